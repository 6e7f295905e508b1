"""Entry checks shared by the launchers: the spec, tensor shapes, dtypes, devices, strides.

Every check raises for a caller's mistake with a message naming the argument, what it got
and what it needed: `contracts.UnitTypeError` for a wrong unit, `contracts.SpecError` for a
spec the kernels cannot run, ``TypeError`` for a wrong dtype or type, ``ValueError`` for a
wrong shape, device, stride or value.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import torch

from contracts import (
    CacheDType,
    KernelSpec,
    KernelUnit,
    ManagedKind,
    SpecError,
    UnitValueError,
    check_quantity,
    describe,
)

_TORCH_DTYPES: Final[dict[CacheDType, torch.dtype]] = {
    CacheDType.bfloat16: torch.bfloat16,
    CacheDType.float16: torch.float16,
    CacheDType.float32: torch.float32,
}

def next_pow2(n: int) -> int:
    """The smallest power of two >= n (1 for n <= 1)."""
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def check_spec(spec: object, kinds: tuple[ManagedKind, ...], launcher: str) -> None:
    """The spec is a derived `KernelSpec` of a kind this launcher runs, with a cache dtype and
    head sizes the kernels support.

    Raises:
        TypeError: not a `KernelSpec`.
        SpecError: a kind, dtype or head size the kernels cannot run.
    """
    if not isinstance(spec, KernelSpec):
        raise TypeError(
            f"{launcher} needs the layer's KernelSpec (contracts.kernel_view(layer, "
            f"block_size_slots).expect(EncoderTokens or Tokens)), got {describe(spec)}"
        )
    if spec.kind not in kinds:
        raise SpecError(
            f"{launcher} runs {' and '.join(kinds)} layers; this spec is {spec.kind} ({spec})"
        )
    if spec.dtype not in _TORCH_DTYPES:
        raise SpecError(
            f"{launcher} supports bfloat16, float16 and float32 caches, not {spec.dtype.value}"
        )
    if spec.head_size_k < 1 or spec.head_size_v < 1:
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
    """
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of shape {axes}, got {describe(tensor)}")
    if tensor.dim() != len(shape) or any(
        want is not None and got != want for got, want in zip(tensor.shape, shape, strict=True)
    ):
        want_text = "[" + ", ".join("*" if s is None else str(s) for s in shape) + "]"
        raise ValueError(
            f"{name} must have shape {axes} = {want_text}, got {list(tensor.shape)}"
        )
    dtypes = (dtype,) if isinstance(dtype, torch.dtype) else tuple(dtype)
    if tensor.dtype not in dtypes:
        raise TypeError(
            f"{name} must be {' or '.join(str(d) for d in dtypes)}, got {tensor.dtype}"
        )
    if tensor.device != device:
        raise ValueError(f"{name} is on {tensor.device} but the kernel runs on {device}")
    if contiguous:
        if not tensor.is_contiguous():
            raise ValueError(f"{name} must be contiguous, got strides {tensor.stride()}")
    elif tensor.numel() > 0 and tensor.stride(-1) != 1 and tensor.shape[-1] != 1:
        raise ValueError(
            f"{name} must have a contiguous last axis (stride 1), got strides {tensor.stride()}"
        )
    return tensor


def resolve_window(spec: KernelSpec[KernelUnit], window: KernelUnit | None) -> int | None:
    """The window the kernel applies, as a plain int of ``spec.seq_unit`` (None: full causal).

    ``window`` overrides the spec's; by default a sliding-window spec uses its own window and
    a full-attention spec none.

    Raises:
        UnitTypeError: ``window`` is not in the spec's kernel unit.
        UnitValueError: ``window`` is 0.
    """
    if window is None:
        return spec.window_tokens
    value = check_quantity(window, spec.seq_unit, "window").value
    if value < 1:
        raise UnitValueError(
            f"a sliding window must be >= 1 {spec.seq_unit.unit} (it holds the current "
            f"position), got {window}",
            field="window",
            expected=f"an int >= 1 of {spec.seq_unit.unit}",
            got=str(window),
        )
    return value


def interpreted(kernel: object) -> bool:
    """Whether ``@triton.jit`` gave Triton's interpreter (``TRITON_INTERPRET=1`` at import)."""
    return type(kernel).__name__ == "InterpretedFunction"


def check_device(device: torch.device, kernel: object, launcher: str) -> None:
    """The compiled kernels run on a GPU; on the CPU only Triton's interpreter runs them.

    Raises:
        ValueError: CPU tensors without the interpreter, naming how to get it.
    """
    if device.type == "cpu" and not interpreted(kernel):
        raise ValueError(
            f"{launcher} got CPU tensors, but its Triton kernel is compiled for a GPU; move "
            "the tensors to a CUDA device, or set TRITON_INTERPRET=1 before importing kernels "
            "to run it in Triton's interpreter (slow; for tests)"
        )
