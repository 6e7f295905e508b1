"""Entry checks shared by the launchers: the spec, tensor shapes, dtypes, devices, strides,
and the host-side checks of a step's metadata.

Every check raises for a caller's mistake with a message naming the argument, what it got
and what it needed: `kvunits.contracts.UnitTypeError` for a wrong unit,
`kvunits.contracts.SpecError` for a spec the kernels cannot run, `KernelTypeError` for a wrong type
or dtype, `KernelValueError` for a wrong shape, device, stride or value (both `KernelArgumentError`,
under
`kvunits.contracts.KvUnitsError`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from itertools import pairwise
from typing import Final

import torch

from kvunits.contracts import (
    CacheDType,
    KernelSpec,
    KernelUnit,
    SpecError,
    Window,
    exclusive_window_bound,
)
from kvunits.contracts.errors import CacheDTypeError, KernelTypeError, KernelValueError
from kvunits.contracts.internal import ManagedKind, check_kind, describe, kernel_ints

_TORCH_DTYPES: Final[dict[CacheDType, torch.dtype]] = {
    CacheDType.bfloat16: torch.bfloat16,
    CacheDType.float16: torch.float16,
    CacheDType.float32: torch.float32,
}
#: Integer dtypes the kernels take for metadata (offsets, lengths, slots, block ids).
INDEX_DTYPES: Final = (torch.int32, torch.int64)
_CACHE_AXES: Final = "[num_cache_blocks, tokens_per_block, kv_heads, head_size]"


def next_pow2(n: int) -> int:
    """The smallest power of two >= n (1 for n <= 1)."""
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def check_spec(spec: object, kinds: tuple[ManagedKind, ...], launcher: str) -> None:
    """The spec is a derived `KernelSpec` of a kind this launcher runs, with a cache dtype and
    head sizes the kernels support.

    Raises:
        KernelTypeError: not a `KernelSpec`.
        SpecError: a kind, dtype or head size the kernels cannot run.
    """
    if not isinstance(spec, KernelSpec):
        raise KernelTypeError(
            f"{launcher} needs the layer's KernelSpec (kvunits.contracts.kernel_view(layer, "
            f"block_size_slots).expect(EncoderTokens or Tokens)), got {describe(spec)}",
            argument="spec",
        )
    if spec.kind not in kinds:
        raise SpecError(
            f"{launcher} runs {' and '.join(kinds)} layers; this spec is {spec.kind} ({spec})"
        )
    if spec.dtype not in _TORCH_DTYPES:
        raise SpecError(
            f"{launcher} supports bfloat16, float16 and float32 caches, not {spec.dtype.value}"
        )
    ints = kernel_ints(spec)
    if ints.head_size_k < 1 or ints.head_size_v < 1:
        raise SpecError(
            f"{launcher} needs K and V heads of >= 1 element, got head_size_k="
            f"{spec.head_size_k}, head_size_v={spec.head_size_v}"
        )


def torch_dtype(dtype: CacheDType) -> torch.dtype:
    """The torch dtype of a supported cache dtype (see `check_spec`)."""
    return _TORCH_DTYPES[dtype]


def check_tensor(
    name: str,
    tensor: object,
    shape: Sequence[int | None],
    axes: str,
    *,
    dtype: torch.dtype | Sequence[torch.dtype],
    device: torch.device,
    contiguous: bool = False,
) -> torch.Tensor:
    """Check one tensor argument; None in ``shape`` accepts any size on that axis.

    ``contiguous=False`` still needs the last axis to have stride 1 (the kernels read a head
    as one vector); the other axes may have any stride (e.g. K and V views of one tensor).

    Raises:
        KernelTypeError: not a tensor, or another dtype.
        KernelValueError: another shape, device or stride.
    """
    if not isinstance(tensor, torch.Tensor):
        raise KernelTypeError(
            f"{name} must be a torch.Tensor of shape {axes}, got {describe(tensor)}",
            argument=name,
        )
    if tensor.dim() != len(shape) or any(
        want is not None and got != want for got, want in zip(tensor.shape, shape, strict=True)
    ):
        want_text = "[" + ", ".join("*" if s is None else str(s) for s in shape) + "]"
        raise KernelValueError(
            f"{name} must have shape {axes} = {want_text}, got {list(tensor.shape)}",
            argument=name,
        )
    dtypes = (dtype,) if isinstance(dtype, torch.dtype) else tuple(dtype)
    if tensor.dtype not in dtypes:
        raise KernelTypeError(
            f"{name} must be {' or '.join(str(d) for d in dtypes)}, got {tensor.dtype}",
            argument=name,
        )
    if tensor.device != device:
        raise KernelValueError(
            f"{name} is on {tensor.device} but the kernel runs on {device}", argument=name
        )
    if contiguous:
        if not tensor.is_contiguous():
            raise KernelValueError(
                f"{name} must be contiguous, got strides {tensor.stride()}", argument=name
            )
    elif tensor.numel() > 0 and tensor.stride(-1) != 1 and tensor.shape[-1] != 1:
        raise KernelValueError(
            f"{name} must have a contiguous last axis (stride 1), got strides {tensor.stride()}",
            argument=name,
        )
    return tensor


def check_caches(
    k_cache: object, v_cache: object, spec: KernelSpec[KernelUnit], device: torch.device
) -> int:
    """Check a layer's K and V caches against its spec; return ``num_cache_blocks``.

    Both are ``[num_cache_blocks, tokens_per_block, kv_heads, head_size]`` in the spec's
    dtype, with the same number of blocks; only the last axis needs stride 1.
    """
    dtype = torch_dtype(spec.dtype)
    for name, cache in (("k_cache", k_cache), ("v_cache", v_cache)):
        if isinstance(cache, torch.Tensor) and cache.dtype != dtype:
            # The dtype a page was sized with owns it: a unit error, not only a bad tensor.
            group = f"group {spec.group!r}" if spec.group is not None else "this layer"
            raise CacheDTypeError(
                f"{name} is {cache.dtype} but {group} stores {spec.dtype.value} "
                f"({dtype}): its pages were sized with another dtype (another group's cache, "
                "or an engine-wide dtype where the group has its own); allocate the layer's "
                "cache from its own kernel view (allocate_kv_caches)",
                argument=name,
                expected=spec.dtype.value,
                got=str(cache.dtype),
                group=spec.group,
            )
    ints = kernel_ints(spec)
    tokens_per_block, heads = ints.tokens_per_block, ints.kv_heads
    k = check_tensor(
        "k_cache", k_cache, (None, tokens_per_block, heads, ints.head_size_k), _CACHE_AXES,
        dtype=dtype, device=device,
    )  # fmt: skip
    num_blocks = int(k.shape[0])
    check_tensor(
        "v_cache", v_cache, (num_blocks, tokens_per_block, heads, ints.head_size_v), _CACHE_AXES,
        dtype=dtype, device=device,
    )  # fmt: skip
    return num_blocks


def check_step_tensors(starts: torch.Tensor, lens: torch.Tensor, device: torch.device) -> int:
    """Check the step's ``query_start_loc`` and ``seq_lens`` tensors (shape, dtype, device,
    contiguity; no values); return ``num_requests``."""
    num_requests = int(lens.shape[0])
    check_tensor(
        "query_start_loc", starts, (num_requests + 1,), "[num_requests + 1]",
        dtype=INDEX_DTYPES, device=device, contiguous=True,
    )  # fmt: skip
    check_tensor(
        "seq_lens", lens, (num_requests,), "[num_requests]",
        dtype=INDEX_DTYPES, device=device, contiguous=True,
    )  # fmt: skip
    return num_requests


def validate_step(
    starts: torch.Tensor, lens: torch.Tensor, num_rows: int, rows_of: str, what: str
) -> tuple[list[int], list[int]]:
    """Host check of a step's offsets and lengths (costs a device-to-host copy).

    ``query_start_loc`` starts at 0, never decreases and ends within the ``num_rows`` rows of
    ``rows_of``; every request is at least as long as the ``what`` (queries, new positions)
    it brings. Returns both as host lists, for the launcher's own checks.

    Raises:
        KernelValueError: naming the first offset or request at fault.
    """
    host_starts: list[int] = starts.tolist()
    host_lens: list[int] = lens.tolist()
    if host_starts[0] != 0 or any(b < a for a, b in pairwise(host_starts)):
        raise KernelValueError(
            f"query_start_loc must start at 0 and never decrease, got {host_starts[:8]}...",
            argument="query_start_loc",
        )
    if host_starts[-1] > num_rows:
        raise KernelValueError(
            f"query_start_loc ends at {host_starts[-1]} rows but {rows_of} has only {num_rows}",
            argument="query_start_loc",
        )
    for req, seq_len in enumerate(host_lens):
        q_len = host_starts[req + 1] - host_starts[req]
        if seq_len < q_len:
            raise KernelValueError(
                f"request {req} has {q_len} {what} but length {seq_len}: seq_lens counts the "
                f"sequence after this step, its {what} included",
                argument="seq_lens",
            )
    return host_starts, host_lens


def resolve_window(
    spec: KernelSpec[KernelUnit], sliding_window: Window[KernelUnit] | None
) -> int | None:
    """The window the kernel applies, as a plain int of ``spec.seq_unit`` (None: full causal).

    ``sliding_window`` overrides the spec's; by default a sliding-window spec uses its own and
    a full-attention spec none.

    Raises:
        UnitTypeError: ``sliding_window`` is not a `Window` of the spec's kernel unit (a
            length, or another unit).
    """
    if sliding_window is None:
        return kernel_ints(spec).sliding_window_tok
    window = check_kind(sliding_window, Window, spec.seq_unit, "sliding_window")
    # The Triton kernel's convention: key j is visible to query i when j > i - W.
    return exclusive_window_bound(window)


def interpreted(kernel: object) -> bool:
    """Whether ``@triton.jit`` gave Triton's interpreter (``TRITON_INTERPRET=1`` at import)."""
    return type(kernel).__name__ == "InterpretedFunction"


def check_device(device: torch.device, kernel: object, launcher: str, argument: str) -> None:
    """The compiled kernels run on a GPU; on the CPU only Triton's interpreter runs them.

    Raises:
        KernelValueError: CPU tensors without the interpreter, naming how to get it.
    """
    if device.type == "cpu" and not interpreted(kernel):
        raise KernelValueError(
            f"{launcher} got CPU tensors, but its Triton kernel is compiled for a GPU; move "
            "the tensors to a CUDA device, or set TRITON_INTERPRET=1 before importing kernels "
            "to run it in Triton's interpreter (slow; for tests)",
            argument=argument,
        )


def on_device(device: torch.device) -> contextlib.AbstractContextManager[object]:
    """Make ``device`` current for a launch: Triton launches on the *current* CUDA device,
    which need not be the one the tensors live on (a multi-GPU process)."""
    if device.type == "cuda":
        return torch.cuda.device(device)
    return contextlib.nullcontext()
