"""DeepSeek V4 planned by kvunits (`plan_deepseek_v4_like_vllm`) against vLLM 0.33's own code.

vLLM cannot build DeepSeek V4's layers on the CPU, so ``oracle_dsv4.py`` (run in
``.venv-vllm``) calls the ``get_kv_cache_spec`` of vLLM's own cache-layer classes
(``DeepseekV4SWACache``, ``DeepseekV4Attention``, ``CompressorStateCache``,
``DeepseekV4IndexerCache``) on stand-ins built as their ``__init__`` builds them, then
vLLM's ``get_global_kv_cache_groups``, ``get_kv_cache_configs``,
``generate_scheduler_kv_cache_config`` and ``get_kv_cache_capacity``: the golden numbers are
vLLM's, computed at test time from the published configs of the held-out set
(``tests/config/hf_fixtures/heldout/{deepseek-ai,nvidia}--DeepSeek-V4-*``, SOURCES.md).
Skipped cleanly without ``.venv-vllm``.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kvunits.contracts.compressed import DeepseekV4Model
from kvunits.runtime.like_vllm_packed import plan_deepseek_v4_like_vllm

from .dsv4_support import Outcome, cases_of, compare, planned_as_vllm, run_oracle
from .test_like_vllm import ROOT, _vllm_python

ORACLE = Path(__file__).with_name("oracle_dsv4.py")
HELDOUT = ROOT / "tests" / "config" / "hf_fixtures" / "heldout"
DIRECTORIES = [
    "deepseek-ai--DeepSeek-V4-Flash",
    "deepseek-ai--DeepSeek-V4-Pro",
    "nvidia--DeepSeek-V4-Flash-NVFP4",
    "nvidia--DeepSeek-V4-Pro-NVFP4",
]
GIB = 1 << 30

#: (pp, max_model_len, batched tokens, async, memory, cache dtype, auto-fit, override)
_SETTINGS: list[tuple[int, int, int, bool, int, str, bool, int | None]] = [
    (1, 1048576, 8192, True, 80 * GIB, "auto", False, None),
    (2, 131072, 16384, True, 40 * GIB, "fp8", False, None),
    (4, 32768, 2048, False, 8 * GIB, "auto", False, None),
    (1, 1048576, 8192, True, 4 * GIB, "auto", False, None),  # one request does not fit
    (1, 1048576, 8192, True, 4 * GIB, "auto", True, None),  # --max-model-len auto
    (3, 65536, 8192, True, 20 * GIB, "fp8_e4m3", False, 1000),  # --num-gpu-blocks-override
    (1, 65536, 8192, True, 20 * GIB, "bfloat16", False, None),  # FlashMLA: fp8 only
    (64, 65536, 8192, True, 20 * GIB, "auto", False, None),  # stages without a layer
]


def _random_configs(root: Path) -> list[str]:
    """DeepSeek-V4-Flash's config with other layer patterns, windows and indexer keys (seeded):
    the packing's branches (balanced or not, one page size or several, the repeats that pad
    least) on patterns no published checkpoint has."""
    import random

    rng = random.Random(21)
    base = json.loads((HELDOUT / DIRECTORIES[0] / "config.json").read_text("utf-8"))
    made = []
    for k in range(12):
        n = rng.randint(1, 48)
        ratios = [rng.choice((0, 4, 128, 4, 128)) for _ in range(n)]
        data = {
            **base,
            "num_hidden_layers": n,
            "compress_ratios": [*ratios, 0],
            "sliding_window": rng.choice((64, 128, 256, 1000)),
            "index_head_dim": rng.choice((128, 256)),
        }
        directory = root / f"random-{k}"
        directory.mkdir()
        (directory / "config.json").write_text(json.dumps(data), "utf-8")
        made.append(str(directory))
    return made


@pytest.fixture(scope="module")
def oracle() -> Iterator[list[Outcome]]:
    python = _vllm_python()
    if python is None:
        pytest.skip("no vLLM 0.33 interpreter (.venv-vllm or KVUNITS_VLLM_PYTHON)")
    with tempfile.TemporaryDirectory() as cwd:  # no checkout directory on sys.path
        configs = [str(HELDOUT / name) for name in DIRECTORIES] + _random_configs(Path(cwd))
        yield run_oracle(python, ORACLE, cwd, cases_of(configs, _SETTINGS), _kvunits)


def _kvunits(case: dict[str, Any]) -> dict[str, Any]:
    directory = Path(case["config"])
    data = json.loads((directory / "config.json").read_text(encoding="utf-8"))
    model = DeepseekV4Model.from_config(directory.name, data)
    return planned_as_vllm(model, case, plan_deepseek_v4_like_vllm)


def test_every_case_is_planned_as_vllm_plans_it(oracle: list[Outcome]) -> None:
    planned, refused = compare(oracle)
    # Both outcomes are exercised: the settings plan most cases and refuse some.
    assert planned >= 40 and refused >= 40, (planned, refused)
