"""Prefix caching in kvunits' own terms: typed content and block boundaries, reservations
that count a shared block once, sequences of other units hit on their own, and the errors."""

from __future__ import annotations

import re
from array import array
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvunits.contracts import (
    Bytes,
    CacheBlocks,
    Elements,
    EncoderTokens,
    FullAttentionLayer,
    KVHeads,
    PoolBlocks,
    PooledBlocks,
    PoolFactor,
    Position,
    SlidingWindowLayer,
    SpecError,
    StateLayer,
    Tokens,
    UnitTypeError,
    UnitValueError,
    Window,
)
from kvunits.runtime import (
    AllocationError,
    ContentBatch,
    ContentKeys,
    KVCacheCoordinator,
    RequestError,
    plan,
)
from kvunits.runtime._core import RequestExtras
from kvunits.runtime.prefix_cache import _PACKED, chain_hashes, root_hash

from ..examples import examples
from .support import check_pools, coordinator, voxtral_engine, voxtral_model

FULL = FullAttentionLayer(kv_heads=KVHeads(1), head_size=Elements(8))


def test_content_is_keyed_per_token_or_encoder_token() -> None:
    with pytest.raises(UnitTypeError, match="key each encoder token"):
        ContentKeys([1, 2], PooledBlocks)  # type: ignore[type-var]
    with pytest.raises(UnitTypeError, match=r"content key 1 is 2\.0 \(a float\)"):
        ContentKeys([1, 2.0], Tokens)  # type: ignore[list-item]
    with pytest.raises(UnitValueError, match="outside int64"):
        ContentKeys([2**63], Tokens)
    assert ContentKeys([1, 2], Tokens) == ContentKeys((1, 2), Tokens)
    assert ContentKeys([1, 2], Tokens) != ContentKeys([1, 2], EncoderTokens)
    assert ContentKeys([1, 2], Tokens) != ContentKeys([1, 2], Tokens, salt="s")


@settings(max_examples=examples(200), deadline=None)
@given(
    keys=st.lists(
        st.integers(-(2**64), 2**64)
        | st.integers(-(2**63), 2**63 - 1)
        | st.booleans()
        | st.floats(allow_nan=False),
        max_size=8,
    ),
    pad=st.sampled_from([0, _PACKED - 9, _PACKED - 8, _PACKED]),
)
def test_content_keys_accept_exactly_the_int64_ints(keys: list[object], pad: int) -> None:
    # The constructor checks a batch's keys in C (classes, then the int64 range); whatever it
    # accepts or refuses is what the key-by-key rule gives: every key exactly an int (not a
    # bool, not a float) within int64, else the first wrong key named. Valid keys appended
    # (``pad``) put the same keys on either side of `_PACKED`, where the packer changes.
    keys = keys + [0] * pad
    first = next(
        (i for i, k in enumerate(keys) if type(k) is not int or not -(2**63) <= k <= 2**63 - 1),
        None,
    )
    if first is None:
        assert ContentKeys(keys, Tokens).keys == tuple(keys)  # type: ignore[arg-type]
    else:
        with pytest.raises((UnitTypeError, UnitValueError), match=f"content key {first} "):
            ContentKeys(keys, Tokens)  # type: ignore[arg-type]


@settings(max_examples=examples(200), deadline=None)
@given(
    per=st.lists(
        st.lists(
            st.integers(-(2**64), 2**64)
            | st.integers(-(2**63), 2**63 - 1)
            | st.booleans()
            | st.floats(allow_nan=False),
            max_size=4,
        )
        | st.tuples(st.integers(0, 9))
        | st.integers(0, 9),
        max_size=5,
    )
)
def test_a_content_batch_accepts_exactly_what_a_content_keys_per_request_accepts(
    per: list[Any],
) -> None:
    # A batch's keys are checked in passes in C over the whole batch; it accepts what one
    # `ContentKeys` per request accepts (each request's keys a list or tuple), and refuses the
    # same first wrong key, naming its request. Accepted, each request's keys are its own
    # int64 array, cut from one.
    wrong = next(
        (
            (r, i)
            for r, one in enumerate(per)
            for i, k in enumerate(one if isinstance(one, list | tuple) else [None])
            if not isinstance(one, list | tuple)
            or type(k) is not int
            or not -(2**63) <= k <= 2**63 - 1
        ),
        None,
    )
    if wrong is None:
        batch = ContentBatch(per, Tokens)
        assert batch.keys == tuple(ContentKeys(one, Tokens).keys for one in per)
        assert batch.lengths == tuple(Tokens(len(one)) for one in per) and len(batch) == len(per)
        assert all(a.typecode == "q" for a in batch._arrays)
        return
    r, i = wrong
    said = (
        f"request {r}'s content is" if not isinstance(per[r], list | tuple)
        else f"request {r}'s content key {i} "
    )
    with pytest.raises((UnitTypeError, UnitValueError), match=re.escape(said)):
        ContentBatch(per, Tokens)


def test_a_content_batch_is_keyed_per_token_or_encoder_token_and_immutable() -> None:
    import copy
    import pickle

    with pytest.raises(UnitTypeError, match="key each encoder token"):
        ContentBatch([[1, 2]], PooledBlocks)  # type: ignore[type-var]
    batch = ContentBatch([[1, 2], [], (3,)], EncoderTokens)
    for name, value in (("keys", ()), ("unit", Tokens), ("_arrays", [])):
        with pytest.raises(AttributeError, match="ContentBatch is immutable: make a new one"):
            setattr(batch, name, value)
        with pytest.raises(AttributeError, match="immutable"):
            delattr(batch, name)
    assert batch.keys == ((1, 2), (), (3,)) and batch.unit is EncoderTokens
    assert pickle.loads(pickle.dumps(batch)) == batch == copy.deepcopy(batch)
    assert hash(batch) == hash(ContentBatch([(1, 2), (), [3]], EncoderTokens))
    assert batch != ContentBatch([[1, 2], [], [3]], Tokens)
    assert batch != ContentBatch([[1], [2], [3]], EncoderTokens)  # the same keys, cut apart
    assert repr(batch) == "ContentBatch(3 requests, 3 keys, EncoderTokens)"


def test_content_keys_are_immutable_so_no_step_reads_unchecked_keys() -> None:
    """The keys are checked once, when made: the steps (typed, and the batch's C passes) read
    them as checked. A key past int64 set afterwards would have reached them unchecked (and
    been refused by `struct` with its own error). Like a quantity, the object refuses to
    change; a pickled or copied one is made, and checked, again."""
    import copy
    import pickle

    keys = ContentKeys([1, 2], Tokens, salt="lora-a")
    for name, value in (("keys", (2**64,)), ("unit", EncoderTokens), ("salt", None)):
        with pytest.raises(AttributeError, match="ContentKeys is immutable: make a new one"):
            setattr(keys, name, value)
        with pytest.raises(AttributeError, match="immutable"):
            delattr(keys, name)
    assert (keys.keys, keys.unit, keys.salt) == ((1, 2), Tokens, "lora-a")
    assert pickle.loads(pickle.dumps(keys)) == keys == copy.deepcopy(keys) == copy.copy(keys)


def test_content_keys_keep_their_keys_as_one_exact_int64_array() -> None:
    """What ``struct`` packed to check the keys is kept, as an int64 array of exactly their
    size (what the typed steps hand the core, which copies it in one pass); ``keys`` reads
    it as a tuple. Equal keys are equal and hash alike whatever sequence they came from."""
    import sys
    from array import array

    for many in (_PACKED - 1, _PACKED):  # either packer (array, struct): no spare either
        long = ContentKeys(range(many), Tokens)._int64s
        assert long.tolist() == list(range(many))
        assert sys.getsizeof(long) == sys.getsizeof(array("q")) + 8 * many
    given = [7, -(2**63), 2**63 - 1, 0]
    keys = ContentKeys(given, Tokens)
    packed = keys._int64s
    assert packed.typecode == "q" and packed.tolist() == given
    assert sys.getsizeof(packed) == sys.getsizeof(array("q")) + 8 * len(given)  # no spare
    assert type(keys.keys) is tuple and keys.keys == tuple(given)
    again = ContentKeys(array("q", given), Tokens)
    assert again == keys and hash(again) == hash(keys)
    assert keys != ContentKeys(given[:3], Tokens) and keys != ContentKeys(given, EncoderTokens)
    assert keys.length == Tokens(4)


def test_a_block_hash_covers_what_one_block_of_the_group_holds() -> None:
    """A pooled group's block of 16 slots holds 64 encoder tokens at P = 4: 130 encoder
    tokens are 2 full blocks; the text group's block holds 16 tokens. The chain's root carries
    the granularity, so hashes cut at 64 never equal hashes cut at 16 of the same keys."""
    coord = KVCacheCoordinator.from_plan(plan(voxtral_model(), voxtral_engine("4 GiB")))
    audio = coord.group("audio", EncoderTokens)
    text = coord.group("text", Tokens)
    frames = ContentKeys(list(range(130)), EncoderTokens)
    hashes = audio.block_hashes(frames)
    assert len(hashes) == 2 and str(hashes.tokens_per_block) == "64 encoder_token/cache_block"
    assert len(text.block_hashes(ContentKeys(list(range(130)), Tokens))) == 8
    as_tokens = chain_hashes(root_hash("encoder_token", 16, None), list(range(64)), 16)
    assert hashes.hashes[0] not in as_tokens
    # The pooled handle stepping whole pooled blocks cuts the same boundaries.
    whole = coord.group("audio", PooledBlocks).block_hashes(frames)
    assert whole.hashes == hashes.hashes and whole.unit is PooledBlocks


def test_another_groups_boundaries_are_refused() -> None:
    """The bug class of vLLM #53142: hashes cut at one group's block size handed to a group
    of another. Both count tokens here (one pool: the narrow group's blocks grow to 32)."""
    from .support import group_of

    narrow = group_of("narrow", FULL, block_size=32, max_len=64, max_in_flight=64)
    wide = group_of(
        "wide",
        FullAttentionLayer(kv_heads=KVHeads(2), head_size=Elements(8)),
        block_size=16,
        max_len=64,
        max_in_flight=64,
    )

    coord = KVCacheCoordinator([wide, narrow], PoolBlocks(20))
    w, n = coord.group("wide", Tokens), coord.group("narrow", Tokens)
    step = coord.stepper(w, n)
    content = ContentKeys(list(range(40)), Tokens)
    with pytest.raises(UnitValueError, match="blocks of 16 token/cache_block, but group 'narrow'"):
        step.admit_with_prefix(
            "r", Tokens(64), Tokens(64), prefix=(w.block_hashes(content), w.block_hashes(content))
        )
    with pytest.raises(UnitTypeError, match="must be BlockHashes"):
        step.admit_with_prefix("r", Tokens(64), Tokens(64), prefix=(content, None))  # type: ignore[arg-type]
    assert "r" not in coord


def test_groups_of_one_sequence_get_one_content() -> None:
    coord = coordinator({"a": FULL, "b": FULL}, block_size=4, num_blocks=20, max_len=16)
    a, b = coord.group("a", Tokens), coord.group("b", Tokens)
    step = coord.stepper(a, b)
    with pytest.raises(RequestError, match=r"read one sequence .* different content"):
        step.admit_with_prefix(
            "r",
            Tokens(16),
            Tokens(16),
            prefix=(
                a.block_hashes(ContentKeys([1] * 8, Tokens)),
                b.block_hashes(ContentKeys([2] * 8, Tokens)),
            ),
        )
    with pytest.raises(RequestError, match="beyond its max_len of 16 token"):
        step.admit_with_prefix(
            "r",
            Tokens(16),
            Tokens(16),
            prefix=(
                a.block_hashes(ContentKeys([1] * 17, Tokens)),
                b.block_hashes(ContentKeys([1] * 17, Tokens)),
            ),
        )
    assert "r" not in coord


def test_a_shared_block_is_reserved_once_where_requests_keep_it() -> None:
    """Full attention, 10 usable blocks, requests of 96 tokens (cap 6 blocks). The second
    request with the same prompt shares the 5 full blocks of its first 95 tokens with the
    first: it reserves 6 − 5 more, so both fit (6 + 6 > 10 without sharing). Every step still
    succeeds, and when the first request ends, the second owns its blocks alone."""
    coord = coordinator({"t": FULL}, block_size=16, num_blocks=11, max_len=96, max_in_flight=96)
    h = coord.group("t", Tokens)
    step = coord.stepper(h)
    content = ContentKeys(list(range(96)), Tokens)
    prefix = (h.block_hashes(content),)
    assert step.admit_with_prefix("a", Tokens(96), prefix=prefix) == (Tokens(0),)
    step.allocate("a", Tokens(96))
    with pytest.raises(AllocationError):
        step.admit("plain", Tokens(96))  # no content: 6 more would not fit
    assert step.admit_with_prefix("b", Tokens(96), prefix=prefix) == (Tokens(80),)
    assert coord.usage(h).reserved == CacheBlocks(6 + 6 - 5)
    step.allocate("b", Tokens(16))
    assert coord.usage(h).used == CacheBlocks(7)
    coord.free("a")
    assert coord.usage(h).reserved == coord.usage(h).used == CacheBlocks(6)
    check_pools(coord)


def test_a_window_reserves_its_cap_whole() -> None:
    """A sliding window drops a shared block one holder at a time; each holder may then need
    its whole cap of blocks of its own: the reservation does not count sharing there. Window
    8 tokens, blocks of 4, 64 tokens: cap ``cdiv(7 + 64, 4) + 1`` capped at ``cdiv(64, 4)``."""
    window = SlidingWindowLayer(
        sliding_window=Window(8, Tokens), kv_heads=KVHeads(1), head_size=Elements(8)
    )
    coord = coordinator({"w": window}, block_size=4, num_blocks=40, max_len=64, max_in_flight=64)
    h = coord.group("w", Tokens)
    step = coord.stepper(h)
    prefix = (h.block_hashes(ContentKeys(list(range(64)), Tokens)),)
    step.admit_with_prefix("a", Tokens(64), prefix=prefix)
    step.allocate("a", Tokens(62))
    assert step.admit_with_prefix("b", Tokens(64), prefix=prefix) == (Tokens(60),)
    assert coord.usage(h).reserved == CacheBlocks(16 + 16)
    check_pools(coord)


def test_audio_and_text_hit_on_their_own() -> None:
    """A speech model's audio (pooled, encoder tokens) and text (tokens) are two sequences:
    each has its own hit. Here the audio window has slid past the shared audio prefix and its
    block was reused, while the text prefix is still held: the text hits, the audio does not.
    (vLLM runs both groups on one token axis and takes the smaller hit, 0: the first request
    of the second wave in its own trace, /work/research/vllm_bench/RESULTS.md.)"""
    planned = plan(voxtral_model(), voxtral_engine("40 GiB", encoder_len=2000, encoder_step=64))
    groups = [p.group for p in planned.groups]
    coord = KVCacheCoordinator(groups, [PoolBlocks(20), PoolBlocks(200)], reserve=False)
    audio, text = coord.group("audio", EncoderTokens), coord.group("text", Tokens)
    step = coord.stepper(audio, text)
    frames = ContentKeys(list(range(128)), EncoderTokens)
    prompt = ContentKeys(list(range(32)), Tokens)
    prefix = (audio.block_hashes(frames), text.block_hashes(prompt))
    first = step.admit_with_prefix("s0", EncoderTokens(2000), Tokens(64), prefix=prefix)
    assert first == (EncoderTokens(0), Tokens(0))
    step.allocate("s0", EncoderTokens(64), Tokens(32))
    step.allocate("s0", EncoderTokens(64), Tokens(1))
    again = step.admit_with_prefix("s1", EncoderTokens(2000), Tokens(64), prefix=prefix)
    assert again == (EncoderTokens(64), Tokens(16))  # one block each: 64 encoder tokens, 16
    coord.free("s1")
    # The audio stream goes on: 750 encoder tokens later its first block left the window.
    for _ in range(14):
        step.allocate("s0", EncoderTokens(64), Tokens(1))
    assert coord.block_table("s0", audio)[Position(0, CacheBlocks)] == 0
    # Other requests take the pool's free blocks, evicting the cached audio block.
    pool = coord._core.pools[0]
    while pool.num_cached_free:
        rid = f"x{pool.num_free}"
        step.admit(rid, EncoderTokens(64), Tokens(1))
        step.allocate(rid, EncoderTokens(64), Tokens(0))
    late = step.admit_with_prefix("s64", EncoderTokens(2000), Tokens(64), prefix=prefix)
    assert late == (EncoderTokens(0), Tokens(16))
    check_pools(coord)


def test_groups_no_prefix_serves() -> None:
    """A state group holds one state per request: no prefix of positions serves it, and a
    request whose token sequence it shares resumes nothing there (its hit is 0)."""
    coord = coordinator(
        {"attn": FULL, "state": StateLayer(state_size=Bytes(64))},
        block_size=4,
        num_blocks=20,
        max_len=16,
    )
    attn, state = coord.group("attn", Tokens), coord.group("state", Tokens)
    with pytest.raises(SpecError, match=r"'state' \(state\) cannot be served from a prefix"):
        state.block_hashes(ContentKeys([1] * 8, Tokens))
    step = coord.stepper(attn, state)
    prefix = (attn.block_hashes(ContentKeys([1] * 12, Tokens)), None)
    step.admit_with_prefix("a", Tokens(16), Tokens(16), prefix=prefix)
    step.allocate("a", Tokens(12), Tokens(12))
    assert step.admit_with_prefix("b", Tokens(16), Tokens(16), prefix=prefix) == (
        Tokens(0),
        Tokens(0),
    )
    # Bound alone, the attention group hits.
    alone = coord.stepper(attn)
    assert alone.admit_with_prefix("c", Tokens(16), prefix=prefix[:1]) == (Tokens(8),)


def test_extending_content() -> None:
    coord = coordinator({"t": FULL}, block_size=4, num_blocks=20, max_len=16)
    h = coord.group("t", Tokens)
    step = coord.stepper(h)
    step.admit("plain", Tokens(16))
    with pytest.raises(RequestError, match="admitted without content"):
        coord.extend_content("plain", h, ContentKeys([1], Tokens))
    step.admit_with_prefix("r", Tokens(16), prefix=(h.block_hashes(ContentKeys([], Tokens)),))
    with pytest.raises(UnitTypeError, match="holds content in token"):
        coord.extend_content("r", h, ContentKeys([1], EncoderTokens))  # type: ignore[arg-type]
    with pytest.raises(UnitValueError, match="a salt goes in the first block"):
        coord.extend_content("r", h, ContentKeys([1], Tokens, salt="s"))
    # Generated tokens, hashed as they come: the block they fill is cached once computed.
    step.allocate("r", Tokens(5))
    coord.extend_content("r", h, ContentKeys([7, 7, 7], Tokens))
    assert not coord._core.caches[0].blocks  # type: ignore[union-attr]
    coord.extend_content("r", h, ContentKeys([7, 7], Tokens))
    table = coord.block_table("r", h)
    first, second = table.ids_in(CacheBlocks)[:2]
    assert coord._core.pools[0].is_cached(first) and not coord._core.pools[0].is_cached(second)
    same = (h.block_hashes(ContentKeys([7] * 9, Tokens)),)
    assert step.admit_with_prefix("s", Tokens(16), prefix=same) == (Tokens(4),)


def test_content_extends_every_stream_of_its_sequence() -> None:
    """Two groups read one sequence at two block sizes (two hash streams): content given
    through either handle extends both, on the one-append path too (a generated token's
    keys filling no block of either), so a later request with that content hits both."""
    from .support import group_of

    wide = group_of("wide", FULL, block_size=8, max_len=32, max_in_flight=32)
    narrow = group_of("narrow", FULL, block_size=4, max_len=32, max_in_flight=32)
    coord = KVCacheCoordinator([wide, narrow], [PoolBlocks(20), PoolBlocks(20)])
    w, n = coord.group("wide", Tokens), coord.group("narrow", Tokens)
    step = coord.stepper(w, n)
    empty = ContentKeys([], Tokens)
    step.admit_with_prefix(
        "r", Tokens(32), Tokens(32), prefix=(w.block_hashes(empty), n.block_hashes(empty))
    )
    step.allocate("r", Tokens(12), Tokens(12))
    coord.extend_content("r", w, ContentKeys([1, 2, 3], Tokens))
    coord.extend_content("r", w, ContentKeys([4], Tokens))  # one append: fills no block
    coord.extend_content("r", n, ContentKeys([5, 6, 7, 8, 9], Tokens))
    content = ContentKeys([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], Tokens)
    prefix = (w.block_hashes(content), n.block_hashes(content))
    assert step.admit_with_prefix("s", Tokens(32), Tokens(32), prefix=prefix) == (
        Tokens(8),
        Tokens(8),
    )
    check_pools(coord)


def test_the_cores_extend_with_a_key_past_int64_changes_nothing() -> None:
    """The core's plain entry takes any sequence of ints (the typed layer hands it checked
    int64 arrays): keys not already an int64 array are copied into one first, so one past
    int64 fails before the first key is appended."""
    coord = coordinator({"t": FULL}, block_size=4, num_blocks=20, max_len=16)
    h = coord.group("t", Tokens)
    step = coord.stepper(h)
    step.admit_with_prefix("r", Tokens(16), prefix=(h.block_hashes(ContentKeys([], Tokens)),))
    step.allocate("r", Tokens(4))
    core = coord._core
    core.extend_content("r", h.index, [1])  # the request's content made active
    extra = core.extras[core.table.offsets["r"]]
    assert isinstance(extra, RequestExtras)
    tail = extra.streams[0].tail
    assert tail.tolist() == [1]
    with pytest.raises(OverflowError):
        core.extend_content("r", h.index, [2, 2**64])
    assert tail.tolist() == [1]
    core.extend_content("r", h.index, array("q", [2]))
    assert tail.tolist() == [1, 2]


def test_a_pooled_group_stepped_in_whole_pooled_blocks_hits_in_pooled_blocks() -> None:
    """The hit comes back in the handle's unit: 64 encoder tokens are 16 pooled blocks."""
    layer = SlidingWindowLayer(
        sliding_window=Window(750, EncoderTokens),
        pool=PoolFactor(4),
        kv_heads=KVHeads(1),
        head_size=Elements(8),
    )
    coord = coordinator({"a": layer}, block_size=16, num_blocks=40, max_len=100)
    h = coord.group("a", PooledBlocks)
    step = coord.stepper(h)
    prefix = (h.block_hashes(ContentKeys(list(range(200)), EncoderTokens)),)
    step.admit_with_prefix("r", PooledBlocks(100), prefix=prefix)
    step.allocate("r", PooledBlocks(50))
    assert step.admit_with_prefix("s", PooledBlocks(100), prefix=prefix) == (PooledBlocks(48),)
    assert coord.seq_len("s", h) == PooledBlocks(48)
    check_pools(coord)


def test_a_window_caches_only_the_blocks_an_aligned_hit_reads() -> None:
    """Issue 23's case, vLLM 0.33's rule (``SlidingWindowManager.reachable_block_mask`` in
    vllm/v1/core/single_type_kv_cache_manager.py): a window of 8 tokens in blocks of 8 beside
    full attention in blocks of 32. A hit ends on a multiple of 32 (the blocks' least common
    multiple) and the window reads the ``cdiv(8 - 1, 8)`` = 1 block before it, so of a
    64-token prompt's 8 window blocks only blocks 3 and 7 are cached (vLLM caches [3, 7];
    kvunits cached all 8 before), and a new request with that prefix still hits 64 tokens."""
    from .support import group_of

    full = group_of("full", FULL, block_size=32, max_len=256, max_in_flight=256)
    window = group_of(
        "sw",
        SlidingWindowLayer(
            sliding_window=Window(8, Tokens), kv_heads=KVHeads(1), head_size=Elements(8)
        ),
        block_size=8,
        max_len=256,
        max_in_flight=256,
    )
    coord = KVCacheCoordinator([full, window], [PoolBlocks(40), PoolBlocks(40)], reserve=False)
    f, w = coord.group("full", Tokens), coord.group("sw", Tokens)
    step = coord.stepper(f, w)
    content = ContentKeys(list(range(65)), Tokens)
    prefix = (f.block_hashes(content), w.block_hashes(content))
    assert step.admit_with_prefix("a", Tokens(65), Tokens(65), prefix=prefix) == (
        Tokens(0),
        Tokens(0),
    )
    step.allocate("a", Tokens(65), Tokens(65))
    table = coord.block_table("a", w)
    pool = coord._core.pools[w.index]
    cached = [i for i, block in enumerate(table) if block and pool.is_cached(block)]
    assert cached == [3, 7]
    assert all(coord._core.pools[f.index].is_cached(b) for b in coord.block_table("a", f)[:2])
    coord.free("a")
    assert coord.usage(w).cached == CacheBlocks(2) and coord.usage(f).cached == CacheBlocks(2)
    hits = step.admit_with_prefix("b", Tokens(65), Tokens(65), prefix=prefix)
    assert hits == (Tokens(64), Tokens(64))
    check_pools(coord)
