"""The launchers accept only declared units, and say clearly what else is wrong."""

from __future__ import annotations

import pickle
from typing import Any

import pytest
import torch

from kvunits.contracts import (
    Chunk,
    ChunkedLocalLayer,
    Elements,
    EncoderTokens,
    KVHeads,
    KvUnitsError,
    PooledBlocks,
    PoolFactor,
    SpecError,
    Tokens,
    UnitTypeError,
    UnitValueError,
    Window,
    kernel_view,
)
from kvunits.kernels import (
    BlockTable,
    KernelArgumentError,
    KernelTypeError,
    KernelValueError,
    QueryStartLoc,
    SeqLens,
    SlotMapping,
    paged_attention,
    slot_start_loc,
    unpool_seq_lens,
    write_kv,
)

from ._scenario import DEVICE, PagedCache, Step, make_spec


def _i32(values: list[int]) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.int32, device=DEVICE)


@pytest.fixture
def pooled() -> tuple[PagedCache, Step]:
    """P = 4, 2 pooled slots per block, window 9 encoder tokens; two requests, one step."""
    spec = make_spec(4, 2, 9)
    cache = PagedCache.build(spec, num_requests=2, max_len=24)
    return cache, cache.step([10, 7])


def _attention_args(cache: PagedCache, step: Step) -> dict[str, Any]:
    return {
        "query": cache.rows(step.num_rows, 4, 16),
        "k_cache": cache.k_cache,
        "v_cache": cache.v_cache,
        "block_table": BlockTable(cache.table),
        "query_start_loc": step.query_start_loc,
        "seq_lens": step.seq_lens,
        "spec": cache.spec,
    }


def _write_args(cache: PagedCache, step: Step) -> dict[str, Any]:
    return {
        "key": cache.rows(step.num_rows, 2, 16),
        "value": cache.rows(step.num_rows, 2, 16),
        "k_cache": cache.k_cache,
        "v_cache": cache.v_cache,
        "slot_mapping": step.slot_mapping,
        "query_start_loc": step.query_start_loc,
        "seq_lens": step.seq_lens,
        "spec": cache.spec,
    }


# -- units ------------------------------------------------------------------------------------


def test_manager_unit_lengths_are_rejected(pooled: tuple[PagedCache, Step]) -> None:
    """The seed's bug at the kernel: lengths in pooled blocks where encoder tokens are read."""
    cache, step = pooled
    args = _attention_args(cache, step)
    args["seq_lens"] = SeqLens(_i32([3, 2]), PooledBlocks)
    with pytest.raises(
        UnitTypeError,
        match=r"seq_lens counts pooled_block, but this argument takes encoder_token; "
        r"convert with kvunits.kernels.unpool_seq_lens",
    ) as info:
        paged_attention(**args)
    assert (info.value.field, info.value.expected, info.value.got) == (
        "seq_lens",
        "encoder_token",
        "pooled_block",
    )


@pytest.mark.parametrize("name", ["seq_lens", "query_start_loc"])
def test_bare_tensors_are_rejected(pooled: tuple[PagedCache, Step], name: str) -> None:
    cache, step = pooled
    args = _attention_args(cache, step)
    args[name] = getattr(step, name).tensor_in(EncoderTokens)
    with pytest.raises(UnitTypeError, match=rf"{name} must be a \w+ of encoder_token, got a Tens"):
        paged_attention(**args)


def test_block_table_must_be_wrapped(pooled: tuple[PagedCache, Step]) -> None:
    cache, step = pooled
    args = _attention_args(cache, step)
    args["block_table"] = cache.table
    with pytest.raises(UnitTypeError, match=r"block_table must be a BlockTable"):
        paged_attention(**args)


def test_token_lengths_on_a_pooled_layer(pooled: tuple[PagedCache, Step]) -> None:
    cache, step = pooled
    args = _attention_args(cache, step)
    starts = step.query_start_loc.tensor_in(EncoderTokens)
    # The same tensor relabelled: refused where it is wrapped (it counts encoder tokens).
    with pytest.raises(UnitTypeError, match=r"already counts encoder_token .* cannot count token"):
        QueryStartLoc(starts, Tokens)
    # A tensor of tokens: refused where the launcher takes it.
    args["query_start_loc"] = QueryStartLoc(starts.clone(), Tokens)
    with pytest.raises(UnitTypeError, match="query_start_loc counts token"):
        paged_attention(**args)


def test_window_in_the_wrong_unit_or_kind(pooled: tuple[PagedCache, Step]) -> None:
    cache, step = pooled
    pooled_window = Window(3, PooledBlocks)
    with pytest.raises(
        UnitTypeError,
        match=r"sliding_window must be a Window\[EncoderTokens\] .*, got 3 pooled_block \(a win",
    ):
        # The point of the test: mypy rejects this call too.
        paged_attention(**_attention_args(cache, step), sliding_window=pooled_window)  # type: ignore[arg-type]
    with pytest.raises(UnitTypeError, match=r"got 3 encoder_token: a length is not a window"):
        paged_attention(**_attention_args(cache, step), sliding_window=EncoderTokens(3))  # type: ignore[call-overload]
    with pytest.raises(UnitValueError, match="window must be >= 1"):
        Window(0, EncoderTokens)


def test_write_takes_manager_slots(pooled: tuple[PagedCache, Step]) -> None:
    cache, step = pooled
    args = _write_args(cache, step)
    slots = step.slot_mapping.tensor_in(PooledBlocks).clone()
    args["slot_mapping"] = SlotMapping(slots, Tokens)
    with pytest.raises(UnitTypeError, match=r"slot_mapping counts token, but .* pooled_block"):
        write_kv(**args)
    args = _write_args(cache, step)
    args["seq_lens"] = SeqLens(_i32([3, 2]), PooledBlocks)
    with pytest.raises(UnitTypeError, match="seq_lens counts pooled_block"):
        write_kv(**args)


def test_unpooled_layer_takes_tokens() -> None:
    spec = make_spec(None, 4, 5)
    cache = PagedCache.build(spec, num_requests=1, max_len=8)
    step = cache.step([6])
    assert step.slot_mapping.unit is Tokens
    args = _write_args(cache, step)
    args["key"] = cache.rows(6, 2, 16)
    args["value"] = cache.rows(6, 2, 16)
    write_kv(**args)
    args["slot_mapping"] = SlotMapping(step.slot_mapping.tensor_in(Tokens).clone(), PooledBlocks)
    with pytest.raises(UnitTypeError, match=r"slot_mapping counts pooled_block, but .* token"):
        write_kv(**args)


def test_typed_tensor_construction() -> None:
    with pytest.raises(UnitTypeError, match=r"SeqLens counts EncoderTokens \| PooledBlocks \| Tok"):
        SeqLens(_i32([1]), int)  # type: ignore[type-var]  # the point: no unit class
    with pytest.raises(UnitTypeError, match=r"SlotMapping counts PooledBlocks \| Tokens"):
        SlotMapping(_i32([1]), EncoderTokens)  # type: ignore[type-var]  # kernel unit: wrong
    with pytest.raises(
        KernelTypeError, match=r"SeqLens must be int32 or int64, got torch\.float32"
    ):
        SeqLens(torch.ones(2), EncoderTokens)
    with pytest.raises(
        KernelValueError, match=r"BlockTable must have shape \[num_requests, max_blo"
    ):
        BlockTable(_i32([1, 2]))
    with pytest.raises(KernelTypeError, match="SeqLens wraps a torch integer tensor"):
        SeqLens([1, 2], EncoderTokens)  # type: ignore[arg-type]  # the point: a list
    assert repr(SeqLens(torch.tensor([3]), Tokens)) == "SeqLens[token](tensor([3]))"


# -- the pooled-length conversion ---------------------------------------------------------------


def test_unpool_seq_lens() -> None:
    lens = SeqLens(torch.tensor([188, 14, 0]), PooledBlocks)
    exact = unpool_seq_lens(lens, PoolFactor(4), last_block_tokens=torch.tensor([2, 4, 3]))
    assert exact.unit is EncoderTokens
    assert exact.tensor_in(EncoderTokens).tolist() == [750, 56, 0]
    assert unpool_seq_lens(lens, PoolFactor(4)).tensor_in(EncoderTokens).tolist() == [752, 56, 0]
    with pytest.raises(UnitValueError, match=r"last_block_tokens\[1\] is 5 encoder_token"):
        unpool_seq_lens(lens, PoolFactor(4), last_block_tokens=torch.tensor([1, 5, 1]))
    with pytest.raises(UnitTypeError, match=r"seq_lens counts encoder_token, but .* pooled_block"):
        unpool_seq_lens(exact, PoolFactor(4))  # type: ignore[arg-type]  # the point


# -- specs, shapes, dtypes, devices, strides ------------------------------------------------------


def test_unsupported_specs(pooled: tuple[PagedCache, Step]) -> None:
    cache, step = pooled
    chunked = kernel_view(
        ChunkedLocalLayer(
            chunk=Chunk(64, EncoderTokens),
            pool=PoolFactor(4),
            kv_heads=KVHeads(2),
            head_size=Elements(16),
        ),
        2,
    )
    with pytest.raises(SpecError, match="paged_attention runs sliding_window and full_attention"):
        paged_attention(**{**_attention_args(cache, step), "spec": chunked})
    fp8 = make_spec(4, 2, 9, dtype="fp8_e4m3")
    with pytest.raises(SpecError, match="not fp8_e4m3"):
        paged_attention(**{**_attention_args(cache, step), "spec": fp8})
    with pytest.raises(KernelTypeError, match="needs the layer's KernelSpec"):
        paged_attention(**{**_attention_args(cache, step), "spec": object()})


@pytest.mark.parametrize(
    ("name", "bad", "error", "message"),
    [
        ("query", lambda t: t[..., :8], KernelValueError,
         r"query must have shape \[num_rows, num_heads, head_size_k\] = \[\*, \*, 16\], got \[17"),
        ("query", lambda t: t.to(torch.float16), KernelTypeError,
         r"query must be torch\.float32, got torch\.float16"),
        ("query", lambda t: t[:, :3], KernelValueError,
         "query has 3 heads, not a positive multiple of the layer's 2 KV heads"),
        ("query", lambda t: t.transpose(0, 2).contiguous().transpose(0, 2), KernelValueError,
         "query must have a contiguous last axis"),
        ("k_cache", lambda t: t[:, :4], KernelValueError,
         r"k_cache must have shape .* = \[\*, 8, 2, 16\]"),
        ("v_cache", lambda t: t[:-1], KernelValueError, "v_cache must have shape"),
        ("k_cache", lambda t: t.to("meta"), KernelValueError,
         "k_cache is on meta but the kernel runs on"),
        ("block_table", lambda t: BlockTable(t.tensor.T.contiguous().T), KernelValueError,
         r"block_table must be contiguous"),
        ("query_start_loc", lambda t: QueryStartLoc(t.tensor_in(EncoderTokens)[:-1], EncoderTokens),
         KernelValueError, r"query_start_loc must have shape \[num_requests \+ 1\] = \[3\]"),
    ],
)  # fmt: skip
def test_tensor_checks(
    pooled: tuple[PagedCache, Step], name: str, bad: Any, error: type[Exception], message: str
) -> None:
    cache, step = pooled
    args = _attention_args(cache, step)
    args[name] = bad(args[name])
    with pytest.raises(error, match=message) as info:
        paged_attention(**args)
    assert isinstance(info.value, KernelArgumentError)  # under KvUnitsError
    assert info.value.argument == name


def test_value_checks(pooled: tuple[PagedCache, Step]) -> None:
    cache, step = pooled
    args = _attention_args(cache, step)
    with pytest.raises(KernelValueError, match="request 1 has 7 queries but length 3"):
        paged_attention(**{**args, "seq_lens": SeqLens(_i32([10, 3]), EncoderTokens)})
    with pytest.raises(KernelValueError, match=r"request 0 has length 40 but .* 4 blocks × 8 = 32"):
        paged_attention(**{**args, "seq_lens": SeqLens(_i32([40, 7]), EncoderTokens)})
    bad_table = cache.table.clone()
    bad_table[0, 0] = 10_000
    with pytest.raises(KernelValueError, match=r"block_table holds ids 1\.\.10000"):
        paged_attention(**{**args, "block_table": BlockTable(bad_table)})
    with pytest.raises(KernelValueError, match="query_start_loc must start at 0 and never decr"):
        bad_starts = QueryStartLoc(_i32([0, 12, 10]), EncoderTokens)
        paged_attention(**{**args, "query_start_loc": bad_starts})
    with pytest.raises(KernelValueError, match="query_start_loc ends at 20 rows but query has "):
        paged_attention(
            **{**args, "query_start_loc": QueryStartLoc(_i32([0, 10, 20]), EncoderTokens)}
        )
    padded = cache.table.clone()
    padded[1, 3] = -1  # a column past request 1's length: still refused, 0 is the padding
    with pytest.raises(
        KernelValueError, match=r"holds ids -1\.\..*pad a table with the null block 0"
    ):
        paged_attention(**{**args, "block_table": BlockTable(padded)})
    with pytest.raises(KernelTypeError, match=r"out must be torch\.float32, got torch\.float16"):
        out = torch.empty(17, 4, 16, dtype=torch.float16, device=DEVICE)
        paged_attention(**args, out=out)


def test_write_value_checks(pooled: tuple[PagedCache, Step]) -> None:
    cache, step = pooled
    args = _write_args(cache, step)
    short = SlotMapping(
        step.slot_mapping.tensor_in(step.slot_mapping.unit)[:-1].contiguous(), PooledBlocks
    )
    with pytest.raises(KernelValueError, match=r"slot_mapping has 4 entries but .* touch 5 slots"):
        write_kv(**{**args, "slot_mapping": short})
    huge = SlotMapping(torch.full((5,), 10_000, device=DEVICE), PooledBlocks)
    with pytest.raises(KernelValueError, match=r"slot_mapping holds slots 10000\.\.10000; valid"):
        write_kv(**{**args, "slot_mapping": huge})
    with pytest.raises(
        KernelValueError, match=r"value must have shape \[num_rows, kv_heads, head_s"
    ):
        write_kv(**{**args, "value": args["value"][:-1]})
    with pytest.raises(KernelValueError, match="query_start_loc ends at 17 rows but key has only"):
        write_kv(**{**args, "key": args["key"][:-1], "value": args["value"][:-1]})
    with pytest.raises(KernelValueError, match="request 1 has 7 new positions but length 3: seq"):
        write_kv(**{**args, "seq_lens": SeqLens(_i32([10, 3]), EncoderTokens)})
    slots = step.slot_mapping.tensor_in(step.slot_mapping.unit).clone()
    slots[3] = -2
    with pytest.raises(KernelValueError, match=r"slot_mapping holds slots -2\.\..*and -1 \(skip\)"):
        write_kv(**{**args, "slot_mapping": SlotMapping(slots, PooledBlocks)})
    slots[3] = 1  # slot 1 of cache block 0 (2 slots per block): the null block
    with pytest.raises(
        KernelValueError, match=r"slot_mapping\[3\] is slot 1, in the null block 0 \(slots 0\.\.1\)"
    ):
        write_kv(**{**args, "slot_mapping": SlotMapping(slots, PooledBlocks)})


def test_slot_starts_shared_by_layers(pooled: tuple[PagedCache, Step]) -> None:
    """A step's slot_start_loc, computed once, serves every layer; a wrong one is refused."""
    cache, step = pooled
    args = _write_args(cache, step)
    starts = slot_start_loc(step.query_start_loc, step.seq_lens, cache.spec)
    assert starts.tolist() == [0, 3, 5]  # request 0: pooled slots 0..2, request 1: 0..1
    write_kv(**args, slot_starts=starts)
    with pytest.raises(KernelValueError, match=r"slot_starts is \[0, 2, 5\]... but this step's"):
        write_kv(**args, slot_starts=_i32([0, 2, 5]))
    with pytest.raises(
        KernelValueError, match=r"slot_starts must have shape \[num_requests \+ 1\]"
    ):
        write_kv(**args, slot_starts=starts[:-1])


@pytest.mark.parametrize("error", [KernelTypeError, KernelValueError])
def test_argument_errors_join_the_tree_and_pickle(error: type[KernelArgumentError]) -> None:
    exc = error("k_cache must be torch.bfloat16, got torch.float32", argument="k_cache")
    builtin = TypeError if error is KernelTypeError else ValueError
    assert {KernelArgumentError, KvUnitsError, builtin} <= set(type(exc).__mro__)
    again = pickle.loads(pickle.dumps(exc))
    assert type(again) is error
    assert (str(again), again.argument) == (str(exc), "k_cache")


def test_cpu_tensors_need_the_interpreter() -> None:
    from kvunits.kernels._checks import check_device

    compiled_kernel = object()  # what @triton.jit gives without TRITON_INTERPRET
    with pytest.raises(KernelValueError, match="set TRITON_INTERPRET=1 before importing kern"):
        check_device(torch.device("cpu"), compiled_kernel, "paged_attention", "query")


def test_block_tables_and_slot_mappings_are_built_from_their_own_ids() -> None:
    from kvunits.contracts import BlockIds, SlotIds

    rows = [BlockIds([5, 7], owner="audio"), BlockIds([3], owner="audio")]
    table = BlockTable.from_rows(rows)
    assert table.tensor.tolist() == [[5, 7], [3, 0]] and table.tensor.dtype == torch.int32
    assert BlockTable.from_rows(rows, width=4).tensor.shape == (2, 4)
    slots = SlotMapping.from_ids(SlotIds([80, 81, 112], PooledBlocks, owner="audio"))
    assert slots.unit is PooledBlocks
    assert slots.tensor_in(PooledBlocks).tolist() == [80, 81, 112]
    # Each refuses the other, at run time as mypy does.
    with pytest.raises(UnitTypeError, match="a slot mapping is not a block table"):
        BlockTable.from_rows([SlotIds([80], PooledBlocks)])  # type: ignore[list-item]
    with pytest.raises(UnitTypeError, match="a block table is not a slot mapping"):
        SlotMapping.from_ids(BlockIds([5, 7]))  # type: ignore[arg-type]
    with pytest.raises(UnitTypeError, match="got a slot mapping"):
        BlockTable(slots)  # type: ignore[arg-type]
    with pytest.raises(UnitTypeError, match="one BlockTable holds one group's"):
        BlockTable.from_rows([BlockIds([1], owner="audio"), BlockIds([2], owner="text")])
