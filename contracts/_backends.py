"""A `Window` handed to an attention backend, in that backend's own convention, named.

A window of W positions is the current position and the W − 1 before it (`Window`), and
each attention library writes that number its own way. Passing ``window`` as its plain number
to a backend that counts differently reads one key too many or too few, silently:

================================ ===================================== =================
backend                          its convention (documented)           a window of W is
================================ ===================================== =================
FlashAttention ``window_size``   query i attends keys                  ``(W − 1, 0)``
                                 ``[i − left, i + right]`` inclusive
FlashInfer ``window_left``       "the left (inclusive) window size"    ``W − 1``
exclusive bound (the Triton      key j visible when ``j > i − bound``  ``W``
kernels here, xformers' local
masks, vLLM's ``sliding_window``)
PyTorch SDPA ``attn_mask``       boolean, True takes part              ``kvunits.kernels.
                                                                       sdpa_window_mask``
================================ ===================================== =================

Each conversion takes a window in a kernel's unit (`EncoderTokens` or `Tokens`): the
manager's ``Window[PooledBlocks]`` counts slots, not the positions a kernel attends over
(the seed's mistake, in the other direction), and is refused statically and at run time.
``None`` (no window: full causal attention) gives each backend's "no window" value.

The lengths users need besides, named: `Window.keys` (W, the keys a query reads, itself
included), `Window.lookback` (W − 1), `last_position` of a length (L − 1) and
`length_through` a position (i + 1).

Example:
    >>> w = Window(4096, Tokens)
    >>> flash_attn_window_size(w), flashinfer_window_left(w), exclusive_window_bound(w)
    ((4095, 0), 4095, 4096)
    >>> last_position(Tokens(4096)), length_through(Position(4095, Tokens))
    (Position(4095, Tokens), Tokens(4096))
"""

from __future__ import annotations

from typing import Any, TypeAlias

from ._describe import describe
from ._kinds import Position, PosUnit, Window
from ._quantity import EncoderTokens, IntQuantity, Tokens
from .errors import UnitTypeError, UnitValueError

#: A window in the unit an attention kernel attends over: encoder tokens or tokens (never a
#: manager's pooled slots).
KernelWindow: TypeAlias = Window[EncoderTokens] | Window[Tokens]

_KERNEL_UNITS: tuple[type[IntQuantity], ...] = (EncoderTokens, Tokens)


def _kernel_window(window: object, backend: str) -> int | None:
    """W of a kernel-unit window, or None; the manager's slots refused by name."""
    if window is None:
        return None
    if type(window) is Window and window.unit in _KERNEL_UNITS:
        return int(window._n)
    unit = getattr(window, "unit", None)
    hint = (
        ": a manager's window counts pooled slots, while the kernel attends over encoder "
        "tokens; hand the backend the layer's own window (KernelSpec.sliding_window)"
        if type(window) is Window and unit is not None
        else ""
    )
    raise UnitTypeError(
        f"{backend} takes a Window of encoder_token or token (the positions a kernel "
        f"attends over), got {describe(window)}{hint}",
        field="window",
        expected="Window[EncoderTokens] | Window[Tokens]",
        got=describe(window),
    )


def flash_attn_window_size(window: KernelWindow | None) -> tuple[int, int]:
    """FlashAttention's ``window_size=(left, right)`` of a causal sliding window:
    ``(W − 1, 0)``; ``(-1, -1)`` for no window.

    FlashAttention's documented semantics (``flash_attn_interface.py``, ``window_size``):
    "Query at position i will only attend to keys between [i − window_size[0],
    i + window_size[1]] inclusive" (bottom-right aligned when the query is shorter than the
    keys). W keys, the query's own included, are ``left = W − 1`` before it and none after
    (vLLM's FlashAttention backend: ``self.sliding_window = (sliding_window - 1, 0)``).
    Passing ``(W, W)`` (transformers #39408) attends to 2W + 1 keys without a causal mask,
    W + 1 with one; ``(W, 0)`` (zml #763) to W + 1.

    Raises:
        UnitTypeError: not a window of a kernel's unit (a length, a manager's pooled window).

    Example:
        >>> flash_attn_window_size(Window(750, EncoderTokens)), flash_attn_window_size(None)
        ((749, 0), (-1, -1))
    """
    w = _kernel_window(window, "flash_attn_window_size")
    return (-1, -1) if w is None else (w - 1, 0)


def flashinfer_window_left(window: KernelWindow | None) -> int:
    """FlashInfer's ``window_left`` of a sliding window: ``W − 1``; ``-1`` for no window.

    FlashInfer documents it as "the left (inclusive) window size for the attention window,
    when set to -1, the window size will be set to the full length of the sequence": a query
    at i attends keys ``i − window_left .. i``, so ``window_left = W − 1`` (vLLM's FlashInfer
    backend: ``window_left = sliding_window[0]``, its ``(W − 1, 0)``).

    Example:
        >>> flashinfer_window_left(Window(4096, Tokens)), flashinfer_window_left(None)
        (4095, -1)
    """
    w = _kernel_window(window, "flashinfer_window_left")
    return -1 if w is None else w - 1


def exclusive_window_bound(window: KernelWindow | None) -> int | None:
    """The window as an exclusive lower bound: key j is visible to query i when
    ``j > i − bound``, so ``bound = W`` (the Triton kernels of `kvunits.kernels`, xformers'
    local attention masks, vLLM's ``sliding_window`` int); None for no window.

    Example:
        >>> exclusive_window_bound(Window(750, EncoderTokens))
        750
    """
    return _kernel_window(window, "exclusive_window_bound")


def last_position(length: PosUnit) -> Position[PosUnit]:
    """The last position of a sequence of ``length`` positions: ``L − 1`` (a length of L
    covers positions 0 .. L − 1).

    Raises:
        UnitTypeError: not a length of a sequence unit (or cache blocks).
        UnitValueError: an empty sequence has no last position.

    Example:
        >>> last_position(EncoderTokens(750))
        Position(749, EncoderTokens)
    """
    cls: Any = type(length)
    if cls not in Position.units:
        raise UnitTypeError(
            f"last_position takes a length of encoder_token, pooled_block, token or "
            f"cache_block, got {describe(length)}",
            field="length",
            expected="a length",
            got=describe(length),
        )
    n = length._value
    if n < 1:
        raise UnitValueError(
            f"a sequence of {length} has no last position",
            field="length",
            expected=f">= 1 {cls.unit}",
            got=str(length),
        )
    return Position._trusted(n - 1, cls)


def length_through(position: Position[PosUnit]) -> PosUnit:
    """The length of a sequence whose last position is ``position``: ``i + 1``.

    Example:
        >>> length_through(Position(749, EncoderTokens))
        EncoderTokens(750)
    """
    if type(position) is not Position:
        raise UnitTypeError(
            f"length_through takes a Position, got {describe(position)}",
            field="position",
            expected="Position",
            got=describe(position),
        )
    unit: Any = position.unit
    result: PosUnit = unit._trusted(position._n + 1)
    return result
