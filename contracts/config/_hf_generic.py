"""Readers of the attention decoders vLLM 0.33 builds the same way, named by their two rules.

Most of vLLM's decoders build one ``Attention`` per layer from three fields: the KV heads
(``num_key_value_heads``, else ``num_attention_heads``: ``ModelConfig.get_total_num_kv_heads``),
the head size, and the window. They differ in two rules only, so one reader serves them,
made by `attention_reader`:

* **head size**: ``"head_dim"`` — ``config.head_dim`` when set and > 0, else ``hidden_size //
  num_attention_heads`` (llama.py ``LlamaAttention``, exaone.py, solar.py, nemotron.py,
  glm4.py, glm4_moe.py, ernie45_moe.py, bailing_moe.py, commandr.py, and every model of the
  Transformers backend: ``ModelArchConfigConvertor.get_head_size``); ``"derived"`` —
  ``hidden_size // num_attention_heads`` whatever ``head_dim`` says (qwen2_moe.py,
  internlm2.py, olmoe.py, minicpm.py, orion.py, stablelm.py).
* **window**: ``"per_layer"`` — a layer slides when ``layer_types`` says
  ``sliding_attention`` (llama.py, exaone4.py, granite.py, the Transformers backend's
  ``create_attention_instances``), and a layer without a window of its own takes the
  engine-wide one, which vLLM sets only when ``layer_types`` is absent or all sliding
  (vllm/engine/arg_utils.py ``create_engine_config``); ``"global"`` — no per-layer window:
  every layer takes the engine-wide one; ``"none"`` — the model has no window: a file that
  sets one is refused (kvunits cannot say what vLLM makes of it).

The vLLM file each family follows is named in its `Family` entry (``kvunits models``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, Literal

from .._layers import LayerSpec
from ._hf_fields import MAX_ELEMENTS, Section
from ._hf_layers import Attention, DTypes, attention, full, grouped_query, layer_count, sliding

Layers = dict[str, LayerSpec]
HeadRule = Literal["head_dim", "derived"]
WindowRule = Literal["per_layer", "global", "none", "gated_none"]

_KINDS: Final = {"sliding_attention": "sliding", "full_attention": "full"}


def attention_reader(
    head: HeadRule, window: WindowRule
) -> Callable[[Section, DTypes], Layers | None]:
    """A reader of a decoder whose layers are all attention, by its two rules."""

    def read(sec: Section, dtypes: DTypes) -> Layers | None:
        if window == "gated_none" and sec.flag("use_sliding_window") is not True:
            sec = sec.without("sliding_window")
        n_layers = layer_count(sec)
        a = _attention(sec, dtypes, head)
        if n_layers is None or a is None:
            return None
        kinds = _window_kinds(sec, n_layers, window)
        if kinds is None:
            return None
        by_kind: dict[str, LayerSpec] = {"full": full(a)}
        if "sliding" in kinds:
            size = sec.window()
            if size is None:
                sec.issue("sliding_window", "missing: some layers slide (in token)")
                return None
            by_kind["sliding"] = sliding(a, size)
        return {f"text.{i}": by_kind[kind] for i, kind in enumerate(kinds)}

    return read


def patterned_reader(
    full_layer: Callable[[int, int], bool],
) -> Callable[[Section, DTypes], Layers | None]:
    """A reader of a decoder whose config class fills an absent ``layer_types`` in
    ``__post_init__`` (``full_layer(i, n)``: layer ``i`` of ``n`` is full attention, the
    others slide): vLLM reads the filled list (a ``sliding_attention`` layer gets
    ``sliding_window`` as its ``per_layer_sliding_window``: transformers/base.py
    ``create_attention_instances``, laguna.py, muse_glimmer.py), so an absent list is that
    pattern, not "every layer slides"."""
    inner = attention_reader("head_dim", "per_layer")

    def read(sec: Section, dtypes: DTypes) -> Layers | None:
        n_layers = layer_count(sec)
        if n_layers is None:
            return None
        kinds = [
            "full_attention" if full_layer(i, n_layers) else "sliding_attention"
            for i in range(n_layers)
        ]
        return inner(sec.filled("layer_types", kinds), dtypes)

    return read


def read_exaone4(sec: Section, dtypes: DTypes) -> Layers | None:
    """exaone4 (vllm/model_executor/models/exaone4.py ``Exaone4Attention``: a layer slides
    over ``sliding_window`` where ``config.layer_types`` says ``sliding_attention``). An
    absent ``layer_types`` is what transformers' ``Exaone4Config.__post_init__`` fills:
    layer ``i`` slides where ``(i + 1) % sliding_window_pattern != 0`` (class default 4); a
    published ``"LLLG"`` pattern comes with its ``layer_types`` (a string pattern alone, or
    no window, makes that derivation fail, so vLLM cannot load the file)."""
    inner = attention_reader("head_dim", "per_layer")
    if sec.value("layer_types") is not None:
        return inner(sec, dtypes)
    n_layers = layer_count(sec)
    if n_layers is None:
        return None
    if sec.value("sliding_window") is None:
        sec.issue(
            "sliding_window",
            "null and no layer_types: Exaone4Config then derives layer_types with a pattern "
            "of 0 and fails (division by zero), so vLLM cannot load the file; write "
            "layer_types",
        )
        return None
    pattern = sec.value("sliding_window_pattern")
    if type(pattern) is not int or pattern < 1:
        sec.issue(
            "sliding_window_pattern",
            f"expected a positive integer when layer_types is absent (Exaone4Config derives "
            f"layer_types from it), got {str(pattern)[:40]!r}; write layer_types",
        )
        return None
    kinds = [
        "sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(n_layers)
    ]
    return inner(sec.filled("layer_types", kinds), dtypes)


def read_rnj1(sec: Section, dtypes: DTypes) -> Layers | None:
    """rnj1 (vllm/model_executor/models/rnj1.py ``Rnj1Attention``): a ``chunked_attention``
    layer of ``layer_types`` attends block-locally over ``sliding_window`` tokens, which vLLM
    caches as a sliding window of that size (``per_layer_sliding_window``; the chunk lookback
    is the kernel's, not the cache's); any other layer is full attention, unless every entry
    is ``sliding_attention``: then the engine-wide window slides them all
    (vllm/engine/arg_utils.py ``create_engine_config``). Head size ``head_dim``."""
    n_layers = layer_count(sec)
    a = attention(sec, dtypes.kv, head="head_dim")
    if n_layers is None or a is None:
        return None
    if sec.value("layer_types") is None:
        sec.issue("layer_types", "missing: vLLM's rnj1.py reads each layer's type from it")
        return None
    names = sec.text_list("layer_types", n_layers)
    if names is None:
        return None
    window = sec.window()
    every = all(name == "sliding_attention" for name in names)
    slides = [name == "chunked_attention" or every for name in names]
    if not any(slides):
        return {f"text.{i}": full(a) for i in range(n_layers)}
    if window is None:
        sec.issue("sliding_window", "missing: chunked_attention layers attend over it (in token)")
        return None
    local, whole = sliding(a, window), full(a)
    return {f"text.{i}": local if slide else whole for i, slide in enumerate(slides)}


def read_iquest_loopcoder(sec: Section, dtypes: DTypes) -> Layers | None:
    """iquest_loopcoder (vllm/model_executor/models/iquest_loopcoder.py
    ``LoopCoderAttention``): each decoder layer runs ``loop_num`` times (default 2) with a
    cache per loop: the first full attention (or, read as Qwen 2 configs are, the
    ``sliding_window`` when ``use_sliding_window`` is true, which vLLM then requires on every
    layer: ``max_window_layers == num_hidden_layers``), every later one a sliding window of
    ``loop_window_size`` tokens (default 64); ``text.<i>`` and ``text.<i>.loop<k>``, all on
    layer i's pipeline stage. Head size ``hidden_size // num_attention_heads``."""
    n_layers = layer_count(sec)
    a = attention(sec, dtypes.kv, head="derived")
    loops = sec.filled("loop_num", 2).number("loop_num", maximum=64)
    span = sec.filled("loop_window_size", 64).number("loop_window_size", maximum=1 << 24)
    if n_layers is None or a is None or loops is None or span is None:
        return None
    window = sec.window() if sec.flag("use_sliding_window") is True else None
    if window is not None and sec.value("max_window_layers") not in (None, n_layers):
        sec.issue(
            "max_window_layers",
            f"{sec.value('max_window_layers')!r}: with use_sliding_window, vLLM's "
            f"iquest_loopcoder.py requires it to equal num_hidden_layers ({n_layers})",
        )
        return None
    first = full(a) if window is None else sliding(a, window)
    later = sliding(a, span)
    layers: Layers = {}
    for i in range(n_layers):
        layers[f"text.{i}"] = first
        for k in range(1, loops):
            layers[f"text.{i}.loop{k}"] = later
    return layers


def _attention(sec: Section, dtypes: DTypes, head: HeadRule) -> Attention | None:
    if head == "head_dim" and sec.value("head_dim") in (0,):
        # vLLM reads 0 as absent (get_head_size: "head_dim > 0").
        return attention(sec.without("head_dim"), dtypes.kv, head="head_dim")
    return attention(sec, dtypes.kv, head=head)


def _window_kinds(sec: Section, n_layers: int, rule: WindowRule) -> list[str] | None:
    """Each layer's kind (``"full"`` or ``"sliding"``) by the family's window rule."""
    window = sec.window()
    types = sec.value("layer_types")
    if rule in ("none", "gated_none"):
        if window is not None:
            sec.issue(
                "sliding_window",
                f"{window}: the {sec.model_type} model in vLLM has no sliding window of its "
                "own, and kvunits does not guess what the engine-wide window does to it; "
                "remove it or set it to null if the checkpoint does not slide",
            )
            return None
        return ["full"] * n_layers
    if types is None:
        return ["full" if window is None else "sliding"] * n_layers
    names = sec.text_list("layer_types", n_layers)
    if names is None:
        return None
    kinds = []
    for index, name in enumerate(names):
        if name not in _KINDS:
            sec.issue(
                f"layer_types[{index}]",
                f"layer type {name[:40]!r} is not one the {sec.model_type} reader knows; it "
                f"reads {', '.join(_KINDS)}",
            )
            return None
        kinds.append(_KINDS[name])
    if window is None:
        return ["full"] * n_layers
    every = all(kind == "sliding" for kind in kinds)
    if rule == "global":
        return ["sliding" if every else "full"] * n_layers
    return kinds


# -- families with their own field names ----------------------------------------------------


def read_chatglm(sec: Section, dtypes: DTypes) -> Layers | None:
    """chatglm (vllm/model_executor/models/chatglm.py ``GLMAttention``): ``num_layers``
    layers; KV heads ``multi_query_group_num`` with ``multi_query_attention``, else the
    attention heads; head size ``hidden_size // num_attention_heads``."""
    n_layers = layer_count(sec, "num_layers")
    heads = sec.number("num_attention_heads")
    mqa = sec.flag("multi_query_attention")
    kv = sec.number("multi_query_group_num") if mqa else heads
    hidden = sec.number("hidden_size", maximum=1 << 24)
    if None in (n_layers, heads, kv, hidden):
        return None
    assert n_layers is not None and heads is not None and kv is not None and hidden is not None
    size = sec.derived("head_dim", hidden // heads, "hidden_size / num_attention_heads")
    if size is None:
        return None
    layer = full(Attention(kv, size, dtypes.kv))
    return {f"text.{i}": layer for i in range(n_layers)}


def read_dbrx(sec: Section, dtypes: DTypes) -> Layers | None:
    """dbrx (vllm/model_executor/models/dbrx.py ``DbrxAttention``): ``n_layers`` layers,
    ``n_heads`` heads of ``d_model // n_heads``, ``attn_config.kv_n_heads`` KV heads."""
    n_layers = layer_count(sec, "n_layers")
    heads = sec.number("n_heads")
    hidden = sec.number("d_model", maximum=1 << 24)
    attn = sec.value("attn_config")
    kv = None
    if isinstance(attn, dict):
        kv = sec.check_number("attn_config.kv_n_heads", attn.get("kv_n_heads"), "head")
    else:
        sec.issue("attn_config", "missing: it holds kv_n_heads (head)")
    if None in (n_layers, heads, hidden, kv):
        return None
    assert n_layers is not None and heads is not None and hidden is not None and kv is not None
    size = sec.derived("head_dim", hidden // heads, "d_model / n_heads")
    if size is None:
        return None
    layer = full(Attention(kv, size, dtypes.kv))
    return {f"text.{i}": layer for i in range(n_layers)}


def read_step3_text(sec: Section, dtypes: DTypes) -> Layers | None:
    """step3_text (vllm/model_executor/models/step3_text.py ``Step3TextDecoderLayer``): one
    KV head of ``head_dim`` on every layer (the model asserts ``num_kv_heads == 1``)."""
    n_layers = layer_count(sec)
    size = sec.number("head_dim", maximum=MAX_ELEMENTS)
    if n_layers is None or size is None:
        return None
    layer = full(Attention(1, size, dtypes.kv))
    return {f"text.{i}": layer for i in range(n_layers)}


def read_nemotron_nas(sec: Section, dtypes: DTypes) -> Layers | None:
    """nemotron-nas, DeciLM (vllm/model_executor/models/nemotron_nas.py
    ``DeciLMDecoderLayer``): one entry of ``block_configs`` per layer; a layer whose
    ``attention.no_op`` (or ``replace_with_linear``) is true has no attention and no cache;
    the others have ``num_attention_heads // attention.n_heads_in_group`` KV heads of
    ``head_dim`` (else ``hidden_size // num_attention_heads``: ``LlamaAttention``)."""
    blocks = sec.value("block_configs")
    heads = sec.number("num_attention_heads")
    a = attention(sec.without("num_key_value_heads"), dtypes.kv)
    if heads is None or a is None:
        return None
    if not isinstance(blocks, list) or not blocks:
        sec.issue("block_configs", "missing: one entry per layer (DeciLM's layer shapes)")
        return None
    layers: Layers = {}
    by_kv: dict[int, LayerSpec] = {}
    for i, block in enumerate(blocks):
        attn = block.get("attention") if isinstance(block, dict) else None
        if not isinstance(attn, dict):
            sec.issue(f"block_configs[{i}].attention", "missing: the layer's attention")
            return None
        if attn.get("no_op") is True or attn.get("replace_with_linear") is True:
            continue  # no attention: no cache (vLLM builds none for it)
        group = sec.check_number(
            f"block_configs[{i}].attention.n_heads_in_group", attn.get("n_heads_in_group"), "head"
        )
        if group is None:
            return None
        if heads % group:
            sec.issue(
                f"block_configs[{i}].attention.n_heads_in_group",
                f"{group} does not divide num_attention_heads {heads}",
            )
            return None
        kv = heads // group
        if kv not in by_kv:
            by_kv[kv] = full(Attention(kv, a.head_size, a.dtype))
        layers[f"text.{i}"] = by_kv[kv]
    if not layers:
        sec.issue("block_configs", "no layer has attention: nothing to cache")
        return None
    return layers


def read_falcon(sec: Section, dtypes: DTypes) -> Layers | None:
    """falcon (vllm/model_executor/models/falcon.py ``FalconAttention``): full attention, head
    size ``hidden_size // num_attention_heads``; KV heads ``num_kv_heads`` (null: the
    attention heads, ``FalconConfig``) with ``new_decoder_architecture``, else one with
    ``multi_query``, else the attention heads (ALiBi or RoPE, the cache is the same)."""
    n_layers = layer_count(sec)
    heads = sec.number("num_attention_heads")
    hidden = sec.number("hidden_size", maximum=1 << 24)
    new_arch, mqa = sec.flag("new_decoder_architecture"), sec.flag("multi_query")
    if None in (n_layers, heads, hidden):
        return None
    assert n_layers is not None and heads is not None and hidden is not None
    if new_arch:
        kv = sec.number("num_kv_heads") if sec.value("num_kv_heads") is not None else heads
    else:
        kv = 1 if mqa else heads
    if kv is None or not grouped_query(sec, heads, kv, "num_kv_heads"):
        return None
    size = sec.derived("head_dim", hidden // heads, "hidden_size / num_attention_heads")
    if size is None:
        return None
    layer = full(Attention(kv, size, dtypes.kv))
    return {f"text.{i}": layer for i in range(n_layers)}


def read_step1(sec: Section, dtypes: DTypes) -> Layers | None:
    """step1 (vllm/model_executor/models/step1.py ``Step1Attention``): ALiBi full attention,
    head size ``hidden_size // num_attention_heads``, KV heads ``num_attention_groups``, else
    ``num_key_value_heads``, else one (a value below 1 is one too)."""
    n_layers = layer_count(sec)
    heads = sec.number("num_attention_heads")
    hidden = sec.number("hidden_size", maximum=1 << 24)
    if None in (n_layers, heads, hidden):
        return None
    assert n_layers is not None and heads is not None and hidden is not None
    key = next((k for k in ("num_attention_groups", "num_key_value_heads") if sec.given(k)), None)
    raw = None if key is None else sec.value(key)
    kv = 1
    if key is not None and raw is not None and not (type(raw) is int and raw <= 0):
        found = sec.number(key)
        if found is None:
            return None
        kv = found
    if not grouped_query(sec, heads, kv, key or "num_attention_groups"):
        return None
    size = sec.derived("head_dim", hidden // heads, "hidden_size / num_attention_heads")
    if size is None:
        return None
    layer = full(Attention(kv, size, dtypes.kv))
    return {f"text.{i}": layer for i in range(n_layers)}


def read_gpt_bigcode(sec: Section, dtypes: DTypes) -> Layers | None:
    """gpt_bigcode through vLLM's Transformers backend (transformers/base.py: KV heads
    ``ModelConfig.get_total_num_kv_heads``, which reads ``num_key_value_heads``, set by
    ``GPTBigCodeConfig.__post_init__`` to 1 with ``multi_query`` (default true) and to
    ``n_head`` without, whatever the file says); head size ``n_embd // n_head``."""
    n_layers = layer_count(sec)
    heads = sec.number("num_attention_heads")
    hidden = sec.number("hidden_size", maximum=1 << 24)
    mqa = sec.flag("multi_query")
    if None in (n_layers, heads, hidden):
        return None
    assert n_layers is not None and heads is not None and hidden is not None
    size = sec.derived("head_dim", hidden // heads, "n_embd / n_head")
    if size is None:
        return None
    layer = full(Attention(1 if mqa is not False else heads, size, dtypes.kv))
    return {f"text.{i}": layer for i in range(n_layers)}
