"""Each backend's window convention, checked against that backend's documented semantics.

A `Window` of W positions lets query i read keys ``i − W + 1 .. i`` (`Window.first_position`).
For each backend, a reference written from its documentation gives the keys it lets a query
read for the value kvunits' conversion hands it; they must be exactly the window's:

* FlashAttention, ``window_size=(left, right)`` (``flash_attn_interface.py``): "Query at
  position i will only attend to keys between [i + seqlen_k − seqlen_q − window_size[0],
  i + seqlen_k − seqlen_q + window_size[1]] inclusive", and with ``causal=True`` never past
  the diagonal; ``(-1, -1)`` is no window. flash-attn is not installed here (a GPU library):
  the reference is that sentence, in torch.
* FlashInfer, ``window_left`` (``flashinfer/prefill.py``, ``decode.py``): "The left
  (inclusive) window size for the attention window, when set to -1, the window size will be
  set to the full length of the sequence"; its mask kernel computes ``visible = kv >=
  prefix_len + q − window_left``. Not installed here either: that rule, in torch.
* PyTorch SDPA ``attn_mask``: "A boolean mask where a value of True indicates that the element
  should take part in attention". Run for real: ``scaled_dot_product_attention`` with
  `sdpa_window_mask` against attention over exactly the window's keys.
* The Triton kernels here: key j visible when ``j > i − bound`` (``_paged_swa.py``); checked
  against `kvunits.kernels.reference_paged_attention` by the kernel tests, and here against the
  window.

The real bugs the conventions caused are pinned too: transformers #39408 passed
``window_size=(W, W)``; zml #763 passed ``window_size_left = W``.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kvunits.contracts import (
    EncoderTokens,
    PooledBlocks,
    Position,
    Tokens,
    UnitTypeError,
    Window,
    exclusive_window_bound,
    flash_attn_window_size,
    flashinfer_window_left,
    last_position,
    length_through,
)
from kvunits.kernels import sdpa_window_mask

from ..examples import examples


def window_keys(window: Window[Tokens] | None, query: int) -> set[int]:
    """The keys the window lets the query at ``query`` read: its definition."""
    if window is None:
        return set(range(query + 1))
    first = window.first_position(Position(query, Tokens)).numerical_value_in(Tokens)
    return set(range(first, query + 1))


def flash_attn_keys(
    window_size: tuple[int, int], query_row: int, seqlen_q: int, seqlen_k: int, causal: bool
) -> set[int]:
    """FlashAttention's documented rule (see the module doc)."""
    i = query_row + seqlen_k - seqlen_q
    left, right = window_size
    keys = set(range(seqlen_k))
    if left >= 0:
        keys = {j for j in keys if j >= i - left}
    if right >= 0:
        keys = {j for j in keys if j <= i + right}
    if causal:
        keys = {j for j in keys if j <= i}
    return keys


def flashinfer_keys(window_left: int, query_row: int, seqlen_q: int, seqlen_k: int) -> set[int]:
    """FlashInfer's documented rule (causal): ``kv >= prefix_len + q − window_left``."""
    i = seqlen_k - seqlen_q + query_row
    keys = set(range(i + 1))
    if window_left >= 0:
        keys = {j for j in keys if j >= i - window_left}
    return keys


def exclusive_keys(bound: int | None, query: int) -> set[int]:
    """The Triton kernel's rule: ``pos_k > pos_q − W`` (and causal)."""
    return {j for j in range(query + 1) if bound is None or j > query - bound}


windows = st.none() | st.integers(1, 70).map(lambda w: Window(w, Tokens))


@settings(max_examples=examples(200))
@given(windows, st.integers(0, 40), st.integers(1, 40))
def test_each_backend_reads_exactly_the_windows_keys(
    window: Window[Tokens] | None, context: int, step: int
) -> None:
    seqlen_k, seqlen_q = context + step, step
    size = flash_attn_window_size(window)
    left = flashinfer_window_left(window)
    bound = exclusive_window_bound(window)
    mask = sdpa_window_mask(window, seqlen_q, seqlen_k)
    for row in range(seqlen_q):
        query = context + row
        want = window_keys(window, query)
        assert flash_attn_keys(size, row, seqlen_q, seqlen_k, causal=True) == want
        assert flashinfer_keys(left, row, seqlen_q, seqlen_k) == want
        assert exclusive_keys(bound, query) == want
        assert set(mask[row].nonzero().flatten().tolist()) == want


@pytest.mark.parametrize("w", [1, 2, 5, 750])
def test_the_window_is_the_query_and_its_lookback(w: int) -> None:
    window = Window(w, EncoderTokens)
    assert window.keys == EncoderTokens(w) and window.lookback == EncoderTokens(w - 1)
    assert flash_attn_window_size(window) == (w - 1, 0)
    assert flashinfer_window_left(window) == w - 1
    assert exclusive_window_bound(window) == w
    assert flash_attn_window_size(None) == (-1, -1) and flashinfer_window_left(None) == -1


def test_transformers_39408_and_zml_763_read_keys_outside_the_window() -> None:
    # transformers #39408: window_size=(W, W) for FlashAttention: without a causal mask a query
    # reads 2W + 1 keys, with one W + 1; zml #763: window_size_left = W: W + 1 keys.
    w, context, step = 4, 20, 1
    window = Window(w, Tokens)
    want = window_keys(window, context)
    assert len(want) == w
    assert len(flash_attn_keys((w, w), 0, step, context + step, causal=False)) == w + 1
    assert len(flash_attn_keys((w, w), 0, step, context + step, causal=True)) == w + 1
    assert len(flash_attn_keys((w, 0), 0, step, context + step, causal=True)) == w + 1
    assert flash_attn_keys(flash_attn_window_size(window), 0, step, context + step, True) == want


@settings(max_examples=examples(40), deadline=None)
@given(windows, st.integers(0, 24), st.integers(1, 12))
def test_sdpa_with_the_mask_is_attention_over_the_windows_keys(
    window: Window[Tokens] | None, context: int, step: int
) -> None:
    # The real library: torch's scaled_dot_product_attention with sdpa_window_mask, against
    # softmax attention over exactly the keys the window lets each query read.
    gen = torch.Generator().manual_seed(context * 100 + step)
    heads, dim, keys = 2, 8, context + step
    q = torch.randn(heads, step, dim, generator=gen, dtype=torch.float64)
    k = torch.randn(heads, keys, dim, generator=gen, dtype=torch.float64)
    v = torch.randn(heads, keys, dim, generator=gen, dtype=torch.float64)
    mask = sdpa_window_mask(window, step, keys)
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    for row in range(step):
        read = sorted(window_keys(window, context + row))
        scores = q[:, row : row + 1] @ k[:, read].transpose(-1, -2) / dim**0.5
        expected = torch.softmax(scores, dim=-1) @ v[:, read]
        torch.testing.assert_close(out[:, row], expected.squeeze(-2))


def test_a_managers_pooled_window_is_no_kernels_window() -> None:
    # The seed's window in the other direction: the manager's 189 pooled slots handed to an
    # attention backend would be read as 189 encoder tokens.
    pooled = Window(189, PooledBlocks)
    for convert in (flash_attn_window_size, flashinfer_window_left, exclusive_window_bound):
        with pytest.raises(UnitTypeError, match="counts pooled slots"):
            convert(pooled)  # type: ignore[arg-type]
    with pytest.raises(UnitTypeError):
        sdpa_window_mask(pooled, 1, 4)  # type: ignore[arg-type]
    with pytest.raises(UnitTypeError):
        flash_attn_window_size(Tokens(4096))  # type: ignore[arg-type]  # a length


@given(st.integers(1, 1 << 40))
def test_last_position_and_length_through_are_inverse(n: int) -> None:
    assert last_position(Tokens(n)) == Position(n - 1, Tokens)
    assert length_through(last_position(EncoderTokens(n))) == EncoderTokens(n)
