"""What every family reader shares: the layer builders, the attention geometry, the cache
dtype (vLLM's ``dtype=auto``), and the default ``max_model_len`` (vLLM's derivation).

Layers are built only through the small functions here (`full`, `sliding`, `chunked`,
`cross`, `mla`, `no_cache`, `kv_shared`, `mamba1`, `mamba2`, `gated_delta_net`), so that a
change to how a layer spec is constructed is made in one place.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from .._counts import Elements, Heads, KVHeads
from .._dtype import CacheDType
from .._factors import PoolFactor
from .._kinds import Chunk, Window
from .._layers import (
    ChunkedLocalLayer,
    CrossAttentionLayer,
    EncoderOnlyLayer,
    FullAttentionLayer,
    IndexerLayer,
    KVSharedLayer,
    LayerSpec,
    MLALayer,
    SlidingWindowLayer,
)
from .._quantity import EncoderTokens, Tokens
from ..state import GatedDeltaNetLayer, Mamba1Layer, Mamba2Layer, ShortConvLayer
from ._hf_fields import MAX_ELEMENTS, MAX_SEQ, Reader, Section
from ._models import MAX_LAYERS

# -- layer builders -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Attention:
    """The cache geometry of an attention layer: KV heads, head size (K = V), dtype."""

    kv_heads: int
    head_size: int
    dtype: CacheDType


def full(a: Attention, pool: PoolFactor | None = None) -> LayerSpec:
    """Full attention (vLLM ``FullAttentionSpec``)."""
    return FullAttentionLayer(
        kv_heads=KVHeads(a.kv_heads), head_size=Elements(a.head_size), dtype=a.dtype, pool=pool
    )


def sliding(a: Attention, window: int, pool: PoolFactor | None = None) -> LayerSpec:
    """Sliding-window attention; ``window`` in the layer's kernel unit (encoder tokens when it
    pools, else tokens), the current position included (vLLM ``SlidingWindowSpec``)."""
    seq = Window(window, EncoderTokens) if pool is not None else Window(window, Tokens)
    return SlidingWindowLayer(
        sliding_window=seq,
        kv_heads=KVHeads(a.kv_heads),
        head_size=Elements(a.head_size),
        dtype=a.dtype,
        pool=pool,
    )


def chunked(a: Attention, chunk: int) -> LayerSpec:
    """Chunked local attention over ``chunk`` tokens (vLLM ``ChunkedLocalAttentionSpec``)."""
    return ChunkedLocalLayer(
        chunk=Chunk(chunk, Tokens),
        kv_heads=KVHeads(a.kv_heads),
        head_size=Elements(a.head_size),
        dtype=a.dtype,
    )


def cross(a: Attention, encoder_length: int) -> LayerSpec:
    """Decoder cross-attention over ``encoder_length`` encoder outputs (vLLM
    ``CrossAttentionSpec``)."""
    return CrossAttentionLayer(
        encoder_length=EncoderTokens(encoder_length),
        kv_heads=KVHeads(a.kv_heads),
        head_size=Elements(a.head_size),
        dtype=a.dtype,
    )


def mla(
    kv_lora_rank: int, qk_rope_head_dim: int, dtype: CacheDType, *, sparse: bool = False
) -> LayerSpec:
    """Multi-head latent attention: one head of ``kv_lora_rank + qk_rope_head_dim``, no V
    (vLLM ``MLAAttentionSpec``); ``sparse`` for DeepSeek sparse attention's MLA."""
    return MLALayer(
        kv_lora_rank=Elements(kv_lora_rank),
        qk_rope_head_dim=Elements(qk_rope_head_dim),
        dtype=dtype,
        sparse=sparse,
    )


def indexer(head_size: int) -> LayerSpec:
    """DeepSeek sparse attention's indexer key cache of ``head_size`` fp8 elements a token
    (vLLM ``DeepseekV32IndexerCache``)."""
    return IndexerLayer(head_size=Elements(head_size))


def no_cache() -> LayerSpec:
    """An encoder layer that keeps no KV cache (vLLM: encoder attention has no spec)."""
    return EncoderOnlyLayer()


def kv_shared(target: str) -> LayerSpec:
    """A layer reading ``target``'s cache (vLLM ``kv_sharing_target_layer_name``)."""
    return KVSharedLayer(target=target)


def mamba1(
    intermediate_size: int, ssm_state_size: int, conv_kernel: int, dtype: CacheDType
) -> LayerSpec:
    """A Mamba-1 state layer, both states in ``dtype``."""
    return Mamba1Layer(
        intermediate_size=Elements(intermediate_size),
        ssm_state_size=Elements(ssm_state_size),
        conv_kernel=conv_kernel,
        conv_dtype=dtype,
        ssm_dtype=dtype,
    )


def mamba2(
    *,
    num_heads: int,
    head_dim: int,
    n_groups: int,
    ssm_state_size: int,
    conv_kernel: int,
    conv_dtype: CacheDType,
    ssm_dtype: CacheDType,
    intermediate_size: int | None = None,
) -> LayerSpec:
    """A Mamba-2 state layer; its inner size is ``intermediate_size``, by default ``num_heads
    × head_dim`` (vLLM's NemotronH; Granite 4.0-H and Falcon-H1 take ``expand × hidden``)."""
    inner = num_heads * head_dim if intermediate_size is None else intermediate_size
    return Mamba2Layer(
        intermediate_size=Elements(inner),
        num_heads=Heads(num_heads),
        head_dim=Elements(head_dim),
        n_groups=n_groups,
        ssm_state_size=Elements(ssm_state_size),
        conv_kernel=conv_kernel,
        conv_dtype=conv_dtype,
        ssm_dtype=ssm_dtype,
    )


def short_conv(*, conv_dim: int, cache_length: int, dtype: CacheDType) -> LayerSpec:
    """A short-convolution state layer (LFM2): one conv state of ``cache_length − 1`` ×
    ``conv_dim`` in ``dtype``."""
    return ShortConvLayer(
        conv_dim=Elements(conv_dim), conv_kernel=cache_length, conv_dtype=dtype, ssm_dtype=dtype
    )


def gated_delta_net(
    *,
    num_k_heads: int,
    num_v_heads: int,
    head_k_dim: int,
    head_v_dim: int,
    conv_kernel: int,
    conv_dtype: CacheDType,
    ssm_dtype: CacheDType,
    mixer: Literal["gdn", "olmo_gdn", "kda", "kda_full_rank_gate"] = "gdn",
    flashkda: bool = False,
) -> LayerSpec:
    """A gated-delta-net state layer (``mixer``: vLLM's class, `GatedDeltaNetLayer`)."""
    return GatedDeltaNetLayer(
        mixer=mixer,
        flashkda=flashkda,
        num_k_heads=Heads(num_k_heads),
        num_v_heads=Heads(num_v_heads),
        head_k_dim=Elements(head_k_dim),
        head_v_dim=Elements(head_v_dim),
        conv_kernel=conv_kernel,
        conv_dtype=conv_dtype,
        ssm_dtype=ssm_dtype,
    )


# -- attention geometry ---------------------------------------------------------------------


def heads(sec: Section) -> tuple[int, int] | None:
    """``num_attention_heads`` and ``num_key_value_heads`` (null: the attention heads, where
    the family's transformers config class fills it; ``_hf_strict.kv_heads_not_null`` refuses
    it first where the class declares an int)."""
    n_heads = sec.number("num_attention_heads")
    given_kv = sec.value("num_key_value_heads") is not None
    kv = sec.number("num_key_value_heads") if given_kv else None
    if n_heads is None or (given_kv and kv is None):
        return None
    kv = n_heads if kv is None else kv
    if not grouped_query(sec, n_heads, kv, "num_key_value_heads"):
        return None
    return n_heads, kv


def grouped_query(sec: Section, n_heads: int, kv_heads: int, key: str) -> bool:
    """Whether the query heads are a whole multiple of the KV heads (each KV head serves a
    group of query heads); an issue at ``key`` otherwise. vLLM refuses such a model: its
    ``Attention`` layer asserts ``num_heads % num_kv_heads == 0`` (``vllm/attention/
    layer.py``). A model's own rule; splitting the heads over TP ranks is another's."""
    if n_heads % kv_heads == 0:
        return True
    sec.issue(
        key,
        f"{kv_heads} KV heads do not divide the {n_heads} attention heads: each KV head "
        "serves a whole group of query heads, and vLLM refuses such a model (its Attention "
        "layer asserts num_heads % num_kv_heads == 0)",
    )
    return False


def derived_head_size(sec: Section, n_heads: int, key: str = "hidden_size") -> int | None:
    """``hidden_size // num_attention_heads``, refused unless exact, range-checked."""
    hidden = sec.number(key, maximum=1 << 24)
    if hidden is None:
        return None
    if hidden % n_heads:
        sec.issue(
            "head_dim",
            f"absent, and {key} {hidden} is not a multiple of num_attention_heads {n_heads}; "
            "write head_dim",
        )
        return None
    return sec.derived("head_dim", hidden // n_heads, f"{key} / num_attention_heads")


def head_size(sec: Section, n_heads: int) -> int | None:
    """``head_dim`` if set (the file's, else the class default), else derived."""
    if sec.value("head_dim") is not None:
        return sec.number("head_dim", maximum=MAX_ELEMENTS)
    return derived_head_size(sec, n_heads)


def attention(sec: Section, dtype: CacheDType, *, head: str = "head_dim") -> Attention | None:
    """The attention geometry of a decoder section. ``head`` is how the family's vLLM model
    takes the head size: ``"head_dim"`` (the field, else derived) or ``"derived"`` (always
    ``hidden_size / num_attention_heads``; a ``head_dim`` field is not read)."""
    counted = heads(sec)
    if counted is None:
        return None
    n_heads, kv = counted
    size = head_size(sec, n_heads) if head == "head_dim" else derived_head_size(sec, n_heads)
    if size is None:
        return None
    return Attention(kv, size, dtype)


def layer_count(sec: Section, key: str = "num_hidden_layers") -> int | None:
    """The number of layers (at most 4096, as a `ModelSpec` holds)."""
    return sec.number(key, maximum=MAX_LAYERS)


# -- dtype ----------------------------------------------------------------------------------

#: vLLM ``_FLOAT16_NOT_SUPPORTED_MODELS`` (vllm/config/model.py): float16 is never chosen.
_NO_FLOAT16: Final = frozenset({"gemma2", "gemma3", "gemma3_text", "glm4"})
_MODEL_DTYPES: Final = {
    "float32": CacheDType.float32,
    "float16": CacheDType.float16,
    "bfloat16": CacheDType.bfloat16,
}


@dataclass(frozen=True, slots=True)
class DTypes:
    """The dtypes a family reader uses.

    Attributes:
        model: the model dtype vLLM serves with ``--dtype auto`` (states follow it).
        kv: the attention KV-cache dtype with ``--kv-cache-dtype auto``.
    """

    model: CacheDType
    kv: CacheDType


def resolve_dtypes(reader: Reader, data: Mapping[str, Any], model_type: str) -> DTypes | None:
    """vLLM's ``dtype=auto`` on a current GPU (compute capability >= 8.0): the config dtype
    (``dtype``/``torch_dtype`` at the top, else in ``text_config``, ``vision_config``,
    ``encoder_config``); float32 (also what vLLM assumes when none is written and it cannot
    read the weights) is served in bfloat16, as is float16 for the Gemma 2/3 families
    (vllm/config/model.py ``_resolve_auto_dtype``). The KV cache follows it unless the
    checkpoint's ``quantization_config`` declares an fp8 KV cache."""
    found: tuple[str, object] | None = None
    for prefix, section in (
        ("", data),
        ("text_config.", data.get("text_config")),
        ("vision_config.", data.get("vision_config")),
        ("encoder_config.", data.get("encoder_config")),
    ):
        if not isinstance(section, Mapping):
            continue
        for key in ("dtype", "torch_dtype"):
            if section.get(key) is not None:
                found = (prefix + key, section[key])
                break
        if found is not None:
            break
    config = CacheDType.float32
    if found is not None:
        path, value = found
        name = value.strip().lower().removeprefix("torch.") if isinstance(value, str) else None
        if name not in _MODEL_DTYPES:
            reader.issue(
                path,
                f"expected a model dtype ({', '.join(_MODEL_DTYPES)}), got {_show(value)}",
            )
            return None
        config = _MODEL_DTYPES[name]
    if config is CacheDType.float32 or (config is CacheDType.float16 and model_type in _NO_FLOAT16):
        model = CacheDType.bfloat16
    else:
        model = config
    # vLLM's order: quantization_config, else compression_config, else the text config's.
    quant = data.get("quantization_config")
    if quant is None:
        quant = data.get("compression_config")
    text = data.get("text_config")
    if quant is None and isinstance(text, Mapping):
        quant = text.get("quantization_config")
    kv = _kv_cache_dtype(reader, quant)
    if kv is False:
        return None
    return DTypes(model, model if kv is None or kv is True else kv)


#: ModelOpt's weight algorithms vLLM recognises (transformers_utils/model_arch_config_convertor.py
#: ``_normalize_quantization_config``): only then is its KV algorithm read.
_MODELOPT_ALGOS: Final = frozenset(
    {"FP8", "FP8_PER_CHANNEL_PER_TOKEN", "FP8_PB_WO", "NVFP4", "MIXED_PRECISION"}
)


def _kv_cache_dtype(reader: Reader, quant: object) -> CacheDType | bool | None:
    """The KV dtype a checkpoint's quantization config sets under ``--kv-cache-dtype auto``,
    as vLLM 0.33 decides it: ``None`` when it sets none (the model dtype), ``False`` after an
    issue.

    * ModelOpt (``producer.name`` "modelopt", with ``quantization.quant_algo`` one vLLM
      knows): ``kv_cache_scheme`` or ``kv_cache_quant_algo`` (nested in ``quantization`` or
      not), "FP8" or an 8-bit float, non-dynamic scheme → fp8 (utils/torch_utils.py
      ``get_kv_cache_quant_algo_string``); another value falls back to the model dtype;
      NVFP4 is refused (kvunits has no 4-bit cache dtype).
    * compressed-tensors (``quant_method``): a ``kv_cache_scheme`` makes the cache fp8
      (model_executor/layers/attention/attention.py ``Attention.__init__``).
    * anything else, a quantization config vLLM does not recognise included, leaves the
      cache in the model dtype.
    """
    if not isinstance(quant, Mapping):
        return None
    inner = quant.get("quantization")
    inner = inner if isinstance(inner, Mapping) else {}
    producer = quant.get("producer")
    name = producer.get("name") if isinstance(producer, Mapping) else None
    algo = str(inner.get("quant_algo", "")).upper()
    method = str(quant.get("quant_method") or "").lower().replace("_", "-")
    if (name == "modelopt" or "modelopt_quant_config" in inner) and algo in _MODELOPT_ALGOS:
        method = "modelopt"
    if method.startswith("modelopt"):
        scopes = [("quantization_config.quantization.", inner), ("quantization_config.", quant)]
        for key in ("kv_cache_scheme", "kv_cache_quant_algo"):
            for prefix, scope in scopes:
                value = scope.get(key)
                if value:
                    return _modelopt_kv(reader, prefix + key, value)
        return None
    if method == "compressed-tensors" and quant.get("kv_cache_scheme") is not None:
        return CacheDType.fp8_e4m3
    return None


def _modelopt_kv(reader: Reader, path: str, value: object) -> CacheDType | bool | None:
    if isinstance(value, Mapping):
        if value.get("num_bits") == 4 and value.get("type") == "float":
            value = "nvfp4"
        elif (
            value.get("dynamic") is False
            and value.get("num_bits") == 8
            and value.get("type") == "float"
        ):
            return CacheDType.fp8_e4m3
        else:
            return None  # vLLM: an unknown scheme falls back to "auto"
    if isinstance(value, str) and value.strip().lower() == "fp8":
        return CacheDType.fp8_e4m3
    if isinstance(value, str) and value.strip().lower() == "nvfp4":
        reader.issue(
            path,
            "an NVFP4 KV cache, which kvunits has no dtype for; set cache_dtype "
            "(--kv-cache-dtype) to the dtype your engine stores",
        )
        return False
    return None  # vLLM warns and falls back to "auto": the model dtype


def _show(value: object) -> str:
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, str):
        return repr(value[:40])
    return repr(value)[:40]


# -- max_model_len --------------------------------------------------------------------------

#: vLLM's length keys (``derive_max_model_len_and_key``): the smallest present wins.
_LENGTH_KEYS: Final = (
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "seq_length",
    "model_max_length",
    "max_target_positions",
    "max_sequence_length",
    "max_seq_length",
    "seq_len",
)
#: vLLM's length when the config has none of `_LENGTH_KEYS` (``_get_and_verify_max_len``).
_ASSUMED_LENGTH: Final = 2048
#: RoPE types whose ``max_position_embeddings`` is already scaled (no ``factor`` applied).
_SCALED_ROPE: Final = frozenset(
    {"su", "longrope", "llama3", "yarn", "deepseek_yarn", "deepseek_llama_scaling"}
)


def max_model_len(sec: Section) -> tuple[int, str, tuple[int, str]] | None:
    """vLLM's default ``max_model_len`` for a text section, where it came from, and the
    longest a user may ask for (vllm/config/model.py ``_get_and_verify_max_len``, 0.33.0):

    the smallest of the length keys present (class defaults included), ``model_max_length``
    overriding; times the RoPE ``factor`` of a type that does not publish the scaled length
    (never for ``gemma3*``); with a ``longrope`` RoPE, ``original_max_position_embeddings``.
    When no key gives one, vLLM's assumed 2048 (its warning: "Assuming the model's maximum
    length is 2048").
    The bound is the derived length before the longrope default, or ``model_max_length``
    when larger; above it vLLM refuses unless ``VLLM_ALLOW_LONG_MAX_MODEL_LEN`` is set.
    """
    best: tuple[int, str] | None = None
    for key in _LENGTH_KEYS:
        if sec.value(key) is None:
            continue
        value = sec.number(key, maximum=MAX_SEQ)
        if value is None:
            return None
        if best is None or value < best[0]:
            best = (value, sec.source(key))
    if sec.value("model_max_length") is not None:
        value = sec.number("model_max_length", maximum=MAX_SEQ)
        if value is None:
            return None
        best = (value, sec.source("model_max_length"))
    if best is None:
        # vLLM assumes 2048 and logs a warning (Mamba's configs have no length key).
        best = (_ASSUMED_LENGTH, "vLLM's assumed 2048 (config.json has none of its length keys)")
    rope = _rope(sec)
    if rope is None:
        return None
    length, source = best
    # vLLM takes one factor for all layer types (the last set's), and never for gemma3.
    scaling = [(p, f) for p, kind, f in rope if kind not in _SCALED_ROPE and f is not None]
    if scaling and "gemma3" not in sec.model_type:
        path, factor = scaling[-1]
        length = int(length * factor)
        source = f"derived: {source} × {path}factor ({factor:g})"
    if not 1 <= length <= MAX_SEQ:
        sec.issue("max_position_embeddings", f"max_model_len {length} is out of range")
        return None
    bound = (length, source)
    explicit = sec.data.get("model_max_length")
    if type(explicit) is int and explicit > length:
        bound = (explicit, sec.path("model_max_length"))
    longrope = any(kind in ("longrope", "su") for _, kind, _ in rope)
    if longrope and sec.value("original_max_position_embeddings") is not None:
        original = sec.number("original_max_position_embeddings", maximum=MAX_SEQ)
        if original is None:
            return None
        return original, f"{sec.source('original_max_position_embeddings')} (longrope)", bound
    return length, source, bound


def _rope(sec: Section) -> list[tuple[str, str | None, float | None]] | None:
    """The RoPE parameter sets (one per layer type when nested): path, type, factor."""
    key = "rope_parameters" if sec.value("rope_parameters") is not None else "rope_scaling"
    value = sec.value(key)
    if value is None:
        return []
    if not isinstance(value, Mapping):
        sec.issue(key, f"expected a mapping, got {_show(value)}")
        return None
    nested = [(k, v) for k, v in value.items() if isinstance(v, Mapping)]
    if nested and len(nested) == len(value):
        sets = [(f"{sec.path(key)}.{k}.", v) for k, v in nested if v]
    else:
        sets = [(f"{sec.path(key)}.", value)] if value else []
    read: list[tuple[str, str | None, float | None]] = []
    for path, params in sets:
        type_key = "rope_type" if params.get("rope_type") is not None else "type"
        kind = params.get(type_key)
        if kind is not None and not isinstance(kind, str):
            sec.reader.issue(path + type_key, f"expected a string, got {_show(kind)}")
            return None
        factor = params.get("factor")
        if kind in _SCALED_ROPE:
            factor = None  # the length is published already scaled: the factor is not read
        if factor is not None:
            # A factor of a type that does not publish the scaled length scales max_model_len.
            if isinstance(factor, bool) or not isinstance(factor, (int, float)):
                sec.reader.issue(path + "factor", f"expected a number, got {_show(factor)}")
                return None
            if not 0 < factor <= 1 << 20:  # NaN and infinity fail too
                sec.reader.issue(path + "factor", f"must be a finite number > 0, got {factor!r}")
                return None
        read.append((path, kind, None if factor is None else float(factor)))
    return read
