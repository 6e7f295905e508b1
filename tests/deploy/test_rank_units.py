"""Whose count it is: a rank's heads, bytes, blocks and tokens against the model's; the named
conversions between them; the engine settings that shape a deployment, and how they load."""

from __future__ import annotations

import operator
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from kvunits.contracts import (
    CONVERSIONS,
    BlockSize,
    Bytes,
    CacheBlocks,
    Elements,
    EngineSpec,
    FullAttentionLayer,
    Heads,
    IntQuantity,
    Layers,
    MLALayer,
    SlidingWindowLayer,
    SpecError,
    StateLayer,
    Tokens,
    UnitTypeError,
    UnitValueError,
    Window,
    manager_view,
)
from kvunits.contracts.config import ConfigError, load_config
from kvunits.contracts.deploy import (
    KVHeads,
    Parallelism,
    RankBlocks,
    RankBytes,
    RankKVHeads,
    RankTokens,
    blocks_per_rank,
    engine_blocks,
    head_replicas,
    kv_heads_per_rank,
    layers_per_stage,
    page_size_per_rank,
    rank_blocks_to_bytes,
    rank_bytes_to_blocks_floor,
    rank_tokens_to_blocks_ceil,
    requested_memory,
    tokens_per_dcp_rank,
)
from kvunits.contracts.state import Mamba2Layer

from ..config.conftest import EXAMPLES, SHIPPED

GiB = 1 << 30
#: Each rank-owned class against the model's class of the same thing.
PAIRS: list[tuple[type[IntQuantity], type[IntQuantity]]] = [
    (KVHeads, RankKVHeads),
    (Bytes, RankBytes),
    (CacheBlocks, RankBlocks),
    (Tokens, RankTokens),
]


def tp(n: int) -> Parallelism:
    return Parallelism(tensor_parallel_size=n)


# -- the classes ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("cls", "text"),
    [
        (KVHeads, "8 kv_head"),
        (RankKVHeads, "8 kv_head/rank"),
        (RankBytes, "8 byte/rank"),
        (RankBlocks, "8 cache_block/rank"),
        (RankTokens, "8 token/rank"),
    ],
)
def test_a_rank_count_says_whose_it_is(cls: type[IntQuantity], text: str) -> None:
    q = cls(8)
    assert str(q) == text and repr(q) == f"{cls.__name__}(8)"
    assert pickle.loads(pickle.dumps(q)) == q
    assert cls(3) + cls(5) == q and q - cls(8) == cls(0)
    # The pint boundary knows the unit ("rank" and "kv_head" are in units.txt).
    assert cls.from_pint(q.to_pint()) == q


_OPERATORS: list[Callable[[Any, Any], object]] = [
    operator.add,
    operator.sub,
    operator.lt,
    operator.ge,
    operator.eq,
    operator.ne,
]


@pytest.mark.parametrize(("model", "rank"), PAIRS)
@pytest.mark.parametrize("op", _OPERATORS)
def test_mixing_the_model_and_a_rank_is_a_unit_error(
    model: type[IntQuantity],
    rank: type[IntQuantity],
    op: Callable[[Any, Any], object],
) -> None:
    with pytest.raises(UnitTypeError, match="both sides must be in"):
        op(model(8), rank(1))
    with pytest.raises(UnitTypeError, match="both sides must be in"):
        op(rank(1), model(8))


def wrong(value: object) -> Any:
    """A value of the wrong scope, passed where mypy would refuse it: the run time must too."""
    return value


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: kv_heads_per_rank(wrong(RankKVHeads(1)), tp(8)),
            "heads must be KVHeads .*kv_head/rank",
        ),
        (
            lambda: kv_heads_per_rank(wrong(8), tp(8)),
            r"heads must be KVHeads \(kv_head\), got 8 \(a bare",
        ),
        (lambda: blocks_per_rank(wrong(RankBlocks(4))), "blocks must be CacheBlocks"),
        (lambda: engine_blocks(wrong([CacheBlocks(4)])), "must be RankBlocks"),
        # One rank's count is not the engine's (nano-vllm #187): every rank's, then the fewest.
        (lambda: engine_blocks(wrong(RankBlocks(4))), "one rank's count is not the engine's"),
        (
            lambda: rank_blocks_to_bytes(wrong(CacheBlocks(2)), RankBytes(8)),
            "blocks must be RankBlocks",
        ),
        (
            lambda: rank_blocks_to_bytes(RankBlocks(2), wrong(Bytes(8))),
            "page_size must be RankBytes",
        ),
        (
            lambda: rank_bytes_to_blocks_floor(wrong(Bytes(GiB)), RankBytes(8)),
            "budget must be RankBytes",
        ),
        (lambda: tokens_per_dcp_rank(wrong(RankTokens(8)), tp(2)), "length must be Tokens"),
        (
            lambda: rank_tokens_to_blocks_ceil(wrong(Tokens(8)), BlockSize(16, Tokens)),
            "tokens must be RankTokens",
        ),
        (lambda: requested_memory(wrong(Bytes(GiB)), 0.9), "gpu_memory must be RankBytes"),
        (lambda: kv_heads_per_rank(KVHeads(8), wrong(8)), "parallelism must be a Parallelism"),
    ],
)
def test_the_conversions_take_only_their_own_scope(
    call: Callable[[], object],
    message: str,
) -> None:
    with pytest.raises(UnitTypeError, match=message):
        call()


def test_every_deployment_conversion_is_listed_with_its_rounding() -> None:
    by_name = {c.name: c for c in CONVERSIONS}
    assert by_name["kv_heads_per_rank"].formula == "max(1, H // tp)"
    assert by_name["kv_heads_per_rank"].rounding == "floor"
    assert by_name["tokens_per_dcp_rank"].rounding == "ceil"
    assert by_name["layers_per_stage"].rounding == "floor"
    assert by_name["requested_memory"].rounding == "ceil"
    assert by_name["blocks_per_rank"].rounding == by_name["engine_blocks"].rounding == "exact"
    assert by_name["page_size_per_rank"].target == "byte/rank"


# -- the conversions ------------------------------------------------------------------------------
@given(st.integers(1, 128), st.integers(1, 128))
def test_heads_per_rank_partition_or_replicate(heads: int, ranks: int) -> None:
    if (heads >= ranks and heads % ranks) or (heads < ranks and ranks % heads):
        with pytest.raises(SpecError, match="cannot be split"):
            kv_heads_per_rank(KVHeads(heads), tp(ranks))
        return
    per_rank = kv_heads_per_rank(KVHeads(heads), tp(ranks)).numerical_value_in(RankKVHeads)
    copies = head_replicas(KVHeads(heads), tp(ranks))
    assert per_rank == max(1, heads // ranks)
    # Every head is held, by as many ranks as hold a copy: heads × copies = ranks × per rank.
    assert heads * copies == ranks * per_rank


@given(st.integers(0, 300), st.integers(1, 16))
def test_layers_per_stage_as_get_pp_indices(layers: int, stages: int) -> None:
    spans = layers_per_stage(Layers(layers), Parallelism(pipeline_parallel_size=stages))
    assert len(spans) == stages
    assert [i for span in spans for i in span] == list(range(layers))
    sizes = [len(span) for span in spans]
    base, extra = divmod(layers, stages)
    # The last stage never takes an extra layer; the first only when all but the last do.
    assert sizes[-1] == base
    assert sizes[0] == base + (1 if extra == stages - 1 and stages > 1 else 0)
    assert sorted(sizes) == [base] * (stages - extra) + [base + 1] * extra


def test_layers_per_stage_examples() -> None:
    # get_pp_indices' docstring examples and NOTES.md §7.4.
    def sizes(n: int, pp: int) -> list[int]:
        return [len(s) for s in layers_per_stage(Layers(n), Parallelism(pipeline_parallel_size=pp))]

    assert sizes(32, 3) == [11, 11, 10]
    assert sizes(61, 4) == [15, 15, 16, 15]
    assert sizes(61, 8) == [7, 7, 8, 8, 8, 8, 8, 7]
    assert sizes(61, 2) == [31, 30]
    assert sizes(62, 4) == [15, 16, 16, 15]
    with pytest.raises(UnitTypeError, match="num_layers must be Layers"):
        layers_per_stage(wrong(Tokens(3)), Parallelism())


@given(st.integers(0, 1 << 40), st.integers(1, 64), st.integers(1, 1 << 10))
def test_tokens_per_dcp_rank_is_the_fullest_rank(length: int, dcp: int, block: int) -> None:
    p = Parallelism(tensor_parallel_size=dcp, decode_context_parallel_size=dcp)
    rank_tokens = tokens_per_dcp_rank(Tokens(length), p)
    # Token i on rank i % dcp: rank 0 holds the most, ceil(length / dcp).
    assert rank_tokens.numerical_value_in(RankTokens) == len(range(0, length, dcp))
    blocks = rank_tokens_to_blocks_ceil(rank_tokens, BlockSize(block, Tokens))
    assert blocks.numerical_value_in(RankBlocks) == -(
        -length // (dcp * block)
    )  # cdiv(cdiv(L, dcp), bs) = cdiv(L, dcp·bs)


def test_page_size_per_rank_of_each_layer_kind() -> None:
    p8 = tp(8)
    full = FullAttentionLayer(kv_heads=KVHeads(8), head_size=Elements(128))
    assert page_size_per_rank(full, manager_view(full, 16), p8) == RankBytes(8192)
    window = SlidingWindowLayer(
        sliding_window=Window(4096, Tokens), kv_heads=KVHeads(16), head_size=Elements(64)
    )
    assert page_size_per_rank(window, manager_view(window, 16), p8) == RankBytes(16 * 2 * 128 * 2)
    mla = MLALayer(kv_lora_rank=Elements(512), qk_rope_head_dim=Elements(64))
    assert page_size_per_rank(mla, manager_view(mla, 16), p8) == RankBytes(16 * 576 * 2)
    # A state given only in bytes is whole on every rank.
    state = StateLayer(state_size=Bytes(1 << 20))
    assert page_size_per_rank(state, manager_view(state, 16), p8) == RankBytes(1 << 20)
    # A Mamba-2 mixer (NOTES.md §1.4's illustration): I 8192, G 8, 128 heads of 64, N 128,
    # K 4, TP 4: conv (3, (8192 + 2·8·128) / 4) = (3, 2560), SSM (32, 64, 128), bf16:
    # 15360 + 524288 = 539648 byte a rank.
    mamba = Mamba2Layer(
        intermediate_size=Elements(8192),
        num_heads=Heads(128),
        head_dim=Elements(64),
        n_groups=8,
        ssm_state_size=Elements(128),
        conv_kernel=4,
    )
    assert page_size_per_rank(mamba, manager_view(mamba, 16), tp(4)) == RankBytes(539648)


@pytest.mark.parametrize(
    ("total", "utilization", "expected"),
    [
        (80 * GiB, 0.9, 77309411328),
        (80 * GiB, 0.92, 79027398247),  # ceil(79027398246.4)
        (80 * GiB, 1, 80 * GiB),
        (141 * GiB, 0.95, 143828475494),  # ceil(151397597184 × 0.95 = 143827717324.8)
    ],
)
def test_requested_memory_rounds_up_as_vllm(total: int, utilization: float, expected: int) -> None:
    import math

    assert requested_memory(RankBytes(total), utilization) == RankBytes(
        math.ceil(total * utilization)
    )
    if total != 141 * GiB:
        assert requested_memory(RankBytes(total), utilization) == RankBytes(expected)


@pytest.mark.parametrize("utilization", [0, 1.5, -0.1])
def test_requested_memory_refuses_a_fraction_outside_0_1(utilization: float) -> None:
    with pytest.raises(UnitValueError, match=r"gpu_memory_utilization must be in \(0, 1\]"):
        requested_memory(RankBytes(GiB), utilization)


@pytest.mark.parametrize(
    ("fields", "error", "message"),
    [
        ({"tensor_parallel_size": 0}, UnitValueError, "tensor_parallel_size must be >= 1, got 0"),
        ({"pipeline_parallel_size": 2.0}, UnitTypeError, "takes an int number of ranks"),
        (
            {"tensor_parallel_size": 8, "decode_context_parallel_size": 3},
            SpecError,
            "decode_context_parallel_size 3 must divide tensor_parallel_size 8",
        ),
    ],
)
def test_parallelism_checks(fields: dict[str, Any], error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        Parallelism(**fields)


# -- the engine settings --------------------------------------------------------------------------
def engine(**fields: object) -> EngineSpec:
    base: dict[str, object] = {
        "max_model_len": "8192 token",
        "max_num_batched_tokens": "2048 token",
    }
    return EngineSpec.model_validate({**base, **fields})


def test_engine_defaults_plan_one_rank_and_one_batch() -> None:
    e = engine(memory_budget="40 GiB")
    assert e.parallelism == Parallelism()
    assert (e.concurrent_batches, e.num_lookahead_tokens) == (1, Tokens(0))
    assert e.max_in_flight == Tokens(2048) and e.max_encoder_in_flight is None
    assert e.kv_cache_memory == RankBytes(40 * GiB)
    # The budget reads back as text a config takes again.
    dumped = e.model_dump(mode="json")
    assert dumped["memory_budget"] == "42949672960 byte"
    assert EngineSpec.model_validate(dumped) == e


def test_engine_in_flight() -> None:
    e = engine(
        memory_budget="40 GiB",
        pipeline_parallel_size=4,
        async_scheduling=True,
        num_speculative_tokens=3,
        max_encoder_tokens_per_step="4 encoder_token",
    )
    assert e.concurrent_batches == 5  # pp + 1 (vLLM 0.33's V2 runner)
    assert e.max_in_flight == Tokens(5 * 2048 + 3)
    assert str(e.max_encoder_in_flight) == "20 encoder_token"
    assert engine(memory_budget="1 GiB", max_concurrent_batches=7).concurrent_batches == 7


@pytest.mark.parametrize(
    ("fields", "loc", "message"),
    [
        (
            {"memory_budget": "40 GiB", "gpu_memory": "80 GiB"},
            "gpu_memory",
            "memory_budget is set too",
        ),
        ({}, "gpu_memory", "no memory given: set memory_budget"),
        (
            {"gpu_memory": "80 GiB", "activation_memory": "4 GiB"},
            "weights_memory",
            "gpu_memory is set, so weights_memory is needed",
        ),
        (
            {"memory_budget": "40 GiB", "weights_memory": "4 GiB"},
            "weights_memory",
            "weights_memory is read only with gpu_memory",
        ),
        (
            {"gpu_memory": "80 GiB", "weights_memory": "70 GiB", "activation_memory": "4 GiB"},
            "activation_memory",
            "no memory left for the KV cache",
        ),
        (
            {"memory_budget": Bytes(GiB)},
            "memory_budget",
            "expected byte/rank (one rank's memory), got 1073741824 byte;",
        ),
        ({"memory_budget": "40 GiB", "gpu_memory_utilization": 0}, "gpu_memory_utilization", ""),
        ({"memory_budget": "40 GiB", "gpu_memory_utilization": True}, "gpu_memory_utilization", ""),
        ({"memory_budget": "40 GiB", "async_scheduling": "yes"}, "async_scheduling", "boolean"),
        ({"memory_budget": "40 GiB", "max_concurrent_batches": 0}, "max_concurrent_batches", ""),
        ({"memory_budget": "40 GiB", "num_speculative_tokens": -1}, "num_speculative_tokens", ""),
        (
            {
                "memory_budget": "40 GiB",
                "tensor_parallel_size": 4,
                "decode_context_parallel_size": 8,
            },
            "decode_context_parallel_size",
            "8 does not divide tensor_parallel_size 4",
        ),
    ],
)
def test_engine_refusals(fields: dict[str, object], loc: str, message: str) -> None:
    with pytest.raises(ValidationError) as excinfo:
        engine(**fields)
    errors = excinfo.value.errors()
    assert loc in [e["loc"][0] for e in errors], errors
    (error,) = [e for e in errors if e["loc"][0] == loc]
    assert message in error["msg"], error["msg"]


# -- loading: file, environment, flags ------------------------------------------------------------
def test_deployment_settings_load_by_precedence(
    write: Callable[[str, str], Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    text = SHIPPED.read_text().replace(
        'memory_budget = "40 GiB"',
        'memory_budget = "40 GiB"\ntensor_parallel_size = 2\nasync_scheduling = true',
    )
    path = write("deploy.toml", text)
    config = load_config(path)
    assert config.engine.tensor_parallel_size == 2 and config.engine.async_scheduling
    assert config.engine_sources["tensor_parallel_size"] == "file"
    monkeypatch.setenv("KVUNITS_TENSOR_PARALLEL_SIZE", "4")
    monkeypatch.setenv("KVUNITS_ASYNC_SCHEDULING", "false")
    monkeypatch.setenv("KVUNITS_NUM_SPECULATIVE_TOKENS", " 2 ")
    config = load_config(path)
    assert (config.engine.tensor_parallel_size, config.engine.async_scheduling) == (4, False)
    assert config.engine.num_speculative_tokens == 2
    assert config.engine_sources["async_scheduling"] == "env KVUNITS_ASYNC_SCHEDULING"
    config = load_config(path, flags={"tensor_parallel_size": "8", "async_scheduling": True})
    assert (config.engine.tensor_parallel_size, config.engine.async_scheduling) == (8, True)
    assert config.engine_sources["tensor_parallel_size"] == "flag --tensor-parallel-size"
    assert config.engine_sources["pipeline_parallel_size"] == "default"


def test_gpu_memory_replaces_the_default_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KVUNITS_GPU_MEMORY", "80 GiB")
    monkeypatch.setenv("KVUNITS_GPU_MEMORY_UTILIZATION", "0.9")
    monkeypatch.setenv("KVUNITS_WEIGHTS_MEMORY", "16 GiB")
    monkeypatch.setenv("KVUNITS_ACTIVATION_MEMORY", "4 GiB")
    hf = EXAMPLES / "hf" / "llama-3.1-8b" / "config.json"
    config = load_config(hf)
    assert config.engine.memory_budget is None
    assert "memory_budget" not in config.engine_sources
    assert config.engine.kv_cache_memory == RankBytes(77309411328 - 20 * GiB)


def test_both_budgets_given_name_their_sources() -> None:
    # The shipped example's file sets memory_budget; a flag adds gpu_memory.
    with pytest.raises(ConfigError) as excinfo:
        load_config(SHIPPED, flags={"gpu_memory": "80 GiB"})
    (issue,) = excinfo.value.issues
    assert issue.path == "engine"
    assert issue.message.startswith(
        "memory_budget (file) and gpu_memory (flag --gpu-memory) are both set"
    )


def test_gpu_memory_without_the_rest_names_what_to_add() -> None:
    with pytest.raises(ConfigError) as excinfo:
        load_config(
            EXAMPLES / "hf" / "llama-3.1-8b" / "config.json",
            flags={"gpu_memory": "80 GiB"},
        )
    paths = [(i.path, i.message) for i in excinfo.value.issues]
    assert [p for p, _ in paths] == ["engine.weights_memory", "engine.activation_memory"]
    assert paths[0][1].endswith(
        'set weights_memory = "16 GiB" in [engine], or KVUNITS_WEIGHTS_MEMORY, or --weights-memory'
    )


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("KVUNITS_ASYNC_SCHEDULING", "yes", "Input should be a valid boolean"),
        ("KVUNITS_TENSOR_PARALLEL_SIZE", "8 rank", "Input should be a valid integer"),
        ("KVUNITS_TENSOR_PARALLEL_SIZE", "0", "greater than or equal to 1"),
        ("KVUNITS_GPU_MEMORY_UTILIZATION", "92%", "Input should be a valid number"),
    ],
)
def test_bad_deployment_settings_name_their_source(
    monkeypatch: pytest.MonkeyPatch,
    variable: str,
    value: str,
    message: str,
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError) as excinfo:
        load_config(SHIPPED)
    (issue,) = excinfo.value.issues
    assert (issue.where, issue.path) == ("environment", variable)
    assert message in issue.message, issue.message
