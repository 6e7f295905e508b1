"""Group markers (issue 20, class 1 statically): a layer group asked for by its marker types
what its handle and views compute; the run time checks the same ownership by name, so a
marked value and a named one behave alike when the code runs.

The model is Gemma-like (full and sliding layers, one shared pool: the plan unifies page
sizes, 32 tokens a block in the full group, 16 in the sliding one), the shape of vLLM #50687
and #53982: one group's column read in another group's table.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvunits.contracts import (
    BlockIds,
    CacheBlocks,
    Elements,
    EngineSpec,
    FullAttentionLayer,
    GroupMarker,
    KVHeads,
    ModelSpec,
    Position,
    SlidingWindowLayer,
    SpecError,
    Tokens,
    UnitTypeError,
    UnitValueError,
    Window,
    group_layers,
)
from kvunits.contracts.deploy import RankBytes
from kvunits.runtime import GroupHandle, KVCacheCoordinator, plan


class Full(GroupMarker, name="full"): ...


class Sliding(GroupMarker, name="sliding"): ...


MODEL = ModelSpec.model_validate(
    {
        "name": "gemma-like",
        "layers": {
            "full.0": FullAttentionLayer(kv_heads=KVHeads(8), head_size=Elements(128)),
            "sliding.0": SlidingWindowLayer(
                sliding_window=Window(64, Tokens), kv_heads=KVHeads(8), head_size=Elements(256)
            ),
        },
    }
)
ENGINE = EngineSpec(
    max_model_len=Tokens(4096),
    max_num_batched_tokens=Tokens(1024),
    memory_budget=RankBytes(1 << 30),
    kv_cache_layout="shared",
)


def _coordinator() -> KVCacheCoordinator:
    coord = KVCacheCoordinator.from_plan(plan(MODEL, ENGINE))
    step = coord.stepper(coord.group(Full, Tokens), coord.group(Sliding, Tokens))
    step.admit("r", Tokens(4096), Tokens(4096))
    for _ in range(4):  # a step at most max_num_batched_tokens
        step.allocate("r", Tokens(1024), Tokens(1024))
    return coord


COORD = _coordinator()


def test_a_marker_is_the_group_by_name() -> None:
    assert COORD.group(Full, Tokens) is COORD.group("full", Tokens)
    assert Full.group_name == "full"
    with pytest.raises(UnitTypeError, match="a group marker, a type"):
        Full()
    with pytest.raises(UnitValueError, match="names its layer group"):

        class Bad(GroupMarker, name=""): ...

    with pytest.raises(UnitTypeError, match="a GroupMarker subclass"):
        COORD.group(int, Tokens)  # type: ignore[type-var]

    class Missing(GroupMarker, name="audio"): ...

    with pytest.raises(SpecError, match="no group 'audio'"):
        COORD.group(Missing, Tokens)


def test_a_view_is_typed_by_its_own_groups_marker_only() -> None:
    (full, sliding), _ = group_layers(MODEL, ENGINE)
    assert full.expect(Tokens, Full) is full
    with pytest.raises(UnitTypeError, match=r"group 'sliding' was asked for as Full, which marks"):
        sliding.expect(Tokens, Full)


@given(index=st.integers(0, 4095))
def test_a_column_indexes_its_own_groups_table_only(index: int) -> None:
    """Whatever the position, a marked handle's column reads its own group's table and is
    refused by the other's, naming both; a column of no group (built by hand) reads any."""
    position = Position(index, Tokens)
    handles: dict[str, GroupHandle[Tokens, Any]] = {
        "full": COORD.group(Full, Tokens),
        "sliding": COORD.group(Sliding, Tokens),
    }
    for name, handle in handles.items():
        table = COORD.block_table("r", handle)
        assert table.owner == name
        column = handle.block_of(position)
        per_block = 32 if name == "full" else 16
        assert column == Position(index // per_block, CacheBlocks) and column.owner == name
        assert table[column] == table[index // per_block]
        for other, other_handle in handles.items():
            if other != name:
                with pytest.raises(UnitTypeError, match=f"computed by group {name!r}"):
                    COORD.block_table("r", other_handle)[column]
        # A column of no group (built by hand) names no group: the caller's own reading.
        assert table[Position(index // per_block, CacheBlocks)] == table[column]


def test_a_table_built_by_hand_takes_a_marker_as_its_owner() -> None:
    table = BlockIds([5, 7], owner=Sliding)
    assert table.owner == "sliding"
    full = COORD.group(Full, Tokens)
    with pytest.raises(UnitTypeError, match="computed by group 'full'"):
        table[full.block_of(Position(0, Tokens))]  # type: ignore[index]
    # A column moved along its table stays its group's.
    column = full.block_of(Position(40, Tokens)) + CacheBlocks(1)
    assert column.owner == "full" and column == Position(2, CacheBlocks)
