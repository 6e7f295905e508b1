"""Readers of the attention-only decoder families, each as vLLM 0.33's model code reads it.

Each reader takes the decoder's `Section` (its transformers class defaults applied) and the
dtypes, and returns the layers ``text.0`` … ``text.<L-1>``, or ``None`` after reporting an
issue. The vLLM file each rule comes from is cited where the rule is applied.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from .._counts import Elements, KVHeads
from .._kinds import Window
from .._layers import FullAttentionLayer, LayerSpec, SlidingWindowLayer
from .._quantity import Tokens
from ._hf_fields import MAX_ELEMENTS, MAX_SEQ, Section
from ._hf_layers import (
    Attention,
    DTypes,
    attention,
    chunked,
    full,
    grouped_query,
    indexer,
    kv_shared,
    layer_count,
    mla,
    sliding,
)
from ._hf_per_layer import per_layer_attention
from ._models import MAX_LAYERS

Layers = dict[str, LayerSpec]

_SLIDING: Final = "sliding_attention"
_FULL: Final = "full_attention"


def layer_types(
    sec: Section, n_layers: int, allowed: Mapping[str, str], key: str = "layer_types"
) -> list[str] | None:
    """``layer_types`` as kinds (``allowed`` maps a name to a kind), or ``None`` after an
    issue naming the first entry the family does not read."""
    names = sec.text_list(key, n_layers)
    if names is None:
        if sec.value(key) is None:
            sec.issue(key, "missing")
        return None
    kinds = []
    for index, name in enumerate(names):
        if name not in allowed:
            sec.issue(
                f"{key}[{index}]",
                f"layer type {name[:40]!r} is not one the {sec.model_type} reader knows; it "
                f"reads {', '.join(allowed)}",
            )
            return None
        kinds.append(allowed[name])
    return kinds


def _pattern(sec: Section, key: str, n_layers: int) -> int | None:
    return sec.number(key, maximum=max(n_layers, 1) + 1)


def _need_window(sec: Section, kinds: list[str], window: int | None) -> bool:
    if "sliding" in kinds and window is None:
        sec.issue(
            "sliding_window",
            "missing: the layer types include sliding_attention layers (sliding_window is in "
            "token)",
        )
        return False
    return True


def _stack(kinds: list[str], by_kind: Mapping[str, LayerSpec]) -> Layers:
    return {f"text.{i}": by_kind[kind] for i, kind in enumerate(kinds)}


def read_llama(sec: Section, dtypes: DTypes) -> Layers | None:
    """llama, mistral, ministral3, mixtral, phi3 (vllm/model_executor/models/llama.py: the
    head size is ``head_dim`` or ``hidden_size // num_attention_heads``; a layer slides when
    ``layer_types`` says ``sliding_attention``, else every layer takes the model-level
    ``sliding_window`` — vllm/engine/arg_utils.py sets ``CacheConfig.sliding_window`` only
    when every layer slides)."""
    n_layers, a = layer_count(sec), attention(sec, dtypes.kv)
    window = sec.window()
    if n_layers is None or a is None:
        return None
    if sec.value("layer_types") is not None:
        kinds = layer_types(sec, n_layers, {_SLIDING: "sliding", _FULL: "full"})
        if kinds is None or not _need_window(sec, kinds, window):
            return None
    else:
        kinds = ["full" if window is None else "sliding"] * n_layers
    by_kind = {"full": full(a)}
    if window is not None:
        by_kind["sliding"] = sliding(a, window)
    return _stack(kinds, by_kind)


def read_qwen2(sec: Section, dtypes: DTypes) -> Layers | None:
    """qwen2, qwen2_5_vl, qwen3 (vllm/model_executor/models/qwen2.py, qwen3.py).

    qwen2 takes the head size from ``hidden_size // num_attention_heads`` always; qwen3 reads
    ``head_dim`` (class default 128). transformers keeps ``sliding_window`` only with
    ``use_sliding_window`` and derives ``layer_types`` (layer i slides when i >=
    ``max_window_layers``); vLLM passes no per-layer window and asserts that a mix of kinds
    comes with ``max_window_layers == num_hidden_layers`` (qwen2.py ``Qwen2Model``): every
    layer then takes the model-level window, which a mix leaves unset.
    """
    head = "derived" if sec.model_type.startswith("qwen2") else "head_dim"
    n_layers, a = layer_count(sec), attention(sec, dtypes.kv, head=head)
    use = sec.flag("use_sliding_window")
    window = sec.window() if use else None
    boundary = sec.number("max_window_layers", minimum=0, maximum=MAX_LAYERS)
    if n_layers is None or a is None or boundary is None:
        return None
    if sec.value("layer_types") is not None:
        kinds = layer_types(sec, n_layers, {_SLIDING: "sliding", _FULL: "full"})
        if kinds is None:
            return None
    else:
        kinds = [
            "sliding" if window is not None and i >= boundary else "full" for i in range(n_layers)
        ]
    if len(set(kinds)) > 1:
        if boundary != n_layers:
            sec.issue(
                "max_window_layers",
                f"{boundary} of {n_layers} layers would be full and the rest sliding: vLLM "
                "refuses this mix (qwen2.py: 'Sliding window for some but all layers is not "
                "supported')",
            )
            return None
        return _stack(["full"] * n_layers, {"full": full(a)})
    if kinds and kinds[0] == "sliding":
        if window is None:
            sec.issue(
                "use_sliding_window",
                "layer_types says every layer slides but use_sliding_window is not true, so "
                "transformers drops sliding_window; write one or the other",
            )
            return None
        return _stack(kinds, {"sliding": sliding(a, window)})
    return _stack(kinds, {"full": full(a)})


def read_qwen3_moe(sec: Section, dtypes: DTypes) -> Layers | None:
    """qwen3_moe (vllm/model_executor/models/qwen3_moe.py): ``head_dim`` or ``hidden_size //
    num_attention_heads``; no per-layer window, and ``Qwen3MoeConfig`` derives no
    ``layer_types``, so every layer takes the model-level window, which transformers keeps
    only with ``use_sliding_window``."""
    n_layers, a = layer_count(sec), attention(sec, dtypes.kv)
    use = sec.flag("use_sliding_window")
    window = sec.window() if use else None
    if n_layers is None or a is None:
        return None
    if window is None:
        return _stack(["full"] * n_layers, {"full": full(a)})
    return _stack(["sliding"] * n_layers, {"sliding": sliding(a, window)})


def read_gemma(sec: Section, dtypes: DTypes) -> Layers | None:
    """gemma2, gemma3_text (vllm/model_executor/models/gemma2.py, gemma3.py): a layer slides
    when ``layer_types`` says so; transformers derives it when absent — gemma2 alternates
    (even layers slide), gemma3 makes every ``sliding_window_pattern``-th layer full
    (default 6)."""
    n_layers, a = layer_count(sec), attention(sec, dtypes.kv)
    window = sec.window()
    if n_layers is None or a is None or not _causal(sec):
        return None
    if sec.value("layer_types") is not None:
        kinds = layer_types(sec, n_layers, {_SLIDING: "sliding", _FULL: "full"})
    elif sec.model_type == "gemma2":
        kinds = ["sliding" if (i + 1) % 2 else "full" for i in range(n_layers)]
    else:
        every = _pattern(sec, "sliding_window_pattern", n_layers)
        kinds = None if every is None else _every(n_layers, every)
    if kinds is None or not _need_window(sec, kinds, window):
        return None
    by_kind = {"full": full(a)}
    if window is not None:
        by_kind["sliding"] = sliding(a, window)
    return _stack(kinds, by_kind)


def _every(n_layers: int, every: int) -> list[str]:
    return ["sliding" if (i + 1) % every else "full" for i in range(n_layers)]


def _causal(sec: Section) -> bool:
    bidirectional = sec.value("use_bidirectional_attention")
    if bidirectional not in (None, False, "vision") or sec.value("is_causal") is False:
        key = "is_causal" if sec.value("is_causal") is False else "use_bidirectional_attention"
        sec.issue(
            key,
            f"{sec.value(key)!r}: a bidirectional (embedding) model keeps no KV cache in "
            "vLLM; kvunits plans causal decoders",
        )
        return False
    return True


def read_gemma4(sec: Section, dtypes: DTypes) -> Layers | None:
    """gemma4_text (vllm/model_executor/models/gemma4.py with transformers'
    ``Gemma4TextConfig.__post_init__``): layer types as gemma3 with pattern 6 and the last
    layer forced full; a full layer has ``global_head_dim`` (default 512) and, with
    ``attention_k_eq_v``, ``num_global_key_value_heads`` KV heads, unless
    ``per_layer_config`` gives each layer's (`per_layer_attention`); the last
    ``num_kv_shared_layers`` layers read the cache of the last earlier layer of their type."""
    n_layers, a = layer_count(sec), attention(sec, dtypes.kv)
    window = sec.window()
    global_head = sec.number("global_head_dim", maximum=MAX_ELEMENTS)
    k_eq_v = sec.flag("attention_k_eq_v")
    global_kv = sec.number("num_global_key_value_heads", nullable=True)
    shared = sec.number("num_kv_shared_layers", minimum=0, maximum=MAX_LAYERS)
    bad_global_kv = sec.value("num_global_key_value_heads") is not None and global_kv is None
    if n_layers is None or a is None or global_head is None or shared is None or bad_global_kv:
        return None
    if not _causal(sec):
        return None
    if sec.value("layer_types") is not None:
        kinds = layer_types(sec, n_layers, {_SLIDING: "sliding", _FULL: "full"})
        if kinds is None:
            return None
        kinds[-1] = "full"  # transformers forces the last layer to full attention
    else:
        kinds = _every(n_layers, 6)
        kinds[-1] = "full"
    if not _need_window(sec, kinds, window):
        return None
    if sec.value("per_layer_config") is not None:
        per_layer = per_layer_attention(sec, n_layers, a)
        if per_layer is None:
            return None
        layers = {
            f"text.{i}": full(g) if kind == "full" or window is None else sliding(g, window)
            for i, (kind, g) in enumerate(zip(kinds, per_layer, strict=True))
        }
        return _kv_shared_tail(sec, kinds, layers, shared)
    kv_global = global_kv if k_eq_v and global_kv is not None else a.kv_heads
    if kv_global != a.kv_heads:  # the same query heads, grouped over other KV heads
        n_heads = sec.number("num_attention_heads")
        key = "num_global_key_value_heads"
        if n_heads is None or not grouped_query(sec, n_heads, kv_global, key):
            return None
    by_kind = {"full": full(Attention(kv_global, global_head, a.dtype))}
    if window is not None:
        by_kind["sliding"] = sliding(a, window)
    return _kv_shared_tail(sec, kinds, _stack(kinds, by_kind), shared)


def _kv_shared_tail(sec: Section, kinds: list[str], layers: Layers, shared: int) -> Layers | None:
    """Gemma 4's last ``shared`` layers read the cache of the last earlier layer of their
    type (``kv_sharing_target_layer_name``)."""
    n_layers = len(kinds)
    if shared >= n_layers:
        sec.issue("num_kv_shared_layers", f"{shared} of {n_layers} layers cannot all share")
        return None
    first = n_layers - shared
    for i in range(first, n_layers):
        earlier = [j for j in range(first) if kinds[j] == kinds[i]]
        if not earlier:
            sec.issue(
                "num_kv_shared_layers",
                f"layer {i} shares the cache of an earlier {kinds[i]} layer, and there is none",
            )
            return None
        layers[f"text.{i}"] = kv_shared(f"text.{earlier[-1]}")
    return layers


def read_gemma3n(sec: Section, dtypes: DTypes) -> Layers | None:
    """gemma3n_text (vllm/model_executor/models/gemma3n.py ``Gemma3nAttention``, with
    transformers' ``Gemma3nTextConfig.__post_init__``): ``layer_types``, else every 5th layer
    full; ``head_dim`` (default 256); a sliding layer's window is ``sliding_window``. From
    ``first = num_hidden_layers - num_kv_shared_layers`` on, a layer reads the cache of
    layer ``first - 2`` when it slides and ``first - 1`` when it is full (vLLM's
    ``kv_sharing_target_layer_name``: no cache spec of its own); where that index is
    negative the layer keeps its own cache. The per-layer inputs (AltUp, Laurel, the
    per-layer embeddings) keep no cache."""
    n_layers, a = layer_count(sec), attention(sec, dtypes.kv)
    window = sec.window()
    shared = sec.number("num_kv_shared_layers", minimum=0, maximum=MAX_LAYERS)
    if n_layers is None or a is None or shared is None or not _causal(sec):
        return None
    if sec.value("layer_types") is not None:
        kinds = layer_types(sec, n_layers, {_SLIDING: "sliding", _FULL: "full"})
        if kinds is None:
            return None
    else:
        kinds = _every(n_layers, 5)
    if not _need_window(sec, kinds, window):
        return None
    by_kind = {"full": full(a)}
    if window is not None:
        by_kind["sliding"] = sliding(a, window)
    layers = _stack(kinds, by_kind)
    first = n_layers - shared
    for i in range(max(first, 0), n_layers):
        target = first - (2 if kinds[i] == "sliding" else 1)
        if target >= 0:
            layers[f"text.{i}"] = kv_shared(f"text.{target}")
    return layers


def _cohere_stack(
    sec: Section, a: Attention, kinds: list[str] | None, window: int | None
) -> Layers | None:
    """Cohere 2's layers (cohere2.py, cohere2_moe.py): full, or sliding over
    ``sliding_window + 1`` tokens."""
    if kinds is None or not _need_window(sec, kinds, window):
        return None
    by_kind = {"full": full(a)}
    if window is not None:
        if window + 1 > MAX_SEQ:
            sec.issue("sliding_window", f"{window} + 1 is out of range")
            return None
        by_kind["sliding"] = sliding(a, window + 1)
    return _stack(kinds, by_kind)


def read_cohere2(sec: Section, dtypes: DTypes) -> Layers | None:
    """cohere2 (vllm/model_executor/models/commandr.py): the head size is
    ``hidden_size // num_attention_heads`` (transformers forces it); every
    ``sliding_window_pattern``-th layer (default 4) is full; a sliding layer's window is
    ``sliding_window + 1`` ("cohere swa layer sees [pos − sliding_window, pos]")."""
    n_layers, a = layer_count(sec), attention(sec, dtypes.kv, head="derived")
    window = sec.window()
    if n_layers is None or a is None:
        return None
    if sec.value("layer_types") is not None:
        kinds = layer_types(sec, n_layers, {_SLIDING: "sliding", _FULL: "full"})
    else:
        every = _pattern(sec, "sliding_window_pattern", n_layers)
        kinds = None if every is None else _every(n_layers, every)
    return _cohere_stack(sec, a, kinds, window)


def read_cohere2_moe(sec: Section, dtypes: DTypes) -> Layers | None:
    """cohere2_moe (vllm/model_executor/models/cohere2_moe.py ``Cohere2MoeAttention``): head
    size ``head_dim`` (class default 128); a ``sliding_attention`` layer of ``layer_types``
    slides over ``sliding_window + 1`` tokens, the others are full. An absent
    ``layer_types`` is Cohere2MoeConfig's ``__post_init__`` list: the first
    ``first_k_dense_replace`` layers full where ``(i + 1) %
    prefix_dense_sliding_window_pattern == 0`` (default 1: all), the rest full where their
    own index ``(j + 1) % sliding_window_pattern == 0`` (default 4)."""
    n_layers, a = layer_count(sec), attention(sec, dtypes.kv, head="head_dim")
    window = sec.window()
    if n_layers is None or a is None:
        return None
    if sec.value("layer_types") is not None:
        kinds = layer_types(sec, n_layers, {_SLIDING: "sliding", _FULL: "full"})
    else:
        dense = sec.number("first_k_dense_replace", minimum=0, maximum=n_layers, nullable=True)
        prefix = _pattern(sec, "prefix_dense_sliding_window_pattern", n_layers)
        every = _pattern(sec, "sliding_window_pattern", n_layers)
        if prefix is None or every is None:
            return None
        dense = dense or 0
        kinds = _every(dense, prefix) + _every(n_layers - dense, every)
    return _cohere_stack(sec, a, kinds, window)


def read_exaone_moe(sec: Section, dtypes: DTypes) -> Layers | None:
    """exaone_moe (vllm/model_executor/models/exaone_moe.py ``ExaoneMoeAttention``): head size
    ``head_dim`` (else ``hidden_size // num_attention_heads``); a ``sliding_attention`` layer
    of ``layer_types`` slides over its ``sliding_windows`` entry when the file lists one per
    layer (K-EXAONE 2.0), else over ``sliding_window``; a full or window-less layer is full
    attention (the engine-wide window only when every layer slides). An absent
    ``layer_types`` is ExaoneMoeConfig's: every ``sliding_window_pattern``-th layer full.
    The multi-token-prediction layers are the draft model's, not the served model's."""
    n_layers, a = layer_count(sec), attention(sec, dtypes.kv)
    if n_layers is None or a is None:
        return None
    if sec.value("layer_types") is not None:
        kinds = layer_types(sec, n_layers, {_SLIDING: "sliding", _FULL: "full"})
    else:
        every = _pattern(sec, "sliding_window_pattern", n_layers)
        kinds = None if every is None else _every(n_layers, every)
    if kinds is None:
        return None
    window = sec.window()
    given = sec.value("sliding_windows")
    if given is not None and (
        not isinstance(given, list)
        or len(given) != n_layers
        or any(w is not None and (type(w) is not int or not 0 <= w <= MAX_SEQ) for w in given)
    ):
        sec.issue("sliding_windows", f"expected {n_layers} windows (in token), one per layer")
        return None
    windows: list[int | None] = list(given) if given is not None else [window] * n_layers
    pairs = zip(kinds, windows, strict=True)
    sizes = [w or None if kind == "sliding" else None for kind, w in pairs]
    if all(kind == "sliding" for kind in kinds) and window is not None:
        sizes = [size or window for size in sizes]
    return {
        f"text.{i}": full(a) if size is None else sliding(a, size) for i, size in enumerate(sizes)
    }


def read_gpt_oss(sec: Section, dtypes: DTypes) -> Layers | None:
    """gpt_oss (vllm/model_executor/models/gpt_oss.py ``_build_attention``): layer i slides
    iff i is even, whatever ``layer_types`` says; window ``sliding_window`` (default 128)."""
    n_layers, a = layer_count(sec), attention(sec, dtypes.kv)
    window = sec.window()
    if n_layers is None or a is None:
        return None
    if window is None:
        return _stack(["full"] * n_layers, {"full": full(a)})
    kinds = ["sliding" if i % 2 == 0 else "full" for i in range(n_layers)]
    return _stack(kinds, {"full": full(a), "sliding": sliding(a, window)})


def read_llama4(sec: Section, dtypes: DTypes) -> Layers | None:
    """llama4_text (vllm/model_executor/models/llama4.py ``Llama4Attention``): a NoPE layer
    (``no_rope_layers[i] == 0``) is full attention, a RoPE layer chunked local over
    ``attention_chunk_size`` tokens when that is set; transformers derives
    ``no_rope_layers`` when absent or empty: layer i is NoPE iff (i + 1) % interval == 0."""
    n_layers, a = layer_count(sec), attention(sec, dtypes.kv)
    chunk = sec.number("attention_chunk_size", maximum=MAX_SEQ, nullable=True)
    if n_layers is None or a is None:
        return None
    if sec.value("attention_chunk_size") is not None and chunk is None:
        return None
    flags = sec.value("no_rope_layers")
    rope: list[bool]
    if flags:  # absent, null or [] all derive
        if (
            not isinstance(flags, list)
            or len(flags) != n_layers
            or any(type(flag) is not int or flag not in (0, 1) for flag in flags)
        ):
            sec.issue("no_rope_layers", f"expected {n_layers} entries of 0 or 1 (one per layer)")
            return None
        rope = [flag == 1 for flag in flags]
    else:
        interval = sec.number("no_rope_layer_interval", maximum=MAX_LAYERS)
        if interval is None:
            return None
        rope = [(i + 1) % interval != 0 for i in range(n_layers)]
    if chunk is None:
        return _stack(["full"] * n_layers, {"full": full(a)})
    kinds = ["chunked" if r else "full" for r in rope]
    return _stack(kinds, {"full": full(a), "chunked": chunked(a, chunk)})


def read_deepseek(sec: Section, dtypes: DTypes) -> Layers | None:
    """deepseek_v2, deepseek_v3 (vllm/model_executor/models/deepseek_v2.py; MLA when
    ``kv_lora_rank`` is set, transformers_utils/model_arch_config_convertor.py
    ``is_deepseek_mla``): every layer caches one latent head of ``kv_lora_rank +
    qk_rope_head_dim`` elements and no V (``MLAAttentionSpec``, ``head_size_v = 0``)."""
    if sec.value("index_topk") is not None:
        # deepseek_v2.py: ``is_v32 = hasattr(config, "index_topk")`` builds the indexer too.
        return read_deepseek_sparse(sec, dtypes)
    n_layers = layer_count(sec)
    rank = sec.number("kv_lora_rank", maximum=MAX_ELEMENTS, nullable=True)
    rope = sec.number("qk_rope_head_dim", maximum=MAX_ELEMENTS)
    if n_layers is None or rope is None:
        return None
    if rank is None:
        if sec.value("kv_lora_rank") is None:
            sec.issue(
                "kv_lora_rank",
                "null: vLLM then runs DeepSeek attention without MLA, which kvunits does not "
                "read (it reads MLA: kv_lora_rank + qk_rope_head_dim)",
            )
        return None
    layer = mla(rank, rope, dtypes.kv)
    return {f"text.{i}": layer for i in range(n_layers)}


def read_minicpm3(sec: Section, dtypes: DTypes) -> Layers | None:
    """minicpm3 (vllm/model_executor/models/minicpm3.py ``MiniCPM3Attention``): vLLM 0.33
    expands the latent before attention and caches it as plain attention,
    ``Attention(num_local_heads, qk_head_dim, num_kv_heads=num_local_heads)``: every layer
    keeps K and V for every attention head, each ``qk_nope_head_dim + qk_rope_head_dim``
    elements (V is padded to it). ``kv_lora_rank`` sizes no cache here, unlike DeepSeek's
    MLA (``is_deepseek_mla`` does not name minicpm3)."""
    n_layers = layer_count(sec)
    n_heads = sec.number("num_attention_heads")
    nope = sec.number("qk_nope_head_dim", maximum=MAX_ELEMENTS)
    rope = sec.number("qk_rope_head_dim", maximum=MAX_ELEMENTS)
    if n_layers is None or n_heads is None or nope is None or rope is None:
        return None
    layer = full(Attention(n_heads, nope + rope, dtypes.kv))
    return {f"text.{i}": layer for i in range(n_layers)}


def read_longcat_flash(sec: Section, dtypes: DTypes) -> Layers | None:
    """longcat_flash (vllm/model_executor/models/longcat_flash.py ``FlashDecoderLayer``; the
    n-gram variant's ``FlashNgramModel`` builds the same layers): ``num_layers`` decoder
    layers of two ``DeepseekV2MLAAttention`` each, so two MLA caches a layer (``text.<i>``
    and ``text.<i>.second``) of one latent head of ``kv_lora_rank + qk_rope_head_dim``."""
    n_layers = layer_count(sec, "num_layers")
    rank = sec.number("kv_lora_rank", maximum=MAX_ELEMENTS)
    rope = sec.number("qk_rope_head_dim", maximum=MAX_ELEMENTS)
    if n_layers is None or rank is None or rope is None:
        return None
    latent = mla(rank, rope, dtypes.kv)
    layers: Layers = {}
    for i in range(n_layers):
        layers[f"text.{i}"] = latent
        layers[f"text.{i}.second"] = latent
    return layers


def read_deepseek_sparse(sec: Section, dtypes: DTypes) -> Layers | None:
    """deepseek_v32, glm_moe_dsa: DeepSeek sparse attention (vllm/models/deepseek_v32/
    attention.py, ``DeepseekV32Attention``): every layer an MLA cache (sparse: FlashMLA's
    layout) and, where the layer runs the lightning indexer, the indexer's key cache
    ``text.<i>.indexer`` of ``index_head_dim`` fp8 elements and their scales.

    A layer runs the indexer unless it reuses an earlier layer's top-k: with
    ``index_topk_pattern``, where its letter is ``S``; else where ``max(i − offset + 1, 0)
    % index_topk_freq != 0`` (``index_skip_topk_offset``, default 2; ``index_topk_freq``,
    default 1: every layer). ``indexer_types`` is not read, as vLLM does not read it.
    """
    n_layers = layer_count(sec)
    rank = sec.number("kv_lora_rank", maximum=MAX_ELEMENTS)
    rope = sec.number("qk_rope_head_dim", maximum=MAX_ELEMENTS)
    head = sec.number("index_head_dim", maximum=MAX_ELEMENTS)
    freq = sec.number("index_topk_freq", maximum=MAX_LAYERS, nullable=True) or 1
    offset = sec.number("index_skip_topk_offset", minimum=0, maximum=MAX_LAYERS, nullable=True)
    if n_layers is None or rank is None or rope is None or head is None:
        return None
    if head % _INDEXER_SCALE_BLOCK:
        sec.issue(
            "index_head_dim",
            f"{head} is not a multiple of {_INDEXER_SCALE_BLOCK}: vLLM's indexer keeps one "
            f"float32 scale per {_INDEXER_SCALE_BLOCK} elements",
        )
        return None
    pattern = sec.value("index_topk_pattern")
    if pattern is not None and not isinstance(pattern, str):
        sec.issue("index_topk_pattern", "expected a string of F and S, one letter per layer")
        return None
    offset = 2 if offset is None else offset
    latent, keys = mla(rank, rope, dtypes.kv, sparse=True), indexer(head)
    layers: Layers = {}
    for i in range(n_layers):
        layers[f"text.{i}"] = latent
        if pattern is not None:
            skip = i < len(pattern) and pattern[i] == "S"
        else:
            skip = max(i - offset + 1, 0) % freq != 0
        if not skip:
            layers[f"text.{i}.indexer"] = keys
    return layers


#: ``layer_types`` entries that make a Hunyuan V4 layer sparse (hy_v4 ``_SPARSE_LAYER_TYPES``).
_HY_V4_SPARSE: Final = frozenset(
    {"sparse_attention", "sparse", "indexed_attention", "deepseek_sparse_attention"}
)


def read_hy_v4(sec: Section, dtypes: DTypes) -> Layers | None:
    """hy_v4 (vllm/models/hy_v4/nvidia/attention.py ``HYV4MLAAttention``): MLA on every
    layer. A layer whose ``layer_types`` entry is a sparse kind (``sparse_attention``,
    ``sparse``, ``indexed_attention``, ``deepseek_sparse_attention``) runs DeepSeek sparse
    attention's MLA and, unless ``indexer_types`` calls it ``shared`` (it reuses the top-k of
    the layer before: ``compute_skip_topk_layers``), the indexer's key cache of
    ``index_head_dim`` fp8 elements and their scales (``DeepseekV32IndexerCache``). Without
    ``layer_types`` every layer is dense MLA. ``indexer_types`` defaults to HYV4Config's:
    ``full`` on layer 0 and every 4th layer from 1. The sink, the gate and the
    hyper-connections change no cache.
    """
    n_layers = layer_count(sec)
    rank = sec.number("kv_lora_rank", maximum=MAX_ELEMENTS)
    rope = sec.number("qk_rope_head_dim", maximum=MAX_ELEMENTS)
    if n_layers is None or rank is None or rope is None:
        return None
    dense = mla(rank, rope, dtypes.kv)
    if sec.value("layer_types") is None:
        return {f"text.{i}": dense for i in range(n_layers)}
    kinds = sec.text_list("layer_types", n_layers)
    head = sec.number("index_head_dim", maximum=MAX_ELEMENTS)
    if kinds is None or head is None:
        return None
    if head % _INDEXER_SCALE_BLOCK:
        sec.issue(
            "index_head_dim",
            f"{head} is not a multiple of {_INDEXER_SCALE_BLOCK}: vLLM's indexer keeps one "
            f"float32 scale per {_INDEXER_SCALE_BLOCK} elements",
        )
        return None
    if sec.value("indexer_types") is None:
        shares = [not (i == 0 or (i - 1) % 4 == 0) for i in range(n_layers)]
    else:
        names = sec.text_list("indexer_types", n_layers)
        if names is None:
            return None
        bad = sorted(set(names) - {"full", "shared"})
        if bad:
            sec.issue(
                "indexer_types",
                f"{bad[0][:40]!r}: vLLM's hy_v4 reads only 'full' and 'shared'",
            )
            return None
        shares = [name == "shared" for name in names]
    latent, keys = mla(rank, rope, dtypes.kv, sparse=True), indexer(head)
    layers: Layers = {}
    for i, kind in enumerate(kinds):
        if kind not in _HY_V4_SPARSE:
            layers[f"text.{i}"] = dense
            continue
        layers[f"text.{i}"] = latent
        if not shares[i]:
            layers[f"text.{i}.indexer"] = keys
    return layers


#: Elements of the indexer key that share one float32 scale (vLLM: ``quant_block_size``).
_INDEXER_SCALE_BLOCK: Final = 128


def read_mimo_v2(sec: Section, dtypes: DTypes) -> Layers | None:
    """mimo_v2_flash (vllm/model_executor/models/mimo_v2.py, ``MiMoV2DecoderLayer``): a layer
    whose ``hybrid_layer_pattern`` entry is 1 slides over ``sliding_window_size`` tokens with
    the ``swa_`` geometry (``swa_num_key_value_heads``, ``swa_head_dim``, ``swa_v_head_dim``);
    one whose entry is 0 is full attention with ``num_key_value_heads``, ``head_dim`` and
    ``v_head_dim``. K and V heads differ in size. The attention sinks (a learnt bias per
    head) change no cache: vLLM sizes these layers as plain ``SlidingWindowSpec`` /
    ``FullAttentionSpec``.
    """
    n_layers = layer_count(sec)
    pattern = sec.value("hybrid_layer_pattern")
    n_heads = sec.number("num_attention_heads", maximum=MAX_ELEMENTS)
    swa_heads = sec.number("swa_num_attention_heads", maximum=MAX_ELEMENTS)
    if n_layers is None or n_heads is None or swa_heads is None:
        return None
    if (
        not isinstance(pattern, list)
        or len(pattern) != n_layers
        or any(p not in (0, 1) or type(p) is not int for p in pattern)
    ):
        sec.issue(
            "hybrid_layer_pattern",
            f"expected {n_layers} entries of 0 (full attention) or 1 (sliding window), one per "
            "layer: vLLM's mimo_v2.py reads it for every layer",
        )
        return None
    full = _mimo_geometry(sec, "", n_heads)
    swa = _mimo_geometry(sec, "swa_", swa_heads)
    window = sec.number("sliding_window_size", maximum=MAX_SEQ)
    if full is None or swa is None or window is None:
        return None
    kv, k, v = full
    full_layer = FullAttentionLayer(
        kv_heads=KVHeads(kv), head_size=Elements(k), head_size_v=Elements(v), dtype=dtypes.kv
    )
    kv, k, v = swa
    sliding_layer = SlidingWindowLayer(
        sliding_window=Window(window, Tokens),
        kv_heads=KVHeads(kv),
        head_size=Elements(k),
        head_size_v=Elements(v),
        dtype=dtypes.kv,
    )
    return {f"text.{i}": sliding_layer if p else full_layer for i, p in enumerate(pattern)}


def _mimo_geometry(sec: Section, prefix: str, n_heads: int) -> tuple[int, int, int] | None:
    """KV heads, K and V head sizes of one of MiMo-V2's layer kinds (``v_head_dim`` absent:
    V as K, as ``MiMoV2Attention`` takes it)."""
    kv = sec.number(f"{prefix}num_key_value_heads", maximum=MAX_ELEMENTS)
    k = sec.number(f"{prefix}head_dim", maximum=MAX_ELEMENTS)
    v = sec.number(f"{prefix}v_head_dim", maximum=MAX_ELEMENTS, nullable=True)
    if kv is None or k is None:
        return None
    if not grouped_query(sec, n_heads, kv, f"{prefix}num_key_value_heads"):
        return None
    return kv, k, k if v is None else v
