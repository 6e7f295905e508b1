"""vLLM's own prefix-caching tests, transliterated to kvunits' API.

Sources: ``tests/v1/core/test_prefix_caching.py`` of vllm-project/vllm at commit
717aebb008de838f4bbbb84a66d254f0f6c8c9bb (the version whose free queue appends every freed
block, as kvunits' does), and, for the hybrid and different-block-size cases, the same file
on vLLM main in 2026 (the search index holds it without a commit: index id 54519828226, read in
/work/research/prefix/TESTS.md). Each test names the vLLM test it follows.

The translation, once: vLLM's ``get_computed_blocks`` + ``allocate_slots(req, n, computed)``
is kvunits' ``admit_with_prefix`` (the lookup, and the hit blocks adopted, at admission) +
``allocate``; the request's token ids are its `ContentKeys`; vLLM's ``num_blocks`` counts the
null block, as kvunits' pools do; vLLM's requests are admitted without reservation (kvunits'
``reserve=False``) unless a test says otherwise.

Deliberate differences, said where they show:

* **Free-queue order.** vLLM main (2026, PR #42656, in vLLM 0.33) puts a freed *unhashed*
  block at the front of its free queue, ahead of the ids it never handed out; kvunits puts
  it at the front too, but behind those ids (its queue keeps them as a range, always first):
  the cached blocks evicted are the same, the ids differ while ids never handed out are
  left. A sliding window's dropped blocks still go to the back in kvunits. Where the numbers
  differ, the test gives vLLM's (the commit above: its FIFO order; main: 2026's) and checks
  kvunits'.
* **Hash function.** vLLM hashes ``pickle((parent, tokens, extra_keys))``; kvunits hashes the
  parent's digest and the keys as int64, seeded with the block's granularity. The tests check
  the chain's structure (block i covers blocks 0 .. i, a salt changes every block) and
  kvunits' own formula, not vLLM's bytes.
* **Statistics** are always counted (vLLM only with ``log_stats``).
* **Prompt logprobs and EAGLE** are not modelled: a caller that must not read the cache admits
  without content; one that needs the last block's hidden states gives content one block
  shorter. ``test_prefill_plp``, ``test_eagle_*`` are not ported.
* **Multimodal extra keys**: kvunits has no placeholder ranges; the caller folds what a
  position holds (an image's hash and the offset in it) into that position's key.
"""

from __future__ import annotations

import hashlib
from array import array
from typing import Any

import pytest

from kvunits.contracts import (
    Bytes,
    Elements,
    FullAttentionLayer,
    KVHeads,
    PoolBlocks,
    SlidingWindowLayer,
    Tokens,
    Window,
)
from kvunits.runtime import AllocationError, ContentKeys, GroupHandle, KVCacheCoordinator, Stepper
from kvunits.runtime.block_pool import BlockPool
from kvunits.runtime.prefix_cache import root_hash

from .support import check_pools, coordinator

#: ``common_token_ids`` of vLLM's tests: 3 full blocks of 16 (16 × 0, 16 × 1, 16 × 2).
COMMON = [i for i in range(3) for _ in range(16)]


def one_group(num_blocks: int, *, block_size: int = 16, reserve: bool = False) -> Any:
    """vLLM's ``make_kv_cache_config(block_size, num_blocks)``: one full-attention group."""
    coord = coordinator(
        {"layer": FullAttentionLayer(kv_heads=KVHeads(1), head_size=Elements(1))},
        block_size=block_size,
        num_blocks=num_blocks,
        max_len=8192,
        max_in_flight=8192,
        reserve=reserve,
    )
    handle = coord.group("layer", Tokens)
    return coord, handle, coord.stepper(handle)


def admit(
    step: Stepper[Tokens],
    handle: GroupHandle[Tokens],
    rid: str,
    tokens: list[int],
    max_len: int | None = None,
    **kw: Any,
) -> int:
    """get_computed_blocks: admit with the tokens as content; the hit in tokens. The request
    declares its own length (vLLM's requests declare none; kvunits refuses up front a request
    whose declared length can never fit the pool)."""
    content = ContentKeys(tokens, Tokens, **kw)
    length = Tokens(len(tokens) if max_len is None else max_len)
    (hit,) = step.admit_with_prefix(rid, length, prefix=(handle.block_hashes(content),))
    return hit.numerical_value_in(Tokens)


def new_blocks(
    coord: KVCacheCoordinator, step: Stepper[Tokens], handle: GroupHandle[Tokens], rid: str, n: int
) -> list[int]:
    """allocate_slots(req, n): the blocks the step took."""
    before = len(coord.block_table(rid, handle))
    step.allocate(rid, Tokens(n))
    return list(coord.block_table(rid, handle))[before:]


def pool_of(coord: KVCacheCoordinator) -> BlockPool:
    return coord._core.pools[0]


def test_prefill() -> None:
    """vLLM ``test_prefill`` (commit 717aebb0)."""
    coord, h, step = one_group(11)
    pool = pool_of(coord)
    # Fully cache miss: 3 full blocks and 7 tokens.
    tokens0 = COMMON + [3] * 7
    assert admit(step, h, "0", tokens0) == 0
    assert new_blocks(coord, step, h, "0", 55) == [1, 2, 3, 4]
    # Full blocks are cached under the chained hashes of their tokens (kvunits' formula).
    parent = root_hash("token", 16, None)
    for block in (1, 2, 3):
        tokens = tokens0[(block - 1) * 16 : block * 16]
        parent = hashlib.sha256(parent + array("q", tokens).tobytes()).digest()
        assert coord._core.caches[0] is not None
        assert coord._core.caches[0].blocks[parent] == block  # one holder: the block itself
        assert pool.ref_count(block) == 1
    assert not pool.is_cached(4) and pool.ref_count(4) == 1  # the partial block
    # Cache hit in the common prefix while the blocks are still in use.
    assert admit(step, h, "1", COMMON + [3] * 5) == 48
    assert coord.block_table("1", h) == [1, 2, 3]
    assert new_blocks(coord, step, h, "1", 53 - 48) == [5]
    assert [pool.ref_count(b) for b in (1, 2, 3)] == [2, 2, 2]
    assert pool.num_free == 5
    coord.free("0")
    coord.free("1")
    assert pool.num_free == 10
    # [unallocated 6-10] [unique of req1: 5, of req0: 4, the later first] [common, tail
    # first: 3 2 1]. vLLM 0.33 gives [5, 4, 6, 7, 8, 9, 10, 3, 2, 1] (its unhashed blocks
    # ahead of the unallocated ones: its KVCacheManager on this test, tests/vllm/
    # test_free_order.py), the commit above [6, .., 10, 4, 5, 3, 2, 1].
    assert pool.free_queue() == [6, 7, 8, 9, 10, 5, 4, 3, 2, 1]
    # Cache hit when the blocks are already free: they leave the queue (lazily).
    assert admit(step, h, "2", COMMON + [3] * 6) == 48
    assert new_blocks(coord, step, h, "2", 53 - 48) == [6]  # vLLM 0.33: 5 (its front)
    assert pool.num_free == 6 and len(pool.free_queue()) == 6
    assert all(pool.ref_count(b) == 0 for b in pool.free_queue())
    coord.free("2")
    # Cache miss and eviction: the order taken is the eviction order (req2's unique block 6
    # ahead of 5 and 4; vLLM 0.33: [5, 4, 6, 7, 8, 9, 10, 3, 2, 1], the commit above
    # [7, 8, 9, 10, 4, 5, 6, 3, 2, 1]): the cached blocks 3, 2, 1 last in all three.
    assert admit(step, h, "3", [99] * 160) == 0
    assert new_blocks(coord, step, h, "3", 160) == [7, 8, 9, 10, 6, 5, 4, 3, 2, 1]
    assert pool.num_free == 0
    cache = coord._core.caches[0]
    assert cache is not None  # only req3's 10 blocks are cached now: the others were evicted
    assert cache.blocks.keys() == set(h.block_hashes(ContentKeys([99] * 160, Tokens)).hashes)
    check_pools(coord)


def test_decode() -> None:
    """vLLM ``test_decode`` (commit 717aebb0): decode tokens are hashed as they come
    (kvunits: `extend_content`), and a block is cached once it is full."""
    coord, h, step = one_group(11)
    pool = pool_of(coord)
    assert admit(step, h, "0", COMMON + [3] * 7, max_len=55 + 4 + 19) == 0
    assert new_blocks(coord, step, h, "0", 55) == [1, 2, 3, 4]
    # 4 decode tokens: no new block, the last block is not full (59 < 64).
    coord.extend_content("0", h, ContentKeys([8] * 4, Tokens))
    assert new_blocks(coord, step, h, "0", 4) == []
    assert not pool.is_cached(coord.block_table("0", h)[-1])
    # 19 more: 5 fill the block (then cached), 10 open a new one.
    coord.extend_content("0", h, ContentKeys([7] * 19, Tokens))
    assert len(new_blocks(coord, step, h, "0", 19)) == 1
    table = coord.block_table("0", h)
    assert pool.is_cached(table[-2]) and not pool.is_cached(table[-1])


def test_evict() -> None:
    """vLLM ``test_evict`` (commit 717aebb0)."""
    coord, h, step = one_group(11)
    pool = pool_of(coord)
    last = 5 * 16 + 7
    assert admit(step, h, "0", list(range(last))) == 0
    assert len(new_blocks(coord, step, h, "0", last)) == 6  # 5 full + 1 partial
    assert admit(step, h, "1", list(range(last, last + 48))) == 0
    assert len(new_blocks(coord, step, h, "1", 48)) == 3
    assert pool.num_free == 1  # 10 - (6 + 3)
    coord.free("0")
    coord.free("1")
    assert pool.num_free == 10
    assert pool.free_queue() == [10, 6, 5, 4, 3, 2, 1, 9, 8, 7]
    # Touch the first 2 blocks.
    assert admit(step, h, "2", list(range(2 * 16 + 3))) == 32
    assert coord.block_table("2", h) == [1, 2]
    assert new_blocks(coord, step, h, "2", 3) == [10]
    assert pool.num_free == 7


def test_hash_block_correct_reuse() -> None:
    """vLLM ``test_hash_block_correct_reuse`` (commit 717aebb0): a cached block reused as a
    new block loses its hash."""
    coord, h, step = one_group(2)
    assert admit(step, h, "0", list(range(16))) == 0
    assert len(new_blocks(coord, step, h, "0", 16)) == 1
    coord.free("0")
    assert admit(step, h, "1", list(range(15))) == 0
    (block,) = new_blocks(coord, step, h, "1", 15)
    assert not pool_of(coord).is_cached(block)
    assert coord._core.caches[0] is not None and not coord._core.caches[0].blocks


def test_computed_blocks_not_evicted() -> None:
    """vLLM ``test_computed_blocks_not_evicted`` (commit 717aebb0): a hit block is never the
    one evicted for the same request's new block."""
    coord, h, step = one_group(3)
    assert admit(step, h, "0", list(range(16))) == 0
    assert new_blocks(coord, step, h, "0", 16) == [1]
    assert admit(step, h, "1", list(range(16, 32))) == 0
    assert new_blocks(coord, step, h, "1", 16) == [2]
    coord.free("0")
    coord.free("1")
    assert admit(step, h, "2", list(range(32))) == 16
    assert coord.block_table("2", h) == [1]
    assert new_blocks(coord, step, h, "2", 16) == [2]


def test_basic_prefix_caching_disabled() -> None:
    """vLLM ``test_basic_prefix_caching_disabled`` (commit 717aebb0): requests admitted
    without content neither hit nor leave anything cached."""
    coord, h, step = one_group(5, block_size=4)
    step.admit("1", Tokens(10))
    assert len(new_blocks(coord, step, h, "1", 10)) == 3
    coord.free("1")
    (hit,) = step.admit_with_prefix("2", Tokens(16), prefix=(None,))
    assert hit == Tokens(0)
    assert len(new_blocks(coord, step, h, "2", 16)) == 4
    step.admit("3", Tokens(4))
    with pytest.raises(AllocationError):  # vLLM: allocate_slots returns None
        step.allocate("3", Tokens(4))


def test_mm_prefix_caching() -> None:
    """vLLM ``test_mm_prefix_caching`` (commit 717aebb0): what an image placeholder holds is
    the image. vLLM adds the image hashes as extra keys of the blocks they overlap; kvunits'
    caller keys each placeholder position by its image and its offset in it."""

    def keyed(tokens: list[int], images: list[tuple[int, int, str]]) -> list[int]:
        keys = list(tokens)
        for offset, length, name in images:
            for i in range(length):
                digest = hashlib.sha256(f"{name}/{i}".encode()).digest()[:7]
                keys[offset + i] = -int.from_bytes(digest, "big") - 1
        return keys

    common = list(range(10)) + [-1] * 6 + [-1] * 4 + list(range(10, 20)) + [-1] * 2 + [-1] * 16
    images = [(11, 10, "aaa"), (30, 18, "bbb")]
    coord, h, step = one_group(11)
    tokens0 = common + [-1] * 7 + [100] * 4
    assert admit(step, h, "0", keyed(tokens0, [*images, (48, 7, "ccc")]), max_len=64) == 0
    assert new_blocks(coord, step, h, "0", 59) == [1, 2, 3, 4]
    coord.extend_content("0", h, ContentKeys([8] * 5, Tokens))
    assert new_blocks(coord, step, h, "0", 5) == []
    assert pool_of(coord).is_cached(4)  # the block completed by 5 decode tokens
    # The same images: a hit on the 3 common blocks.
    tokens1 = common + [-1] * 7 + [200] * 5
    assert admit(step, h, "1", keyed(tokens1, [*images, (48, 7, "ccc")])) == 48
    # Another first image in the same placeholders: no block matches.
    assert admit(step, h, "2", keyed(tokens1, [(11, 10, "zzz"), (30, 18, "bbb")])) == 0


def test_cache_key_salting() -> None:
    """vLLM ``test_cache_key_salting`` (main, 2026): a salt changes the first block's hash,
    and through the chain every later one."""
    coord, h, step = one_group(11)
    tokens = COMMON + [3] * 11
    salted = h.block_hashes(ContentKeys(tokens, Tokens, salt="salt1")).hashes
    plain = h.block_hashes(ContentKeys(tokens, Tokens)).hashes
    assert len(salted) == 3 and all(a != b for a, b in zip(salted, plain, strict=True))
    assert admit(step, h, "0", tokens, salt="salt1") == 0
    assert new_blocks(coord, step, h, "0", 59) == [1, 2, 3, 4]
    assert admit(step, h, "1", COMMON + [4] * 11, salt="salt1") == 48
    assert admit(step, h, "2", COMMON + [4] * 11, salt="salt2") == 0


def test_prefill_not_enough_free_blocks_with_computed_blocks() -> None:
    """vLLM ``test_prefill_not_enough_free_blocks_with_computed_blocks`` (commit 717aebb0):
    a request whose hit is cached but which cannot get its other blocks touches nothing.

    vLLM finds it out at ``allocate_slots``; kvunits, which reserves at admission, refuses the
    admission (a shared block reserved once: req0 holds 3 of req3's hit blocks)."""
    coord, h, step = one_group(11, reserve=True)
    pool = pool_of(coord)

    def admit_len(rid: str, tokens: list[int]) -> int:
        (hit,) = step.admit_with_prefix(
            rid, Tokens(len(tokens)), prefix=(h.block_hashes(ContentKeys(tokens, Tokens)),)
        )
        return int(hit.numerical_value_in(Tokens))

    assert admit_len("0", COMMON) == 0
    step.allocate("0", Tokens(48))
    part0 = list(coord.block_table("0", h))
    assert admit_len("1", COMMON * 2) == 48 and coord.block_table("1", h) == part0
    step.allocate("1", Tokens(96 - 48))
    part1 = list(coord.block_table("1", h))
    coord.free("1")
    assert {pool.ref_count(b) for b in part1[:3]} == {1}
    assert {pool.ref_count(b) for b in part1[3:]} == {0}
    assert admit_len("2", [7] * 32) == 0
    step.allocate("2", Tokens(32))
    assert pool.num_free == 5
    # req3's 9 blocks, less the 3 req0 holds: 6 > 10 - 3 - 2 unreserved.
    with pytest.raises(AllocationError, match="cannot admit request '3' now"):
        admit_len("3", COMMON * 3)
    assert {pool.ref_count(b) for b in part1[:3]} == {1}
    assert {pool.ref_count(b) for b in part1[3:]} == {0}
    check_pools(coord)


def test_reset_prefix_cache() -> None:
    """vLLM ``test_reset_prefix_cache`` (commit 717aebb0)."""
    coord, h, step = one_group(11)
    assert admit(step, h, "0", COMMON + [3] * 7) == 0
    assert new_blocks(coord, step, h, "0", 55) == [1, 2, 3, 4]
    assert admit(step, h, "1", COMMON + [4] * 7) == 48
    assert new_blocks(coord, step, h, "1", 7) == [5]
    cache = coord._core.caches[0]
    assert cache is not None
    assert coord.reset_prefix_cache() is False and cache.blocks
    coord.free("0")
    coord.free("1")
    assert coord.reset_prefix_cache() is True and not cache.blocks
    assert not any(pool_of(coord).is_cached(b) for b in range(11))


def test_prefix_cache_stats() -> None:
    """vLLM's ``PrefixCacheStats`` (``vllm/v1/metrics/stats.py``): per admission, the
    request's tokens are queried and its hit tokens counted."""
    coord, h, step = one_group(11)
    assert admit(step, h, "0", COMMON + [3] * 7) == 0
    step.allocate("0", Tokens(55))
    assert admit(step, h, "1", COMMON + [3] * 5) == 48
    stats = coord.prefix_cache_stats(h)
    assert (stats.requests, stats.queried, stats.hits) == (2, Tokens(55 + 53), Tokens(48))
    assert stats.hit_rate == pytest.approx(48 / 108)


# -- hybrid models: several groups, one pool ----------------------------------------------------


def hybrid(num_blocks: int, window_blocks: int) -> Any:
    """vLLM's ``make_kv_cache_config_hybrid_model(16, num_blocks, sw_blocks)``: a full group and
    two sliding-window groups of ``window_blocks × 16`` tokens, one pool."""
    coord = coordinator(
        {
            "full": FullAttentionLayer(kv_heads=KVHeads(1), head_size=Elements(1)),
            "sw1": SlidingWindowLayer(
                sliding_window=Window(window_blocks * 16, Tokens),
                kv_heads=KVHeads(1),
                head_size=Elements(1),
            ),
            "sw2": SlidingWindowLayer(
                sliding_window=Window(window_blocks * 16, Tokens),
                kv_heads=KVHeads(1),
                head_size=Elements(1),
            ),
        },
        block_size=16,
        num_blocks=num_blocks,
        max_len=8192,
        max_in_flight=8192,
        reserve=False,
        shared=True,
    )
    handles = [coord.group(n, Tokens) for n in ("full", "sw1", "sw2")]
    return coord, handles, coord.stepper(*handles)


def test_prefill_hybrid_model() -> None:
    """vLLM ``test_prefill_hybrid_model`` (main, 2026; TESTS.md A2): full + 2 sliding windows
    of 2 blocks on one pool; a hit is the longest prefix every group can serve."""
    coord, handles, step = hybrid(21, 2)
    pool = pool_of(coord)

    def admit3(rid: str, tokens: list[int]) -> int:
        content = ContentKeys(tokens, Tokens)
        length = Tokens(64)
        hits = step.admit_with_prefix(
            rid,
            length,
            length,
            length,
            prefix=tuple(h.block_hashes(content) for h in handles),
        )
        assert len(set(hits)) == 1
        return int(hits[0].numerical_value_in(Tokens))

    def tables(rid: str) -> list[list[int]]:
        return [list(coord.block_table(rid, h)) for h in handles]

    assert admit3("0", COMMON + [3] * 7) == 0
    step.allocate("0", Tokens(55), Tokens(55), Tokens(55))
    assert tables("0") == [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]]
    # Each group files its blocks under the same token hashes, in its own map.
    caches = coord._core.caches
    hashes = handles[0].block_hashes(ContentKeys(COMMON, Tokens)).hashes
    for k, ids in enumerate([(1, 5, 9), (2, 6, 10), (3, 7, 11)]):
        for cache, block in zip(caches, ids, strict=True):
            assert cache is not None and cache.blocks[hashes[k]] == block
    assert not any(pool.is_cached(b) for b in (4, 8, 12))
    # The windows need only the last 2 blocks: block 0 stands as the null block.
    assert admit3("1", COMMON + [3] * 5) == 48
    assert tables("1") == [[1, 2, 3], [0, 6, 7], [0, 10, 11]]
    step.allocate("1", Tokens(5), Tokens(5), Tokens(5))
    assert tables("1") == [[1, 2, 3, 13], [0, 6, 7, 14], [0, 10, 11, 15]]
    assert all(pool.ref_count(b) == 2 for b in (1, 2, 3, 6, 7, 10, 11))
    coord.free("0")
    coord.free("1")

    def hit_without(keys: list[tuple[int, int]]) -> int:
        """A request with req1's tokens, after the given (block hash, group) are evicted."""
        saved = [dict(c.blocks) for c in caches if c is not None]
        for k, g in keys:
            cache = caches[g]
            assert cache is not None
            del cache.blocks[hashes[k]]
        try:
            hit = admit3("probe", COMMON + [3] * 5)
            coord.free("probe")
            return hit // 16
        finally:
            for cache, blocks in zip(caches, saved, strict=True):
                assert cache is not None
                cache.blocks.clear()
                cache.blocks.update(blocks)

    assert hit_without([(0, 1), (0, 2)]) == 3
    assert hit_without([(0, 0)]) == 0
    assert hit_without([(2, 0), (2, 1), (2, 2)]) == 2
    assert hit_without([(2, 0)]) == 2
    assert hit_without([(2, 1)]) == 2
    assert hit_without([(2, 2)]) == 2
    # Full attention serves 1 block; the windows cannot end a window there without block 0.
    assert hit_without([(2, 0), (0, 1), (0, 2)]) == 0


def test_different_block_size() -> None:
    """vLLM ``test_different_block_size`` (main, 2026; TESTS.md A24): full attention with
    blocks of 32 tokens and a window of 32 tokens with blocks of 16 share one pool (pages of
    128 bytes both); a hit is a multiple of 32, the blocks' least common multiple."""
    from kvunits.contracts import CacheDType

    from .support import group_of

    full = group_of(
        "full",
        FullAttentionLayer(kv_heads=KVHeads(1), head_size=Elements(1), dtype=CacheDType.float16),
        block_size=32,
        max_len=8192,
        max_in_flight=8192,
    )
    window = group_of(
        "sw",
        SlidingWindowLayer(
            sliding_window=Window(32, Tokens),
            kv_heads=KVHeads(1),
            head_size=Elements(1),
            dtype=CacheDType.float32,
        ),
        block_size=16,
        max_len=8192,
        max_in_flight=8192,
    )
    assert full.manager.page_size == window.manager.page_size == Bytes(128)
    coord = KVCacheCoordinator([full, window], PoolBlocks(100), reserve=False)
    f, w = coord.group("full", Tokens), coord.group("sw", Tokens)
    step = coord.stepper(f, w)
    common = [i for i in range(10) for _ in range(16)]

    def admit2(rid: str, tokens: list[int]) -> tuple[int, int, int]:
        content = ContentKeys(tokens, Tokens)
        length = Tokens(160)
        hits = step.admit_with_prefix(
            rid, length, length, prefix=(f.block_hashes(content), w.block_hashes(content))
        )
        assert hits[0] == hits[1]
        return (
            len(coord.block_table(rid, f)),
            len(coord.block_table(rid, w)),
            hits[0].numerical_value_in(Tokens),
        )

    assert admit2("0", common) == (0, 0, 0)
    step.allocate("0", Tokens(112), Tokens(112))
    assert coord.block_table("0", f) == [1, 2, 3, 4]  # cdiv(112, 32)
    assert coord.block_table("0", w) == [5, 6, 7, 8, 9, 10, 11]  # cdiv(112, 16)
    assert admit2("1", common[:113]) == (3, 6, 96)
    assert admit2("2", common[:97]) == (3, 6, 96)
    coord.free("1")
    coord.free("2")
    # Evict the window's blocks of fine hashes 5 and 6 (blocks 10, 11): alone it would hit
    # 80 tokens, but 80 is not a multiple of 32.
    cache = coord._core.caches[1]
    assert cache is not None
    fine = w.block_hashes(ContentKeys(common, Tokens)).hashes
    assert cache.blocks.pop(fine[5]) == 10 and cache.blocks.pop(fine[6]) == 11
    assert admit2("3", common[:113]) == (2, 4, 64)
