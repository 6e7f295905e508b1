"""Record what vLLM 0.33 builds for the shipped examples: ``tests/vllm/recorded/<name>.json``,
the plugin's dump of vLLM's own specs (its model code on the meta device, `built`) and of the
KV-cache configuration its engine step builds from 128 GiB per rank, the hybrid manager on as
on a GPU; and, in ``tests/vllm/defaults/<model_type>.json``, the same for transformers' default
config of model types no shipped example builds here (`models.DEFAULTS`). The offline tests
audit these files in CI without vLLM; ``test_in_vllm.py`` checks they are what vLLM builds now.

    .venv-vllm/bin/python -m tests.vllm.record [NAME ...]   (scripts/vllm-venv builds the venv)
    .venv-vllm/bin/python -m tests.vllm.record --defaults [MODEL_TYPE ...]
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
RECORDED = HERE / "recorded"
DEFAULTS_DIR = HERE / "defaults"
MEMORY = 128 << 30

# The checkout's root holds kvunits' `kernels/`, which transformers' probe for Hugging Face's
# `kernels` package would import: off the path (this package is already imported from it).
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT]


def build(name: str) -> dict[str, Any]:
    """The dump of one example, as vLLM 0.33 builds it."""
    from kvunits.vllm import dump_from_vllm

    from .built import built_specs, engine_config
    from .models import BUILT

    vllm_config = engine_config(str(ROOT / "examples" / "hf" / name), **BUILT[name])
    vllm_config.scheduler_config.disable_hybrid_kv_cache_manager = False
    specs = built_specs(vllm_config)
    configs = engine_step(vllm_config, specs)
    dump = dump_from_vllm(vllm_config, [specs], [MEMORY], configs)
    dump["engine"]["model"] = name
    # The checkout's path is no part of the model: the example's name instead.
    text = json.dumps(dump).replace(str(ROOT / "examples" / "hf" / name), name)
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def build_default(model_type: str, config: dict[str, Any] | None = None) -> dict[str, Any]:
    """The dump of transformers' default config of ``model_type`` (or of ``config``, a
    recorded one), as vLLM 0.33 builds it (its architecture: `models.DEFAULTS`), the model
    named ``default:<model_type>``."""
    import tempfile

    from kvunits.vllm import dump_from_vllm

    from .built import built_specs, engine_config
    from .models import DEFAULTS

    if config is None:
        import transformers

        config = transformers.AutoConfig.for_model(model_type).to_dict()
        config["architectures"] = [DEFAULTS[model_type]]
        config["dtype"] = "bfloat16"
    with tempfile.TemporaryDirectory(prefix="kvunits-default-") as where:
        (Path(where) / "config.json").write_text(json.dumps(config))
        vllm_config = engine_config(where, max_model_len=2048)
        vllm_config.scheduler_config.disable_hybrid_kv_cache_manager = False
        specs = built_specs(vllm_config)
        configs = engine_step(vllm_config, specs)
        dump = dump_from_vllm(vllm_config, [specs], [MEMORY], configs)
        text = json.dumps(dump).replace(where, f"default:{model_type}")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def engine_step(vllm_config: Any, specs: dict[str, Any]) -> Any:
    """EngineCore._initialize_kv_caches' calls (vllm/v1/engine/core.py) around the step."""
    import vllm.v1.engine.core as core
    from vllm.v1.attention.backends.utils import resolve_kv_cache_layout
    from vllm.v1.core.kv_cache_planning import get_global_kv_cache_groups

    if vllm_config.cache_config.kv_cache_layout is None:
        resolve_kv_cache_layout(vllm_config, [["LBHNC"]], list(specs.values()))
    groups = get_global_kv_cache_groups(vllm_config, [specs])
    return core.get_kv_cache_configs(vllm_config, [specs], [MEMORY], groups)


def main(names: list[str]) -> int:
    from .models import BUILT, DEFAULTS

    os.environ["KVUNITS_VLLM_AUDIT"] = "off"  # the plugin, installed here, records nothing
    os.chdir(RECORDED.parent)
    defaults = names[:1] == ["--defaults"]
    into = DEFAULTS_DIR if defaults else RECORDED
    into.mkdir(exist_ok=True)
    for name in (names[1:] if defaults else names) or sorted(DEFAULTS if defaults else BUILT):
        dump = build_default(name) if defaults else build(name)
        (into / f"{name}.json").write_text(json.dumps(dump, indent=1, sort_keys=True) + "\n")
        print(f"recorded {name}: {sum(len(w) for w in dump['workers'])} layer specs")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
