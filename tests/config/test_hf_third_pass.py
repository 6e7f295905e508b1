"""Architectures read in issue 21's third pass, each as its vLLM 0.33 model file builds it:
AXK1 and Sarvam MLA (MLA without an indexer), Sarvam MoE (BailingMoe's attention), Hunyuan V4
(dense and sparse MLA layers, the indexer where ``indexer_types`` says ``full``), the
decoders whose config class fills ``layer_types`` in ``__post_init__`` (CWM, Kolibri 1,
Mellum, Laguna, MuseGlimmer; Jais 2 has no window), Rnj-1's chunked layers, LFM2's short
convolutions and OLMo Hybrid's gated delta nets. LFM2's configs are published ones
(hf_fixtures/excerpts). The fixtures are
tests/config/hf_fixtures/synthetic (SOURCES.md: written here from the transformers config
classes); ``scripts/vllm-model-view`` compares each with vLLM's own ``ModelConfig`` (and
Hunyuan V4's indexers with vLLM's ``compute_skip_topk_layers``), and
tests/vllm_oracle/test_like_vllm.py plans them with vLLM's ``get_kv_cache_configs``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvunits.contracts import (
    Bytes,
    Elements,
    FullAttentionLayer,
    IndexerLayer,
    KVHeads,
    MLALayer,
    SlidingWindowLayer,
    Tokens,
    Window,
)
from kvunits.contracts.config import ConfigError, load_config, read_hf_config
from kvunits.contracts.state import GatedDeltaNetLayer, Mamba2Layer, ShortConvLayer

SYNTHETIC = Path(__file__).resolve().parent / "hf_fixtures" / "synthetic"


def _data(name: str, **changes: Any) -> dict[str, Any]:
    path = SYNTHETIC / f"synthetic--{name}" / "config.json"
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    data.update(changes)
    for key, value in changes.items():
        if value is None:
            del data[key]
    return data


def _layers(data: dict[str, Any]) -> dict[str, Any]:
    return dict(read_hf_config(data, where="config.json").model.layers)


def _kinds(data: dict[str, Any]) -> str:
    letters: dict[type, str] = {FullAttentionLayer: "F", SlidingWindowLayer: "S"}
    return "".join(letters[type(layer)] for layer in _layers(data).values())


@pytest.mark.parametrize("arch", ["AXK1ForCausalLM", "SarvamMLAForCausalLM"])
def test_mla_without_an_indexer(arch: str) -> None:
    # AXK1.py AXK1MLAAttention and sarvam.py SarvamMLAAttention pass indexer=None: one latent
    # head of kv_lora_rank + qk_rope_head_dim (512 + 64) per layer, dense.
    layers = _layers(_data("axk1", architectures=[arch]))
    assert len(layers) == 8
    assert all(isinstance(layer, MLALayer) and not layer.sparse for layer in layers.values())
    layer = layers["text.0"]
    assert isinstance(layer, MLALayer)
    assert layer.kv_lora_rank == Elements(512) and layer.qk_rope_head_dim == Elements(64)


def test_sarvam_moe_reads_bailing_attention() -> None:
    # sarvam.py SarvamMoEForCausalLM(BailingMoeForCausalLM): head_dim (else hidden / heads)
    # and num_key_value_heads. Sarvam 30B's shape (19 layers, 64 heads, 4 KV heads of 64).
    data = {
        "architectures": ["SarvamMoEForCausalLM"],
        "model_type": "sarvam_moe",
        "hidden_size": 4096,
        "num_hidden_layers": 19,
        "num_attention_heads": 64,
        "num_key_value_heads": 4,
        "head_dim": 64,
        "max_position_embeddings": 131072,
    }
    layer = _layers(data)["text.18"]
    assert isinstance(layer, FullAttentionLayer)
    assert layer.kv_heads == KVHeads(4) and layer.head_size == Elements(64)


def test_hy_v4_indexers_follow_indexer_types() -> None:
    # layer_types: layer 0 full (dense MLA), 1-5 sparse; indexer_types full at 0, 1 and 5
    # (layer 0 is dense: no indexer; shared layers reuse the top-k of the layer before).
    layers = _layers(_data("hy_v4"))
    latents = {n: layer for n, layer in layers.items() if isinstance(layer, MLALayer)}
    assert [layer.sparse for layer in latents.values()] == [False] + [True] * 5
    indexed = [n for n, layer in layers.items() if isinstance(layer, IndexerLayer)]
    assert indexed == ["text.1.indexer", "text.5.indexer"]


def test_hy_v4_default_indexer_types_and_dense_without_layer_types() -> None:
    # HYV4Config.__post_init__: indexer_types "full" where i == 0 or (i - 1) % 4 == 0.
    layers = _layers(_data("hy_v4-default-indexers"))
    indexed = [n for n, layer in layers.items() if isinstance(layer, IndexerLayer)]
    assert indexed == ["text.1.indexer", "text.5.indexer", "text.9.indexer"]
    # Without layer_types no layer is sparse (requested_sparse needs the layer's type).
    layers = _layers(_data("hy_v4-dense"))
    assert all(isinstance(layer, MLALayer) and not layer.sparse for layer in layers.values())


def test_hy_v4_refuses_an_indexer_type_vllm_refuses() -> None:
    data = _data("hy_v4", indexer_types=["full", "full", "shared", "dense", "shared", "full"])
    with pytest.raises(ConfigError, match="indexer_types: 'dense': vLLM's hy_v4 reads only"):
        read_hf_config(data, where="config.json")


@pytest.mark.parametrize(
    ("name", "kinds"),
    [
        # CwmConfig.__post_init__: full where i % 4 == 0.
        ("cwm", "FSSSFSSS"),
        # Kolibri1Config: full where (i + 1) % 5 == 0.
        ("kolibri1", "SSSSFSSSSF"),
        # MuseGlimmerTextConfig: full where (n - 1 - i) % 4 == 0, counted from the last.
        ("muse_glimmer", "SSSFSSSF"),
        # Mellum's file gives layer_types; Laguna's too.
        ("mellum", "SSFSSF"),
        ("laguna", "FSSSFSSS"),
        ("jais2", "FFFF"),
    ],
)
def test_an_absent_layer_types_is_the_config_classs_pattern(name: str, kinds: str) -> None:
    assert _kinds(_data(name)) == kinds


def test_a_pattern_only_fills_what_the_file_leaves_out() -> None:
    # Mellum without layer_types: MellumConfig fills every layer full, whatever the window;
    # Laguna likewise. A written list wins.
    assert _kinds(_data("mellum", layer_types=None)) == "FFFFFF"
    assert _kinds(_data("laguna", layer_types=None)) == "F" * 8
    assert _kinds(_data("cwm", layer_types=["sliding_attention"] * 8)) == "S" * 8


def test_a_kolibri_window_is_its_sliding_window() -> None:
    layer = _layers(_data("kolibri1"))["text.0"]
    assert isinstance(layer, SlidingWindowLayer)
    assert layer.sliding_window == Window(513, Tokens)


def test_the_models_load_as_directories() -> None:
    config = load_config(SYNTHETIC / "synthetic--muse_glimmer")
    assert config.engine.max_model_len == Tokens(131072)


EXCERPTS = SYNTHETIC.parent / "excerpts"


def test_lfm2_keeps_a_short_convolution_state_beside_its_attention_layers() -> None:
    # LiquidAI/LFM2-1.2B's config.json (SOURCES.md): full_attn_idxs 2, 5, 8, 10, 12, 14 (no
    # layer_types: Lfm2Config fills them), conv_dim 2048, conv_L_cache 3; attention of
    # 2048 / 32 = 64 with 8 KV heads. short_conv_state_shape at TP 2: (3 - 1, 2048 / 2).
    layers = load_config(EXCERPTS / "LiquidAI--LFM2-1.2B").model.layers
    attending = [n for n, layer in layers.items() if isinstance(layer, FullAttentionLayer)]
    assert attending == [f"text.{i}" for i in (2, 5, 8, 10, 12, 14)]
    attn = layers["text.2"]
    assert isinstance(attn, FullAttentionLayer)
    assert attn.kv_heads == KVHeads(8) and attn.head_size == Elements(64)
    state = layers["text.0"]
    assert isinstance(state, ShortConvLayer)
    assert [t.shape for t in state.state_tensors(tp=2)] == [(2, 1024)]
    assert state.state_size.numerical_value_in(Bytes) == 2 * 2048 * 2


def test_lfm2_moe_sizes_its_convolution_with_hidden_size() -> None:
    # lfm2_moe.py get_mamba_state_shape_from_config: intermediate_size=hf_config.hidden_size.
    layer = load_config(SYNTHETIC / "synthetic--lfm2_moe").model.layers["text.0"]
    assert isinstance(layer, ShortConvLayer)
    assert [t.shape for t in layer.state_tensors()] == [(2, 1024)]


def test_lfm2_without_conv_dim_is_refused_as_vllm_fails() -> None:
    data = json.loads((EXCERPTS / "LiquidAI--LFM2-1.2B" / "config.json").read_text("utf-8"))
    del data["conv_dim"]
    with pytest.raises(ConfigError, match="conv_dim: missing"):
        read_hf_config(data, where="config.json")


def test_olmo_hybrid_fills_its_config_class_defaults() -> None:
    # OlmoHybridConfig.__post_init__: full attention where i % 4 == 3; key heads the
    # attention heads (8) of int(0.75 × 1024 / 8) = 96, value heads of 192;
    # gated_delta_net_state_shape: conv (4 - 1, 2·8·96 + 8·192), recurrent (8, 192, 96).
    layers = load_config(SYNTHETIC / "synthetic--olmo_hybrid").model.layers
    kinds = "".join("F" if isinstance(x, FullAttentionLayer) else "G" for x in layers.values())
    assert kinds == "GGGFGGGF"
    state = layers["text.0"]
    assert isinstance(state, GatedDeltaNetLayer)
    assert [t.shape for t in state.state_tensors()] == [(3, 3072), (8, 192, 96)]
    attn = layers["text.3"]
    assert isinstance(attn, FullAttentionLayer) and attn.head_size == Elements(128)


def test_rnj1_caches_chunked_layers_as_their_window() -> None:
    # rnj1.py: a chunked_attention layer's per_layer_sliding_window is sliding_window (4096).
    layers = load_config(SYNTHETIC / "synthetic--rnj1").model.layers
    assert _kinds_of(layers) == "SSSFSSSF"
    local = layers["text.0"]
    assert isinstance(local, SlidingWindowLayer)
    assert local.sliding_window == Window(4096, Tokens)


def test_rnj1_without_layer_types_is_refused_by_name() -> None:
    data = _data("rnj1", layer_types=None)
    with pytest.raises(ConfigError, match=r"layer_types: missing: vLLM.s rnj1\.py"):
        read_hf_config(data, where="config.json")


def _kinds_of(layers: Any) -> str:
    letters: dict[type, str] = {FullAttentionLayer: "F", SlidingWindowLayer: "S"}
    return "".join(letters[type(layer)] for layer in layers.values())


def test_mamba2_heads_must_tile_the_inner_size_as_transformers_requires() -> None:
    # tiiuae--Falcon-H1-0.5B as quoted (SOURCES.md) lacks mamba_d_ssm: FalconH1Config's
    # default 1024 is not 24 heads × 64, and validate_architecture refuses the file (vLLM
    # loads it through that class); with mamba_d_ssm 1536 it tiles and is read.
    path = EXCERPTS / "tiiuae--Falcon-H1-0.5B" / "config.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    with pytest.raises(ConfigError, match=r"24 heads \(mamba_n_heads\) × 64 \(mamba_d_head\)"):
        read_hf_config(data, where="config.json")
    data["mamba_d_ssm"] = 1536
    layer = read_hf_config(data, where="config.json").model.layers["text.0.mamba"]
    assert isinstance(layer, Mamba2Layer)
    assert [t.shape for t in layer.state_tensors()] == [(3, 1536 + 2 * 128), (24, 64, 128)]


def test_use_sliding_window_is_qwen2s_alone() -> None:
    # JetBrains Mellum 2.1 (SOURCES.md) carries use_sliding_window: true; vLLM reads it only in
    # qwen2.py, so its windows are layer_types' (every 4th layer full from 3), as vLLM plans.
    layers = load_config(EXCERPTS / "JetBrains--Mellum-2.1").model.layers
    assert _kinds_of(layers) == "SSSF" * 7
    # A Laguna file with the Qwen fields reads the same (laguna.py does not read them).
    path = EXCERPTS / "poolside--Laguna-XS-2.1" / "config.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    plain = _kinds_of(read_hf_config(data, where="config.json").model.layers)
    data.update(use_sliding_window=True, max_window_layers=28)
    assert _kinds_of(read_hf_config(data, where="config.json").model.layers) == plain == "FSSS" * 10


def test_a_refused_decoder_inside_a_multimodal_config_names_its_reason() -> None:
    # Step 3.7's text_config is step3p5 (vLLM's registry: Step3p7ForConditionalGeneration
    # wraps Step3p5ForCausalLM): the refusal is that architecture's, not "a model type
    # kvunits does not read". (Kimi-K3's kimi_linear decoder, the earlier example, is read.)
    data = {
        "architectures": ["Step3p7ForConditionalGeneration"],
        "model_type": "step3p7",
        "torch_dtype": "bfloat16",
        "text_config": {"model_type": "step3p5", "num_hidden_layers": 4, "hidden_size": 64},
    }
    with pytest.raises(ConfigError, match=r"'step3p5' \(Step3p5ForCausalLM\): kvunits"):
        read_hf_config(data, where="config.json")


def test_cohere2_moe_fills_its_layer_types_from_the_dense_prefix() -> None:
    # Cohere2MoeConfig.__post_init__: first_k_dense_replace 2 layers with
    # prefix_dense_sliding_window_pattern 2 ("SF"), then the rest by sliding_window_pattern 4
    # ("SSSF" counted afresh); cohere2_moe.py slides over sliding_window + 1, head_dim 128.
    layers = load_config(SYNTHETIC / "synthetic--cohere2_moe").model.layers
    assert _kinds_of(layers) == "SF" + "SSSFSSSF"
    local = layers["text.0"]
    assert isinstance(local, SlidingWindowLayer)
    assert local.sliding_window == Window(4097, Tokens) and local.head_size == Elements(128)


def test_param2moe_refuses_a_tp_that_does_not_divide_its_kv_heads(tmp_path: Path) -> None:
    # param2moe.py Param2MoEAttention asserts num_key_value_heads % tp == 0 (no replication).
    data = {
        "architectures": ["Param2MoEForCausalLM"],
        "model_type": "param2moe",
        "hidden_size": 2048,
        "num_hidden_layers": 4,
        "num_attention_heads": 16,
        "num_key_value_heads": 4,
        "head_dim": 128,
        "max_position_embeddings": 4096,
    }
    (tmp_path / "config.json").write_text(json.dumps(data), encoding="utf-8")
    flags = {"tensor_parallel_size": "4", "memory_budget": "10 GiB"}
    layer = load_config(tmp_path, flags=flags).model.layers["text.3"]
    assert isinstance(layer, FullAttentionLayer) and layer.kv_heads == KVHeads(4)
    with pytest.raises(ConfigError, match="tensor_parallel_size 8 does not divide the model's 4"):
        load_config(tmp_path, flags={**flags, "tensor_parallel_size": "8"})


def test_exaone_moe_slides_each_layer_over_its_own_window() -> None:
    # exaone_moe.py: sliding_windows[i] when the file lists them (K-EXAONE 2.0), else
    # sliding_window; ExaoneMoeConfig's default pattern: every 4th layer full.
    layers = load_config(SYNTHETIC / "synthetic--exaone_moe-windows").model.layers
    windows = [getattr(layer, "sliding_window", None) for layer in layers.values()]
    assert windows == [Window(w, Tokens) if w else None for w in (128, 128, 1024, 0) * 2]
    assert _kinds_of(load_config(SYNTHETIC / "synthetic--exaone_moe").model.layers) == "SSSF" * 2


@pytest.mark.parametrize("arch", ["LongcatFlashForCausalLM", "LongcatFlashNgramForCausalLM"])
def test_longcat_flash_keeps_two_mla_caches_a_layer(arch: str) -> None:
    # longcat_flash.py FlashDecoderLayer: self_attn = two DeepseekV2MLAAttention (512 + 64);
    # the n-gram variant (FlashNgramModel) builds the same layers. Both caches of layer i go
    # with layer i on a pipeline stage.
    data = _data("longcat_flash", architectures=[arch])
    layers = _layers(data)
    assert list(layers)[:4] == ["text.0", "text.0.second", "text.1", "text.1.second"]
    assert len(layers) == 8
    assert all(isinstance(x, MLALayer) and x.kv_lora_rank == Elements(512) for x in layers.values())


def test_iquest_loopcoder_keeps_a_cache_per_loop() -> None:
    # iquest_loopcoder.py LoopCoderAttention: loop_num caches a layer, the first full, the
    # later ones sliding over loop_window_size; head size hidden_size / heads (5120 / 40).
    data = {
        "architectures": ["IQuestLoopCoderForCausalLM"],
        "model_type": "iquest_loopcoder",
        "hidden_size": 5120,
        "num_hidden_layers": 3,
        "num_attention_heads": 40,
        "num_key_value_heads": 8,
        "max_position_embeddings": 131072,
        "loop_num": 3,
        "loop_window_size": 64,
        "sliding_window": 32768,
        "use_sliding_window": False,
    }
    layers = _layers(data)
    assert list(layers)[:3] == ["text.0", "text.0.loop1", "text.0.loop2"]
    first, later = layers["text.0"], layers["text.0.loop2"]
    assert isinstance(first, FullAttentionLayer) and first.head_size == Elements(128)
    assert isinstance(later, SlidingWindowLayer) and later.sliding_window == Window(64, Tokens)
    with pytest.raises(ConfigError, match="max_window_layers: 2: with use_sliding_window"):
        read_hf_config({**data, "use_sliding_window": True, "max_window_layers": 2}, where="c")


def test_k2_horizon_is_plain_full_attention() -> None:
    # k2_horizon.py: K2HorizonAttention and K2HorizonMoVAAttention each build one Attention of
    # num_key_value_heads heads of head_dim; no loop, no window (use_sliding_window false).
    # The sizing fields a public capacity test quotes for K2-Horizon (code search id
    # 69552524305): 48 layers, 8 KV heads of 128, 524288 positions.
    data = {
        "architectures": ["K2HorizonForCausalLM"],
        "model_type": "k2_horizon",
        "num_hidden_layers": 48,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "hidden_size": 2560,
        "max_position_embeddings": 524288,
        "use_sliding_window": False,
    }
    layers = _layers(data)
    assert len(layers) == 48
    layer = layers["text.47"]
    assert isinstance(layer, FullAttentionLayer)
    assert layer.kv_heads == KVHeads(8) and layer.head_size == Elements(128)
