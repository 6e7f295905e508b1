"""DeepSeek V4.1 planned by kvunits (`plan_deepseek_v41_like_vllm`) against vLLM 0.33's own code.

vLLM cannot build DeepSeek V4.1's layers on the CPU, so ``oracle_dsv41.py`` (run in
``.venv-vllm``) reads each config with vLLM's ``DeepseekV41Config``, calls the
``get_kv_cache_spec`` of vLLM's own V4.1 cache-layer classes on stand-ins built as their
``__init__`` builds them on Hopper, then vLLM's ``get_global_kv_cache_groups``,
``get_kv_cache_configs``, ``generate_scheduler_kv_cache_config`` and
``get_kv_cache_capacity``: the golden numbers are vLLM's, computed at test time.

No V4.1 ``config.json`` was found published in a public repository, and vLLM's
``DeepseekV41Config`` has no defaults for the fields that shape the caches, so the configs
here are **synthetic** (seeded random topologies: layer counts, ratios 0/1/2, kv and index
sources, windows, indexer keys; flat or nested under ``text_config``), including ones vLLM
refuses. Skipped cleanly without ``.venv-vllm``.
"""

from __future__ import annotations

import json
import random
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kvunits.contracts import KvUnitsError
from kvunits.contracts.compressed_v41 import DeepseekV41Model
from kvunits.runtime.like_vllm_packed_v41 import plan_deepseek_v41_like_vllm

from .dsv4_support import Outcome, cases_of, compare, planned_as_vllm, run_oracle
from .test_like_vllm import _vllm_python

ORACLE = Path(__file__).with_name("oracle_dsv41.py")
GIB = 1 << 30

#: (pp, max_model_len, batched tokens, async, memory, cache dtype, auto-fit, override)
_SETTINGS: list[tuple[int, int, int, bool, int, str, bool, int | None]] = [
    (1, 1048576, 8192, True, 80 * GIB, "auto", False, None),
    (2, 131072, 16384, True, 40 * GIB, "fp8", False, None),
    (4, 32768, 2048, False, 8 * GIB, "auto", False, None),
    (1, 1048576, 8192, True, 1 * GIB, "auto", False, None),  # one request may not fit
    (1, 1048576, 8192, True, 1 * GIB, "auto", True, None),  # --max-model-len auto
    (3, 65536, 8192, True, 20 * GIB, "fp8_e4m3", False, 1000),  # --num-gpu-blocks-override
    (1, 65536, 8192, True, 20 * GIB, "bfloat16", False, None),  # FlashMLA: fp8 only
    (64, 65536, 8192, True, 20 * GIB, "auto", False, None),  # stages without a layer
]


def _random_configs(root: Path) -> list[str]:
    """Seeded synthetic V4.1 topologies (see the module docstring)."""
    rng = random.Random(41)
    made = []
    for k in range(16):
        n = rng.randint(1, 48)
        ratios = [rng.choice((0, 1, 2, 2)) for _ in range(n)]
        compressed = [i for i, r in enumerate(ratios) if r]
        kv = sorted(set(compressed[:1] + rng.sample(compressed, min(len(compressed), 4))))
        # Index sources: the first kv source and some others (a consumer may index too,
        # reading its kv source's keys).
        index = sorted(set(kv[:1] + rng.sample(kv, rng.randint(0, len(kv)))))
        if k % 5 == 4 and compressed:  # an index source reading a source without keys
            index = sorted(set(index) - {kv[-1]} | {compressed[-1]})
        elif k % 3 == 2 and compressed:  # a consumer layer that runs an indexer too
            index = sorted(set(index) | {compressed[-1]})
        text = {
            "num_hidden_layers": n,
            "head_dim": 512,
            "qk_rope_head_dim": 64,
            "index_head_dim": rng.choice((64, 128, 256)),
            "sliding_window": rng.choice((64, 128, 1000)),
            "compress_ratios": [*ratios, 0],  # an MTP layer's entry past the backbone
            "kv_source_layer_ids": kv,
            "index_source_layer_ids": index,
        }
        data: dict[str, Any] = {
            "architectures": ["DeepseekV41ForCausalLM"],
            "model_type": "deepseek_v41",
        }
        if k % 2:
            data["text_config"] = text
        else:
            data.update(text)
        directory = root / f"synthetic-v41-{k}"
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
        cases = cases_of(_random_configs(Path(cwd)), _SETTINGS)
        yield run_oracle(python, ORACLE, cwd, cases, _kvunits)


def _kvunits(case: dict[str, Any]) -> dict[str, Any]:
    directory = Path(case["config"])
    data = json.loads((directory / "config.json").read_text(encoding="utf-8"))
    try:
        model = DeepseekV41Model.from_config(directory.name, data)
    except KvUnitsError as err:
        return {"error": str(err)}
    return planned_as_vllm(model, case, plan_deepseek_v41_like_vllm)


def test_every_case_is_planned_as_vllm_plans_it(oracle: list[Outcome]) -> None:
    planned, refused = compare(oracle)
    # Both outcomes are exercised: the settings plan most cases and refuse some.
    assert planned >= 30 and refused >= 30, (planned, refused)
