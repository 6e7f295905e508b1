"""The counts a spec declares (heads, KV heads, elements, layers) and the allocator's integer
sequences (block ids, slot mappings): each its own type, refused where another belongs."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvunits.contracts import (
    BlockIds,
    CacheBlocks,
    Elements,
    EncoderTokens,
    FullAttentionLayer,
    Heads,
    KVHeads,
    Layers,
    ModelSpec,
    PoolBlocks,
    Position,
    SlotIds,
    StageLayers,
    Tokens,
    UnitTypeError,
    UnitValueError,
    manager_view,
)
from kvunits.contracts.deploy import (
    Parallelism,
    RankBlocks,
    RankBytes,
    RankKVHeads,
    engine_blocks,
    kv_heads_per_rank,
    layers_of_stage,
    layers_per_stage,
    rank_block_bytes,
)
from kvunits.contracts.internal import owned_column

COUNTS = [Heads, KVHeads, Elements, Layers, StageLayers]


@pytest.mark.parametrize("cls", COUNTS)
def test_a_count_is_its_own_unit(cls: type[KVHeads]) -> None:
    n = cls(8)
    assert n + cls(8) == cls(16) and n.numerical_value_in(cls) == 8
    for other in COUNTS:
        if other is not cls:
            with pytest.raises(UnitTypeError):
                n + other(8)  # type: ignore[arg-type, unused-ignore]
    with pytest.raises(UnitTypeError):
        n == 8  # type: ignore[comparison-overlap]  # noqa: B015  # a bare int is no count
    assert pickle.loads(pickle.dumps(n)) == n


@pytest.mark.parametrize("cls", [*COUNTS, RankBytes, RankBlocks, RankKVHeads])
def test_counts_and_a_ranks_quantities_do_not_scale_by_a_bare_int(cls: type[KVHeads]) -> None:
    # What would the int count? (layers? stages? ranks?): a named function says.
    with pytest.raises(UnitTypeError, match="named function"):
        cls(8) * 2  # type: ignore[operator]
    with pytest.raises(UnitTypeError, match="named function"):
        2 * cls(8)  # type: ignore[operator]
    with pytest.raises(UnitTypeError, match="divided"):
        cls(8) // 2  # type: ignore[operator]


def test_kv_heads_divided_by_tp_names_kv_heads_per_rank() -> None:
    # `layer.kv_heads // tp` was how engines lost a replicated head (tp > heads gives 0).
    layer = FullAttentionLayer(kv_heads=KVHeads(2), head_size=Elements(128))
    with pytest.raises(UnitTypeError, match="kv_heads_per_rank"):
        layer.kv_heads // 4  # type: ignore[operator]
    assert kv_heads_per_rank(layer.kv_heads, Parallelism(tensor_parallel_size=4)) == RankKVHeads(1)


def test_layers_of_the_model_are_not_a_stages() -> None:
    stages = layers_per_stage(Layers(61), Parallelism(pipeline_parallel_size=4))
    assert [layers_of_stage(s) for s in stages] == [StageLayers(n) for n in (15, 15, 16, 15)]
    # A rank's bytes per block id: its page in each layer of its stage, named.
    assert rank_block_bytes(RankBytes(8192), layers_of_stage(stages[2])) == RankBytes(131072)
    with pytest.raises(UnitTypeError, match="layers must be StageLayers"):
        rank_block_bytes(RankBytes(8192), Layers(61))  # type: ignore[arg-type]
    with pytest.raises(UnitTypeError, match="num_layers must be Layers"):
        layers_per_stage(StageLayers(16), Parallelism())  # type: ignore[arg-type]
    with pytest.raises(UnitTypeError, match="counts its layers in Layers"):
        ModelSpec.stacked(
            "m",
            {"t": (FullAttentionLayer(kv_heads=KVHeads(1), head_size=Elements(8)), 2)},  # type: ignore[dict-item]
        )


@given(st.lists(st.integers(0, 1 << 40), min_size=1, max_size=16))
def test_engine_blocks_are_the_fewest_over_every_rank(per_rank: list[int]) -> None:
    assert engine_blocks([RankBlocks(n) for n in per_rank]) == PoolBlocks(min(per_rank))


def test_one_ranks_blocks_are_not_the_engines() -> None:
    # nano-vllm #187 (PRs #215, #259, #275): rank 0 found 2111 blocks, rank 1 2055; the
    # scheduler on rank 0 handed out ids up to 2110 and rank 1 read past its cache.
    with pytest.raises(UnitTypeError, match="one rank's count is not the engine's"):
        engine_blocks(RankBlocks(2111))  # type: ignore[arg-type]
    assert engine_blocks([RankBlocks(2111), RankBlocks(2055)]) == PoolBlocks(2055)
    with pytest.raises(UnitValueError):
        engine_blocks([])


# -- block ids and slot mappings -----------------------------------------------------------


def test_a_block_table_and_a_slot_mapping_refuse_each_other() -> None:
    table = BlockIds([5, 7], owner="text")
    slots = SlotIds([80, 81, 112], Tokens, owner="text")
    with pytest.raises(UnitTypeError, match="not each other"):
        BlockIds(slots)  # type: ignore[arg-type]
    with pytest.raises(UnitTypeError, match="not each other"):
        SlotIds(table, Tokens)  # type: ignore[arg-type]
    with pytest.raises(UnitTypeError, match="cannot compare"):
        table == slots  # noqa: B015
    assert table == [5, 7] and slots == (80, 81, 112)
    with pytest.raises(UnitValueError):
        BlockIds([5, -1])
    with pytest.raises(UnitTypeError):
        SlotIds([1], EncoderTokens)  # type: ignore[type-var]  # slots count the manager's unit
    with pytest.raises(AttributeError):
        table.owner = "audio"  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(table)) == table
    assert pickle.loads(pickle.dumps(slots)) == slots


def test_a_table_takes_its_own_groups_columns() -> None:
    table = BlockIds([5, 7, 9], owner="text/sliding_window")
    assert table[owned_column(1, "text/sliding_window")] == 7
    assert table[Position(2, CacheBlocks)] == 9  # a column of no group: the caller's reading
    assert table[1] == 7 and table[1:] == BlockIds([7, 9], owner="text/sliding_window")
    with pytest.raises(UnitTypeError, match="computed by group 'text/full_attention'"):
        table[owned_column(1, "text/full_attention")]
    with pytest.raises(UnitTypeError, match="block_of"):
        table[Position(1, Tokens)]  # type: ignore[arg-type]  # a position, not a column


def test_a_grouped_view_keeps_its_group_in_its_columns() -> None:
    layer = FullAttentionLayer(kv_heads=KVHeads(8), head_size=Elements(128))
    model = ModelSpec.stacked("m", {"text": (layer, Layers(2))})
    from kvunits.contracts import EngineSpec, group_layers

    engine = EngineSpec(
        max_model_len=Tokens(64),
        max_num_batched_tokens=Tokens(16),
        memory_budget=RankBytes(1 << 30),
    )
    ((any_group,), _) = group_layers(model, engine)
    group = any_group.expect(Tokens)
    column = group.manager.block_of(Position(40, Tokens))
    assert column == Position(2, CacheBlocks) and column.owner == "text"
    # The view is still equal to the ungrouped one (the group is not part of its value).
    assert group.manager == manager_view(layer, 16)
    assert manager_view(layer, 16).expect(Tokens).block_of(Position(40, Tokens)).owner is None
