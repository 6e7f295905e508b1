"""A held-out sweep of the audit: for every model type kvunits reads (its Hugging Face family
readers), transformers' default config of that type, built by vLLM 0.33's model code on the
meta device as `record.build_default` builds it (the architecture transformers names for
causal LM, else the family's first), dumped by the plugin and audited. One line per model
type: clean, its findings, what was not audited, or why vLLM did not build it here (a CUDA
kernel, a config attribute vLLM reads that transformers' default lacks, ...).

Not a test (minutes, and its cases are transformers' defaults of the day): the cases it finds
go to ``models.DEFAULTS`` (recorded, audited in CI). Session 29 found three audit bugs with
it: every MambaSpec skipped, Falcon-H1's and Zamba2's caches read as other layers, Gemma 4's
blocks planned from the grown block size.

    .venv-vllm/bin/python -m tests.vllm.sweep [MODEL_TYPE ...]   (about 8 minutes for all)
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from .record import MEMORY, ROOT, engine_step

# The checkout's root holds kvunits' `kernels/`, which transformers' probe for Hugging Face's
# `kernels` package would import: off the path (as in record.py).
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT]


def audited(model_type: str, architectures: tuple[str, ...]) -> str:
    """One model type's line."""
    import transformers
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    from kvunits.vllm import audit, dump_from_vllm, read_dump

    from .built import built_specs, engine_config

    try:
        config: dict[str, Any] = transformers.AutoConfig.for_model(model_type).to_dict()
    except ValueError:
        return f"-- {model_type}: transformers has no config of this type"
    named = MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(model_type)
    config["architectures"] = list(
        config.get("architectures") or ([named] if named else architectures[:1])
    )
    config["dtype"] = "bfloat16"
    lengths = [
        v
        for k in ("max_position_embeddings", "n_positions", "max_target_positions")
        if type(v := config.get(k)) is int
    ]
    with tempfile.TemporaryDirectory(prefix="kvunits-sweep-") as where:
        (Path(where) / "config.json").write_text(json.dumps(config, default=str))
        try:
            vllm_config = engine_config(where, max_model_len=min([2048, *lengths]))
            vllm_config.scheduler_config.disable_hybrid_kv_cache_manager = False
            specs = built_specs(vllm_config)
            configs = engine_step(vllm_config, specs)
            dump = json.loads(json.dumps(dump_from_vllm(vllm_config, [specs], [MEMORY], configs)))
        except Exception as exc:  # vLLM's refusal on this host: reported, the sweep goes on
            return f"-- {model_type} {config['architectures']}: not built: {exc!r:.200}"
    report = audit(read_dump(dump))
    lines = [
        f"== {model_type} {config['architectures']}: {len(specs)} specs, "
        + ("clean" if report.ok else f"{len(report.findings)} findings")
    ]
    lines += [f"   {line}" for line in report.lines()[1:]]
    return "\n".join(lines)


def main(only: list[str]) -> int:
    from kvunits.contracts.config._hf_families import FAMILIES

    os.environ["KVUNITS_VLLM_AUDIT"] = "off"  # the plugin, installed here, records nothing
    os.chdir(Path(__file__).resolve().parent)  # vLLM inspects models in a subprocess: not here
    for family in FAMILIES:
        for model_type in family.model_types:
            if not only or model_type in only:
                print(audited(model_type, family.architectures), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
