"""A toy paged cache for the kernel tests: specs, random block tables, streamed steps.

Every position is written in the kernel's unit (encoder tokens for a pooled layer); slot
mappings are built in the manager's unit from the block table, as a cache manager would:
pooled slot ``ps`` of request r is slot ``table[r, ps // block_size] × block_size + ps %
block_size``. Caches start as NaN, so a kernel that reads a row nobody wrote (the null block,
an evicted block, a row past a request's length) produces NaN and fails the comparison.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import torch

from kvunits.contracts import (
    CacheDType,
    Elements,
    EncoderTokens,
    FullAttentionLayer,
    KernelSpec,
    KVHeads,
    PooledBlocks,
    PoolFactor,
    SlidingWindowLayer,
    Tokens,
    Window,
    kernel_view,
)
from kvunits.contracts.internal import cdiv
from kvunits.kernels import QueryStartLoc, SeqLens, SlotMapping

#: Where the kernels run: the GPU when there is one and the interpreter is not forced.
DEVICE = torch.device(
    "cuda" if torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1" else "cpu"
)

#: (atol, rtol) against the fp32 torch reference, per input dtype: the kernel rounds the
#: softmax probabilities to the input dtype before P·V, as FlashAttention does.
TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float32: (2e-5, 2e-5),
    torch.float16: (2e-3, 2e-3),
    torch.bfloat16: (1.6e-2, 1.6e-2),
}

TORCH_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def make_spec(
    pool: int | None,
    block_size: int,
    sliding_window: int | None,
    *,
    kv_heads: int = 2,
    head_k: int = 16,
    head_v: int | None = None,
    dtype: str = "float32",
) -> KernelSpec[Any]:
    """The kernel view of a layer: pooled by ``pool`` (encoder tokens) or unpooled (tokens)."""
    common: dict[str, Any] = {
        "kv_heads": KVHeads(kv_heads),
        "head_size": Elements(head_k),
        "head_size_v": None if head_v is None else Elements(head_v),
        "dtype": CacheDType(dtype),
        "pool": None if pool is None else PoolFactor(pool),
    }
    if sliding_window is None:
        layer: FullAttentionLayer | SlidingWindowLayer = FullAttentionLayer(**common)
    else:
        window = (
            Window(sliding_window, Tokens)
            if pool is None
            else Window(sliding_window, EncoderTokens)
        )
        layer = SlidingWindowLayer(sliding_window=window, **common)
    spec: KernelSpec[Any] = kernel_view(layer, block_size)
    return spec


@dataclass
class Step:
    """One scheduled step: the metadata every kernel of the step takes."""

    q_lens: list[int]
    context: list[int]
    query_start_loc: QueryStartLoc[Any]
    seq_lens: SeqLens[Any]
    slot_mapping: SlotMapping[Any]

    @property
    def num_rows(self) -> int:
        return sum(self.q_lens)


@dataclass
class PagedCache:
    """K/V caches of one layer plus the block tables of ``num_requests`` requests."""

    spec: KernelSpec[Any]
    k_cache: torch.Tensor
    v_cache: torch.Tensor
    table: torch.Tensor
    lens: list[int]
    generator: torch.Generator = field(repr=False)

    @classmethod
    def build(
        cls,
        spec: KernelSpec[Any],
        num_requests: int,
        max_len: int,
        *,
        seed: int = 0,
        joint: bool = False,
    ) -> PagedCache:
        """Random distinct blocks per request (never 0, the null block); NaN everywhere.

        ``joint``: K and V are views of one ``[N, 2, tokens_per_block, heads, head]`` tensor
        (non-contiguous caches; needs equal K and V head sizes).
        """
        gen = torch.Generator().manual_seed(seed)
        tpb = spec.tokens_per_block.numerical_value_in(spec.seq_unit)
        width = cdiv(max_len, tpb) + 1
        num_blocks = 1 + num_requests * width + 3
        ids = torch.randperm(num_blocks - 1, generator=gen)[: num_requests * width] + 1
        table = ids.view(num_requests, width).to(torch.int32)
        dtype = TORCH_DTYPES[spec.dtype.value]
        heads, hk, hv = (
            spec.kv_heads.numerical_value_in(KVHeads),
            spec.head_size_k.numerical_value_in(Elements),
            spec.head_size_v.numerical_value_in(Elements),
        )
        nan = float("nan")
        if joint:
            assert hk == hv
            both = torch.full((num_blocks, 2, tpb, heads, hk), nan, dtype=dtype)
            k_cache, v_cache = both[:, 0], both[:, 1]
        else:
            k_cache = torch.full((num_blocks, tpb, heads, hk), nan, dtype=dtype)
            v_cache = torch.full((num_blocks, tpb, heads, hv), nan, dtype=dtype)
        return cls(
            spec=spec,
            k_cache=k_cache.to(DEVICE),
            v_cache=v_cache.to(DEVICE),
            table=table.to(DEVICE),
            lens=[0] * num_requests,
            generator=gen,
        )

    @property
    def pool(self) -> int:
        return self.spec.pool.tokens_per_block

    @property
    def block_size_slots(self) -> int:
        return self.spec.tokens_per_block.numerical_value_in(self.spec.seq_unit) // self.pool

    def clone(self) -> PagedCache:
        return PagedCache(
            spec=self.spec,
            k_cache=self.k_cache.clone(),
            v_cache=self.v_cache.clone(),
            table=self.table.clone(),
            lens=list(self.lens),
            generator=self.generator,
        )

    def step(self, q_lens: list[int], *, skip_slots: frozenset[int] = frozenset()) -> Step:
        """Schedule ``q_lens[r]`` new positions for each request and advance the lengths.

        ``skip_slots``: indices of slot-mapping entries to replace by -1 (padding).
        """
        unit = self.spec.seq_unit
        manager = PooledBlocks if unit is EncoderTokens else Tokens
        p, bs = self.pool, self.block_size_slots
        table = self.table.cpu().tolist()
        starts, slots, context = [0], [], []
        for r, q_len in enumerate(q_lens):
            ctx = self.lens[r]
            seq = ctx + q_len
            context.append(ctx)
            starts.append(starts[-1] + q_len)
            if q_len:
                for ps in range(ctx // p, cdiv(seq, p)):
                    slots.append(table[r][ps // bs] * bs + ps % bs)
            self.lens[r] = seq
        slots = [-1 if i in skip_slots else s for i, s in enumerate(slots)]

        def tensor(values: list[int], dtype: torch.dtype = torch.int32) -> torch.Tensor:
            return torch.tensor(values, dtype=dtype, device=DEVICE)

        return Step(
            q_lens=list(q_lens),
            context=context,
            query_start_loc=QueryStartLoc(tensor(starts), unit),
            seq_lens=SeqLens(tensor(self.lens), unit),
            slot_mapping=SlotMapping(tensor(slots, torch.int64), manager),
        )

    def rows(self, num_rows: int, heads: int, head: int) -> torch.Tensor:
        """Random rows in the cache dtype (normal, so softmax is neither flat nor one-hot)."""
        data = torch.randn(num_rows, heads, head, generator=self.generator)
        return data.to(TORCH_DTYPES[self.spec.dtype.value]).to(DEVICE)

    def evict_outside(self, step: Step, window: int | None) -> int:
        """Drop every block no query of ``step`` needs: null it in the table, poison it.

        The tightest eviction a manager could do: a column whose positions all lie below
        ``context − W + 1`` (the first query's window) of its request. Returns how many
        entries were nulled.
        """
        if window is None:
            return 0
        tpb = self.spec.tokens_per_block.numerical_value_in(self.spec.seq_unit)
        dropped = 0
        for r, (ctx, q_len) in enumerate(zip(step.context, step.q_lens, strict=True)):
            if q_len == 0:
                continue
            first_needed = max(0, ctx - window + 1)
            for col in range(first_needed // tpb):
                blk = int(self.table[r, col])
                if blk:
                    self.k_cache[blk] = float("nan")
                    self.v_cache[blk] = float("nan")
                    self.table[r, col] = 0
                    dropped += 1
        return dropped
