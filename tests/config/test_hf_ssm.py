"""The Mamba families and the attention decoders read since the refused table was reviewed:
Granite 4.0-H, Falcon-H1, Zamba2, Mamba / Falcon-Mamba, Mamba-2, Falcon, GPT-BigCode.

Every state shape below is vLLM 0.33's ``MambaStateShapeCalculator`` formula
(vllm/model_executor/layers/mamba/mamba_utils.py) applied as each model file's
``get_mamba_state_shape_from_config`` applies it (granitemoehybrid.py, falcon_h1.py,
zamba2.py, mamba.py, mamba2.py); tests/vllm_oracle/test_like_vllm.py compares the whole plan
of the fixture configs with vLLM's own functions (22 + 24 cases agreed when written).
"""

from __future__ import annotations

from pathlib import Path

from kvunits.contracts import Elements, FullAttentionLayer, KVHeads, Tokens
from kvunits.contracts.config import load_config
from kvunits.contracts.state import Mamba1Layer, Mamba2Layer

FIXTURES = Path(__file__).parent / "hf_fixtures"


def test_falcon_h1_keeps_attention_and_a_state_in_every_layer() -> None:
    # tiiuae/Falcon-H1-7B-Instruct's sizing fields (SOURCES.md): 44 layers, 2 KV heads of
    # 128; mamba_d_ssm 3072, 24 heads of 128, 1 group, state 256, conv 4.
    config = load_config(FIXTURES / "excerpts" / "tiiuae--Falcon-H1-7B-Instruct")
    layers = config.model.layers
    assert len(layers) == 88
    attn, state = layers["text.0"], layers["text.0.mamba"]
    assert isinstance(attn, FullAttentionLayer) and isinstance(state, Mamba2Layer)
    assert attn.kv_heads == KVHeads(2) and attn.head_size == Elements(128)
    # mamba2_state_shape at TP 2: the 1 group is replicated to 2 (extra_groups_for_head_
    # shards), conv (K-1, (I + 2·2·N) / 2) = (3, 2048); ssm (H / 2, P, N).
    conv, ssm = state.state_tensors(tp=2)
    assert conv.shape == (3, 2048) and ssm.shape == (12, 128, 256)


def test_falcon_mamba_takes_the_files_intermediate_size() -> None:
    # tiiuae/falcon-mamba-7b: expand 16 × hidden 4096 would be 65536; vLLM 0.33 sizes the
    # state with intermediate_size 8192 (its 311,296-byte page at TP 1, the oracle's).
    config = load_config(FIXTURES / "excerpts" / "tiiuae--falcon-mamba-7b")
    layer = config.model.layers["text.63"]
    assert isinstance(layer, Mamba1Layer)
    assert [t.shape for t in layer.state_tensors()] == [(3, 8192), (8192, 16)]
    assert layer.state_size.numerical_value_in(type(layer.state_size)) == 311296
    # No length key: vLLM's assumed 2048 (_get_and_verify_max_len).
    assert config.engine.max_model_len == Tokens(2048)


def test_granite_hybrid_reads_legacy_layer_type_names() -> None:
    # "mamba"/"attention" are transformers' legacy names (remap_legacy_layer_types).
    config = load_config(FIXTURES / "excerpts" / "toy--granitemoehybrid")
    kinds = [type(layer).__name__ for layer in config.model.layers.values()]
    assert kinds.count("FullAttentionLayer") == 2 and kinds.count("Mamba2Layer") == 6
    state = config.model.layers["text.0"]
    assert isinstance(state, Mamba2Layer)
    # inner mamba_expand × hidden = 1024; 8 heads of 128; 1 group; state 128.
    assert [t.shape for t in state.state_tensors()] == [(3, 1024 + 256), (8, 128, 128)]


def test_zamba2_hybrid_layers_add_their_own_attention() -> None:
    config = load_config(FIXTURES / "synthetic" / "synthetic--zamba2")
    attention = [
        name for name, layer in config.model.layers.items() if isinstance(layer, FullAttentionLayer)
    ]
    assert attention == ["text.2", "text.5"]
    layer = config.model.layers["text.2"]
    assert isinstance(layer, FullAttentionLayer)
    # Zamba2Config: attention_head_dim = 2 × hidden / heads = 128; KV heads = heads.
    assert layer.head_size == Elements(128) and layer.kv_heads == KVHeads(32)


def test_gpt_bigcode_multi_query_is_one_kv_head() -> None:
    # mlc-llm's gpt_bigcode preset (StarCoder): multi_query true, n_head 48.
    config = load_config(FIXTURES / "tuning" / "gpt_bigcode")
    layer = config.model.layers["text.0"]
    assert isinstance(layer, FullAttentionLayer) and layer.kv_heads == KVHeads(1)


def test_falcon_kv_heads_follow_its_two_switches(tmp_path: Path) -> None:
    # vllm/model_executor/models/falcon.py FalconAttention.
    base = '"architectures": ["FalconForCausalLM"], "model_type": "falcon", "hidden_size": 8192, '
    for extra, kv in (
        ('"multi_query": true, "new_decoder_architecture": false', 1),
        ('"multi_query": false, "new_decoder_architecture": false', 128),
        ('"new_decoder_architecture": true, "num_kv_heads": 8', 8),
    ):
        (tmp_path / "config.json").write_text(
            "{" + base + '"num_attention_heads": 128, "num_hidden_layers": 2, ' + extra + "}"
        )
        layer = load_config(tmp_path).model.layers["text.0"]
        assert isinstance(layer, FullAttentionLayer)
        assert layer.kv_heads == KVHeads(kv) and layer.head_size == Elements(64)
