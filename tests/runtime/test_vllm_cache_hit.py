"""vLLM's tests of the longest cache hit each attention kind can serve, transliterated.

Source: ``tests/v1/core/test_single_type_kv_cache_manager.py`` of vllm-project/vllm at commit
297316b0e5d01e6261fc384d4ce3b72d81ec66c9: ``test_sliding_window_possible_cached_prefix`` and
``test_chunked_local_attention_possible_cached_prefix``. As there, the block hashes are
made-up keys, block ``i`` is cached as block id ``i + 10`` when its flag is set, and the hit
is read off the table prefix the lookup returns (`kvunits.runtime.prefix_cache.GroupCache.find`, the
counterpart of ``find_longest_cache_hit``): its length, and the null block where the kind
needs nothing. Block size 2 (tokens), sliding window 4, chunk 4.

vLLM's chunked case passes ``max_length = blocks × 2 + tail`` tokens; kvunits' lookup takes
the hit's bound in whole blocks, since a hit is whole blocks: the chunk is a whole number of
blocks, so ``max_length // chunk`` is the same either way.
"""

from __future__ import annotations

import random

import pytest

from kvunits.contracts import (
    Chunk,
    ChunkedLocalLayer,
    Elements,
    KVHeads,
    SlidingWindowLayer,
    Tokens,
    Window,
    manager_view,
)
from kvunits.runtime import NULL_BLOCK
from kvunits.runtime.block_pool import BlockPool
from kvunits.runtime.prefix_cache import GroupCache


def cache_of(layer: SlidingWindowLayer | ChunkedLocalLayer, cached: list[bool]) -> GroupCache:
    cache = GroupCache(manager_view(layer, block_size_slots=2), BlockPool(100))
    for i, flag in enumerate(cached):
        if flag:
            cache.blocks[str(i).encode()] = i + 10
    return cache


def find(cache: GroupCache, num_blocks: int) -> list[int]:
    hashes = [str(i).encode() for i in range(num_blocks)]
    return cache.find(hashes, num_blocks, align=1)


WINDOW = SlidingWindowLayer(
    sliding_window=Window(4, Tokens), kv_heads=KVHeads(1), head_size=Elements(1)
)


@pytest.mark.parametrize(
    ("cached", "expect"),
    [
        ([False] * 10, 0),
        ([True], 1),
        ([True, False], 1),
        ([True, True], 2),
        ([True, True, False], 2),
        ([True, True, True], 3),
        ([True, True, True, False], 3),
        ([True, True, False, True, False, False, True, True, False, True, True, True], 12),
        ([True, True, False, True, False, False, True, True, False, False, False], 8),
        ([True, True, False, True, False, False, True, True, False, False, False, True], 8),
    ],
)
def test_sliding_window_possible_cached_prefix(cached: list[bool], expect: int) -> None:
    """A window of 4 tokens needs the 2 blocks before the hit point (``cdiv(4 − 1, 2)``);
    the blocks before them stand as the null block."""
    table = find(cache_of(WINDOW, cached), len(cached))
    assert len(table) == expect
    assert all(b == NULL_BLOCK for b in table[: expect - 2])
    for i in range(2):
        if i < expect:
            assert table[expect - i - 1] == expect - i - 1 + 10


CHUNK = ChunkedLocalLayer(chunk=Chunk(4, Tokens), kv_heads=KVHeads(1), head_size=Elements(1))


@pytest.mark.parametrize(
    ("cached", "tail", "expect"),
    [
        ([True], 0, 1),
        ([True], 1, 1),
        ([True, False], 0, 2),
        ([True, False], 1, 2),
        ([True, True], 0, 2),
        ([True, True], 1, 2),
        ([True, True, False], 0, 2),
        ([True, True, False], 1, 2),
        ([True, True, True], 0, 3),
        ([True, True, True], 1, 3),
        ([True, True, True, False], 0, 4),
        ([True, True, True, False], 1, 4),
        ("random", 1, 9),  # any 8 flags, then T
        ("random-F", 1, 8),
        ("random-TT", 1, 10),
        ("random-TF", 0, 10),
        ("random-TF", 1, 10),
        ("random-FT", 0, 10),
        ("random-FT", 1, 10),
        ("random-FF", 0, 10),
        ("random-FF", 1, 10),
    ],
)
def test_chunked_local_attention_possible_cached_prefix(
    cached: list[bool] | str, tail: int, expect: int
) -> None:
    """The query after the hit reads its own chunk of 4 tokens: the blocks before that chunk
    stand as the null block, the chunk's own are scanned until the first miss. The tail
    tokens (vLLM's ``max_length`` beyond whole blocks) never make a block more."""
    if isinstance(cached, str):
        rng = random.Random(f"{cached}{tail}")
        ends = {"random": [True], "random-F": [False]}.get(cached)
        if ends is None:
            ends = [c == "T" for c in cached.split("-")[1]]
        cached = [rng.choice([True, False])] * 8 + ends
    assert tail in (0, 1)  # a bound in whole blocks: the tail token is never a block
    table = find(cache_of(CHUNK, cached), len(cached))
    assert len(table) == expect
    assert all(b == NULL_BLOCK for b in table[: (expect - 1) // 2])


def test_a_hit_is_aligned_to_the_groups_common_block() -> None:
    """With groups of other block sizes on the same sequence, a run must end on a multiple of
    their least common multiple (vLLM: ``alignment_tokens``): with blocks 0-2 cached and an
    alignment of 2 blocks, the window's run ends at block 1, not 2."""
    cache = cache_of(WINDOW, [True, True, True])
    assert cache.find([b"0", b"1", b"2"], 3, align=2) == [10, 11]
    chunk = cache_of(CHUNK, [True, True, True])
    assert chunk.find([b"0", b"1", b"2"], 3, align=2) == [NULL_BLOCK, NULL_BLOCK]
