"""The named conversions against plain integer arithmetic, and the residency proof of
`pool_window` by brute force over small geometries."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import kvunits.contracts
import kvunits.contracts.deploy
from kvunits.contracts import (
    CONVERSIONS,
    BlockSize,
    Bytes,
    CacheBlocks,
    Chunk,
    EncoderTokens,
    PooledBlocks,
    PoolFactor,
    Position,
    SpanBlocks,
    Tokens,
    UnitTypeError,
    UnitValueError,
    Window,
    block_of,
    bytes_to_cache_blocks_floor,
    cache_blocks_to_bytes,
    expand_block_size,
    pool_chunk,
    pool_length,
    pool_position,
    pool_window,
    slots_to_cache_blocks_ceil,
    unpool_length,
    window_blocks,
)
from kvunits.contracts.crossing import step_cache_rows
from kvunits.contracts.deploy import DEPLOY_CONVERSIONS
from kvunits.contracts.internal import cdiv

SEQ_CLASSES: tuple[type[Any], ...] = (EncoderTokens, PooledBlocks, Tokens)
#: The conversions without their signatures: what a caller without mypy calls.
untyped: Any = kvunits.contracts

counts = st.integers(min_value=0, max_value=2**40)
pools = st.integers(min_value=1, max_value=64)
positive = st.integers(min_value=1, max_value=2**20)


# -- golden values from the seed --------------------------------------------------------------


def test_seed_golden_values() -> None:
    # The seed (MISSION.md): Voxtral Realtime's encoder window, W = 750 encoder tokens, P = 4.
    assert pool_window(Window(750, EncoderTokens), PoolFactor(4)) == Window(189, PooledBlocks)
    assert pool_window(Window(749, EncoderTokens), PoolFactor(4)) == Window(188, PooledBlocks)
    # The seed fix read the window as a length: one pooled block short.
    assert pool_length(EncoderTokens(750), PoolFactor(4)) == PooledBlocks(188)
    # The window's cache blocks, block size 16 pooled blocks: cdiv(188, 16) + 1.
    assert window_blocks(Window(189, PooledBlocks), BlockSize(16, PooledBlocks)) == SpanBlocks(13)
    assert slots_to_cache_blocks_ceil(
        PooledBlocks(189), BlockSize(16, PooledBlocks)
    ) == CacheBlocks(12)
    assert str(expand_block_size(BlockSize(16, PooledBlocks), PoolFactor(4))) == (
        "64 encoder_token/cache_block"
    )


# -- each conversion against plain arithmetic -------------------------------------------------


@given(n=counts, p=pools)
def test_pool_length(n: int, p: int) -> None:
    got = pool_length(EncoderTokens(n), PoolFactor(p))
    assert type(got) is PooledBlocks
    assert got.numerical_value_in(PooledBlocks) == (n + p - 1) // p
    # Enough pooled blocks to hold n tokens, and not one more.
    assert got.numerical_value_in(PooledBlocks) * p >= n and (
        got.numerical_value_in(PooledBlocks) == 0
        or (got.numerical_value_in(PooledBlocks) - 1) * p < n
    )


@given(w=st.integers(min_value=1, max_value=2**40), p=pools)
def test_pool_window(w: int, p: int) -> None:
    got = pool_window(Window(w, EncoderTokens), PoolFactor(p))
    assert got.unit is PooledBlocks
    slots = got.numerical_value_in(PooledBlocks)
    assert slots == (w - 1 + p - 1) // p + 1
    # The look-back of the first token of a pooled block, in whole pooled blocks, plus itself.
    assert got.lookback == PooledBlocks(math.ceil(Fraction(w - 1, p)))


def test_a_window_holds_at_least_the_current_position() -> None:
    with pytest.raises(
        UnitValueError,
        match=r"^a window must be >= 1 encoder_token \(it holds the current position\), got 0$",
    ) as info:
        Window(0, EncoderTokens)
    assert info.value.field == "window"


@given(i=counts, p=pools)
def test_pool_position(i: int, p: int) -> None:
    got = pool_position(Position(i, EncoderTokens), PoolFactor(p))
    assert got.unit is PooledBlocks
    slot = got.numerical_value_in(PooledBlocks)
    assert slot == i // p
    assert slot * p <= i < (slot + 1) * p


@given(c=st.integers(min_value=1, max_value=2**30), p=pools)
def test_pool_chunk(c: int, p: int) -> None:
    if c % p:
        with pytest.raises(UnitValueError, match=rf"^a chunk of {c} encoder_token is not a whole"):
            pool_chunk(Chunk(c, EncoderTokens), PoolFactor(p))
    else:
        assert pool_chunk(Chunk(c, EncoderTokens), PoolFactor(p)) == Chunk(c // p, PooledBlocks)


def _most_blocks_touched(w: int, bs: int) -> int:
    """Brute force: the most cache blocks of ``bs`` slots that ``w`` consecutive slots touch,
    over every start offset within a block (the window's current slot anywhere)."""
    return max(len({s // bs for s in range(start, start + w)}) for start in range(bs))


@pytest.mark.parametrize("unit", [EncoderTokens, PooledBlocks, Tokens])
def test_window_blocks_is_the_most_a_window_touches(unit: type[Any]) -> None:
    # vllm-gaudi #1395 kept W // B blocks of the table for a window, dropping the block the
    # window straddles; its fix, W // B + 1, and a length's ceiling cdiv(W, B) (TRT-LLM #16426
    # sampled one alignment) are still short for some windows. cdiv(W - 1, B) + 1 is exact.
    shorts = {"W // B": 0, "W // B + 1": 0, "cdiv(W, B)": 0}
    for w in range(1, 80):
        for bs in range(1, 17):
            most = _most_blocks_touched(w, bs)
            assert window_blocks(Window(w, unit), BlockSize(bs, unit)) == SpanBlocks(most)
            shorts["W // B"] += w // bs < most
            shorts["W // B + 1"] += w // bs + 1 < most
            shorts["cdiv(W, B)"] += cdiv(w, bs) < most
    assert all(shorts.values()), shorts  # every shortcut loses a block somewhere
    # The seed's layer: 189 pooled blocks, block size 16: 13 (cdiv(189, 16) says 12).
    assert window_blocks(Window(189, unit), BlockSize(16, unit)) == SpanBlocks(13)


@given(i=counts, bs=st.integers(min_value=1, max_value=1024), unit=st.sampled_from(SEQ_CLASSES))
def test_block_of(i: int, bs: int, unit: type[Any]) -> None:
    got = block_of(Position(i, unit), BlockSize(bs, unit))
    assert got == Position(i // bs, CacheBlocks)


@given(s=counts, p=pools)
def test_unpool_length(s: int, p: int) -> None:
    got = unpool_length(PooledBlocks(s), PoolFactor(p))
    assert type(got) is EncoderTokens
    assert got.numerical_value_in(EncoderTokens) == s * p
    assert pool_length(got, PoolFactor(p)) == PooledBlocks(s)


@given(slots=st.lists(st.integers(min_value=1, max_value=1 << 20), max_size=8), p=pools)
def test_whole_slots_expand_to_p_rows_each(slots: list[int], p: int) -> None:
    # A step of whole pooled blocks (block size 1: slot s is cache slot table[s]): P rows per
    # slot, in order; row // P gives the cache slot back (pool_position's rule).
    rows = step_cache_rows(slots, 1, 0, len(slots) * p, p)
    assert len(rows) == len(slots) * p
    assert [r // p for r in rows] == [s for s in slots for _ in range(p)]
    assert [r % p for r in rows] == list(range(p)) * len(slots)


@given(slots=st.integers(min_value=1, max_value=4096), p=pools)
def test_expand_block_size(slots: int, p: int) -> None:
    got = expand_block_size(BlockSize(slots, PooledBlocks), PoolFactor(p))
    assert got == BlockSize(slots * p, EncoderTokens)


@pytest.mark.parametrize("unit", [EncoderTokens, Tokens])
def test_expand_block_size_rejects_unpooled_block_size(unit: type[Any]) -> None:
    with pytest.raises(
        UnitTypeError,
        match=rf"^block_size is 16 {unit.unit}/cache_block but pooled_block slots were expected$",
    ):
        expand_block_size(BlockSize(16, unit), PoolFactor(4))


@given(n=counts, bs=st.integers(min_value=1, max_value=1024), unit=st.sampled_from(SEQ_CLASSES))
def test_slots_to_cache_blocks_ceil(n: int, bs: int, unit: type[Any]) -> None:
    got = slots_to_cache_blocks_ceil(unit(n), BlockSize(bs, unit))
    assert type(got) is CacheBlocks
    assert got.numerical_value_in(CacheBlocks) == (n + bs - 1) // bs


@given(
    pair=st.sampled_from([(a, b) for a in SEQ_CLASSES for b in SEQ_CLASSES if a is not b]),
    n=st.integers(min_value=0, max_value=10**6),
)
def test_slots_to_cache_blocks_ceil_rejects_unit_mismatch(
    pair: tuple[type[Any], type[Any]], n: int
) -> None:
    slot_cls, block_cls = pair
    with pytest.raises(
        UnitTypeError,
        match=rf"^slots must be {block_cls.__name__} \({block_cls.unit}\), "
        rf"got {n} {slot_cls.unit}$",
    ):
        slots_to_cache_blocks_ceil(slot_cls(n), BlockSize(16, block_cls))


@given(n=counts, page=counts)
def test_cache_blocks_to_bytes(n: int, page: int) -> None:
    got = cache_blocks_to_bytes(CacheBlocks(n), Bytes(page))
    assert type(got) is Bytes
    assert got.numerical_value_in(Bytes) == n * page


def test_cache_blocks_to_bytes_rejects_swapped_arguments() -> None:
    with pytest.raises(
        UnitTypeError, match=r"^blocks must be CacheBlocks \(cache_block\), got 4096 byte$"
    ):
        cache_blocks_to_bytes(Bytes(4096), CacheBlocks(13))  # type: ignore[arg-type]


@given(budget=counts, page=st.integers(min_value=1, max_value=2**30))
def test_bytes_to_cache_blocks_floor(budget: int, page: int) -> None:
    got = bytes_to_cache_blocks_floor(Bytes(budget), Bytes(page))
    assert type(got) is CacheBlocks
    assert got.numerical_value_in(CacheBlocks) == budget // page
    assert (
        got.numerical_value_in(CacheBlocks) * page
        <= budget
        < (got.numerical_value_in(CacheBlocks) + 1) * page
    )


def test_bytes_to_cache_blocks_floor_rejects_empty_page() -> None:
    with pytest.raises(UnitValueError, match=r"^page_size must be > 0 byte to count pages$"):
        bytes_to_cache_blocks_floor(Bytes(1 << 30), Bytes(0))


@given(
    n=st.integers(min_value=-(2**70), max_value=2**70),
    d=st.integers(min_value=-(2**40), max_value=2**40),
)
def test_cdiv(n: int, d: int) -> None:
    if d == 0:
        with pytest.raises(ZeroDivisionError):
            cdiv(n, d)
    else:
        assert cdiv(n, d) == math.ceil(Fraction(n, d))


@pytest.mark.parametrize(
    "convert",
    [
        lambda: pool_length(EncoderTokens(750), 4),  # type: ignore[arg-type]
        lambda: pool_window(Window(750, EncoderTokens), 4),  # type: ignore[arg-type]
        lambda: pool_position(Position(750, EncoderTokens), 4),  # type: ignore[arg-type]
        lambda: pool_chunk(Chunk(752, EncoderTokens), 4),  # type: ignore[arg-type]
        lambda: unpool_length(PooledBlocks(188), 4),  # type: ignore[arg-type]
        lambda: expand_block_size(BlockSize(16, PooledBlocks), 4),  # type: ignore[arg-type]
    ],
)
def test_pool_must_be_a_pool_factor(convert: Any) -> None:
    with pytest.raises(
        UnitTypeError,
        match=r"^pool must be a PoolFactor \(encoder_token per pooled_block\), "
        r"got 4 \(a bare int, no unit\)$",
    ):
        convert()


@pytest.mark.parametrize(
    ("convert", "message"),
    [
        (
            lambda: untyped.pool_length(PooledBlocks(750), PoolFactor(4)),
            r"length must be EncoderTokens .*",
        ),
        # A window, a position or a chunk is not a length, and a length is none of them.
        (
            lambda: untyped.pool_length(Window(750, EncoderTokens), PoolFactor(4)),
            r"length must be EncoderTokens .*, got 750 encoder_token \(a window\)",
        ),
        (
            lambda: untyped.pool_span(Window(750, EncoderTokens), PoolFactor(4)),
            r"run must be EncoderTokens .*, got 750 encoder_token \(a window\)",
        ),
        (
            lambda: untyped.pool_window(EncoderTokens(750), PoolFactor(4)),
            r"window must be a Window\[EncoderTokens\] .*: a length is not a window; "
            r"write Window\(n, EncoderTokens\)",
        ),
        (
            lambda: untyped.pool_window(Window(750, PooledBlocks), PoolFactor(4)),
            r"window must be a Window\[EncoderTokens\] .*, got 750 pooled_block \(a window\)",
        ),
        (
            lambda: untyped.pool_window(750, PoolFactor(4)),
            r"window must be a Window\[EncoderTokens\] .*",
        ),
        (
            lambda: untyped.pool_position(Tokens(3), PoolFactor(4)),
            r"position must be a Position\[EncoderTokens\] .*",
        ),
        (
            lambda: untyped.pool_position(Position(3, Tokens), PoolFactor(4)),
            r"position must be a Position\[EncoderTokens\] .*",
        ),
        (
            lambda: untyped.pool_chunk(EncoderTokens(8), PoolFactor(4)),
            r"chunk must be a Chunk\[EncoderTokens\] .*",
        ),
        (
            lambda: untyped.window_blocks(EncoderTokens(8), BlockSize(4, EncoderTokens)),
            r"window must be a Window\[EncoderTokens\] .*",
        ),
        (
            lambda: untyped.window_blocks(Window(8, Tokens), BlockSize(4, EncoderTokens)),
            r"window must be a Window\[EncoderTokens\] .*",
        ),
        (
            lambda: untyped.block_of(Position(8, Tokens), BlockSize(4, EncoderTokens)),
            r"position must be a Position\[EncoderTokens\] .*",
        ),
        (
            lambda: untyped.unpool_length(EncoderTokens(188), PoolFactor(4)),
            r"length must be PooledBlocks .*",
        ),
    ],
)
def test_conversions_check_their_source_unit(convert: Any, message: str) -> None:
    with pytest.raises(UnitTypeError, match=f"^{message}$"):
        convert()


def test_factors_validate() -> None:
    with pytest.raises(
        UnitValueError,
        match=r"^PoolFactor must be >= 1 \(1 means the layer does not pool\), got 0$",
    ):
        PoolFactor(0)
    with pytest.raises(UnitTypeError, match=r"^PoolFactor takes an int .*, got True \(a bool\)$"):
        PoolFactor(True)
    with pytest.raises(
        UnitValueError, match=r"^BlockSize must be >= 1 pooled_block per cache_block, got 0$"
    ):
        BlockSize(0, PooledBlocks)
    with pytest.raises(
        UnitTypeError,
        match=r"^BlockSize counts encoder_token, pooled_block or token slots, got a type$",
    ):
        BlockSize(16, CacheBlocks)  # type: ignore[type-var]
    with pytest.raises(
        UnitTypeError,
        match=r"^BlockSize takes an int number of token per cache_block, got 16.0 \(a float\)$",
    ):
        BlockSize(16.0, Tokens)  # type: ignore[arg-type]


def test_conversion_table_names_real_functions() -> None:
    for conversion in CONVERSIONS:
        # The per-rank conversions live in kvunits.contracts.deploy, the others at the top.
        home = kvunits.contracts.deploy if conversion in DEPLOY_CONVERSIONS else kvunits.contracts
        assert callable(getattr(home, conversion.name))
        # A name that states its rounding must agree with the table.
        for suffix in ("ceil", "floor"):
            if conversion.name.endswith("_" + suffix):
                assert conversion.rounding == suffix
    by_name = {c.name: c for c in CONVERSIONS}
    assert by_name["pool_window"].rounding == "window"
    assert by_name["window_blocks"].rounding == "window"
    assert by_name["pool_length"].rounding == "ceil"
    assert by_name["pool_position"].rounding == by_name["block_of"].rounding == "floor"
    # A conversion of a window, a position or a chunk says so on both sides.
    for name, kind in [
        ("pool_window", "window"),
        ("pool_position", "position"),
        ("pool_chunk", "chunk"),
    ]:
        assert by_name[name].source.endswith(kind) and by_name[name].target.endswith(kind)


# -- residency: the manager's eviction against the kernel's reads -----------------------------


@dataclass(frozen=True)
class Geometry:
    """One streamed sequence through one pooled sliding-window layer.

    Attributes:
        seq_tokens: sequence length in encoder tokens (the last pooled slot may be partial).
        window_tokens: W, the kernel's window in encoder tokens.
        pool: P, encoder tokens per pooled slot.
        block_size: pooled slots per cache block.
    """

    seq_tokens: int
    window_tokens: int
    pool: int
    block_size: int

    @classmethod
    def long_enough(cls, window_tokens: int, pool: int, block_size: int) -> Geometry:
        """A sequence that reaches every eviction phase, with a partial last pooled slot."""
        slots = cdiv(window_tokens - 1, pool) + 2 * block_size + 1
        return cls(slots * pool - pool // 2, window_tokens, pool, block_size)


def first_unresident_read(
    g: Geometry, window_slots: int, steps: tuple[int, ...] = (1,)
) -> tuple[int, int, int] | None:
    """Stream a sequence through a simulated manager and kernel; find the first bad read.

    The manager counts pooled slots. Before each step it frees the whole cache blocks that lie
    entirely below slot ``num_computed - window_slots + 1`` (vLLM's sliding-window rule), then
    allocates blocks for the step's new slots. The kernel then runs every encoder-token query
    of the step against keys ``q - (W - 1) .. q``.

    Args:
        g: the sequence and the layer.
        window_slots: the window the manager is given, in pooled slots.
        steps: slots computed per step, cycled.

    Returns:
        ``(num_computed, q, k)``: the oldest key ``k`` of the first query ``q`` that reads a
        freed cache block, and the slots computed before that step; ``None`` if every read
        was resident.
    """
    seq_slots = cdiv(g.seq_tokens, g.pool)
    tokens_per_block = g.pool * g.block_size
    held = 0  # bit b set: cache block b is allocated and not freed
    allocated_blocks = 0
    num_computed = 0
    for step in itertools.cycle(steps):
        if num_computed >= seq_slots:
            return None
        new_slots = min(step, seq_slots - num_computed)
        first_useful_slot = num_computed - window_slots + 1
        if first_useful_slot > 0:
            held &= ~((1 << (first_useful_slot // g.block_size)) - 1)
        needed_blocks = cdiv(num_computed + new_slots, g.block_size)
        for block in range(allocated_blocks, needed_blocks):
            held |= 1 << block
        allocated_blocks = max(allocated_blocks, needed_blocks)
        step_end = min((num_computed + new_slots) * g.pool, g.seq_tokens)
        for q in range(num_computed * g.pool, step_end):
            oldest_key = max(0, q - (g.window_tokens - 1))
            # The keys are one contiguous range, so their slots and blocks are too: the mask
            # has one bit for every cache block that some key of this query lives in.
            reads = (1 << (q // tokens_per_block + 1)) - (1 << (oldest_key // tokens_per_block))
            if held & reads != reads:
                freed_reads = reads & ~held
                lowest = (freed_reads & -freed_reads).bit_length() - 1
                return num_computed, q, max(oldest_key, lowest * tokens_per_block)
        num_computed += new_slots
    raise AssertionError("unreachable: itertools.cycle does not end")


def first_unresident_read_slow(g: Geometry, window_slots: int) -> tuple[int, int, int] | None:
    """The same simulation, one slot per step, key by key against a set of blocks: the oracle."""
    held: set[int] = set()
    for num_computed in range(cdiv(g.seq_tokens, g.pool)):
        first_useful_slot = num_computed - window_slots + 1
        if first_useful_slot > 0:
            held -= set(range(first_useful_slot // g.block_size))
        if num_computed % g.block_size == 0:
            held.add(num_computed // g.block_size)
        for q in range(num_computed * g.pool, min((num_computed + 1) * g.pool, g.seq_tokens)):
            for k in range(max(0, q - (g.window_tokens - 1)), q + 1):
                if k // g.pool // g.block_size not in held:
                    return num_computed, q, k
    return None


#: Every window 1..64 encoder tokens, pooling 1..8, block size 1..8 pooled slots.
GRID = [
    Geometry.long_enough(w, p, bs) for w in range(1, 65) for p in range(1, 9) for bs in range(1, 9)
]
#: One slot per step (decode-like), fixed chunks, and a mixed chunk pattern.
SCHEDULES: tuple[tuple[int, ...], ...] = ((1,), (2,), (3,), (1, 3, 2))


def _pool_window(g: Geometry) -> int:
    window = pool_window(Window(g.window_tokens, EncoderTokens), PoolFactor(g.pool))
    return window.numerical_value_in(PooledBlocks)


def test_residency_simulator_agrees_with_key_by_key_oracle() -> None:
    for g in GRID[::5]:
        for window_slots in (_pool_window(g), cdiv(g.window_tokens, g.pool), 1):
            slow = first_unresident_read_slow(g, window_slots)
            assert first_unresident_read(g, window_slots) == slow, (g, window_slots)


def test_pool_window_keeps_every_read_resident_and_is_the_smallest() -> None:
    seed_rule_fails: list[Geometry] = []
    for g in GRID:
        w, p = g.window_tokens, g.pool
        window_slots = _pool_window(g)
        # Sufficient, whatever the step sizes.
        for steps in SCHEDULES:
            assert first_unresident_read(g, window_slots, steps) is None, (g, steps)
        # Necessary: one slot less loses a key in every geometry, pooled or not, as long as
        # "one less" is still a window (W = 1 gives 1 slot; 0 slots is not a window). The
        # one-slot stream is the adversary here: larger steps meet the eviction point less
        # often, so some of them survive with one slot less.
        if window_slots > 1:
            assert first_unresident_read(g, window_slots - 1) is not None, g
        # The seed's reading of W as a length, cdiv(W, P), is safe exactly when it equals
        # pool_window, which is when (W - 1) % P == 0 (always for P = 1).
        seed_slots = pool_length(EncoderTokens(w), PoolFactor(p)).numerical_value_in(PooledBlocks)
        seed_ok = first_unresident_read(g, seed_slots) is None
        assert seed_ok == (seed_slots == window_slots) == ((w - 1) % p == 0), g
        if not seed_ok:
            assert seed_slots == window_slots - 1
            seed_rule_fails.append(g)
        # vLLM's later cdiv(W, P) + 1 is safe; it wastes one slot exactly when (W - 1) % P == 0.
        vllm_slots = cdiv(w, p) + 1
        assert vllm_slots - window_slots == (1 if (w - 1) % p == 0 else 0)
        assert first_unresident_read(g, vllm_slots) is None
    assert len(seed_rule_fails) == sum(1 for g in GRID if (g.window_tokens - 1) % g.pool != 0)
    assert seed_rule_fails and all(g.pool > 1 for g in seed_rule_fails)


@pytest.mark.parametrize("block_size", [1, 2, 3, 4, 8, 16, 32])
def test_seed_window_188_reads_a_freed_block(block_size: int) -> None:
    """W = 750, P = 4: the seed's 188 frees a block the kernel still reads; 189 does not."""
    g = Geometry.long_enough(750, 4, block_size)
    for steps in SCHEDULES:
        assert first_unresident_read(g, 189, steps) is None
    bad = first_unresident_read(g, 188)
    assert bad is not None
    num_computed, q, k = bad
    # The first query of pooled slot c reads back to key 4c - 749, in slot c - 188. Given 188,
    # the manager frees the blocks below slot c - 187, so the block holding slot c - 188 goes
    # as soon as c - 187 lands on a block boundary, with the first such c.
    assert num_computed == 187 + block_size
    assert q == 4 * num_computed
    assert k == q - 749
    assert k // 4 == num_computed - 188 == block_size - 1


def test_seed_window_188_narrated_for_block_size_16() -> None:
    """The seed's geometry step by step: block_size = 16 pooled slots, P = 4, W = 750."""
    g = Geometry(seq_tokens=4 * 400, window_tokens=750, pool=4, block_size=16)
    # Slots 0-202 are computed. Given 188, the manager frees the blocks below slot
    # 203 - 188 + 1 = 16: block 0, slots 0-15, encoder tokens 0-63.
    # Slot 203 starts at encoder token 812, whose window reaches back to 812 - 749 = 63:
    # token 63 sits in slot 15, block 0, which was just freed.
    assert first_unresident_read(g, 188) == (203, 812, 63)
    # Given 189, block 0 goes one slot later, before slot 204, whose first token 816 reads
    # back to 67, in slot 16, block 1: nothing it reads is freed.
    assert first_unresident_read(g, 189) is None


def test_window_longer_than_the_sequence() -> None:
    # 750 tokens at P = 4 need 189 slots; a sequence this short never reaches an eviction.
    for seq_tokens in (1, 4, 21, 63, 64, 65, 749, 750, 751):
        for block_size in (1, 3, 16):
            g = Geometry(seq_tokens, window_tokens=750, pool=4, block_size=block_size)
            assert first_unresident_read(g, 189) is None
