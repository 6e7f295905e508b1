"""A `Window` as PyTorch's ``scaled_dot_product_attention`` mask: who attends to whom.

PyTorch documents ``attn_mask`` of ``torch.nn.functional.scaled_dot_product_attention`` as
"a boolean mask where a value of True indicates that the element should take part in
attention". A sliding window of W (`kvunits.contracts.Window`) lets the query at position i
read the keys ``i − W + 1 .. i``; the mask is built from the window itself (its
`Window.first_position`), so no number is re-read in another convention on the way (the
bug class of transformers #39408 and zml #763, where ``W`` went where ``W − 1`` belongs).

Example:
    >>> from kvunits.contracts import Tokens, Window

    Three queries at positions 1, 2 and 3 of four keys, a window of 2 (each reads itself and
    the key before):

    >>> sdpa_window_mask(Window(2, Tokens), query_len=3, key_len=4).int()
    tensor([[1, 1, 0, 0],
            [0, 1, 1, 0],
            [0, 0, 1, 1]], dtype=torch.int32)
"""

from __future__ import annotations

import torch

from kvunits.contracts import (
    EncoderTokens,
    Tokens,
    UnitTypeError,
    UnitValueError,
    Window,
    flashinfer_window_left,
)
from kvunits.contracts.internal import describe

__all__ = ["sdpa_window_mask"]


def sdpa_window_mask(
    window: Window[EncoderTokens] | Window[Tokens] | None,
    query_len: int,
    key_len: int,
    *,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """The boolean ``attn_mask`` of a causal sliding window for SDPA.

    The queries are the last ``query_len`` of ``key_len`` positions (a step after a context
    of ``key_len − query_len``, as FlashAttention aligns them bottom-right): query row r sits
    at position ``key_len − query_len + r`` and reads key j when ``first ≤ j ≤ position``,
    ``first`` being the window's `first_position` of it (0 without a window).

    Args:
        window: the layer's window in its kernel unit, or None for full causal attention.
        query_len: rows of the query, in the window's unit.
        key_len: positions of the keys, at least ``query_len``.
        device: where to build the mask.

    Returns:
        ``[query_len, key_len]`` bool, True where the key takes part in attention.

    Raises:
        UnitTypeError: ``window`` is not a window of encoder tokens or tokens (a manager's
            window counts pooled slots; a length is not a window).
        UnitValueError: ``query_len`` is negative or longer than ``key_len``.
    """
    given: object = window  # checked at run time too: mypy's view is the annotation's
    if given is not None and (
        type(given) is not Window or given.unit not in (EncoderTokens, Tokens)
    ):
        raise UnitTypeError(
            f"sdpa_window_mask takes a Window of encoder_token or token (the positions the "
            f"kernel attends over), got {describe(window)}",
            field="window",
            expected="Window[EncoderTokens] | Window[Tokens]",
            got=describe(window),
        )
    for name, n in (("query_len", query_len), ("key_len", key_len)):
        if type(n) is not int or n < 0:
            raise UnitValueError(
                f"{name} must be an int >= 0, got {describe(n)}",
                field=name,
                expected="int >= 0",
                got=describe(n),
            )
    if query_len > key_len:
        raise UnitValueError(
            f"query_len {query_len} is longer than key_len {key_len}: the queries are the last "
            "positions of the keys",
            field="query_len",
            expected=f"<= {key_len}",
            got=str(query_len),
        )
    context = key_len - query_len
    position = torch.arange(context, key_len, device=device)[:, None]
    key = torch.arange(key_len, device=device)[None, :]
    mask = key <= position
    if window is not None:
        # first_position(q) = max(0, q − (W − 1)): the window's own lookback, in FlashInfer's
        # inclusive-left convention (W − 1).
        mask &= key >= position - flashinfer_window_left(window)
    return mask
