"""The reverse questions (the longest max_model_len, the concurrency at a length, the budget for
N requests) and the per-rank plan's invariants, on hand-worked numbers and generated models."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvunits.contracts import (
    Bytes,
    Elements,
    EngineSpec,
    FullAttentionLayer,
    KVHeads,
    Layers,
    LayerSpec,
    MLALayer,
    ModelSpec,
    PoolBlocks,
    SlidingWindowLayer,
    SpecError,
    StateLayer,
    Tokens,
    UnitTypeError,
    UnitValueError,
    Window,
)
from kvunits.contracts.config import load_config
from kvunits.contracts.deploy import Parallelism, RankBytes, RankTokens
from kvunits.runtime import (
    KVCacheCoordinator,
    budget_for,
    concurrency_at,
    longest_max_model_len,
    plan,
)
from kvunits.runtime.deployment import Layout, stage_layers

from ..config.conftest import EXAMPLES
from ..examples import examples

GiB = 1 << 30
LLAMA = EXAMPLES / "hf" / "llama-3.1-8b" / "config.json"


def llama(**flags: str) -> tuple[ModelSpec, EngineSpec]:
    config = load_config(LLAMA, flags=flags)
    return config.model, config.engine


# -- hand-worked ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("budget", "longest"),
    [
        # Llama-3.1-8B, TP 1: a request of L tokens takes 32 × 65536 × cdiv(L, 16) = 2**21 ×
        # cdiv(L, 16) byte, plus one 2 MiB null block. 16 GiB: cdiv(L, 16) <= 8191 → 131056.
        ("16 GiB", 131056),
        # 10 GiB: cdiv(L, 16) <= 10 × 2**30 / 2**21 − 1 = 5119 → 81904 (vLLM's older planner,
        # without the null block: 81920, NOTES.md §7.3).
        ("10 GiB", 81904),
        # 64 GiB holds all of max_model_len: the answer is the configured 131072.
        ("64 GiB", 131072),
        # 2 MiB holds the null block and nothing more: not even one token.
        ("2 MiB", 0),
    ],
)
def test_longest_max_model_len(budget: str, longest: int) -> None:
    model, engine = llama(memory_budget=budget)
    assert longest_max_model_len(model, engine) == Tokens(longest)


def test_concurrency_and_budget_for_requests() -> None:
    model, engine = llama(tensor_parallel_size="8", memory_budget="16 GiB")
    # TP 8: 8192-byte pages, 32 layers: 262144 byte a block; 16 GiB buys 65536 blocks.
    # At 131072 tokens (8192 blocks): (65536 − 1) // 8192 = 7; at 32768 (2048): 31.
    assert concurrency_at(model, engine, Tokens(131072)) == 7
    assert concurrency_at(model, engine, Tokens(32768)) == 31
    # 64 requests of 32768 tokens: 64 × 2048 × 262144 byte + one 262144-byte null block.
    need = budget_for(model, engine, 64, Tokens(32768))
    assert need == RankBytes(64 * 2048 * 262144 + 262144) == RankBytes(32 * GiB + 262144)
    assert concurrency_at(model, engine.model_copy(update={"memory_budget": need}), Tokens(32768))
    with pytest.raises(SpecError, match="requests must be an int >= 1"):
        budget_for(model, engine, 0, Tokens(32768))
    with pytest.raises(UnitValueError, match="max_model_len must be >= 1 token"):
        concurrency_at(model, engine, Tokens(0))
    with pytest.raises(UnitTypeError, match="max_model_len must be Tokens"):
        concurrency_at(model, engine, RankTokens(32768))  # type: ignore[arg-type]


def test_budget_for_takes_the_fullest_stage() -> None:
    # PP 3 splits 32 layers [11, 11, 10]: the 11-layer stages decide. One request of 131072
    # tokens at TP 1: 11 × 65536 × 8192 byte, plus an 11-page null block.
    model, engine = llama(pipeline_parallel_size="3")
    need = budget_for(model, engine, 1, Tokens(131072))
    assert need == RankBytes(11 * 65536 * 8192 + 11 * 65536)


def test_a_plan_that_does_not_fit_names_the_stage_and_the_estimate() -> None:
    model, engine = llama(pipeline_parallel_size="2", memory_budget="8 GiB")
    # 16 layers a stage: a request is 16 × 65536 × 8192 = 8 GiB, plus 1 MiB of null blocks.
    with pytest.raises(SpecError) as excinfo:
        plan(model, engine)
    assert str(excinfo.value) == (
        "memory_budget 8589934592 byte/rank cannot hold one full-length request on the ranks "
        "of stage 0: it needs 8589934592 byte/rank plus 1048576 byte/rank of null blocks "
        "(8590983168 byte/rank in all); the longest max_model_len that fits is 131056 token "
        "(kvunits fit)"
    )


def test_stages_split_each_stack_on_its_own() -> None:
    # A 4-layer encoder and a 6-layer decoder over 2 stages: [2, 2] and [3, 3], as vLLM's
    # make_layers splits each module list; a single layer is a stack of one (stage 0 at PP 2).
    layer = FullAttentionLayer(kv_heads=KVHeads(2), head_size=Elements(8))
    layers: dict[str, LayerSpec] = {f"enc.{i}": layer for i in range(4)}
    layers |= {f"dec.{i}": layer for i in range(6)}
    layers["head"] = layer
    model = ModelSpec(name="two-stacks", layers=layers)
    stages = stage_layers(model, Parallelism(pipeline_parallel_size=2))
    assert stages == (
        ("enc.0", "enc.1", "dec.0", "dec.1", "dec.2", "head"),
        ("enc.2", "enc.3", "dec.3", "dec.4", "dec.5"),
    )


def test_the_coordinator_runs_tensor_and_pipeline_plans_but_not_dcp() -> None:
    model, engine = llama(
        tensor_parallel_size="8", pipeline_parallel_size="2", max_model_len="4096 token"
    )
    p = plan(model, engine)
    coord = KVCacheCoordinator.from_plan(p)
    # Its pool: the block ids every rank holds a page for, less the null block.
    assert coord.usage_by_group()["text"].capacity == p.groups[0].num_blocks.usable
    model, engine = llama(tensor_parallel_size="16", decode_context_parallel_size="2")
    with pytest.raises(SpecError, match="shards positions over decode_context_parallel_size 2"):
        KVCacheCoordinator.from_plan(plan(model, engine))


# -- generated models: the plan never overspends, and the reverse answers are exact ----------------


@dataclass(frozen=True)
class Case:
    model: ModelSpec
    engine: EngineSpec


@st.composite
def cases(draw: st.DrawFn) -> Case:
    tp = draw(st.sampled_from([1, 2, 4, 8]))
    stacks: dict[str, tuple[LayerSpec, Layers]] = {}
    for index in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["full", "sliding", "mla", "state"]))
        heads = draw(st.sampled_from([1, 2, 4, 8]))
        head = draw(st.sampled_from([8, 16, 64]))
        layer: LayerSpec
        if kind == "full":
            layer = FullAttentionLayer(kv_heads=KVHeads(heads), head_size=Elements(head))
        elif kind == "sliding":
            window = draw(st.integers(1, 400))
            layer = SlidingWindowLayer(
                sliding_window=Window(window, Tokens),
                kv_heads=KVHeads(heads),
                head_size=Elements(head),
            )
        elif kind == "mla":
            layer = MLALayer(kv_lora_rank=Elements(head), qk_rope_head_dim=Elements(8))
        else:
            layer = StateLayer(state_size=Bytes(draw(st.integers(1, 1 << 16))))
        stacks[f"s{index}"] = (layer, Layers(draw(st.integers(1, 9))))
    # Every stage must hold a layer (vLLM fails on an empty one: check_every_stage_caches);
    # a stack of at least pp layers gives each stage one.
    longest = max(count.numerical_value_in(Layers) for _, count in stacks.values())
    engine = EngineSpec(
        block_size_slots=draw(st.sampled_from([1, 4, 16])),
        max_model_len=Tokens(draw(st.integers(1, 6000))),
        max_num_batched_tokens=Tokens(draw(st.integers(1, 600))),
        tensor_parallel_size=tp,
        pipeline_parallel_size=draw(st.integers(1, min(4, longest))),
        async_scheduling=draw(st.booleans()),
        num_speculative_tokens=draw(st.integers(0, 5)),
        memory_budget=RankBytes(1),
    )
    return Case(ModelSpec.stacked("generated", stacks), engine)


@settings(max_examples=examples(60))
@given(cases(), st.integers(1, 40), st.integers(-3, 3))
def test_budget_for_is_the_least_budget_that_admits_the_requests(
    case: Case, requests: int, slack: int
) -> None:
    length = case.engine.max_model_len
    need = budget_for(case.model, case.engine, requests, length)
    budget = RankBytes(max(1, need.numerical_value_in(RankBytes) + slack))
    engine = case.engine.model_copy(update={"memory_budget": budget})
    admitted = concurrency_at(case.model, engine, length)
    assert (admitted >= requests) == (slack >= 0)
    if admitted:
        p = plan(case.model, engine)
        assert p.concurrent_requests == admitted
        # Every stage's rank stays within its budget, null blocks and all.
        assert all(s.memory_used <= budget for s in p.stages)
        # null + admitted × one request, in plain byte/rank: a rank's bytes times a count of
        # requests has no named product.
        assert all(
            s.null_bytes.numerical_value_in(RankBytes)
            + admitted * s.bytes_per_request.numerical_value_in(RankBytes)
            <= budget.numerical_value_in(RankBytes)
            for s in p.stages
        )


@settings(max_examples=examples(60))
@given(cases(), st.integers(1, 1 << 24))
def test_longest_max_model_len_fits_and_one_more_does_not(case: Case, budget: int) -> None:
    engine = case.engine.model_copy(update={"memory_budget": RankBytes(budget)})
    layout = Layout(case.model, engine)
    longest = layout.longest_max_model_len()
    if longest:
        assert layout.fits(longest)
        assert concurrency_at(case.model, engine, longest) >= 1
    if longest < engine.max_model_len:
        assert not layout.fits(longest + Tokens(1))


def test_int32_block_ids_bound_the_budget_over_stages() -> None:
    # Three 1-byte states over 2 stages: [2, 1] layers. Each stage buys B // (its layers)
    # blocks and the pool is the fewer, B // 2; at most 2**31 block ids (int32 block tables):
    # B <= 2 + (2**31 × 2 − 1) = 2**32 + 1, the largest budget the message names.
    from kvunits.runtime.block_pool import MAX_POOL_BLOCKS

    model = ModelSpec.stacked("states", {"s": (StateLayer(state_size=Bytes(1)), Layers(3))})

    def engine(budget: int) -> EngineSpec:
        return EngineSpec(
            block_size_slots=1,
            max_model_len=Tokens(8),
            max_num_batched_tokens=Tokens(8),
            pipeline_parallel_size=2,
            memory_budget=RankBytes(budget),
        )

    with pytest.raises(SpecError, match="block ids must fit int32 block tables") as excinfo:
        plan(model, engine(1 << 40))
    assert "lower the budget to at most 4294967297 byte/rank" in str(excinfo.value)
    assert plan(model, engine(2**32 + 1)).groups[0].num_blocks == PoolBlocks(MAX_POOL_BLOCKS)
    with pytest.raises(SpecError, match="int32"):
        plan(model, engine(2**32 + 2))
