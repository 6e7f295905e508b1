"""DeepSeek V4.1's caches as vLLM 0.33 sizes them on Hopper (FlashMLA, the V4 record).

DeepSeek V4.1 (``vllm/models/deepseek_v41``, ``DeepseekV41ForCausalLM``) differs from V4
(`kvunits.contracts.compressed`): each decoder layer ``i`` has a compress ratio
``compress_ratios[i]`` of 0 (sliding window only), 1 (a full-length compressed cache) or 2,
and the compressed caches are **shared**: only the layers of ``kv_source_layer_ids`` own a
compressed latent cache and a compressor, only those of ``index_source_layer_ids`` run an
indexer, and a compressed layer reads the caches of the nearest source at or below it
(``DeepseekV4Attention.__init__``, ``attention.py``). A layer registers, in this order:

* its compressed latent, on kv sources (``DeepseekV4Attention.get_kv_cache_spec``): an
  ``MLAAttentionSpec`` of ``r`` tokens a state, 584 bytes a state;
* the indexer's keys, on layers both index and kv source (``DeepseekV4IndexerCache``): an
  ``MLAAttentionSpec`` of ``r`` tokens a state, ``d + floor(d / 128) × 4`` bytes a state
  (fp8 and a float32 scale per 128, ``_indexer_k_cache_head_dim``);
* the sliding-window latent, on every layer (``DeepseekV4SWACache``, built with
  ``block_size=32``): a ``SlidingWindowMLASpec`` of window ``sliding_window``, 584 bytes a
  token, with *bounded replay* (``CacheConfig.swa_bounded_replay``: not prefix-cached; the
  blocks a request holds are a window's as for any sliding window);
* the compressor's state, on kv sources of ratio 2 (``CompressorStateCache``): a
  ``CircularBufferSpec``, one ring per request of ``max(8, next_pow2(spec + 2))`` rows of
  ``2 × head_dim`` float32 (8 rows without speculative decoding).

**The record and the block** depend on the GPU. On Hopper (compute capability 9) vLLM takes
FlashMLA (``_select_dsv4_attn_cls``), which keeps V4's 584-byte ``fp8_ds_mla`` record and
576-byte page alignment (``_use_v41_mxfp8_kv_record`` is SM100 only), and blocks of 64
tokens for the compressed and indexer caches (``DeepseekV4FlashMLABackend`` and
``DeepseekV41IndexerBackend.get_supported_kernel_block_sizes``: 64 on Hopper, 128
otherwise). SM100 (B200) defaults to mega attention where its kernel is built and the TP
suits it (NVFP4 compressed records of 288 bytes, MXFP8 window records of 528, block-stride
alignments): not modelled, refused by name.

The page rule is V4's: ``floor(B / tokens_per_state)`` states a block
(`kvunits.contracts.compressed.states_per_block`) padded up to a multiple of the alignment
(`kvunits.contracts.compressed.aligned_page_size`); the ring is not padded (no alignment).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal, final

from ._counts import Elements, Layers
from ._quantity import Bytes, Tokens
from .compressed import (
    DS_MLA_ALIGNMENT,
    DS_MLA_STATE,
    _typed,
    aligned_page_size,
    states_per_block,
)
from .errors import SpecError

__all__ = [
    "HOPPER_BLOCK",
    "RING_ROWS",
    "SWA_BLOCK_V41",
    "DeepseekV41Cache",
    "DeepseekV41Layer",
    "DeepseekV41Model",
    "indexer_key_bytes",
]

#: Tokens a compressed or indexer block covers on Hopper (see the module docstring).
HOPPER_BLOCK: Final = Tokens(64)
#: Tokens a sliding-window block covers (``DeepseekV4SWACache(block_size=32)``).
SWA_BLOCK_V41: Final = Tokens(32)
#: Rows of a compressor ring without speculative decoding: ``max(8, next_pow2(0 + 2))``.
RING_ROWS: Final = Tokens(8)
_INDEX_SCALE_GROUP: Final = 128  # indexer key elements per float32 scale
_FLOAT32: Final = 4
_RATIOS: Final = (0, 1, 2)

CacheKindV41 = Literal["compressed", "indexer", "swa", "compressor"]


def indexer_key_bytes(index_head_size: Elements) -> Bytes:
    """Bytes of one fp8 indexer key: ``d`` fp8 values and a float32 scale per 128 of them,
    ``d + floor(d / 128) × 4`` (rounds down, as vLLM's ``_indexer_k_cache_head_dim``).

    Example:
        >>> str(indexer_key_bytes(Elements(128)))
        '132 byte'
    """
    d = _typed(index_head_size, Elements, "index_head_size").numerical_value_in(Elements)
    return Bytes(d + d // _INDEX_SCALE_GROUP * _FLOAT32)


@final
@dataclass(frozen=True, slots=True)
class DeepseekV41Cache:
    """One cache a V4.1 layer owns, as vLLM 0.33's spec sizes it.

    Attributes:
        kind: which cache (the module docstring's rows).
        suffix: its name under the layer's attention (``""``: the attention itself).
        window: the sliding window in tokens (``None``: full attention or a ring).
        block_size: tokens a block covers (a ring's rows).
        tokens_per_state: tokens one stored state covers.
        page_size: one block's page (padded where vLLM pads it).
    """

    kind: CacheKindV41
    suffix: str
    window: Tokens | None
    block_size: Tokens
    tokens_per_state: int
    page_size: Bytes


def _padded(kind: CacheKindV41, suffix: str, block: Tokens, per_state: int, state: Bytes,
            window: int | None = None) -> DeepseekV41Cache:
    raw = Bytes(states_per_block(block, per_state) * state.numerical_value_in(Bytes))
    return DeepseekV41Cache(
        kind=kind,
        suffix=suffix,
        window=None if window is None else Tokens(window),
        block_size=block,
        tokens_per_state=per_state,
        page_size=aligned_page_size(raw, DS_MLA_ALIGNMENT),
    )


@final
@dataclass(frozen=True, slots=True)
class DeepseekV41Layer:
    """A V4.1 decoder layer: its ratio, which caches it owns, and their geometry.

    Attributes:
        compress_ratio: 0, 1 or 2.
        kv_source: it owns a compressed cache (and a compressor).
        index_source: it runs an indexer (owning its keys when also a kv source).
        head_size: the latent's elements (512).
        index_head_size: the indexer key's elements.
        sliding_window: the window of its sliding-window cache.
    """

    compress_ratio: Literal[0, 1, 2]
    kv_source: bool
    index_source: bool
    head_size: Elements
    index_head_size: Elements
    sliding_window: Tokens

    def __post_init__(self) -> None:
        # What mypy rejects, the runtime rejects too (for callers without it).
        _typed(self.head_size, Elements, "head_size")
        _typed(self.index_head_size, Elements, "index_head_size")
        _typed(self.sliding_window, Tokens, "sliding_window")
        ratio: object = self.compress_ratio
        if type(ratio) is not int or ratio not in _RATIOS:
            raise SpecError(
                f"compress_ratio must be 0, 1 or 2 (vLLM 0.33's DeepSeek V4.1), got {ratio!r}"
            )
        if self.kv_source and not ratio:
            raise SpecError("a kv source needs compress_ratio 1 or 2 (its compressor's ratio)")
        if not self.sliding_window.numerical_value_in(Tokens):
            raise SpecError("sliding_window must be >= 1 token")

    def caches(self) -> tuple[DeepseekV41Cache, ...]:
        """The caches the layer owns, in vLLM's registration order on Hopper.

        Example:
            >>> layer = DeepseekV41Layer(2, True, True, Elements(512), Elements(128),
            ...                          Tokens(128))
            >>> [(c.kind, c.page_size.numerical_value_in(Bytes)) for c in layer.caches()]
            [('compressed', 19008), ('indexer', 4608), ('swa', 19008), ('compressor', 32768)]
        """
        r = self.compress_ratio
        out: list[DeepseekV41Cache] = []
        if self.kv_source:
            out.append(_padded("compressed", "", HOPPER_BLOCK, r, DS_MLA_STATE))
            if self.index_source:
                key = indexer_key_bytes(self.index_head_size)
                out.append(_padded("indexer", "indexer.k_cache", HOPPER_BLOCK, r, key))
        window = self.sliding_window.numerical_value_in(Tokens)
        out.append(_padded("swa", "swa_cache", SWA_BLOCK_V41, 1, DS_MLA_STATE, window))
        if self.kv_source and r == 2:
            head = self.head_size.numerical_value_in(Elements)
            rows = RING_ROWS.numerical_value_in(Tokens)
            out.append(
                DeepseekV41Cache(
                    kind="compressor",
                    suffix="compressor.state_cache",
                    window=None,
                    block_size=RING_ROWS,
                    tokens_per_state=1,
                    page_size=Bytes(rows * 2 * head * _FLOAT32),
                )
            )
        return tuple(out)


@final
@dataclass(frozen=True, slots=True)
class DeepseekV41Model:
    """A DeepSeek V4.1 model's decoder layers, as vLLM 0.33 builds them.

    Attributes:
        name: the model's name.
        layers: one entry per decoder layer, in order.
        kv_source_of: for each layer, the kv source whose caches it reads (``None``: none).
    """

    name: str
    layers: tuple[DeepseekV41Layer, ...]
    kv_source_of: tuple[int | None, ...]

    @property
    def num_layers(self) -> Layers:
        """The decoder layers."""
        return Layers(len(self.layers))

    @classmethod
    def from_config(cls, name: str, config: Mapping[str, object]) -> DeepseekV41Model:
        """Read a ``deepseek_v41`` ``config.json`` as vLLM's ``DeepseekV41Config`` gives it
        to the model (``text_config`` flattened onto the top, top-level keys winning), with
        the checks ``DeepseekV4Attention.__init__`` and ``DeepseekCompressor.__init__`` make.

        Raises:
            SpecError: a missing or malformed field, or a topology vLLM 0.33 refuses (a
                ratio other than 0, 1, 2; a compressed layer without a source at or below
                it; a source of ratio 0; an index source whose kv source runs no indexer;
                ``head_dim`` other than 512 or ``qk_rope_head_dim`` other than 64).
        """
        text = config.get("text_config")
        flat: dict[str, object] = dict(text) if isinstance(text, Mapping) else {}
        flat.update({k: v for k, v in config.items() if k not in ("text_config",
                                                                   "vision_config")})
        n = _int(flat, "num_hidden_layers")
        head = _int(flat, "head_dim")
        rope = _int(flat, "qk_rope_head_dim")
        if (head, rope) != (512, 64):
            raise SpecError(
                f"head_dim {head} and qk_rope_head_dim {rope}: vLLM 0.33's DeepSeek V4.1 "
                "compressor asserts 512 and 64 (DeepseekCompressor.__init__)"
            )
        index_head = _int(flat, "index_head_dim")
        window = _int(flat, "sliding_window")
        ratios = _ints(flat, "compress_ratios")
        kv_sources = set(_ints(flat, "kv_source_layer_ids"))
        index_sources = set(_ints(flat, "index_source_layer_ids"))
        layers: list[DeepseekV41Layer] = []
        source_of: list[int | None] = []
        for i in range(n):
            r = ratios[i] if i < len(ratios) else 0
            if r not in _RATIOS:
                raise SpecError(
                    f"layer {i} has compress_ratio {r}: vLLM 0.33's DeepSeek V4.1 takes 0 "
                    "(sliding window), 1 and 2 only (DeepseekV4Attention.__init__)"
                )
            is_kv, is_index = i in kv_sources, i in index_sources
            source = None
            if r > 0:
                below = [s for s in kv_sources if s <= i]
                if not below or not any(s <= i for s in index_sources):
                    raise SpecError(
                        f"layer {i} is compressed (ratio {r}) but no kv_source_layer_ids or "
                        "index_source_layer_ids entry is at or below it (vLLM 0.33 fails "
                        "building it)"
                    )
                source = max(below)
            elif is_kv or is_index:
                raise SpecError(
                    f"layer {i} is a kv or index source of compress_ratio 0: vLLM 0.33's "
                    "compressor and indexer need a ratio of 1 or 2"
                )
            if is_index and not is_kv and source is not None and source not in index_sources:
                raise SpecError(
                    f"layer {i} is an index source reading the indexer keys of layer {source}, "
                    "which runs no indexer (vLLM 0.33: 'Indexer K cache source not found')"
                )
            layers.append(
                DeepseekV41Layer(
                    compress_ratio=r,  # type: ignore[arg-type]
                    kv_source=is_kv,
                    index_source=is_index,
                    head_size=Elements(head),
                    index_head_size=Elements(index_head),
                    sliding_window=Tokens(window),
                )
            )
            source_of.append(source)
        return cls(name=name, layers=tuple(layers), kv_source_of=tuple(source_of))


def _int(config: Mapping[str, object], key: str) -> int:
    value = config.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SpecError(
            f"DeepSeek V4.1 config field {key!r} must be a positive integer, got {value!r}"
        )
    return value


def _ints(config: Mapping[str, object], key: str) -> list[int]:
    value = config.get(key)
    if value is None:
        return []
    if not isinstance(value, list) or any(
        isinstance(v, bool) or not isinstance(v, int) or v < 0 for v in value
    ):
        raise SpecError(
            f"DeepSeek V4.1 config field {key!r} must list non-negative integers, got "
            f"{str(value)[:80]}"
        )
    return [int(v) for v in value]
