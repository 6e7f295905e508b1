"""The one crossing from manager slots to kernel rows, checked against positions one by one.

Every formula of `kvunits.contracts.crossing` is compared with a brute-force walk over the step's
positions: which slot each lies in, where that slot sits in the cache, which row that is.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvunits.contracts.crossing import (
    cache_slot,
    first_unresident,
    slot_of,
    slots_holding,
    step_cache_rows,
    step_cache_slots,
    touched_slots,
)

from ..runtime.support import unresident_keys

pools = st.integers(1, 6)


def test_the_issue_case_a_step_of_6_then_4_at_p_4() -> None:
    # Block size 2 slots, table [5, 7]. Step 1: positions 0-5, slots 0-1 (slot 1 half full).
    # Step 2: positions 6-9 continue slot 1 and open slot 2: two slots, not one.
    assert touched_slots(0, 6, 4) == 2 and step_cache_slots([5, 7], 2, 0, 6, 4) == [10, 11]
    assert touched_slots(6, 4, 4) == 2 and step_cache_slots([5, 7], 2, 6, 4, 4) == [11, 14]
    assert step_cache_rows([5, 7], 2, 6, 4, 4) == [46, 47, 56, 57]
    assert slots_holding(10, 4) == 3 and slot_of(6, 4) == 1


@given(
    pool=pools, block_size=st.integers(1, 5), context=st.integers(0, 60), step=st.integers(0, 20)
)
def test_formulas_agree_with_the_positions(
    pool: int, block_size: int, context: int, step: int
) -> None:
    end = context + step
    table = [100 + 3 * b for b in range(math.ceil(end / pool / block_size) + 1)]
    slots = sorted({i // pool for i in range(context, end)})  # the slots the step writes
    assert touched_slots(context, step, pool) == len(slots)
    assert slots_holding(end, pool) == math.ceil(end / pool)
    assert step_cache_slots(table, block_size, context, step, pool) == [
        table[s // block_size] * block_size + s % block_size for s in slots
    ]
    rows = step_cache_rows(table, block_size, context, step, pool)
    rows_per_block = block_size * pool
    for i, row in zip(range(context, end), rows, strict=True):
        # Row r of the kernel's view is position r % (B·P) of cache block r // (B·P); it must
        # be the position the manager put in slot i // P at offset i % P.
        block, offset = divmod(row, rows_per_block)
        assert block == table[i // pool // block_size]
        assert offset == (i // pool % block_size) * pool + i % pool
        assert row // pool == cache_slot(table, block_size, slot_of(i, pool))


@given(
    pool=pools,
    contexts=st.lists(st.integers(0, 50), min_size=1, max_size=6),
    steps=st.lists(st.integers(0, 12), min_size=6, max_size=6),
)
def test_touched_slots_on_tensors_is_the_int_formula(
    pool: int, contexts: list[int], steps: list[int]
) -> None:
    # The kernels' slot_start_loc sums this per request on the device.
    torch = pytest.importorskip("torch", reason="torch not installed (the kernels extra)")
    n = len(contexts)
    got = touched_slots(torch.tensor(contexts), torch.tensor(steps[:n]), pool)
    assert got.tolist() == [
        touched_slots(c, q, pool) for c, q in zip(contexts, steps, strict=False)
    ]


@given(
    tokens_per_block=st.integers(1, 8),
    reach=st.one_of(
        st.tuples(st.just("sliding_window"), st.integers(1, 40)),
        st.tuples(st.just("chunked_local"), st.integers(1, 40)),
        st.tuples(st.just("full_attention"), st.none()),
    ),
    table=st.lists(st.integers(0, 5), max_size=14),
    context=st.integers(0, 90),
    step=st.integers(0, 12),
)
def test_first_unresident_is_the_first_bad_query_of_the_oracle(
    tokens_per_block: int,
    reach: tuple[str, int | None],
    table: list[int],
    context: int,
    step: int,
) -> None:
    """Against the runtime tests' oracle, which walks every query and every block it reads
    (tests/runtime/support.py `unresident_keys`): the first query it finds reading a missing
    block, and that block's first key, are what `first_unresident` returns."""
    kind, size = reach
    window = size if kind == "sliding_window" else None
    chunk = size if kind == "chunked_local" else None
    oracle = unresident_keys(
        table,
        block_size=tokens_per_block,
        pool=1,
        kind=kind,
        sliding_window=window,
        chunk=chunk,
        first_query=context,
        end_query=context + step,
    )
    found = first_unresident(
        table, tokens_per_block, context, step, sliding_window=window, chunk=chunk
    )
    if not oracle:
        assert found is None
        return
    assert found is not None
    query, key, column = found
    assert (query, key) == oracle[0]
    assert column == key // tokens_per_block
    assert column >= len(table) or table[column] == 0
