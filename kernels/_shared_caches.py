"""KV-cache tensors of a shared-pool plan, laid out byte for byte as vLLM 0.33 lays them out.

With ``kv_cache_layout = "shared"`` (`kvunits.runtime.shared_pool`) every group draws its block
ids from one pool, so block ``b`` must be one page of every layer of whichever group holds it.
vLLM 0.33 builds this from one backing allocation (``vllm/v1/core/kv_cache_planning.py``:
``get_kv_cache_config_from_groups``; ``vllm/v1/worker/utils.py``: ``allocate_kv_cache``;
``vllm/v1/kv_cache_interface.py``: ``KVCacheTensor``, ``compute_layout_strides``,
``create_kv_cache_views``), and so does `shared_views`:

* One int8 buffer of ``num_blocks × page × layers_per_block`` bytes (the plan's
  ``block_bytes`` per block).
* Layer ``l`` of *each* group (the ``l``-th of its ``layer_names``) sits on the same bytes:
  the groups overlay each other, which is sound because a block id belongs to one group at a
  time. A group with fewer layers leaves the last positions unused (vLLM's padding layers).
  Older vLLM said the same with one raw tensor per position, ``KVCacheTensor(size,
  shared_by=[one layer of each group])``.
* Each layer views its bytes as vLLM's logical ``[B, H, N, C]``, with its own shape and dtype:
  ``H`` KV heads, ``N = tokens_per_block`` kernel positions (``block_size × P`` encoder tokens
  for a pooled layer, at its group's unified block size), ``C = head_size_k + head_size_v``
  elements, K then V in one cell; the strides follow the layout's physical axis order
  (``LBNHC``, vLLM's default and FlashAttention's NHD: ``[L, B, N, H, C]`` in memory).
  ``k_cache``/``v_cache`` are its ``[B, N, H, :head_size_k]`` and ``[..., head_size_k:]``
  slices: what vLLM's FlashAttention backend takes
  (``kv_cache.transpose(1, 2).split(head_size, dim=-1)``) and kvunits' kernels take.

Which layouts keep the groups apart: block ``b`` of one group must share no byte with a block
``b' ≠ b`` of another. That holds when the block axis lies outside the head and position
axes (``LB…``: each layer's page is one run; ``B…``: each block is one run). ``LHBNC`` puts
heads outside blocks, so two groups whose pages differ in shape (Voxtral's audio page is 32
heads × 64 positions, its text page 8 × 128) overlay *other* blocks of each other: refused
unless every group's page has one shape (vLLM 0.33 lays it out anyway). Block-outermost
layouts (``B…``) are how vLLM stores pages of *different* sizes side by side without
unifying them (``_get_packed_kv_cache_groups``: other groups, other block sizes); a plan
whose pages were unified is refused with them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, Literal

import torch

from kvunits.contracts import AnyLayerGroup, KernelSpec, Layers, SpecError
from kvunits.contracts.internal import kernel_ints, manager_ints

from ._checks import _TORCH_DTYPES, torch_dtype

#: vLLM 0.33's ``KVCacheLayout`` names: the physical order of the logical axes.
PhysicalLayout = Literal["LBNHC", "LBHNC", "LHBNC", "BLNHC", "BLHNC", "BHLNC"]

_L, _B, _H, _N, _C = range(5)

#: Each layout's physical axis order, outermost first (``vllm/v1/kv_cache_layout.py``).
LAYOUT_ORDERS: Final[dict[str, tuple[int, int, int, int, int]]] = {
    "LBHNC": (_L, _B, _H, _N, _C),
    "LBNHC": (_L, _B, _N, _H, _C),
    "LHBNC": (_L, _H, _B, _N, _C),
    "BLHNC": (_B, _L, _H, _N, _C),
    "BLNHC": (_B, _L, _N, _H, _C),
    "BHLNC": (_B, _H, _L, _N, _C),
}


def layout_strides(
    shape: tuple[int, int, int, int, int], order: tuple[int, ...], block_stride: int | None
) -> tuple[int, ...]:
    """Byte strides of the logical ``[L, B, H, N, C]`` (``C`` in bytes) stored in ``order``:
    each axis steps over everything inside it; ``block_stride`` (block-outermost layouts:
    the widest group's block) fixes the block axis's (vLLM's ``compute_layout_strides``
    for unpadded pages).

    Example:
        Voxtral's text layers in a pool of 10 blocks: 8 heads × 128 positions × 512 byte
        (K and V of 128 bf16 each), a 512 KiB page; ``[L, B, N, H, C]`` in memory (the
        strides vLLM's ``KVCacheTensor`` gives them: layer_stride 5242880, block_stride
        524288).

        >>> layout_strides((26, 10, 8, 128, 512), LAYOUT_ORDERS["LBNHC"], None)
        (5242880, 524288, 512, 4096, 1)
    """
    strides = [0] * 5
    step = 1
    for axis in reversed(order):
        strides[axis] = block_stride if axis == _B and block_stride is not None else step
        step = strides[axis] * shape[axis]
    return tuple(strides)


def shared_views(
    groups: Sequence[AnyLayerGroup],
    num_blocks: int,
    block_size_slots: int,
    layout: str,
    device: torch.device | str | None,
) -> dict[str, tuple[torch.Tensor, torch.Tensor | None]]:
    """Every attention layer's ``(k_cache, v_cache)`` views of one backing buffer (see the
    module docstring). State layers hold bytes at their positions but get no view.

    Args:
        groups: the plan's groups (pages unified, split to at most ``layers_per_block``).
        num_blocks: the pool's blocks, the null block included.
        block_size_slots: the engine's block size: a group whose block size differs grew
            to unify the pages.
        layout: a vLLM ``KVCacheLayout`` name.
        device: where the buffer goes.

    Raises:
        SpecError: an unknown layout, a layout that cannot hold these groups apart or that
            vLLM lays out otherwise (see the module docstring), or a dtype the kernels do
            not take.
    """
    order = LAYOUT_ORDERS.get(layout)
    if order is None:
        raise SpecError(
            f"layout {layout!r} is not one of vLLM's KV-cache layouts: use one of "
            + ", ".join(LAYOUT_ORDERS)
        )
    page_bytes = manager_ints(groups[0].manager).page_size_bytes
    layers = [g.num_layers.numerical_value_in(Layers) for g in groups]
    positions = max(layers)
    block_outermost = order[0] == _B
    grown = [g.name for g in groups if manager_ints(g.manager).block_size_slots != block_size_slots]
    if block_outermost and grown:
        raise SpecError(
            f"layout {layout} is block-outermost, with which vLLM stores pages of different "
            f"sizes side by side in each block instead of unifying them (other groups, other "
            f"block sizes), but this plan unified the pages (groups {', '.join(grown)} grew "
            "their block size): use a layer-outermost layout (LBNHC, LBHNC)"
        )
    kernels = [(name, spec) for g in groups for name, spec in g.kernels.items()]
    for name, spec in kernels:
        if spec.dtype not in _TORCH_DTYPES:
            raise SpecError(
                f"layer {name!r}: the kernels take {', '.join(map(str, _TORCH_DTYPES))} "
                f"caches, not {spec.dtype}; plan with another cache_dtype"
            )
    shapes = {_page_shape(spec) for _, spec in kernels}
    if order.index(_B) > min(order.index(_H), order.index(_N)) and len(shapes) > 1:
        raise SpecError(
            f"layout {layout} puts heads or positions outside the block axis, so groups whose "
            f"pages differ in shape ({', '.join(sorted(map(_shape_text, shapes)))}) would "
            "overlay other blocks of each other: a block freed by one group and taken by "
            "another would corrupt live pages. Use a layout with the block axis outside "
            "(LBNHC, LBHNC)"
        )
    block_bytes = page_bytes * positions
    raw = torch.empty(num_blocks * block_bytes, dtype=torch.int8, device=device)
    views: dict[str, tuple[torch.Tensor, torch.Tensor | None]] = {}
    for group, num_layers in zip(groups, layers, strict=True):
        for position, name in enumerate(group.layer_names):
            kernel = group.kernels.get(name)
            if kernel is None:
                continue  # a state layer: its bytes are its state's, read by no kernel here
            heads, rows, head_k, head_v = _page_shape(kernel)
            dtype = torch_dtype(kernel.dtype)
            cell_bytes = (head_k + head_v) * dtype.itemsize
            # Internal: the plan unified every group's page to one size.
            assert heads * rows * cell_bytes == page_bytes, (name, page_bytes)
            strides = layout_strides(
                (num_layers, num_blocks, heads, rows, cell_bytes),
                order,
                block_bytes if block_outermost else None,
            )
            layer = torch.as_strided(
                raw,
                (num_blocks, heads, rows, cell_bytes),
                strides[1:],
                raw.storage_offset() + position * strides[_L],
            )
            cells = layer.view(dtype).transpose(1, 2)  # [B, N, H, head_k + head_v]
            views[name] = (cells[..., :head_k], cells[..., head_k:] if head_v else None)
    return views


def _page_shape(spec: KernelSpec[Any]) -> tuple[int, int, int, int]:
    """A layer's page as (kv heads, positions, head_size_k, head_size_v), plain ints."""
    ints = kernel_ints(spec)
    return ints.kv_heads, ints.tokens_per_block, ints.head_size_k, ints.head_size_v


def _shape_text(shape: tuple[int, int, int, int]) -> str:
    heads, rows, head_k, head_v = shape
    return f"{heads} heads × {rows} positions × {head_k}+{head_v}"
