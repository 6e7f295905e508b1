"""The coordinator's public API: units at the entry, atomic steps, admission, usage, errors."""

from __future__ import annotations

import pickle
import re
from collections.abc import Callable
from typing import Any

import pytest

from kvunits.contracts import (
    AdmissionCap,
    Bytes,
    CacheBlocks,
    Chunk,
    ChunkedLocalLayer,
    CrossAttentionLayer,
    Elements,
    EncoderTokens,
    EngineSpec,
    FullAttentionLayer,
    KVHeads,
    KvUnitsError,
    Layers,
    ModelSpec,
    PoolBlocks,
    PooledBlocks,
    PoolFactor,
    SlidingWindowLayer,
    SpecError,
    StateLayer,
    Tokens,
    UnitError,
    UnitTypeError,
    Window,
    manager_view,
)
from kvunits.contracts._views import _admission_blocks as admission_blocks
from kvunits.contracts.deploy import RankBytes
from kvunits.runtime import (
    AdmissionError,
    AllocationError,
    GroupUsage,
    KVCacheCoordinator,
    RequestError,
)
from kvunits.runtime.capacity import plan

from .support import check_pools, coordinator, snapshot, voxtral_engine, voxtral_model

AUDIO = SlidingWindowLayer(
    sliding_window=Window(30, EncoderTokens),
    pool=PoolFactor(4),
    kv_heads=KVHeads(32),
    head_size=Elements(64),
)
TEXT = FullAttentionLayer(kv_heads=KVHeads(8), head_size=Elements(128))


def two_groups(num_blocks: int | dict[str, int] = 40, reserve: bool = True) -> KVCacheCoordinator:
    """A pooled audio group (P = 4, window 30 encoder tokens: 9 slots) and a text group, block
    size 4, at most 100 slots a request and 8 a step."""
    return coordinator(
        {"audio": AUDIO, "text": TEXT},
        block_size=4,
        num_blocks=num_blocks,
        max_len=100,
        max_in_flight=8,
        reserve=reserve,
    )


# -- units at the entry ---------------------------------------------------------------------------


def test_group_handles_carry_the_unit() -> None:
    coord = two_groups()
    audio = coord.group("audio", PooledBlocks)
    assert (audio.name, audio.index, audio.unit) == ("audio", 0, PooledBlocks)
    assert repr(coord.group("text", Tokens)) == "GroupHandle('text', Tokens)"
    with pytest.raises(
        UnitTypeError,
        match=re.escape(
            "group 'audio' counts pooled_block (PooledBlocks), not token; ask for "
            "coordinator.group('audio', PooledBlocks) or "
            "coordinator.group('audio', EncoderTokens)"
        ),
    ):
        coord.group("audio", Tokens)
    # A pooled group can also be stepped in encoder tokens; a token group cannot.
    assert coord.group("audio", EncoderTokens).unit is EncoderTokens
    with pytest.raises(UnitTypeError, match="counts token"):
        coord.group("text", EncoderTokens)
    with pytest.raises(SpecError, match="no group 'video'; groups: audio, text"):
        coord.group("video", Tokens)


def test_encoder_tokens_where_pooled_blocks_are_expected_raise() -> None:
    coord = two_groups()
    step = coord.stepper(coord.group("audio", PooledBlocks), coord.group("text", Tokens))
    coord.admit("r")
    before = snapshot(coord)
    message = (
        "num_new[0] is for group 'audio', whose handle counts pooled_block (PooledBlocks); "
        "got 4 encoder_token; step this group in encoder tokens with coordinator.group("
        "'audio', EncoderTokens), or convert whole pooled blocks with "
        "kvunits.contracts.pool_length(n, PoolFactor(4))"
    )
    with pytest.raises(UnitTypeError, match=re.escape(message)) as info:
        step.allocate("r", EncoderTokens(4), Tokens(1))  # type: ignore[arg-type]
    assert (info.value.field, info.value.expected, info.value.got) == (
        "num_new[0]",
        "pooled_block",
        "4 encoder_token",
    )
    with pytest.raises(UnitTypeError, match=r"got 4 \(a bare int, no unit\)"):
        step.allocate("r", PooledBlocks(1), 4)  # type: ignore[arg-type]
    with pytest.raises(
        UnitTypeError, match=r"num_new\[1\] is for group 'text', whose handle counts token"
    ):
        step.allocate("r", PooledBlocks(1), PooledBlocks(1))  # type: ignore[arg-type]
    with pytest.raises(UnitError, match="max_len"):
        step.admit("s", EncoderTokens(40), Tokens(8))  # type: ignore[arg-type]
    assert snapshot(coord) == before and "s" not in coord


@pytest.mark.parametrize(
    "bad",
    [4, True, 4.0, EncoderTokens(4), CacheBlocks(4), Tokens(4)],
    ids=["int", "bool", "float", "encoder_token", "cache_block", "other_group_unit"],
)
def test_every_typed_entry_refuses_bare_numbers_and_other_units(bad: Any) -> None:
    coord = two_groups()
    audio, text = coord.group("audio", PooledBlocks), coord.group("text", Tokens)
    step = coord.stepper(audio, text)
    one = coord.stepper(audio)
    general = coord.stepper(text, audio)  # not in group order: the general path
    coord.admit("r")
    step.allocate("r", PooledBlocks(2), Tokens(1))
    before = snapshot(coord)
    calls: list[Callable[[], object]] = [
        lambda: step.allocate("r", bad, Tokens(1)),
        lambda: one.allocate("r", bad),
        lambda: general.allocate("r", Tokens(1), bad),
        lambda: step.admit("s", bad, Tokens(4)),
        lambda: coord.group("audio", bad),
    ]
    if type(bad) is not Tokens:  # the text group's own unit
        calls.append(lambda: step.allocate("r", PooledBlocks(1), bad))
    if type(bad) is not CacheBlocks:  # the unit of pool sizes
        calls.append(lambda: KVCacheCoordinator(coord.groups, [PoolBlocks(8), bad]))
    if type(bad) is not EncoderTokens:  # a pooled group's other step unit
        calls.append(lambda: coord.group("audio", type(bad)))
    for call in calls:
        with pytest.raises(UnitTypeError):
            call()
    assert snapshot(coord) == before and "s" not in coord


def test_handles_of_another_coordinator_are_refused() -> None:
    a, b = two_groups(), two_groups()
    foreign = b.group("audio", PooledBlocks)
    a.admit("r")
    with pytest.raises(UnitTypeError, match="GroupHandle of this coordinator"):
        a.block_table("r", foreign)
    with pytest.raises(UnitTypeError, match="GroupHandle of this coordinator"):
        a.stepper(foreign)
    with pytest.raises(UnitTypeError, match="a str"):
        a.block_table("r", "audio")  # type: ignore[arg-type]
    audio = a.group("audio", PooledBlocks)
    with pytest.raises(SpecError, match="bound twice"):
        a.stepper(audio, audio)


def test_steppers_over_a_subset_or_in_another_order() -> None:
    coord = two_groups()
    audio, text = coord.group("audio", PooledBlocks), coord.group("text", Tokens)
    coord.admit("r")
    # Only the text group: the audio group gets 0 new slots.
    assert coord.stepper(text).allocate("r", Tokens(3)) == [[4, 5, 6]]
    assert coord.seq_len("r", audio) == PooledBlocks(0)
    # Text first: mappings come back in the stepper's order.
    swapped = coord.stepper(text, audio)
    assert swapped.allocate("r", Tokens(1), PooledBlocks(2)) == [[7], [4, 5]]
    assert swapped.seq_lens("r") == (Tokens(4), PooledBlocks(2))
    with pytest.raises(UnitTypeError, match=r"num_new\[0\] is for group 'text'"):
        swapped.allocate("r", PooledBlocks(1), Tokens(1))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        swapped.allocate("r", Tokens(1))  # type: ignore[call-arg]


def test_four_groups_take_the_general_path() -> None:
    coord = coordinator(
        {
            "a": FullAttentionLayer(kv_heads=KVHeads(1), head_size=Elements(8)),
            "b": SlidingWindowLayer(
                sliding_window=Window(3, Tokens), kv_heads=KVHeads(1), head_size=Elements(8)
            ),
            "c": StateLayer(state_size=Bytes(1024)),
            "d": SlidingWindowLayer(
                sliding_window=Window(5, EncoderTokens),
                pool=PoolFactor(2),
                kv_heads=KVHeads(1),
                head_size=Elements(8),
            ),
        },
        block_size=2,
        num_blocks=30,
        max_len=20,
        max_in_flight=4,
    )
    a, b = coord.group("a", Tokens), coord.group("b", Tokens)
    c, d = coord.group("c", Tokens), coord.group("d", PooledBlocks)
    step = coord.stepper(a, b, c, d)
    step.admit("r", Tokens(20), Tokens(20), Tokens(20), PooledBlocks(20))
    assert step.allocate("r", Tokens(2), Tokens(1), Tokens(2), PooledBlocks(3)) == [
        [2, 3],
        [2],
        [],
        [2, 3, 4],
    ]
    with pytest.raises(UnitTypeError, match=r"num_new\[3\] is for group 'd'"):
        step.allocate("r", Tokens(2), Tokens(1), Tokens(2), EncoderTokens(6))  # type: ignore[arg-type]
    check_pools(coord)


# -- atomic steps -----------------------------------------------------------------------------


def test_a_step_short_in_one_group_changes_nothing_anywhere() -> None:
    # Audio has 7 usable blocks, text 3; no reservation, so both requests are admitted.
    coord = two_groups({"audio": 8, "text": 4}, reserve=False)
    audio, text = coord.group("audio", PooledBlocks), coord.group("text", Tokens)
    step = coord.stepper(audio, text)
    step.admit("a", PooledBlocks(100), Tokens(12))
    step.admit("b", PooledBlocks(100), Tokens(12))
    step.allocate("a", PooledBlocks(8), Tokens(8))  # text: 2 blocks
    before = snapshot(coord)
    # b needs 2 audio blocks (there are 5) and 2 text blocks (there is 1).
    with pytest.raises(AllocationError) as info:
        step.allocate("b", PooledBlocks(8), Tokens(5))
    err = info.value
    assert (err.group, err.needed, err.free, err.request_id) == (
        "text",
        CacheBlocks(2),
        CacheBlocks(1),
        "b",
    )
    assert err.shortfall == CacheBlocks(1)
    assert str(err) == (
        "step of request 'b' needs 2 new cache_block in group 'text' but only 1 are free "
        "(evictions of this step included), 1 short; nothing was allocated in any group: "
        "preempt a request or retry after one finishes"
    )
    assert snapshot(coord) == before
    assert coord.seq_len("b", audio) == PooledBlocks(0)
    # One text block fits.
    assert step.allocate("b", PooledBlocks(8), Tokens(4)) == [
        [12, 13, 14, 15, 16, 17, 18, 19],
        [12, 13, 14, 15],
    ]
    check_pools(coord)


def test_a_failed_step_does_not_evict_either() -> None:
    # vLLM frees a sliding window's skipped blocks before it finds out that the step cannot
    # be allocated; here the step is all or nothing, evictions included, so the free queue's
    # order and the tables are exactly as before.
    coord = two_groups({"audio": 40, "text": 4}, reserve=False)
    audio, text = coord.group("audio", PooledBlocks), coord.group("text", Tokens)
    step = coord.stepper(audio, text)
    step.admit("a", PooledBlocks(100), Tokens(12))
    step.admit("b", PooledBlocks(100), Tokens(12))
    step.allocate("a", PooledBlocks(8), Tokens(4))
    step.allocate("a", PooledBlocks(8), Tokens(4))
    step.allocate("b", PooledBlocks(0), Tokens(1))  # the last of the 3 usable text blocks
    before = snapshot(coord)
    # 16 audio slots computed, window 9: the step's first query reads back to slot 8, so
    # blocks 0 and 1 (slots 0-7) would go; but text needs a third block and has none.
    with pytest.raises(AllocationError, match="in group 'text'"):
        step.allocate("a", PooledBlocks(4), Tokens(1))
    assert snapshot(coord) == before
    assert coord.block_table("a", audio) == [1, 2, 3, 4]
    # The same step without the text token goes through, and evicts.
    step.allocate("a", PooledBlocks(4), Tokens(0))
    assert coord.block_table("a", audio) == [0, 0, 3, 4, 5]
    check_pools(coord)


def test_short_in_two_groups_names_the_first() -> None:
    coord = two_groups({"audio": 4, "text": 2}, reserve=False)
    step = coord.stepper(coord.group("audio", PooledBlocks), coord.group("text", Tokens))
    step.admit("a", PooledBlocks(8), Tokens(4))
    step.admit("b", PooledBlocks(8), Tokens(4))
    step.allocate("a", PooledBlocks(8), Tokens(1))  # 2 of 3 audio blocks, the text block
    step.allocate("b", PooledBlocks(4), Tokens(0))  # the last audio block
    # Both groups are short; the error names the first, in group order.
    with pytest.raises(AllocationError) as info:
        step.allocate("b", PooledBlocks(1), Tokens(1))
    assert (info.value.group, info.value.needed, info.value.free) == (
        "audio",
        CacheBlocks(1),
        CacheBlocks(0),
    )


def test_a_protocol_mistake_is_reported_before_a_shortfall() -> None:
    coord = two_groups({"audio": 6, "text": 40}, reserve=False)
    step = coord.stepper(coord.group("audio", PooledBlocks), coord.group("text", Tokens))
    step.admit("a", PooledBlocks(20), Tokens(20))  # audio cap 5 = the whole pool
    step.admit("r", PooledBlocks(20), Tokens(20))
    step.allocate("a", PooledBlocks(8), Tokens(0))
    step.allocate("a", PooledBlocks(8), Tokens(0))
    step.allocate("r", PooledBlocks(4), Tokens(0))  # the last free audio block
    with pytest.raises(AllocationError, match="in group 'audio'"):
        step.allocate("r", PooledBlocks(1), Tokens(8))
    # Short in audio and beyond the step budget in text: the mistake is what is reported.
    with pytest.raises(RequestError, match="adds 9 token, more than the group's max_in_flight"):
        step.allocate("r", PooledBlocks(1), Tokens(9))


def test_steps_beyond_the_declared_length_are_refused() -> None:
    coord = two_groups()
    step = coord.stepper(coord.group("audio", PooledBlocks), coord.group("text", Tokens))
    step.admit("r", PooledBlocks(5), Tokens(10))
    step.allocate("r", PooledBlocks(5), Tokens(8))
    before = snapshot(coord)
    with pytest.raises(
        RequestError,
        match=re.escape(
            "a step of request 'r' in group 'text' would hold 11 token (8 + 3), beyond the "
            "request's max_len of 10 token"
        ),
    ) as info:
        step.allocate("r", PooledBlocks(0), Tokens(3))
    assert (info.value.request_id, info.value.group) == ("r", "text")
    assert snapshot(coord) == before


def test_unknown_and_duplicate_request_ids() -> None:
    coord = two_groups()
    audio = coord.group("audio", PooledBlocks)
    with pytest.raises(RequestError, match="request 'x' is not admitted"):
        coord.free("x")
    with pytest.raises(RequestError, match="not admitted"):
        coord.block_table("x", audio)
    coord.admit("x")
    with pytest.raises(RequestError, match="request 'x' is already admitted"):
        coord.admit("x")
    coord.free("x")
    with pytest.raises(RequestError, match="not admitted"):
        coord.free("x")


# -- admission --------------------------------------------------------------------------------


def test_a_request_that_can_never_fit_is_refused_up_front() -> None:
    coord = two_groups({"audio": 40, "text": 10})
    text = coord.group("text", Tokens)
    step = coord.stepper(coord.group("audio", PooledBlocks), text)
    with pytest.raises(AdmissionError) as info:
        step.admit("long", PooledBlocks(10), Tokens(40))
    err = info.value
    assert (err.request_id, err.group, err.cap, err.usable) == (
        "long",
        "text",
        AdmissionCap(10),
        CacheBlocks(9),
    )
    assert str(err) == (
        "request 'long' can never fit: in group 'text' it can hold 10 cache_block at once "
        "(full_attention, max_len 40 token, max_in_flight 8 token) but the group has only 9 "
        "cache_block for requests; refuse it, or give the cache more memory"
    )
    assert not issubclass(AdmissionError, AllocationError), "a scheduler must not retry it"
    with pytest.raises(AdmissionError, match="beyond the group's limit of 100 token"):
        step.admit("longer", PooledBlocks(10), Tokens(101))
    assert coord.num_requests == 0
    step.admit("fits", PooledBlocks(10), Tokens(36))
    assert coord.request_cap("fits", text) == AdmissionCap(9)


def test_reservation_waits_and_frees() -> None:
    coord = two_groups({"audio": 40, "text": 13})
    audio, text = coord.group("audio", PooledBlocks), coord.group("text", Tokens)
    step = coord.stepper(audio, text)
    step.admit("a", PooledBlocks(10), Tokens(24))  # text cap 6 of 12
    step.admit("b", PooledBlocks(10), Tokens(24))  # 12 of 12
    before = snapshot(coord)
    with pytest.raises(AllocationError, match="cannot admit request 'c' now") as info:
        step.admit("c", PooledBlocks(10), Tokens(4))
    assert (info.value.group, info.value.needed, info.value.free) == (
        "text",
        CacheBlocks(1),
        CacheBlocks(0),
    )
    assert snapshot(coord) == before
    assert coord.usage(text) == GroupUsage(
        name="text",
        capacity=CacheBlocks(12),
        used=CacheBlocks(0),
        free=CacheBlocks(12),
        reserved=CacheBlocks(12),
    )
    coord.free("a")
    step.admit("c", PooledBlocks(10), Tokens(4))
    assert coord.usage(text).reserved == CacheBlocks(7)


def test_without_reservation_admission_only_refuses_what_never_fits() -> None:
    coord = two_groups({"audio": 40, "text": 13}, reserve=False)
    step = coord.stepper(coord.group("audio", PooledBlocks), coord.group("text", Tokens))
    for rid in "abcd":
        step.admit(rid, PooledBlocks(10), Tokens(24))
    assert coord.num_requests == 4
    assert all(u.reserved == CacheBlocks(0) for u in coord.usage_by_group().values())


def small_voxtral() -> tuple[Any, KVCacheCoordinator]:
    engine = EngineSpec.model_validate(
        {
            "block_size_slots": 16,
            "max_model_len": "256 token",
            "max_num_batched_tokens": "64 token",
            "max_encoder_len": "800 encoder_token",
            "max_encoder_tokens_per_step": "16 encoder_token",
            "memory_budget": "1 GiB",
        }
    )
    p = plan(voxtral_model(), engine)
    return p, KVCacheCoordinator.from_plan(p)


def test_every_request_the_plan_admits_runs_to_full_length() -> None:
    p, coord = small_voxtral()
    n = p.concurrent_requests
    assert n >= 2
    audio, text = coord.group("audio", PooledBlocks), coord.group("text", Tokens)
    step = coord.stepper(audio, text)
    rids = [f"r{i}" for i in range(n)]
    for rid in rids:
        coord.admit(rid)  # full length in both groups
        assert coord.request_cap(rid, audio) == p.group("audio").admission_cap
    # Worst case: every request takes the most slots every step, interleaved, to full length.
    audio_limit = p.group("audio").group.expect(PooledBlocks).limits
    text_limit = p.group("text").group.expect(Tokens).limits
    slots = audio_limit.max_len.numerical_value_in(PooledBlocks)
    for _ in range(slots // audio_limit.max_in_flight.numerical_value_in(PooledBlocks)):
        for rid in rids:
            done = coord.seq_len(rid, text)
            step.allocate(
                rid,
                audio_limit.max_in_flight,
                min(text_limit.max_in_flight, text_limit.max_len - done),
            )
        check_pools(coord)
    assert all(coord.seq_len(r, audio) == audio_limit.max_len for r in rids)
    assert all(coord.seq_len(r, text) == text_limit.max_len for r in rids)
    # One more full-length request waits (it would fit an empty cache: not refused for ever).
    spare = [u.capacity - u.reserved for u in coord.usage_by_group().values()]
    caps = [g.admission_cap for g in p.groups]
    if any(not s.covers(c) for s, c in zip(spare, caps, strict=True)):
        with pytest.raises(AllocationError):
            coord.admit("one-more")
    for rid in rids:
        coord.free(rid)
    assert all(u.used == CacheBlocks(0) for u in coord.usage_by_group().values())


def test_misaligned_chunk_is_refused() -> None:
    # Block size 3, chunk 2, one slot a step: the cap formula says
    # cdiv(min(2 + 1, max_len), 3) = 1 block, but at 3 computed the chunk started at slot 2
    # and the step writes slot 3: slots 2-3 span blocks 0 and 1.
    layer = ChunkedLocalLayer(chunk=Chunk(2, Tokens), kv_heads=KVHeads(1), head_size=Elements(8))
    assert admission_blocks("chunked_local", 3, None, 2, None, 1, 100) == 1
    with pytest.raises(SpecError, match="chunk of 2 token is not a whole number of cache blocks"):
        manager_view(layer, block_size_slots=3)
    with pytest.raises(SpecError, match="chunk of 2 token is not a whole number of cache blocks"):
        coordinator({"c": layer}, block_size=3, num_blocks=4)
    # Whole blocks are fine.
    coordinator({"c": layer}, block_size=2, num_blocks=4)


def test_cross_attention_is_written_whole_whatever_the_step_budget() -> None:
    cross = CrossAttentionLayer(
        encoder_length=EncoderTokens(1500), kv_heads=KVHeads(8), head_size=Elements(64)
    )
    model = ModelSpec.stacked(
        "whisper-like", {"dec": (TEXT, Layers(4)), "cross": (cross, Layers(4))}
    )
    engine = EngineSpec(
        max_model_len=Tokens(448),
        max_num_batched_tokens=Tokens(64),
        memory_budget=RankBytes(1 << 30),
    )
    coord = KVCacheCoordinator.from_plan(plan(model, engine))
    dec, xattn = coord.group("dec", Tokens), coord.group("cross", PooledBlocks)
    step = coord.stepper(dec, xattn)
    coord.admit("r")
    # The encoder output, 1500 slots, goes in at once, beyond the decoder's 64 a step.
    mappings = step.allocate("r", Tokens(16), PooledBlocks(1500))
    assert len(mappings[1]) == 1500
    assert len(coord.block_table("r", xattn)) == 94  # cdiv(1500, 16)
    with pytest.raises(RequestError, match="beyond the request's max_len of 1500 pooled_block"):
        step.allocate("r", Tokens(1), PooledBlocks(1))


# -- reading ----------------------------------------------------------------------------------


def test_usage_and_reads() -> None:
    coord = two_groups()
    audio, text = coord.group("audio", PooledBlocks), coord.group("text", Tokens)
    step = coord.stepper(audio, text)
    coord.admit("r")
    step.allocate("r", PooledBlocks(5), Tokens(3))
    assert coord.block_table("r", audio) == [1, 2]
    assert coord.slot_mapping("r", audio) == [4, 5, 6, 7, 8]
    assert coord.slot_mapping("r", text) == [4, 5, 6]
    assert coord.seq_len("r", audio) == PooledBlocks(5)
    usage = coord.usage_by_group()
    assert usage["audio"].used == CacheBlocks(2) and usage["audio"].free == CacheBlocks(37)
    assert usage["text"].used == CacheBlocks(1)
    assert coord.group_names == ("audio", "text") and "r" in coord
    assert coord.request_cap("r", audio) == AdmissionCap(
        admission_blocks("sliding_window", 4, 9, None, None, 8, 100)
    )


def test_kernel_inputs_of_a_pooled_group() -> None:
    coord = two_groups()
    audio, text = coord.group("audio", PooledBlocks), coord.group("text", Tokens)
    step = coord.stepper(audio, text)
    coord.admit("r")
    step.allocate("r", PooledBlocks(3), Tokens(1))
    step.allocate("r", PooledBlocks(2), Tokens(1))  # slots 3-4: block 0 row 3, block 1 row 0
    inputs = coord.kernel_inputs("r", audio)
    assert inputs.block_table == (1, 2)
    assert str(inputs.tokens_per_block) == "16 encoder_token/cache_block"
    assert inputs.slot_mapping == (7, 8)
    assert inputs.row_mapping == (16 * 1 + 12, 29, 30, 31, 32, 33, 34, 35)
    assert inputs.seq_len == EncoderTokens(20) and inputs.step_len == EncoderTokens(8)
    assert inputs.pool == PoolFactor(4)
    # A token group reads its own unit: rows are its slots.
    assert coord.kernel_inputs("r", text).row_mapping == (5,)
    assert coord.kernel_inputs("r", text).seq_len == Tokens(2)


# -- errors -----------------------------------------------------------------------------------


def test_errors_pickle_with_their_fields() -> None:
    errors: list[KvUnitsError] = [
        AllocationError(
            "short", group="audio", needed=CacheBlocks(3), free=CacheBlocks(1), request_id="r"
        ),
        AdmissionError(
            "never", request_id="r", group="text", cap=AdmissionCap(9), usable=CacheBlocks(8)
        ),
        RequestError("unknown", request_id="r", group=None),
    ]
    for err in errors:
        copy = pickle.loads(pickle.dumps(err))
        assert type(copy) is type(err) and vars(copy) == vars(err) and str(copy) == str(err)
    assert isinstance(errors[0], RuntimeError) and isinstance(errors[1], ValueError)
    assert isinstance(errors[2], ValueError)


def test_voxtral_from_the_plan_has_the_seed_numbers() -> None:
    p = plan(voxtral_model(), voxtral_engine())
    coord = KVCacheCoordinator.from_plan(p)
    coord.admit("r")
    assert coord.request_cap("r", coord.group("audio", PooledBlocks)) == AdmissionCap(13)
    capacity = coord.usage(coord.group("audio", PooledBlocks)).capacity
    assert capacity == p.group("audio").num_blocks.usable
