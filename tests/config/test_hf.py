"""The Hugging Face ``config.json`` reader: the rules each family is read by, what it refuses
by name, real files' NaN/Infinity, derived values checked like given ones, and its errors.

The plans of the shipped files against vLLM's numbers are in ``test_hf_families.py``; here
each rule is exercised on a real file with one field edited (the vLLM source of the rule is
cited in ``contracts/config/_hf_*.py`` where it is applied, and repeated here).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from kvunits.contracts import (
    Elements,
    EncoderTokens,
    FullAttentionLayer,
    KVHeads,
    KVSharedLayer,
    Layers,
    PoolFactor,
    SlidingWindowLayer,
    Tokens,
    Window,
)
from kvunits.contracts.config import (
    HF_FAMILIES,
    HF_FIELDS,
    HF_WRAPPERS,
    load_config,
    load_config_data,
    read_hf_config,
)
from kvunits.contracts.errors import ConfigError
from kvunits.runtime.capacity import plan

from .conftest import EXAMPLES

HF = EXAMPLES / "hf"


def _data(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((HF / name / "config.json").read_text())
    return loaded


def _kinds(data: dict[str, Any]) -> list[str]:
    model = read_hf_config(data, where="config.json").model
    return [layer.kind for layer in model.layers.values()]


def _issues(data: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as excinfo:
        load_config_data(data, where="config.json")
    return [str(issue) for issue in excinfo.value.issues]


def _one_issue(data: dict[str, Any]) -> str:
    issues = _issues(data)
    assert len(issues) == 1, issues
    return issues[0]


# -- the shipped examples ------------------------------------------------------------------


def test_voxtral_realtime_config() -> None:
    config = load_config(HF / "voxtral-mini-4b-realtime-2602" / "config.json")
    assert config.model.name == "voxtral-mini-4b-realtime-2602"  # the directory's name
    audio, text = config.model.layers["audio.0"], config.model.layers["text.25"]
    assert isinstance(audio, SlidingWindowLayer)
    assert audio.sliding_window == Window(
        750, EncoderTokens
    )  # audio_config.sliding_window: encoder_token
    assert audio.pool == PoolFactor(4)  # downsample_factor
    assert (audio.kv_heads, audio.head_size) == (KVHeads(32), Elements(64))
    assert isinstance(text, SlidingWindowLayer)
    assert text.sliding_window == Window(8192, Tokens)  # text_config.sliding_window: token
    assert (text.kv_heads, text.head_size) == (KVHeads(8), Elements(128))
    assert len(config.model.layers) == 32 + 26
    assert config.engine_sources["max_model_len"] == "hf text_config.max_position_embeddings"
    # A streaming sliding-window encoder has no length limit of its own (its
    # max_position_embeddings, 30 s, is not one): it feeds one pooled block per text token.
    assert config.engine.max_encoder_len == EncoderTokens(4 * 131072)
    assert config.engine_sources["max_encoder_len"].startswith("hf derived: P × text_config.")
    assert str(config.engine.max_encoder_tokens_per_step) == "4 encoder_token"
    result = plan(config.model, config.engine)
    audio_plan = result.group("audio")
    assert str(audio_plan.group.manager.sliding_window) == "189 pooled_block"
    assert str(audio_plan.page_size) == "524288 byte"
    assert str(audio_plan.admission_cap) == "13 cache_block"


def test_mistral_derives_head_dim_and_slides_everywhere() -> None:
    config = load_config(HF / "mistral-7b-v0.1" / "config.json")
    layers = list(config.model.layers.values())
    assert len(layers) == 32
    assert all(isinstance(layer, SlidingWindowLayer) for layer in layers)
    first = layers[0]
    assert isinstance(first, SlidingWindowLayer)
    assert first.head_size == Elements(4096 // 32)  # no head_dim in the file
    assert (first.sliding_window, first.kv_heads) == (Window(4096, Tokens), KVHeads(8))
    assert str(config.engine.max_model_len) == "32768 token"
    assert config.engine_sources["max_model_len"] == "hf max_position_embeddings"
    assert str(plan(config.model, config.engine).group("text").admission_cap) == "385 cache_block"


def test_gemma_layer_types_mix_sliding_and_full() -> None:
    kinds = _kinds(_data("gemma-3-1b-it"))
    assert [i for i, kind in enumerate(kinds) if kind == "full_attention"] == [5, 11, 17, 23]
    config = load_config(HF / "gemma-3-1b-it" / "config.json")
    names = [group.group.name for group in plan(config.model, config.engine).groups]
    assert names == ["text/sliding_window", "text/full_attention"]


def test_engine_settings_still_apply_to_hf_configs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KVUNITS_MAX_MODEL_LEN", "8192 token")
    config = load_config(HF / "llama-3.1-8b" / "config.json", flags={"memory_budget": "16 GiB"})
    assert str(config.engine.max_model_len) == "8192 token"
    assert config.engine_sources["max_model_len"] == "env KVUNITS_MAX_MODEL_LEN"
    assert config.engine_sources["memory_budget"] == "flag --memory-budget"


# -- layer kinds, family by family ----------------------------------------------------------


def test_sliding_window_pattern_without_layer_types() -> None:
    # Gemma3TextConfig derives layer_types from sliding_window_pattern (default 6).
    data = _data("gemma-3-1b-it")
    expected = _kinds(data)
    del data["layer_types"]
    assert _kinds(data) == expected
    del data["sliding_window_pattern"]
    assert _kinds(data) == expected  # the default is 6 too
    assert (
        _kinds({**data, "sliding_window_pattern": 2})[:4]
        == ["sliding_window", "full_attention"] * 2
    )


def test_gemma2_alternates() -> None:
    # Gemma2Config: layer i slides when (i + 1) % 2 (even layers), vLLM gemma2.py:155-166.
    data = _data("gemma-2-2b-it")
    assert "layer_types" not in data
    assert _kinds(data)[:4] == ["sliding_window", "full_attention"] * 2


def test_qwen2_slides_on_every_layer_or_none_as_vllm_does() -> None:
    # transformers derives layer i sliding when i >= max_window_layers; vLLM's Qwen2Model
    # asserts max_window_layers == num_hidden_layers whenever the kinds mix (qwen2.py:351-360).
    data = {**_data("qwen2.5-7b-instruct"), "use_sliding_window": True, "max_window_layers": 0}
    assert set(_kinds(data)) == {"sliding_window"}
    layer = read_hf_config(data, where="config.json").model.layers["text.0"]
    assert isinstance(layer, SlidingWindowLayer) and layer.sliding_window == Window(131072, Tokens)
    assert set(_kinds({**data, "use_sliding_window": False})) == {"full_attention"}
    assert set(_kinds({**data, "max_window_layers": 28})) == {"full_attention"}
    assert _one_issue({**data, "max_window_layers": 4}) == (
        "config.json: max_window_layers: 4 of 28 layers would be full and the rest sliding: "
        "vLLM refuses this mix (qwen2.py: 'Sliding window for some but all layers is not "
        "supported')"
    )


def test_qwen2_reads_the_head_size_from_hidden_size() -> None:
    # vLLM's qwen2.py:150 takes hidden_size // num_attention_heads; a head_dim is not read.
    layer = read_hf_config(
        {**_data("qwen2.5-7b-instruct"), "head_dim": 64}, where="config.json"
    ).model.layers["text.0"]
    assert isinstance(layer, FullAttentionLayer) and layer.head_size == Elements(3584 // 28)


def test_qwen3_head_dim_defaults_to_128() -> None:
    data = _data("qwen3-8b")
    del data["head_dim"]
    layer = read_hf_config({**data, "hidden_size": 5120}, where="config.json").model.layers[
        "text.0"
    ]
    assert isinstance(layer, FullAttentionLayer) and layer.head_size == Elements(
        128
    )  # not 5120 / 32


def test_mistral_without_sliding_window_slides_at_4096() -> None:
    # MistralConfig's default sliding_window is 4096; null turns it off.
    data = _data("mistral-7b-v0.1")
    del data["sliding_window"]
    assert set(_kinds(data)) == {"sliding_window"}
    assert set(_kinds({**data, "sliding_window": None})) == {"full_attention"}
    assert set(_kinds({**data, "sliding_window": 0})) == {"full_attention"}  # 0 is none
    # use_sliding_window is not a Mistral field: vLLM's llama.py slides whatever it says.
    assert set(_kinds({**data, "use_sliding_window": False})) == {"sliding_window"}


def test_llama4_chunked_and_nope_layers() -> None:
    data = _data("llama-4-scout-17b-16e-instruct")
    kinds = _kinds(data)
    assert [i for i, k in enumerate(kinds) if k == "full_attention"] == list(range(3, 48, 4))
    text = data["text_config"]
    text["no_rope_layers"] = [1, 0] * 24
    assert _kinds(data)[:2] == ["chunked_local", "full_attention"]
    text["attention_chunk_size"] = None  # no chunk: vLLM's llama4.py uses full attention
    assert set(_kinds(data)) == {"full_attention"}
    text["no_rope_layers"] = [1, 2] * 24
    assert "no_rope_layers: expected 48 entries of 0 or 1" in _one_issue(data)


def test_gemma4_shared_kv_layers_keep_no_cache() -> None:
    # Gemma4: the last num_kv_shared_layers layers read the cache of the last earlier layer
    # of their type (gemma4.py:403-492) and get no cache spec.
    data = _data("gemma-4-26b-a4b")
    data["text_config"]["num_kv_shared_layers"] = 10
    config = load_config_data(data, where="config.json", flags={"memory_budget": "1 TiB"})
    layers = config.model.layers
    assert isinstance(layers["text.20"], KVSharedLayer)
    assert layers["text.20"].target == "text.19"  # the last sliding layer before 20
    assert layers["text.29"] == KVSharedLayer(target="text.17")  # the last full one
    result = plan(config.model, config.engine)
    assert len(result.uncached_layers) == 10
    assert [g.group.num_layers for g in result.groups] == [Layers(17), Layers(3)]


def test_cohere2_window_is_one_more() -> None:
    layer = read_hf_config(_data("c4ai-command-r7b-12-2024"), where="config.json").model.layers[
        "text.0"
    ]
    assert isinstance(layer, SlidingWindowLayer) and layer.sliding_window == Window(4097, Tokens)


def test_gpt_oss_ignores_layer_types() -> None:
    data = _data("gpt-oss-20b")
    data["layer_types"] = ["full_attention"] * 24
    assert _kinds(data)[:2] == ["sliding_window", "full_attention"]


def test_whisper_decoder_self_and_cross_attention() -> None:
    model = read_hf_config(_data("whisper-large-v3"), where="config.json").model
    assert model.layers["audio.0"].kind == "encoder_only"
    cross = model.layers["cross.31"]
    assert cross.kind == "cross_attention" and str(cross.encoder_length) == "1500 encoder_token"
    assert "d_model: 1280 is not a multiple of decoder_attention_heads 24" in _one_issue(
        {**_data("whisper-large-v3"), "decoder_attention_heads": 24}
    )


def test_voxtral_audio_encoder_keeps_no_cache() -> None:
    # Voxtral Mini 3B: a non-causal Whisper encoder (vLLM voxtral.py builds it with
    # is_causal false): no P is needed, unlike the realtime model.
    model = read_hf_config(_data("voxtral-mini-3b-2507"), where="config.json").model
    assert {layer.kind for name, layer in model.layers.items() if name.startswith("audio")} == {
        "encoder_only"
    }


def test_a_realtime_text_config_may_name_its_type() -> None:
    # transformers 5 writes text_config.model_type "voxtral_realtime_text" (a mistral).
    data = _data("voxtral-mini-4b-realtime-2602")
    data["text_config"]["model_type"] = "voxtral_realtime_text"
    assert _kinds(data) == _kinds(_data("voxtral-mini-4b-realtime-2602"))


def test_block_pool_size_is_read_first() -> None:
    data = _data("voxtral-mini-4b-realtime-2602")
    del data["downsample_factor"]
    data["audio_config"]["block_pool_size"] = 4
    layer = read_hf_config(data, where="config.json").model.layers["audio.0"]
    assert isinstance(layer, SlidingWindowLayer) and layer.pool == PoolFactor(4)
    data["downsample_factor"] = 2
    assert _issues(data) == [
        "config.json: audio_config.block_pool_size: the pooling factors disagree: "
        "audio_config.block_pool_size = 4, downsample_factor = 2"
    ]


def test_full_attention_audio_encoder_without_window() -> None:
    # An absent window is the class default (750); null turns it off.
    data = _data("voxtral-mini-4b-realtime-2602")
    del data["audio_config"]["sliding_window"]
    layer = read_hf_config(data, where="config.json").model.layers["audio.0"]
    assert isinstance(layer, SlidingWindowLayer) and layer.sliding_window == Window(
        750, EncoderTokens
    )
    data["audio_config"]["sliding_window"] = None
    config = read_hf_config(data, where="config.json")
    layer = config.model.layers["audio.0"]
    assert isinstance(layer, FullAttentionLayer) and layer.pool == PoolFactor(4)
    assert config.engine["max_encoder_len"] == EncoderTokens(1500)


def test_nemotron_h_pattern_and_block_types() -> None:
    data = _data("nemotron-h-56b-base-8k")
    kinds = _kinds(data)
    assert (kinds.count("mamba2"), kinds.count("full_attention"), len(kinds)) == (54, 10, 64)
    names = list(read_hf_config(data, where="config.json").model.layers)
    assert names[:3] == ["text.0", "text.2", "text.4"]  # MLP layers keep their index
    del data["hybrid_override_pattern"]
    data["layers_block_type"] = ["mamba", "mlp", "attention", "moe"]
    assert _kinds(data) == ["mamba2", "full_attention"]
    data["layers_block_type"] = ["mamba", "ssm"]
    assert "layers_block_type[1]: 'ssm' is not a block type" in _one_issue(data)


def test_jamba_attention_period() -> None:
    kinds = _kinds(_data("jamba-v0.1"))
    assert [i for i, k in enumerate(kinds) if k == "full_attention"] == [4, 12, 20, 28]
    assert "attn_layer_offset: 8 must be below attn_layer_period 8" in _one_issue(
        {**_data("jamba-v0.1"), "attn_layer_offset": 8}
    )


# -- never guess ----------------------------------------------------------------------------


def test_an_unknown_model_type_is_refused_by_name() -> None:
    data = {**_data("llama-3.1-8b"), "model_type": "rwkv"}
    del data["architectures"]
    issue = _one_issue(data)
    assert issue.startswith(
        "config.json: model_type: kvunits does not read model type 'rwkv': it plans "
        "only the families whose caches it reads as vLLM does: afmoe, apertus, arcee, "
    )
    assert "llama4" in issue and "whisper" in issue


def test_architectures_come_first_as_vllm_dispatches() -> None:
    # vLLM picks the model class by `architectures` (ModelRegistry), so a checkpoint whose
    # model_type was renamed still serves as its architecture: kvunits reads it so too.
    renamed = {**_data("llama-3.1-8b"), "model_type": "my_llama_finetune"}
    assert set(_kinds(renamed)) == {"full_attention"}
    # An architecture vLLM 0.33 serves but kvunits does not model is refused with the reason.
    data = {**_data("llama-3.1-8b"), "architectures": ["DoryForCausalLM"]}
    assert _one_issue(data) == (
        "config.json: architectures[0]: DoryForCausalLM: kvunits does not plan it: layers run "
        "several times per token (looped/recurrent depth, dory.py), not modelled"
    )
    # An MLA architecture reads the file as MLA, naming what it lacks.
    data["architectures"] = ["SarvamMLAForCausalLM"]
    assert _one_issue(data) == (
        "config.json: qk_rope_head_dim: missing (element (MLA decoupled RoPE key))"
    )
    # One vLLM 0.33 no longer serves (registry.py _PREVIOUSLY_SUPPORTED_MODELS).
    data["architectures"] = ["MllamaForConditionalGeneration"]
    assert "vLLM 0.33 no longer serves it" in _one_issue(data)


def test_architectures_stand_in_for_a_missing_model_type() -> None:
    data = _data("mistral-7b-v0.1")
    del data["model_type"]
    assert set(_kinds(data)) == {"sliding_window"}  # MistralForCausalLM → mistral
    data["architectures"] = ["MyOwnForCausalLM"]
    assert _one_issue(data).startswith(
        "config.json: architectures: no model_type, and architecture 'MyOwnForCausalLM' is "
        "not one kvunits reads: "
    )


def test_a_cache_field_the_family_does_not_read_is_refused() -> None:
    # Llama 4's chunk in a plain llama file: vLLM's llama.py would not read it; kvunits
    # cannot tell what was meant, so it names the field rather than guess.
    issue = _one_issue({**_data("llama-3.1-8b"), "attention_chunk_size": 8192})
    assert issue.startswith(
        "config.json: attention_chunk_size: the llama config sets attention_chunk_size, which "
        "sizes the KV cache in other families; kvunits' llama reader does not read it"
    )
    assert "kv_lora_rank" in _one_issue({**_data("qwen3-8b"), "kv_lora_rank": 512})


def test_a_layer_type_the_family_does_not_know_is_refused() -> None:
    data = _data("gemma-3-1b-it")
    data["layer_types"][25] = "mamba"
    assert _one_issue(data) == (
        "config.json: layer_types[25]: layer type 'mamba' is not one the gemma3_text reader "
        "knows; it reads sliding_attention, full_attention"
    )
    data = _data("mistral-7b-v0.1")
    data["layer_types"] = ["chunked_attention"] * 32
    assert "layer type 'chunked_attention' is not one the mistral reader knows" in _one_issue(data)


def test_deepseek_without_mla_is_refused() -> None:
    assert "kv_lora_rank: null: vLLM then runs DeepSeek attention without MLA" in _one_issue(
        {**_data("deepseek-v3"), "kv_lora_rank": None}
    )


def test_embedding_gemma_is_refused() -> None:
    data = _data("gemma-3-1b-it")
    assert "use_bidirectional_attention: True: a bidirectional (embedding) model" in _one_issue(
        {**data, "use_bidirectional_attention": True}
    )


# -- real files: NaN and Infinity; derived values ---------------------------------------------


def test_infinity_where_the_reader_does_not_look_is_accepted(tmp_path: Path) -> None:
    # Nemotron-H's published config.json has "time_step_limit": [0.0, Infinity].
    text = (HF / "nemotron-h-56b-base-8k" / "config.json").read_text()
    assert "Infinity" in text
    config = load_config(HF / "nemotron-h-56b-base-8k" / "config.json")
    assert len(config.model.layers) == 64


@pytest.mark.parametrize(
    ("directory", "edit", "issue"),
    [
        (
            "llama-3.1-8b",
            {"num_hidden_layers": float("nan")},
            "num_hidden_layers: nan is not a finite number; kvunits reads this field (layer)",
        ),
        (
            "mistral-7b-v0.1",
            {"sliding_window": float("inf")},
            "sliding_window: inf is not a finite number; kvunits reads this field",
        ),
        (
            "llama-3.1-8b",
            {"rope_scaling": {"rope_type": "linear", "factor": float("nan")}},
            "rope_scaling.factor: must be a finite number > 0, got nan",
        ),
    ],
)
def test_nan_and_infinity_where_the_reader_reads_are_refused(
    directory: str, edit: dict[str, Any], issue: str
) -> None:
    assert issue in _one_issue({**_data(directory), **edit})


def test_nan_in_a_file_on_disk(write: Any) -> None:
    path = write("config.json", '{"model_type": "llama", "num_hidden_layers": NaN}')
    with pytest.raises(ConfigError) as excinfo:
        load_config(path)
    assert [str(i) for i in excinfo.value.issues] == [
        f"{path}: num_hidden_layers: nan is not a finite number; kvunits reads this field (layer)"
    ]


def test_a_derived_head_size_is_checked_like_a_given_one() -> None:
    # The issue's file: hidden_size 2^24 over one head, head_dim absent.
    data = {
        "model_type": "llama",
        "num_hidden_layers": 1,
        "num_attention_heads": 1,
        "hidden_size": 16777216,
    }
    assert _one_issue(data) == (
        "config.json: head_dim: hidden_size / num_attention_heads = 16777216, which must be "
        "between 1 and 1048576"
    )
    realtime = _data("voxtral-mini-4b-realtime-2602")
    realtime["audio_config"].update(
        head_dim=None, hidden_size=16777216, num_attention_heads=1, num_key_value_heads=1
    )
    assert "audio_config.head_dim: hidden_size / num_attention_heads = 16777216" in _one_issue(
        realtime
    )


def test_max_model_len_follows_vllm() -> None:
    # vllm/config/model.py _get_and_verify_max_len: a linear RoPE factor scales the length;
    # llama3/yarn/longrope publish it scaled; gemma3 never scales; model_max_length wins.
    llama = _data("llama-3.1-8b")
    linear = {**llama, "rope_scaling": {"rope_type": "linear", "factor": 2.0}}
    config = load_config_data(linear, where="config.json")
    assert config.engine.max_model_len == Tokens(2 * 131072)
    assert config.engine_sources["max_model_len"] == (
        "hf derived: max_position_embeddings × rope_scaling.factor (2)"
    )
    assert load_config_data(llama, where="c").engine.max_model_len == Tokens(131072)  # llama3
    gemma = {**_data("gemma-3-1b-it"), "rope_scaling": {"rope_type": "linear", "factor": 8.0}}
    assert load_config_data(gemma, where="c").engine.max_model_len == Tokens(32768)
    cohere = {**_data("c4ai-command-r7b-12-2024"), "model_max_length": 131072}
    config = load_config_data(cohere, where="c")
    assert config.engine.max_model_len == Tokens(131072)
    assert config.engine_sources["max_model_len"] == "hf model_max_length"


def test_errors_name_the_field_and_its_declared_unit() -> None:
    data = copy.deepcopy(_data("voxtral-mini-4b-realtime-2602"))
    data["audio_config"]["sliding_window"] = "750"
    data["text_config"]["num_hidden_layers"] = True
    data["text_config"]["head_dim"] = None
    data["text_config"]["hidden_size"] = 3000  # not a multiple of 32 heads
    assert _issues(data) == [
        "config.json: text_config.num_hidden_layers: expected an integer (layer), got True "
        "(a bool)",
        "config.json: text_config.head_dim: absent, and hidden_size 3000 is not a multiple of "
        "num_attention_heads 32; write head_dim",
        "config.json: audio_config.sliding_window: expected an integer (token in a decoder, "
        "encoder_token in audio_config), got '750' (a str)",
    ]


def test_detection() -> None:
    # A kvunits section wins over HF-looking keys (which are then unknown sections).
    issues = _issues({"model_type": "llama", "model": {"name": "m"}})
    assert "config.json: model_type: unknown section" in issues[0]
    assert _issues({"name": "x"})[0].startswith("config.json: name: unknown section")


# -- what the reader declares ---------------------------------------------------------------


def test_every_field_read_declares_a_unit() -> None:
    assert {"sliding_window", "block_pool_size", "head_dim", "max_position_embeddings"} <= set(
        HF_FIELDS
    )
    assert "encoder_token" in HF_FIELDS["sliding_window"]
    for family in HF_FAMILIES:
        for field in family.reads:
            assert field in HF_FIELDS, (family.name, field)


def test_the_families_the_issue_names_are_read() -> None:
    types = {t for family in HF_FAMILIES for t in family.model_types} | set(HF_WRAPPERS)
    named = [
        "llama",
        "mistral",
        "mixtral",
        "qwen2",
        "qwen3",
        "phi3",
        "gemma2",
        "gemma3",
        "gemma3_text",
        "gemma4",
        "cohere2",
        "gpt_oss",
        "llama4",
        "deepseek_v2",
        "deepseek_v3",
        "jamba",
        "qwen3_next",
        "qwen3_5",
        "nemotron_h",
        "whisper",
        "voxtral",
        "voxtral_realtime",
        "llava",
        "mistral3",
        "qwen2_5_vl",
    ]
    assert set(named) <= types


def test_examples_are_the_published_numbers() -> None:
    # Guard the example files themselves against edits (see examples/hf/README.md).
    voxtral = _data("voxtral-mini-4b-realtime-2602")
    assert voxtral["audio_config"]["sliding_window"] == 750
    assert voxtral["downsample_factor"] == 4
    assert _data("mistral-7b-v0.1")["sliding_window"] == 4096
    assert _data("gemma-3-1b-it")["sliding_window"] == 512
    assert _data("deepseek-v3")["kv_lora_rank"] == 512
    assert Path(HF / "README.md").is_file()


def test_the_docs_list_every_family() -> None:
    # docs/huggingface.md's table, or docs/vllm-compat.md's (the families read as vLLM 0.33's
    # registry).
    section = (EXAMPLES.parent / "docs" / "huggingface.md").read_text(encoding="utf-8")
    compat = (EXAMPLES.parent / "docs" / "vllm-compat.md").read_text(encoding="utf-8")
    section += compat[compat.index("## Families") :]
    for family in HF_FAMILIES:
        assert f"\n| {family.name} |" in section, family.name
        for model_type in family.model_types:
            assert f"`{model_type}`" in section, model_type
    for wrapper in HF_WRAPPERS:
        assert f"`{wrapper}`" in section, wrapper
