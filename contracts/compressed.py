"""DeepSeek V4's caches as vLLM 0.33 sizes them: several tokens per stored state.

DeepSeek V4 (``vllm/models/deepseek_v4``) keeps, in every decoder layer ``i`` of compress
ratio ``r`` (1: sliding window only; 4: "compressed sparse attention"; 128: "heavily
compressed attention"), up to five caches, each a spec of ``vllm/v1/kv_cache_interface.py``:

* the sliding-window latent (``DeepseekV4SWACache``): a ``SlidingWindowMLASpec`` of window
  ``sliding_window``, blocks of 64 tokens, a state a token of 584 bytes (fp8_ds_mla);
* for ``r > 1``, the compressed latent (``DeepseekV4Attention``): an ``MLAAttentionSpec``
  (full attention) of ``r`` tokens a state, blocks of 256 tokens, 584 bytes a state;
* for ``r > 1``, its compressor's state (``CompressorStateCache``): a
  ``SlidingWindowMLASpec`` of window ``c × r``, blocks of 4 tokens (``r = 4``) else 8, a
  state a token of ``2c × head_dim`` float32;
* for ``r = 4``, the indexer's keys (``DeepseekV4IndexerCache``): an ``MLAAttentionSpec`` of
  ``r`` tokens a state, blocks of 256 tokens, ``d + d / 128 × 4`` bytes a state (fp8 and a
  float32 scale per 128);
* for ``r = 4``, the indexer compressor's state: window ``c × r``, blocks of 4 tokens,
  ``2c × d`` float32 a token;

with ``c = 2`` for ``r = 4`` (overlapping windows) else 1, ``d = index_head_dim``, and the
latent's 584 bytes FlashMLA's ``fp8_ds_mla`` layout (448 fp8 NoPE values, 64 bf16 RoPE
values, 8 bytes of UE8M0 scales: ``state_content_bytes=584`` in ``attention.py``).

**The rule** (``AttentionSpec.page_size_bytes`` with ``KVCacheSpec.get_num_kernel_states``
and ``_apply_alignment_padding``): a page of a block of ``B`` tokens holds
``floor(B / tokens_per_state)`` states (`states_per_block`), and is padded up to a multiple
of the alignment, 576 bytes under ``fp8_ds_mla`` (`aligned_page_size`). Block sizes are
vLLM's own: 256 for the compressed caches (the only size ``DeepseekV4SparseMLABackend`` and
``DeepseekV4IndexerBackend`` accept, ``get_supported_kernel_block_sizes``), 64 for the
sliding window (``DeepseekV4SWACache.__init__``), 4 and 8 for the compressor states (they
share the latent's physical pages, ``CompressorStateCache.__init__``).

The cache dtype is FlashMLA's on Hopper and Blackwell SM100 (``_select_dsv4_attn_cls``):
``fp8_ds_mla`` for ``auto`` and every ``fp8`` spelling; vLLM refuses any other
(``_resolve_dsv4_kv_cache_dtype``). Its multi-token-prediction layers
(``num_nextn_predict_layers``) hold caches only for speculative decoding, not planned here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal, TypeVar, final

from ._counts import Elements, Layers
from ._describe import describe
from ._quantity import Bytes, IntQuantity, Tokens
from .errors import SpecError, UnitTypeError

__all__ = [
    "DS_MLA_ALIGNMENT",
    "DS_MLA_STATE",
    "DeepseekV4Cache",
    "DeepseekV4Layer",
    "DeepseekV4Model",
    "aligned_page_size",
    "states_per_block",
]

#: Bytes of one latent state in FlashMLA's fp8_ds_mla layout (attention.py: 448 NoPE fp8 +
#: 64 RoPE bf16 + 8 UE8M0 scale bytes; ``state_content_bytes=584``).
DS_MLA_STATE: Final = Bytes(584)
#: What an fp8_ds_mla page is padded to a multiple of (``alignment=576``).
DS_MLA_ALIGNMENT: Final = Bytes(576)
#: vLLM's block sizes for DeepSeek V4's caches (see the module docstring).
COMPRESSED_BLOCK: Final = Tokens(256)
SWA_BLOCK: Final = Tokens(64)
_INDEX_SCALE_GROUP: Final = 128  # indexer key elements per float32 scale (quant_block_size)
_FLOAT32: Final = 4
_LAYER_TYPE_RATIO: Final[Mapping[int, str]] = {
    0: "sliding_attention",
    4: "compressed_sparse_attention",
    128: "heavily_compressed_attention",
}
_DEFAULT_RATES: Final[Mapping[str, int]] = {
    "compressed_sparse_attention": 4,
    "heavily_compressed_attention": 128,
}


_Q = TypeVar("_Q", bound=IntQuantity)


def _typed(value: object, cls: type[_Q], field: str) -> _Q:
    """The entry check of a typed argument: what mypy rejects, the run time rejects too."""
    if type(value) is cls:
        return value
    raise UnitTypeError(
        f"{field} must be {cls.__name__} ({cls.unit}), got {describe(value)}",
        field=field,
        expected=cls.unit,
        got=describe(value),
    )


def states_per_block(block_size: Tokens, tokens_per_state: int) -> int:
    """States a page of ``block_size`` tokens holds when each state covers
    ``tokens_per_state`` tokens: ``floor(block_size / tokens_per_state)`` (rounds down, as
    vLLM's ``KVCacheSpec.get_num_kernel_states``; DeepSeek V4's blocks are whole multiples).

    Example:
        >>> states_per_block(Tokens(256), 4), states_per_block(Tokens(256), 128)
        (64, 2)
    """
    block = _typed(block_size, Tokens, "block_size").numerical_value_in(Tokens)
    if type(tokens_per_state) is not int or tokens_per_state < 1:
        raise SpecError(f"tokens_per_state must be an int >= 1, got {tokens_per_state!r}")
    return block // tokens_per_state


def aligned_page_size(raw: Bytes, alignment: Bytes) -> Bytes:
    """A page of ``raw`` bytes padded up to a multiple of ``alignment`` (rounds up, as
    vLLM's ``_apply_alignment_padding``).

    Example:
        >>> str(aligned_page_size(Bytes(2 * 584), DS_MLA_ALIGNMENT))
        '1728 byte'
    """
    size = _typed(raw, Bytes, "raw").numerical_value_in(Bytes)
    step = _typed(alignment, Bytes, "alignment").numerical_value_in(Bytes)
    if step < 1:
        raise SpecError(f"alignment must be >= 1 byte, got {alignment}")
    return Bytes(-(-size // step) * step)


CacheRole = Literal["swa", "compressed", "compressor", "indexer", "indexer_compressor"]


@final
@dataclass(frozen=True, slots=True)
class DeepseekV4Cache:
    """One of a layer's caches as vLLM 0.33's spec sizes it.

    Attributes:
        role: which cache of the layer (the module docstring's rows).
        suffix: its name under the layer's attention, as vLLM registers it (``""`` the
            attention itself).
        window: the sliding window in tokens (``None``: full attention).
        block_size: tokens a block covers.
        tokens_per_state: tokens one stored state covers.
        state_size: bytes of one state.
        page_size: one block's page, padded (`aligned_page_size`).
    """

    role: CacheRole
    suffix: str
    window: Tokens | None
    block_size: Tokens
    tokens_per_state: int
    state_size: Bytes
    page_size: Bytes


def _cache(
    role: CacheRole, suffix: str, window: int | None, block: Tokens, per_state: int, state: int
) -> DeepseekV4Cache:
    raw = Bytes(states_per_block(block, per_state) * state)
    return DeepseekV4Cache(
        role=role,
        suffix=suffix,
        window=None if window is None else Tokens(window),
        block_size=block,
        tokens_per_state=per_state,
        state_size=Bytes(state),
        page_size=aligned_page_size(raw, DS_MLA_ALIGNMENT),
    )


@final
@dataclass(frozen=True, slots=True)
class DeepseekV4Layer:
    """A DeepSeek V4 decoder layer's attention: its compress ratio and the sizes its caches
    take.

    Attributes:
        compress_ratio: 1 (sliding window only), 4 or 128.
        head_size: the latent's elements (``head_dim``; vLLM's backend takes 512 only).
        index_head_size: the indexer key's elements (``index_head_dim``).
        sliding_window: the window of the sliding-window latent cache.
    """

    compress_ratio: Literal[1, 4, 128]
    head_size: Elements
    index_head_size: Elements
    sliding_window: Tokens

    def __post_init__(self) -> None:
        # What mypy rejects, the runtime rejects too (for callers without it).
        _typed(self.head_size, Elements, "head_size")
        _typed(self.index_head_size, Elements, "index_head_size")
        _typed(self.sliding_window, Tokens, "sliding_window")
        ratio: object = self.compress_ratio
        if type(ratio) is not int or ratio not in (1, 4, 128):
            raise SpecError(
                f"compress_ratio must be 1, 4 or 128 (vLLM 0.33's DeepSeek V4 compressor "
                f"takes 4 and 128), got {self.compress_ratio!r}"
            )
        if self.index_head_size.numerical_value_in(Elements) % _INDEX_SCALE_GROUP:
            raise SpecError(
                f"index_head_size must be a multiple of {_INDEX_SCALE_GROUP} element (a "
                f"float32 scale per {_INDEX_SCALE_GROUP}), got {self.index_head_size}"
            )
        if not self.sliding_window.numerical_value_in(Tokens):
            raise SpecError("sliding_window must be >= 1 token")

    def caches(self) -> tuple[DeepseekV4Cache, ...]:
        """The layer's caches in vLLM's registration order (``DeepseekV4Attention.__init__``:
        the indexer's key and compressor state, the sliding window, the compressed latent,
        its compressor state).

        Example:
            >>> layer = DeepseekV4Layer(4, Elements(512), Elements(128), Tokens(128))
            >>> [(c.role, c.page_size.numerical_value_in(Bytes)) for c in layer.caches()]
            ... # doctest: +NORMALIZE_WHITESPACE
            [('indexer', 8640), ('indexer_compressor', 8640), ('swa', 37440),
             ('compressed', 37440), ('compressor', 32832)]
        """
        r = self.compress_ratio
        c = 2 if r == 4 else 1
        head = self.head_size.numerical_value_in(Elements)
        state = DS_MLA_STATE.numerical_value_in(Bytes)
        out: list[DeepseekV4Cache] = []
        state_block = Tokens(4 if r == 4 else 8)
        if r == 4:
            d = self.index_head_size.numerical_value_in(Elements)
            key = d + d // _INDEX_SCALE_GROUP * 4
            out.append(_cache("indexer", "indexer.k_cache", None, COMPRESSED_BLOCK, r, key))
            out.append(
                _cache(
                    "indexer_compressor",
                    "indexer.compressor.state_cache",
                    c * r,
                    state_block,
                    1,
                    2 * c * d * _FLOAT32,
                )
            )
        window = self.sliding_window.numerical_value_in(Tokens)
        out.append(_cache("swa", "swa_cache", window, SWA_BLOCK, 1, state))
        if r > 1:
            out.append(_cache("compressed", "", None, COMPRESSED_BLOCK, r, state))
            out.append(
                _cache(
                    "compressor",
                    "compressor.state_cache",
                    c * r,
                    state_block,
                    1,
                    2 * c * head * _FLOAT32,
                )
            )
        return tuple(out)


@final
@dataclass(frozen=True, slots=True)
class DeepseekV4Model:
    """A DeepSeek V4 model's decoder layers, as vLLM 0.33 builds them.

    Attributes:
        name: the model's name.
        layers: one entry per decoder layer, in order.
    """

    name: str
    layers: tuple[DeepseekV4Layer, ...]

    @property
    def num_layers(self) -> Layers:
        """The decoder layers."""
        return Layers(len(self.layers))

    @classmethod
    def from_config(cls, name: str, config: Mapping[str, object]) -> DeepseekV4Model:
        """Read a ``deepseek_v4`` ``config.json`` as transformers' ``DeepseekV4Config``
        gives it to vLLM: ``layer_types`` (else the legacy ``compress_ratios``, 0 / 4 / 128;
        else two heavily compressed layers then compressed sparse and heavily compressed
        alternating), cut to ``num_hidden_layers``; a layer's ratio is
        ``max(1, compress_rates[its type])`` (``DeepseekV4Attention.__init__``), with
        ``compress_rates`` defaulting to 4 and 128 (``compress_rate_csa`` /
        ``compress_rate_hca`` override them).

        Raises:
            SpecError: a missing or malformed field, or a geometry vLLM 0.33's DeepSeek V4
                kernels refuse (``head_dim`` other than 512, compress ratios other than 4
                and 128, an indexer key not a multiple of 128).
        """
        n = _int(config, "num_hidden_layers")
        head = _int(config, "head_dim")
        index_head = _int(config, "index_head_dim")
        window = _int(config, "sliding_window", 128)
        if head != 512:
            raise SpecError(
                f"head_dim is {head}: vLLM 0.33's DeepSeek V4 backends take 512 only "
                "(DeepseekV4SparseMLABackend.get_supported_head_sizes)"
            )
        if index_head % _INDEX_SCALE_GROUP:
            raise SpecError(
                f"index_head_dim is {index_head}: the indexer's fp8 key has a float32 scale "
                f"per {_INDEX_SCALE_GROUP} elements, so it must be a multiple of 128"
            )
        types = _layer_types(config, n)
        rates = dict(_DEFAULT_RATES)
        given = config.get("compress_rates")
        if isinstance(given, Mapping):
            rates = {str(k): int(v) for k, v in given.items()}
        for key, kind in (
            ("compress_rate_csa", "compressed_sparse_attention"),
            ("compress_rate_hca", "heavily_compressed_attention"),
        ):
            if isinstance(config.get(key), int):
                rates[kind] = int(config[key])  # type: ignore[call-overload]
        layers = []
        for i, kind in enumerate(types):
            ratio = max(1, rates.get(kind, 0))
            if ratio not in (1, 4, 128):
                raise SpecError(
                    f"layer {i} ({kind}) has compress ratio {ratio}: vLLM 0.33's DeepSeek V4 "
                    "compressor takes 4 and 128 only (CompressorStateCache asserts it)"
                )
            layers.append(
                DeepseekV4Layer(
                    compress_ratio=ratio,  # type: ignore[arg-type]
                    head_size=Elements(head),
                    index_head_size=Elements(index_head),
                    sliding_window=Tokens(window),
                )
            )
        return cls(name=name, layers=tuple(layers))


def _int(config: Mapping[str, object], key: str, default: int | None = None) -> int:
    value = config.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SpecError(
            f"DeepSeek V4 config field {key!r} must be a positive integer, got {value!r}"
        )
    return value


def _layer_types(config: Mapping[str, object], n: int) -> list[str]:
    types = config.get("layer_types")
    ratios = config.get("compress_ratios")
    if types is None and ratios is not None:
        if not isinstance(ratios, list) or any(r not in _LAYER_TYPE_RATIO for r in ratios):
            raise SpecError(
                f"compress_ratios must list 0, 4 or 128 per layer (DeepseekV4Config), got "
                f"{str(ratios)[:80]}"
            )
        types = [_LAYER_TYPE_RATIO[r] for r in ratios]
    if types is None:
        types = ["heavily_compressed_attention"] * min(n, 2) + [
            "compressed_sparse_attention" if i % 2 else "heavily_compressed_attention"
            for i in range(max(n - 2, 0))
        ]
    if not isinstance(types, list) or any(
        t not in _DEFAULT_RATES and t != "sliding_attention" for t in types
    ):
        raise SpecError(
            "layer_types must list sliding_attention, compressed_sparse_attention or "
            f"heavily_compressed_attention per layer, got {str(types)[:80]}"
        )
    if len(types) < n:
        raise SpecError(
            f"layer_types (or compress_ratios) lists {len(types)} layers but "
            f"num_hidden_layers is {n}"
        )
    return [str(t) for t in types[:n]]
