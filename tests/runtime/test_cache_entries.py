"""What the prefix cache and a request's content cost: the edges of their compact forms.

A cache map files one block per hash as the block itself and several as a list; a pool keeps
one key per cached block (the map is the one of its groups' maps that files it); a request
keeps its prompt's hashes by reference until content adds some, and its hit's table with
room for the prompt it was admitted with. Each test narrates a toy case with blocks of 4
tokens."""

from __future__ import annotations

import copy
from array import array
from typing import Any

import pytest

from kvunits.contracts import (
    CacheBlocks,
    Elements,
    FullAttentionLayer,
    KVHeads,
    SlidingWindowLayer,
    Tokens,
    Window,
)
from kvunits.contracts.internal import magnitude
from kvunits.runtime import ContentKeys, KVCacheCoordinator
from kvunits.runtime._core import RequestExtras, RestingExtras
from kvunits.runtime._table import CAPACITY
from kvunits.runtime.prefix_cache import PrefixPart, chain_hashes, root_hash

from .support import check_pools, coordinator, snapshot

FULL = FullAttentionLayer(kv_heads=KVHeads(1), head_size=Elements(8))
PROMPT = ContentKeys(list(range(9)), Tokens)  # two full blocks and one token
PROMPT_HASHES = chain_hashes(root_hash("token", 4, None), PROMPT.keys, 4)


def _one_group() -> tuple[KVCacheCoordinator, Any, Any, tuple[Any, ...]]:
    """A coordinator of one full-attention group (blocks of 4 tokens, room for 16), its
    handle and stepper, and PROMPT's hashes as a prefix."""
    coord = coordinator({"t": FULL}, block_size=4, num_blocks=20, max_len=16)
    h = coord.group("t", Tokens)
    return coord, h, coord.stepper(h), (h.block_hashes(PROMPT),)


def test_a_hash_held_by_two_blocks_is_a_list_until_one_is_evicted() -> None:
    coord = coordinator({"t": FULL}, block_size=4, num_blocks=9, max_len=20)
    h = coord.group("t", Tokens)
    step = coord.stepper(h)
    cache, pool = coord._core.caches[0], coord._core.pools[0]
    assert cache is not None
    prefix = (h.block_hashes(PROMPT),)
    # Both admitted before either computed its prompt: no hit, and each registers its own
    # two full blocks under the same two hashes (vLLM keeps such duplicates too).
    assert step.admit_with_prefix("a", Tokens(12), prefix=prefix) == (Tokens(0),)
    assert step.admit_with_prefix("b", Tokens(12), prefix=prefix) == (Tokens(0),)
    step.allocate("a", Tokens(9))
    a0, a1 = coord.block_table("a", h).ids_in(CacheBlocks)[:2]
    first, second = prefix[0].hashes
    assert cache.blocks == {first: a0, second: a1}  # one holder: the block itself
    step.allocate("b", Tokens(9))
    b0, b1 = coord.block_table("b", h).ids_in(CacheBlocks)[:2]
    assert cache.blocks == {first: [a0, b0], second: [a1, b1]}  # oldest first
    check_pools(coord)
    # "a" ends: its blocks wait in the queue with their content (tail first: a1, then a0).
    coord.free("a")
    assert pool.num_cached_free == 2
    # Taking every free block (the 2 never handed out, then a's 3) evicts a's two cached
    # ones: each hash is filed as b's block alone again.
    step.admit("c", Tokens(20))
    step.allocate("c", Tokens(4 * pool.num_free))
    assert cache.blocks == {first: b0, second: b1}
    assert pool.cached_key(b0) == first and not pool.is_cached(a0)
    check_pools(coord)


def test_a_hit_takes_a_cached_free_block_back() -> None:
    coord = coordinator({"t": FULL}, block_size=4, num_blocks=9, max_len=12)
    h = coord.group("t", Tokens)
    step = coord.stepper(h)
    pool = coord._core.pools[0]
    prefix = (h.block_hashes(PROMPT),)
    step.admit_with_prefix("a", Tokens(12), prefix=prefix)
    step.allocate("a", Tokens(9))
    a0, a1, _ = coord.block_table("a", h).ids_in(CacheBlocks)
    coord.free("a")  # a0 and a1 free, still cached
    free = pool.num_free
    # The same prompt: 8 of its 9 tokens hit (the last is always computed), in a0 and a1,
    # taken back out of the queue (their entries there turn stale), still filed.
    assert step.admit_with_prefix("b", Tokens(12), prefix=prefix) == (Tokens(8),)
    assert coord.block_table("b", h).ids_in(CacheBlocks)[:2] == (a0, a1)
    assert pool.num_free == free - 2 and pool.num_cached_free == 0
    assert pool.cached_key(a0) == prefix[0].hashes[0]
    step.allocate("b", Tokens(1))
    check_pools(coord)
    # Its hit's table was placed with room for the prompt's 3 entries: the step that
    # computed the last token filled the third in place (no move, no garbage).
    assert coord._core.table.garbage[0] == 0
    assert coord._core.table.field(coord._core.table.offsets["b"], 0, CAPACITY) == 3


def test_a_request_freed_mid_prompt_leaves_only_what_it_registered() -> None:
    coord = coordinator({"t": FULL}, block_size=4, num_blocks=9, max_len=12)
    h = coord.group("t", Tokens)
    step = coord.stepper(h)
    core, pool = coord._core, coord._core.pools[0]
    prefix = (h.block_hashes(PROMPT),)
    step.admit_with_prefix("a", Tokens(12), prefix=prefix)
    step.allocate("a", Tokens(6))  # one full block computed of the prompt's two
    (o,) = core.extras
    assert core.requests["a"].extra is not None
    assert core.requests["a"].extra.registered == [1]
    a0 = coord.block_table("a", h).ids_in(CacheBlocks)[0]
    coord.free("a")
    # Its content is forgotten with it; the block it registered stays cached, free.
    assert o not in core.extras and not core.extras
    assert pool.is_cached(a0) and pool.num_cached_free == 1
    assert step.admit_with_prefix("b", Tokens(12), prefix=prefix) == (Tokens(4),)
    check_pools(coord)


def test_two_groups_of_one_pool_file_one_hash_in_their_own_maps() -> None:
    # Two token groups of one block size in one pool: their hashes of the same content are
    # the same, their blocks are not; each map files its group's blocks, and evicting the
    # blocks of one group leaves the other's filed.
    coord = coordinator({"t": FULL, "u": FULL}, block_size=4, num_blocks=9, max_len=12, shared=True)
    t, u = coord.group("t", Tokens), coord.group("u", Tokens)
    step = coord.stepper(t, u)
    core, pool = coord._core, coord._core.pools[0]
    prefix = (t.block_hashes(PROMPT), u.block_hashes(PROMPT))
    assert prefix[0].hashes == prefix[1].hashes
    step.admit_with_prefix("a", Tokens(12), Tokens(12), prefix=prefix)
    step.allocate("a", Tokens(9), Tokens(9))
    mine = [coord.block_table("a", g).ids_in(CacheBlocks)[:2] for g in (t, u)]
    maps = [c.blocks for c in core.caches if c is not None]
    for cache_map, blocks in zip(maps, mine, strict=True):
        assert list(cache_map.values()) == list(blocks)
        assert all(pool.map_of(b, pool.cached_key(b) or b"") is cache_map for b in blocks)
    check_pools(coord)
    # "a" ends, each table tail first, t's before u's: the blocks without content (t2, u2)
    # go to the queue's front, after the 2 ids never handed out, the cached ones to its back:
    # 7 8 t2 u2 t1 t0 u1 u0. Five blocks taken: 7, 8, t2 for t, then u2 and t1 for u: only
    # t1 is evicted (t's map keeps t0), u's blocks stay filed in u's map.
    tables = [coord.block_table("a", g).ids_in(CacheBlocks) for g in (t, u)]
    coord.free("a")
    step.admit("c", Tokens(12), Tokens(12))
    step.allocate("c", Tokens(12), Tokens(8))
    assert list(coord.block_table("c", t).ids_in(CacheBlocks)) == [7, 8, tables[0][2]]
    assert list(coord.block_table("c", u).ids_in(CacheBlocks)) == [tables[1][2], tables[0][1]]
    assert maps[0] == {prefix[0].hashes[0]: tables[0][0]}
    assert maps[1] == dict(zip(prefix[1].hashes, mine[1], strict=True))
    assert all(pool.map_of(b, pool.cached_key(b) or b"") is maps[1] for b in mine[1])
    check_pools(coord)


def test_content_added_to_a_prompt_leaves_the_callers_hashes_as_they_are() -> None:
    coord = coordinator({"t": FULL}, block_size=4, num_blocks=12, max_len=16)
    h = coord.group("t", Tokens)
    step = coord.stepper(h)
    hashes = h.block_hashes(PROMPT)
    given = hashes.hashes
    # One object of hashes for two requests: the core keeps it by reference for both.
    step.admit_with_prefix("a", Tokens(16), prefix=(hashes,))
    step.admit_with_prefix("b", Tokens(16), prefix=(hashes,))
    step.allocate("a", Tokens(9))
    # Three generated tokens fill a's third block: its hashes become its own, longer list.
    coord.extend_content("a", h, ContentKeys([5, 5, 5], Tokens))
    views = coord._core.requests
    a, b = views["a"].extra, views["b"].extra
    assert a is not None and b is not None
    assert a.hashes == [[*given, *chain_hashes(given[-1], [8, 5, 5, 5], 4)]]
    assert b.hashes == [list(given)] and len(given) == 2
    step.allocate("a", Tokens(3))
    check_pools(coord)


def test_a_request_rests_once_its_prompt_is_registered_and_content_wakes_it() -> None:
    coord, h, step, prefix = _one_group()
    core = coord._core
    for rid in ("a", "b"):
        step.admit_with_prefix(rid, Tokens(16), prefix=prefix)
    a, b = core.table.offsets["a"], core.table.offsets["b"]
    assert type(core.extras[a]) is RequestExtras  # two hashes ahead of its positions
    # Its 9 tokens computed: both full blocks registered, nothing left, its content the
    # prompt's as given: it keeps the caller's part itself (no object of its own).
    step.allocate("a", Tokens(9))
    assert core.extras[a] is prefix[0].part()
    view = core.requests["a"].extra
    assert view is not None and view.registered == [2] and view.hashes == [list(PROMPT_HASHES)]
    twin = copy.deepcopy(coord)
    assert twin._core.requests["a"].extra.registered == [2]  # type: ignore[union-attr]
    # Content for it (one call, then a batch of both): made active again before planning;
    # the block the keys fill is registered by the step that computes it, and it rests.
    coord.extend_content("a", h, ContentKeys([5, 5, 5], Tokens))
    assert type(core.extras[a]) is RequestExtras
    # Content of its own since: one flat tuple.
    step.allocate("a", Tokens(3))
    assert type(core.extras[a]) is RestingExtras and view.registered == [3]
    step.allocate("b", Tokens(9))
    assert core.extras[b] is prefix[0].part()
    step.advance_with_content_all(["a", "b"], Tokens(1), content=[(h, ContentKeys([6, 6], Tokens))])
    assert {type(core.extras[o]) for o in (a, b)} == {RequestExtras}
    woken = core.requests["b"].extra
    assert woken is not None and woken.hashes == [list(PROMPT_HASHES)]  # no block filled yet
    # The twin, given the same calls, ends the same.
    twin.extend_content("a", twin.group("t", Tokens), ContentKeys([5, 5, 5], Tokens))
    twin_step = twin.stepper(twin.group("t", Tokens))
    twin_step.allocate("a", Tokens(3))
    twin_step.allocate("b", Tokens(9))
    twin_step.advance_with_content_all(
        ["a", "b"], Tokens(1), content=[(twin.group("t", Tokens), ContentKeys([6, 6], Tokens))]
    )
    assert snapshot(twin) == snapshot(coord)
    check_pools(coord)
    coord.free("a")
    coord.free("b")
    assert not core.extras


def test_a_resting_request_given_the_content_of_its_step_registers_the_block_it_fills() -> None:
    # "a" rests after its prompt (tail: token 8). One call gives its step 3 positions and the
    # 3 keys they hold: the block they fill is hashed and registered by that call, as the
    # same content added first (extend_content) and then stepped does.
    one, two = (coordinator({"t": FULL}, block_size=4, num_blocks=20, max_len=16) for _ in range(2))
    keys = ContentKeys([5, 5, 5], Tokens)
    for c in (one, two):
        h = c.group("t", Tokens)
        c.stepper(h).admit_with_prefix("a", Tokens(16), prefix=(h.block_hashes(PROMPT),))
        c.stepper(h).allocate("a", Tokens(9))
        assert type(c._core.extras[c._core.table.offsets["a"]]) is PrefixPart
    h = one.group("t", Tokens)
    one.stepper(h).advance_with_content("a", Tokens(3), content=[(h, keys)])
    h2 = two.group("t", Tokens)
    two.extend_content("a", h2, keys)
    two.stepper(h2).allocate("a", Tokens(3))
    assert snapshot(one) == snapshot(two)
    view = one._core.requests["a"].extra
    assert view is not None and view.registered == [3]
    assert view.hashes == [[*PROMPT_HASHES, *chain_hashes(PROMPT_HASHES[-1], [8, 5, 5, 5], 4)]]
    check_pools(one)


def test_a_resting_request_comes_back_with_the_same_streams() -> None:
    # `RequestExtras.resting` and `RestingExtras.active` take one stream without a loop (the
    # common case), several in one: both round trips give back every stream's axis, block
    # size, hashes, tail and parent, the shape shared, the registered entries a list.
    from kvunits.runtime._core import HashStream

    one = HashStream(0, 16, (b"a", b"b"), [5, 6], b"b")
    two = HashStream(1, 64, [b"c"], [], b"c")
    # Per group: its stream (-1: none), and the axis and block size the core knows it by.
    for streams, shape, axis, rows, registered in (
        ((one,), (0, -1, 0), [0, 0, 0], [16, 16, 16], [2, 0, 1]),
        ((one, two), (1, 0, 1), [1, 0, 1], [64, 16, 64], [1, 2, 0]),
    ):
        rest = RequestExtras(streams, shape, [0, 0, 0]).resting(registered)
        assert type(rest) is RestingExtras and not rest.pending() and rest.has_streams()
        back = rest.active(axis, rows)
        assert back.stream_of is shape and back.registered == registered
        seen = [(s.axis, s.rows_per_block, s.hashes, list(s.tail), s.parent) for s in streams]
        assert [
            (s.axis, s.rows_per_block, s.hashes, list(s.tail), s.parent) for s in back.streams
        ] == seen
        assert all(a.tail is not b.tail for a, b in zip(back.streams, streams, strict=True))


def test_a_resting_request_keeps_its_prompts_last_keys_by_reference_until_content_comes() -> None:
    # PROMPT ends one token into its third block. At rest, "a" keeps that token as the
    # caller's own tuple (a reference: the caller's part, as it keeps the prompt's hashes),
    # not a copy; once content filled that block and started the next, it keeps its last key
    # as int64 bytes (8 byte a key in one object, not a tuple of ints), and the block hashed
    # as the whole content would. Woken, it keeps the part's tuple until content comes.
    coord, h, step, prefix = _one_group()
    core = coord._core
    given = prefix[0].part().tail
    assert given == (8,)
    step.admit_with_prefix("a", Tokens(16), prefix=prefix)
    step.allocate("a", Tokens(9))
    o = core.table.offsets["a"]
    assert core.extras[o] is prefix[0].part()
    woken = core._active(o)
    assert woken is not None and woken.streams[0].given is given
    assert woken.resting([2]) is prefix[0].part()  # nothing came: the part again
    coord.extend_content("a", h, ContentKeys([5, 5, 5, 7], Tokens))
    step.allocate("a", Tokens(4))
    rest = core.extras[o]
    assert type(rest) is RestingExtras and rest[-2] == array("q", [7]).tobytes()
    view = core.requests["a"].extra
    assert view is not None and view.registered == [3]
    assert view.hashes == [[*PROMPT_HASHES, *chain_hashes(PROMPT_HASHES[-1], [8, 5, 5, 5], 4)]]
    # Woken by more content, it goes on from that key: [7, 1, 2, 3] fills the fourth block.
    coord.extend_content("a", h, ContentKeys([1, 2, 3], Tokens))
    step.allocate("a", Tokens(3))
    third = chain_hashes(PROMPT_HASHES[-1], [8, 5, 5, 5], 4)
    assert view.hashes == [[*PROMPT_HASHES, *third, *chain_hashes(third[-1], [7, 1, 2, 3], 4)]]
    check_pools(coord)
    # A stream made of another form of keys (a list) keeps a copy at rest too.
    from kvunits.runtime._core import HashStream

    stream = HashStream(0, 4, (b"a",), [5, 6], b"a")
    assert stream.given is None
    kept = RequestExtras((stream,), (0,), [1]).resting([1])[-2]
    assert kept == array("q", [5, 6]).tobytes()


def test_a_registered_blocks_id_is_one_int_object_in_the_pool_and_its_map() -> None:
    # Blocks past 256 are int objects of their own (28 byte). A run registered from an array
    # slice (a prompt's blocks) makes each id once: the pool's entry (block -> key) and the
    # map's (key -> block) hold the same object, not one each.
    from kvunits.runtime.block_pool import BlockPool

    pool = BlockPool(1000)
    cache_map: dict[bytes, int | list[int]] = {}
    for fn, *args in pool.filed_ops(cache_map, array("i", range(300, 303)), [b"x", b"y", b"z"]):
        fn(*args)
    assert cache_map == {b"x": 300, b"y": 301, b"z": 302}
    assert all(block is cache_map[key] for block, key in pool._cached.items())


def _ids_interned(coord: KVCacheCoordinator) -> None:
    """Assert that every block id the prefix cache keeps (the pool's block -> key entries, the
    maps' blocks) is the pool's own int object for that id."""
    for pool in {id(p): p for p in coord._core.pools}.values():
        ids = pool._ids
        assert type(ids) is tuple and len(ids) == pool.num_blocks
        kept = [*pool._cached]
        for cache_map in pool._maps:
            for entry in cache_map.values():
                kept += entry if isinstance(entry, list) else [entry]
        strays = [b for b in kept if b is not ids[b]]
        assert not strays, strays[:8]


@pytest.mark.parametrize("layout", ["text", "text + sliding, one pool", "text + sliding"])
def test_a_cached_blocks_id_is_the_pools_own_int_object_in_every_entry(layout: str) -> None:
    # With caching on the pool makes each id's int once (`BlockPool.add_map`), and every
    # cache entry holds that object: a cached block costs its entries, not an int of its own
    # per entry (ids past 256 are objects of 28 byte). Prompts of their own and repeated,
    # in one step and in chunks (the core's boundary path), generated tokens cached (a
    # request at a time, and a batch), steps without content, ends, a window's evictions,
    # and evictions when the pool runs short: each path that files a block or frees a
    # cached one, on pools of 900 blocks, the first 320 of each held throughout (the rest
    # past 256).
    layers: dict[str, Any] = {"t": FULL}
    if layout != "text":
        layers["s"] = SlidingWindowLayer(
            sliding_window=Window(10, Tokens), kv_heads=KVHeads(1), head_size=Elements(8)
        )
    shared = layout.endswith("one pool")
    coord = coordinator(
        layers, block_size=4, num_blocks=900 * (len(layers) if shared else 1), max_len=160,
        shared=shared,
    )
    handles = [coord.group(name, Tokens) for name in layers]
    step: Any = coord.stepper(*handles)
    every = [Tokens(160)] * len(handles)
    for i in range(8):
        step.admit(f"held{i}", *every)
        step.allocate(f"held{i}", *every)
    live: list[str] = []
    for i in range(120):
        rid = f"r{i}"
        # A third of them one prompt again, the others prompts of their own.
        keys = ContentKeys(
            [(0 if i % 3 == 0 else i) * 1000 + k for k in range(37 + 11 * (i % 5))], Tokens
        )
        prefix = tuple(h.block_hashes(keys) for h in handles)
        hits = step.admit_with_prefix(rid, *every, prefix=prefix)
        done = min(map(magnitude, hits))
        chunk = 16 if i % 3 == 0 else len(keys.keys)
        while done < len(keys.keys):
            n = Tokens(min(chunk, len(keys.keys) - done))
            step.allocate(rid, *[n] * len(handles))
            done += magnitude(n)
        one = [Tokens(1)] * len(handles)
        for t in range(5 + i % 9):  # generated tokens, cached as their blocks fill
            token = ContentKeys([t + i], Tokens)
            if i % 2:  # with the step, or before it (the step then registers the block)
                step.advance_with_content(rid, *one, content=[(handles[0], token)])
            else:
                coord.extend_content(rid, handles[0], token)
                step.allocate(rid, *one)
        live.append(rid)
        if i % 5 == 4:  # an engine step for all of them at once, a token each
            tokens = ContentKeys([i + j for j in range(len(live))], Tokens)
            step.advance_with_content_all(live, *one, content=[(handles[0], tokens)])
        elif i % 5 == 2:  # and steps without content (a window evicts their cached blocks)
            for _ in range(4):
                step.advance_all(live, *one)
            step.allocate(rid, *[Tokens(5)] * len(handles))
        if len(live) > 12:
            coord.free(live.pop(i % len(live)))
        _ids_interned(coord)
    ended = [*live, *(f"held{i}" for i in range(8))]
    for rid in ended[:-1]:
        coord.free(rid)
    pools = {id(p): p for p in coord._core.pools}.values()
    # Every id handed out (later blocks came from the queue, evicting cached ones).
    assert all(pool._fresh == pool.num_blocks for pool in pools)
    _ids_interned(coord)
    coord.free(ended[-1])
    for pool in pools:  # idle: the ids above the highest cached one unlisted (`_emit_idle`)
        assert pool.num_cached_free > 100 and pool._fresh == max(pool._cached) + 1
    _ids_interned(coord)
    check_pools(coord)
