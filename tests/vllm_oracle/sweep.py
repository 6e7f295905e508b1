"""Model directories for every transformers config class vLLM 0.33 serves for generation.

Run with ``.venv-vllm``'s interpreter (never kvunits' own): ``python sweep.py OUT`` writes,
for each ``model_type`` of transformers' ``CONFIG_MAPPING_NAMES`` whose image-text-to-text,
multimodal-LM or causal-LM class (or ``XForCausalLM`` / ``XForConditionalGeneration`` after its base
``XModel``) is a key of vLLM's ``_TEXT_GENERATION_MODELS`` or ``_MULTIMODAL_MODELS``, the
class's default config (``CONFIG_MAPPING[mt]().to_dict()`` with that architecture, bf16) as
``OUT/<mt>/config.json``; and, where the text config has ``num_key_value_heads``, the same
with it null as ``OUT/<mt>@kv-null/config.json`` (does the class fill it, does vLLM serve it,
does kvunits refuse it where vLLM fails). ``OUT/manifest.json`` lists what was written and the
classes that could not be built. ``scripts/vllm-config-sweep`` runs it, vLLM's
``ModelConfig`` view of each directory (model_view.py) and the comparison (evaluate.py).
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def architecture(model_type: str, served: set[str]) -> str | None:
    """The vLLM architecture that serves this model type, as a config would name it."""
    from transformers.models.auto import modeling_auto

    names: list[str] = []
    # A multimodal model type's own class first: a config with a text_config is published
    # with it (Llama4ForConditionalGeneration), not with its decoder's (Llama4ForCausalLM).
    for mapping in (
        modeling_auto.MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES,
        modeling_auto.MODEL_FOR_MULTIMODAL_LM_MAPPING_NAMES,
        modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
    ):
        value = mapping.get(model_type)
        names.extend([value] if isinstance(value, str) else list(value or ()))
    base = modeling_auto.MODEL_MAPPING_NAMES.get(model_type)
    for stem in [base] if isinstance(base, str) else list(base or ()):
        prefix = stem.removesuffix("Model")
        names += [prefix + "ForCausalLM", prefix + "ForConditionalGeneration"]
    return next((name for name in names if name in served), None)


def _text(config: dict[str, Any]) -> dict[str, Any]:
    """The dictionary that holds the decoder's fields (a text config, or the config)."""
    for key in ("text_config", "llm_config", "language_config"):
        inner = config.get(key)
        if isinstance(inner, dict) and "num_attention_heads" in inner:
            return inner
    return config


def main(out: Path) -> None:
    import logging

    logging.disable(logging.WARNING)
    warnings.filterwarnings("ignore")
    from transformers import CONFIG_MAPPING, AutoConfig
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
    from vllm.model_executor.models import registry

    served = set(registry._TEXT_GENERATION_MODELS) | set(registry._MULTIMODAL_MODELS)
    manifest: dict[str, Any] = {"written": {}, "unbuildable": {}}
    for model_type in sorted(CONFIG_MAPPING_NAMES):
        arch = architecture(model_type, served)
        if arch is None:
            continue
        try:
            config = CONFIG_MAPPING[model_type]().to_dict()
        except Exception as exc:  # a class without defaults, a missing dependency
            manifest["unbuildable"][model_type] = f"{type(exc).__name__}: {str(exc)[:120]}"
            continue
        config["architectures"] = [arch]
        config.pop("dtype", None)
        config["torch_dtype"] = "bfloat16"
        _write(out / model_type, config)
        entry: dict[str, Any] = {"architecture": arch}
        text = _text(config)
        if "num_key_value_heads" in text:
            text["num_key_value_heads"] = None
            directory = out / f"{model_type}@kv-null"
            _write(directory, config)
            try:
                loaded = AutoConfig.from_pretrained(directory).get_text_config()
                entry["kv_null_filled_as"] = getattr(loaded, "num_key_value_heads", None)
            except Exception as exc:
                entry["kv_null_filled_as"] = f"{type(exc).__name__}"
        manifest["written"][model_type] = entry
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    print(f"{len(manifest['written'])} config classes written, "
          f"{len(manifest['unbuildable'])} unbuildable", file=sys.stderr)


def _write(directory: Path, config: dict[str, Any]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    text = json.dumps(config, indent=1, default=str)
    (directory / "config.json").write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
    os._exit(0)
