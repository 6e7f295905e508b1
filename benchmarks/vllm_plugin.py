"""Benchmark: what the kvunits plugin adds to vLLM's start-up, on a 100-layer model.

Two costs, each the median of ``--rounds`` rounds, CPU time of this process:

* **register**: ``kvunits.vllm.plugin.register()`` in a process where vLLM's engine core is
  imported (as when ``EngineCore.__init__`` loads the general plugins): importing the plugin,
  finding the KV-cache step, wrapping it;
* **audit**: the wrapped ``get_kv_cache_configs`` minus the original, on 100 layers (Llama 3.1
  8B's geometry with ``num_hidden_layers = 100``: 100 ``FullAttentionSpec`` from vLLM's own
  class, 16 tokens a block, 128 GiB): writing the dump, reading it, kvunits' plan, the audit.

Run in the venv of benchmarks/vllm-nodeps.txt (``scripts/vllm-venv``)::

    .venv-vllm/bin/python -m benchmarks.vllm_plugin
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The checkout's `kernels/` must not shadow Hugging Face's for transformers' probe.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT]
CLOCK = time.process_time

LAYERS = 100
MEMORY = 128 << 30


def _register_cost() -> float:
    """One fresh process: import vLLM's engine core, then time register()."""
    code = (
        "import sys, time; from pathlib import Path; "
        f"sys.path[:] = [p for p in sys.path if Path(p or '.').resolve() != Path({str(ROOT)!r})]; "
        "import vllm.v1.engine.core; "
        "t = time.process_time(); "
        "from kvunits.vllm import plugin; plugin.register(); "
        "print(time.process_time() - t)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd="/"
    )
    return float(out.stdout.strip().splitlines()[-1])


def _model_dir() -> str:
    config = json.loads((ROOT / "examples/hf/llama-3.1-8b/config.json").read_text())
    config["num_hidden_layers"] = LAYERS
    folder = tempfile.mkdtemp(prefix="kvunits-100-layers-")
    Path(folder, "config.json").write_text(json.dumps(config))
    return folder


def _step_costs(rounds: int) -> tuple[list[float], list[float]]:
    import torch
    from vllm.config import CacheConfig, DeviceConfig, ModelConfig, VllmConfig
    from vllm.v1.attention.backends.utils import resolve_kv_cache_layout
    from vllm.v1.core import kv_cache_planning
    from vllm.v1.kv_cache_interface import FullAttentionSpec

    from kvunits.vllm import plugin

    os.chdir(tempfile.gettempdir())
    model = ModelConfig(
        model=_model_dir(), skip_tokenizer_init=True, dtype="bfloat16", max_model_len=8192
    )
    config = VllmConfig(
        model_config=model,
        cache_config=CacheConfig(block_size=16),
        device_config=DeviceConfig("cpu"),
    )
    spec = FullAttentionSpec(block_size=16, num_kv_heads=8, head_size=128, dtype=torch.bfloat16)
    specs = {f"model.layers.{i}.self_attn.attn": spec for i in range(LAYERS)}
    resolve_kv_cache_layout(config, [["LBHNC"]], list(specs.values()))
    groups = kv_cache_planning.get_global_kv_cache_groups(config, [specs])
    original = kv_cache_planning.get_kv_cache_configs
    wrapped = plugin.wrap(original)
    os.environ[plugin.MODE_VARIABLE] = "warn"
    plain: list[float] = []
    audited: list[float] = []
    for _ in range(rounds):
        for step, out in ((original, plain), (wrapped, audited)):
            start = CLOCK()
            step(config, [specs], [MEMORY], groups)
            out.append(CLOCK() - start)
    return plain, audited


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=11)
    args = parser.parse_args(argv)
    registers = [_register_cost() for _ in range(max(3, args.rounds // 3))]
    plain, audited = _step_costs(args.rounds)
    extra = [a - p for a, p in zip(audited, plain, strict=True)]
    print(f"register: {statistics.median(registers) * 1e3:.1f} ms (median of {len(registers)})")
    print(
        f"KV-cache step, {LAYERS} layers: vLLM {statistics.median(plain) * 1e3:.1f} ms, "
        f"audited {statistics.median(audited) * 1e3:.1f} ms, the audit adds "
        f"{statistics.median(extra) * 1e3:.1f} ms (median of {args.rounds})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
