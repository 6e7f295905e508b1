"""DeepSeek V4 planned as vLLM 0.33 plans it (`plan_deepseek_v4_like_vllm`), without vLLM.

The golden numbers are vLLM 0.33's own: ``get_kv_cache_configs`` and
``get_kv_cache_capacity`` (vllm/v1/core/kv_cache_planning.py, kv_cache_utils.py) on the
specs vLLM's DeepSeek V4 cache classes build for the published DeepSeek-V4-Flash and -Pro
configs (tests/config/hf_fixtures/heldout), as tests/vllm_oracle/oracle_dsv4.py computes
them (run on 2026-12-02 with vLLM 0.33 in .venv-vllm; test_dsv4.py re-checks them live).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvunits.contracts import CacheDType, EngineSpec, SpecError, Tokens
from kvunits.contracts.compressed import DeepseekV4Model
from kvunits.contracts.deploy import RankBytes
from kvunits.runtime.like_vllm_packed import approximate_gcd, plan_deepseek_v4_like_vllm

HELDOUT = Path(__file__).resolve().parents[1] / "config" / "hf_fixtures" / "heldout"
GIB = 1 << 30


def _model(name: str) -> DeepseekV4Model:
    data = json.loads((HELDOUT / name / "config.json").read_text("utf-8"))
    return DeepseekV4Model.from_config(name, data)


def _engine(**changes: object) -> EngineSpec:
    values: dict[str, object] = {
        "max_model_len": Tokens(1048576),
        "max_num_batched_tokens": Tokens(8192),
        "async_scheduling": True,
        "memory_budget": RankBytes(80 * GIB),
        **changes,
    }
    return EngineSpec(**values)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "blocks", "tokens", "groups"),
    [
        (
            "deepseek-ai--DeepSeek-V4-Flash",
            85707,
            8338309,
            [(64, 22), (64, 21), (256, 62), (4, 42), (8, 20)],
        ),
        (
            "deepseek-ai--DeepSeek-V4-Pro",
            59819,
            5819703,
            [(64, 31), (64, 30), (256, 91), (8, 31), (4, 60)],
        ),
    ],
)
def test_published_configs_at_80_gib_as_vllm(
    name: str, blocks: int, tokens: int, groups: list[tuple[int, int]]
) -> None:
    plan = plan_deepseek_v4_like_vllm(_model(name), _engine())
    assert plan.num_blocks._value == blocks
    assert plan.kv_cache_size == Tokens(tokens)
    got = [(g.block_size.numerical_value_in(Tokens), len(g.layer_names)) for g in plan.groups]
    assert got == groups
    # Flash's widest group: 21 compressed latents (37440) + 20 (1728) + 21 indexers (8640).
    if "Flash" in name:
        assert plan.bytes_per_block == RankBytes(21 * 37440 + 20 * 1728 + 21 * 8640)


def test_a_memory_that_holds_no_request_is_vllms_start_up_error() -> None:
    # vLLM: "10.06 GiB KV cache is needed ... the estimated maximum model length is 10432".
    with pytest.raises(SpecError, match="the longest max_model_len that fits is 10432 token"):
        plan_deepseek_v4_like_vllm(
            _model("deepseek-ai--DeepSeek-V4-Flash"), _engine(memory_budget=RankBytes(4 * GIB))
        )
    fitted = plan_deepseek_v4_like_vllm(
        _model("deepseek-ai--DeepSeek-V4-Flash"),
        _engine(memory_budget=RankBytes(4 * GIB)),
        auto_fit=True,
    )
    assert fitted.max_model_len == Tokens(10432) and fitted.num_blocks._value == 4285


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"cache_dtype": CacheDType.bfloat16}, "only supports an fp8 KV cache"),
        ({"block_size_slots": 64}, "blocks of 256 tokens only"),
        (
            {"decode_context_parallel_size": 2, "tensor_parallel_size": 2},
            "DCP not support sliding window",
        ),
        ({"num_speculative_tokens": 1}, "multi-token-prediction layers"),
        ({"pipeline_parallel_size": 64}, "holds no layer"),
    ],
)
def test_what_vllm_refuses_is_refused(changes: dict[str, object], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        plan_deepseek_v4_like_vllm(_model("deepseek-ai--DeepSeek-V4-Flash"), _engine(**changes))


def test_an_fp8_cache_dtype_is_the_same_plan() -> None:
    model = _model("deepseek-ai--DeepSeek-V4-Flash")
    auto = plan_deepseek_v4_like_vllm(model, _engine())
    fp8 = plan_deepseek_v4_like_vllm(model, _engine(cache_dtype=CacheDType.fp8_e4m3))
    assert auto == fp8


@given(st.lists(st.integers(1, 60), min_size=1, max_size=5), st.integers(0, 70))
def test_approximate_gcd_pads_least(values: list[int], low: int) -> None:
    best = approximate_gcd(values, low)

    def pad(d: int) -> int:
        return sum((d - x % d) % d for x in values)

    start = max(1, low)
    if start > max(values):
        assert best == start
        return
    assert start <= best <= max(values)
    assert all(
        pad(best) < pad(d) or (pad(best) == pad(d) and d <= best)
        for d in range(start, max(values) + 1)
    )
