"""The Voxtral Realtime case: an audio stream of pooled blocks through the planned allocator.

The encoder layers: a sliding window of 750 encoder tokens, P = 4, block size 16 pooled slots.
The manager's window is pool_window(750, 4) = 189 slots; the admission cap with one pooled
block per step is cdiv(min(188 + 1, max_len), 16) + 1 = 13 cache blocks.
"""

from __future__ import annotations

from collections.abc import Sequence

from kvunits.contracts import (
    AdmissionCap,
    CacheBlocks,
    Elements,
    EncoderTokens,
    KVHeads,
    PooledBlocks,
    PoolFactor,
    SlidingWindowLayer,
    Tokens,
    Window,
    manager_view,
)
from kvunits.runtime import NULL_BLOCK, KVCacheCoordinator
from kvunits.runtime.capacity import plan

from .support import coordinator, unresident_keys, voxtral_engine, voxtral_model

STREAM = 10_000


def unread_keys_of_step(table: Sequence[int], slot: int) -> list[tuple[int, int]]:
    """The (query, key) pairs of the step that wrote pooled ``slot`` (encoder tokens
    4·slot .. 4·slot + 3) whose key the kernel, with its real window of 750 encoder tokens,
    would read from a freed block of ``table`` (block size 16 pooled blocks, P = 4)."""
    return unresident_keys(
        list(table),
        block_size=16,
        pool=4,
        kind="sliding_window",
        sliding_window=750,
        chunk=None,
        first_query=4 * slot,
        end_query=4 * slot + 4,
    )


def test_streaming_10000_pooled_blocks_never_holds_more_than_13() -> None:
    p = plan(voxtral_model(), voxtral_engine(encoder_len=4 * STREAM, encoder_step=4))
    assert p.group("audio").admission_cap == AdmissionCap(13)
    coord = KVCacheCoordinator.from_plan(p)
    audio, text = coord.group("audio", PooledBlocks), coord.group("text", Tokens)
    step = coord.stepper(audio, text)
    coord.admit("stream")
    assert coord.request_cap("stream", audio) == AdmissionCap(13)
    most = 0
    for i in range(STREAM):
        # One pooled block (4 encoder tokens) a step; a decoder token every 8th step.
        step.allocate("stream", PooledBlocks(1), Tokens(1 if i % 8 == 7 else 0))
        table = coord.block_table("stream", audio)
        held = sum(1 for b in table if b != NULL_BLOCK)
        assert held <= 13, (i, held)
        most = max(most, held)
        if i % 97 == 0 or i < 300:
            # The kernel's queries of this step, encoder tokens 4i .. 4i + 3, read back 749
            # tokens: every one of those keys is in a live block of the request.
            assert not unread_keys_of_step(table.ids_in(CacheBlocks), i)
    assert most == 13
    assert len(coord.block_table("stream", audio)) == STREAM // 16
    assert coord.usage(audio).used.numerical_value_in(CacheBlocks) <= 13
    coord.free("stream")
    assert coord.usage(audio).used == CacheBlocks(0)


def first_unresident(manager_window_tokens: int, steps: int) -> tuple[int, int, int] | None:
    """Stream one pooled block a step through an allocator whose manager derives its window
    from ``manager_window_tokens``, and check residency for the kernel's real 750 tokens.

    Returns the first (slots computed before the step, query, key) the kernel reads from a
    freed block, or None.
    """
    layer = SlidingWindowLayer(
        sliding_window=Window(manager_window_tokens, EncoderTokens),
        pool=PoolFactor(4),
        kv_heads=KVHeads(32),
        head_size=Elements(64),
    )
    coord = coordinator(
        {"audio": layer}, block_size=16, num_blocks=64, max_len=steps, max_in_flight=1
    )
    audio = coord.group("audio", PooledBlocks)
    step = coord.stepper(audio)
    coord.admit("r")
    for c in range(steps):
        step.allocate("r", PooledBlocks(1))
        bad = unread_keys_of_step(coord.block_table("r", audio).ids_in(CacheBlocks), c)
        if bad:
            return (c, *bad[0])
    return None


def test_window_188_frees_a_block_the_kernel_still_reads() -> None:
    # A ManagerSpec is only ever derived, so the seed's 188 is produced the only way it can
    # be: a layer whose own window gives 188 (pool_window(749, 4) = cdiv(748, 4) + 1 = 188),
    # while the kernel reads the real 750.
    assert manager_view(
        SlidingWindowLayer(
            sliding_window=Window(749, EncoderTokens),
            pool=PoolFactor(4),
            kv_heads=KVHeads(32),
            head_size=Elements(64),
        ),
        16,
    ).sliding_window == Window(188, PooledBlocks)
    # Slots 0-202 are computed. Given 188, the manager frees the blocks below slot
    # 203 - 188 + 1 = 16: block 0, slots 0-15, encoder tokens 0-63. Slot 203 starts at token
    # 812, whose window reaches back to 812 - 749 = 63: in slot 15, block 0, just freed.
    assert first_unresident(749, 400) == (203, 812, 63)
    # Given 189 (the 750-token layer), block 0 goes one step later, when the first query,
    # token 816, reads back only to token 67 in block 1. Nothing read is ever freed.
    assert first_unresident(750, 2_000) is None
