"""What the DeepSeek V4 and V4.1 oracle tests share: the cases from settings, one run of the
vLLM oracle script, kvunits' side of a case, and the comparison (every case the same refusal,
or the same blocks, groups, pages and both headline numbers)."""

from __future__ import annotations

import itertools
import json
import re
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from kvunits.contracts import Bytes, CacheDType, EngineSpec, KvUnitsError, Tokens
from kvunits.contracts.deploy import RankBytes
from kvunits.runtime.like_vllm import VllmPlan

#: (pp, max_model_len, batched tokens, async, memory bytes, cache dtype, auto-fit, override)
Setting = tuple[int, int, int, bool, int, str, bool, int | None]
Outcome = tuple[dict[str, Any], dict[str, Any], dict[str, Any]]


def cases_of(configs: Sequence[str], settings: Sequence[Setting]) -> list[dict[str, Any]]:
    """Every config under every setting, as the oracle script reads a case."""
    keys = ("pp", "max_model_len", "batched", "async", "memory", "cache_dtype", "auto_fit")
    return [
        {"config": config, **dict(zip(keys, setting[:7], strict=True)), "override": setting[7]}
        for config, setting in itertools.product(configs, settings)
    ]


def run_oracle(
    python: Path,
    script: Path,
    cwd: str,
    cases: list[dict[str, Any]],
    kvunits: Callable[[dict[str, Any]], dict[str, Any]],
) -> list[Outcome]:
    """vLLM's answer to every case (``script`` in ``python``, run in ``cwd`` so that no
    checkout directory is on its path) beside kvunits' (taken while the configs exist)."""
    done = subprocess.run(
        [str(python), str(script)],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    answers: list[dict[str, Any]] = json.loads(done.stdout)
    return list(zip(cases, answers, [kvunits(case) for case in cases], strict=True))


def engine_of(case: dict[str, Any]) -> EngineSpec:
    """The case's engine settings (vLLM's ``--kv-cache-dtype fp8`` is e4m3, as kvunits' own
    parser reads it)."""
    given = case["cache_dtype"]
    dtype = None if given == "auto" else CacheDType("fp8_e4m3" if given == "fp8" else given)
    return EngineSpec(
        max_model_len=Tokens(case["max_model_len"]),
        max_num_batched_tokens=Tokens(case["batched"]),
        async_scheduling=case["async"],
        pipeline_parallel_size=case["pp"],
        memory_budget=RankBytes(case["memory"]),
        cache_dtype=dtype,
    )


def described(model: Any, plan: VllmPlan) -> dict[str, Any]:
    """A plan as the oracle describes vLLM's: each group's pages by vLLM's layer names."""
    pages = {}
    for i, layer in enumerate(model.layers):
        for cache in layer.caches():
            name = f"model.layers.{i}.attn" + (f".{cache.suffix}" if cache.suffix else "")
            pages[name] = cache.page_size.numerical_value_in(Bytes)
    return {
        "pages": [sorted({pages[n] for n in g.layer_names}) for g in plan.groups],
        "num_blocks": plan.num_blocks._value,
        "max_concurrency": plan.max_concurrency,
        "kv_cache_size": plan.kv_cache_size.numerical_value_in(Tokens),
        "max_model_len": plan.max_model_len.numerical_value_in(Tokens),
        "groups": [
            (g.block_size.numerical_value_in(Tokens), len(g.layer_names)) for g in plan.groups
        ],
    }


def planned_as_vllm(
    model: Any, case: dict[str, Any], planner: Callable[..., VllmPlan]
) -> dict[str, Any]:
    """kvunits' plan of a read model under the case's settings, or its refusal."""
    try:
        plan = planner(
            model,
            engine_of(case),
            auto_fit=case["auto_fit"],
            num_gpu_blocks_override=case["override"],
        )
    except KvUnitsError as err:
        return {"error": str(err)}
    return described(model, plan)


def compare(outcomes: Sequence[Outcome]) -> tuple[int, int]:
    """Assert every case agrees; return how many both planned and how many both refused."""
    planned = refused = 0
    for case, vllm, mine in outcomes:
        where = f"{Path(case['config']).name} {case}"
        if "error" in vllm:
            assert "error" in mine, f"{where}: vLLM refuses ({vllm['error'][:200]}), kvunits plans"
            estimate = re.search(r"estimated maximum model length is (\d+)", vllm["error"])
            if estimate:  # vLLM's start-up error: the same longest length that fits
                assert f"fits is {estimate.group(1)} token" in mine["error"], where
            refused += 1
            continue
        assert "error" not in mine, f"{where}: kvunits refuses ({mine['error']}), vLLM plans"
        assert mine["num_blocks"] == vllm["num_blocks"], where
        assert mine["kv_cache_size"] == vllm["kv_cache_size"], where
        assert mine["max_model_len"] == vllm["max_model_len"], where
        assert mine["max_concurrency"] == pytest.approx(vllm["max_concurrency"], rel=1e-12), where
        assert mine["groups"] == [(g[1], g[3]) for g in vllm["groups"]], where
        assert mine["pages"] == [g[2] for g in vllm["groups"]], where
        planned += 1
    return planned, refused
