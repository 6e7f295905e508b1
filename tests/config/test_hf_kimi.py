"""Kimi Linear (``kimi_linear``) and Kimi-K3 (its ``text_config``) read as vLLM 0.33 builds
them: Kimi delta attention (KDA) states on ``linear_attn_config.kda_layers`` (1-based), MLA
elsewhere (vllm/models/kimi_k3/nvidia/model.py ``KimiDecoderLayer``), planned beside MLA pages
as ``Platform._align_hybrid_block_size`` aligns them.

The fixtures are published configs (tests/config/hf_fixtures/SOURCES.md): Kimi-Linear-48B-A3B-
Instruct's raw ``config.json`` (``reports/``) and Kimi-K3's (``heldout/``). Their plans are
compared with vLLM's own ``get_kv_cache_configs`` in tests/vllm_oracle/test_like_vllm.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvunits.contracts import CacheDType, EngineSpec, MLALayer, SpecError, Tokens
from kvunits.contracts.config import ConfigError, load_config, read_hf_config
from kvunits.contracts.config._hf_kimi import kda_state_dtypes
from kvunits.contracts.deploy import RankBytes
from kvunits.contracts.state import GatedDeltaNetLayer
from kvunits.runtime.like_vllm import plan_like_vllm

FIXTURES = Path(__file__).parent / "hf_fixtures"
KIMI_LINEAR = FIXTURES / "reports" / "moonshotai--Kimi-Linear-48B-A3B-Instruct"
KIMI_K3 = FIXTURES / "heldout" / "moonshotai--Kimi-K3"


def _config() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((KIMI_LINEAR / "config.json").read_text(encoding="utf-8"))
    return data


def test_kda_layers_are_one_based_and_the_others_mla() -> None:
    # config.json: kda_layers [1, 2, 3, 5, …, 26] of 27 layers; KimiLinearConfig.is_kda_layer
    # tests layer_idx + 1, so layers 3, 7, 11, 15, 19, 23, 26 (0-based) are MLA.
    layers = load_config(KIMI_LINEAR).model.layers
    mla = [i for i in range(27) if isinstance(layers[f"text.{i}"], MLALayer)]
    assert mla == [3, 7, 11, 15, 19, 23, 26]
    assert all(isinstance(layers[f"text.{i}"], GatedDeltaNetLayer) for i in set(range(27)) - {*mla})
    latent = layers["text.3"]
    assert isinstance(latent, MLALayer)
    # kv_lora_rank 512 + qk_rope_head_dim 64: one latent head, as DeepSeek's.
    assert (latent.kv_lora_rank + latent.qk_rope_head_dim)._value == 576


@pytest.mark.parametrize("tp", [1, 2, 4, 8, 16, 32])
def test_kda_state_is_vllms_kda_state_shape(tp: int) -> None:
    # mamba_utils.py MambaStateShapeCalculator.kda_state_shape(tp, num_heads 32, head_dim 128,
    # conv_kernel_size 4): conv (K − 1, (H·D + 2·H·D) / tp), recurrent (H / tp, D, D);
    # kda_state_dtype: conv in the model dtype (bfloat16), recurrent float32.
    state = load_config(KIMI_LINEAR).model.layers["text.0"]
    assert isinstance(state, GatedDeltaNetLayer) and state.mixer == "kda"
    conv, recurrent = state.state_tensors(tp)
    assert conv.shape == (3, 3 * 32 * 128 // tp) and conv.dtype == CacheDType.bfloat16
    assert recurrent.shape == (32 // tp, 128, 128) and recurrent.dtype == CacheDType.float32


def test_kimi_k3_reads_its_text_config_with_the_full_rank_gate() -> None:
    layers = load_config(KIMI_K3).model.layers
    states = [n for n, layer in layers.items() if isinstance(layer, GatedDeltaNetLayer)]
    # 93 layers, 69 of them in kda_layers (every 4th from 4, and 93, are full_attn_layers).
    assert len(layers) == 93 and len(states) == 69
    state = layers[states[0]]
    assert isinstance(state, GatedDeltaNetLayer) and state.mixer == "kda_full_rank_gate"
    # kda_state_shape(1, 96, 128, 4): 3 × 36864 bf16 + 96 × 128² float32.
    assert state.state_size._value == 3 * 36864 * 2 + 96 * 128 * 128 * 4


def _engine(**extra: Any) -> EngineSpec:
    return EngineSpec(
        max_model_len=Tokens(131072),
        max_num_batched_tokens=Tokens(8192),
        memory_budget=RankBytes(40 << 30),
        **extra,
    )


@pytest.mark.parametrize("block_size", [16, 64, 256])
def test_kda_states_align_to_the_mla_page_in_blocks_of_128(block_size: int) -> None:
    # Platform._align_hybrid_block_size (vllm/platforms/interface.py): with use_mla the
    # alignment is max(16, block_size, 128); the block is align × cdiv(state, align × MLA page
    # per token) and the state page is padded to block × 1152 (576 bf16 elements a token).
    model = load_config(KIMI_LINEAR).model
    planned = plan_like_vllm(model, _engine(block_size_slots=block_size))
    state = 3 * 4096 * 2 + 32 * 128 * 128 * 4
    align = max(16, block_size, 128)
    block = align * -(-state // (align * 1152))
    assert {g.block_size._value for g in planned.groups} == {block}
    assert {g.page_size._value for g in planned.groups} == {block * 1152}
    # With prefix caching (Mamba align mode) a request's state holds 2 pages.
    states = [g for g in planned.groups if g.kind == "mamba"]
    assert states and all(g.blocks_per_request._value == 2 for g in states)


def _kimi_k3(**lac: Any) -> Any:
    data = json.loads((KIMI_K3 / "config.json").read_text())
    data["text_config"]["linear_attn_config"].update(lac)
    return read_hf_config(data, where="config.json").model


def _state_pages(model: Any, gpu: str | None) -> set[int]:
    from kvunits.runtime.like_vllm import VLLM_GPUS

    planned = plan_like_vllm(model, _engine(), gpu=None if gpu is None else VLLM_GPUS[gpu])
    return {g.blocks_per_request._value for g in planned.groups if g.kind == "mamba"}


def test_kimi_k3_with_prefix_caching_holds_flashkdas_checkpoint_page_by_gpu() -> None:
    # vllm/models/kimi_k3/nvidia/kda.py: KimiK3DeltaAttention.get_kv_cache_spec sets
    # num_prefill_checkpoint_blocks = int(kda_prefill_checkpoint_alignment(backend) is not None),
    # FlashKDA where resolve_kda_prefill_backend("auto") finds is_flashkda_supported (SM 9/10/12,
    # head_dim 128, bf16, gate_lower_bound -5.0 in the published config); MambaSpec
    # .max_memory_usage_bytes in align mode: 2 + 1 pages. Elsewhere Triton: 2 pages.
    model = load_config(KIMI_K3).model
    assert all(
        layer.flashkda for layer in model.layers.values() if isinstance(layer, GatedDeltaNetLayer)
    )
    with pytest.raises(SpecError, match="name the GPU"):
        plan_like_vllm(model, _engine())
    for gpu in ("h100", "h200", "b200"):
        assert _state_pages(model, gpu) == {3}
    assert _state_pages(model, "a100-80gb") == {2}
    planned = plan_like_vllm(model, _engine(), enable_prefix_caching=False)
    assert {g.kind for g in planned.groups} == {"mamba", "mla"}


@pytest.mark.parametrize(
    ("lac", "dtype"),
    [({"gate_lower_bound": None}, "bfloat16"), ({"head_dim": 64}, "bfloat16"), ({}, "float16")],
)
def test_kimi_k3_without_flashkda_needs_no_gpu(lac: dict[str, Any], dtype: str) -> None:
    # is_flashkda_supported: no bound (kda_config.get("gate_lower_bound") is None), a head dim
    # other than 128 or fp16 activations: Triton on every GPU, no checkpoint page.
    data = json.loads((KIMI_K3 / "config.json").read_text())
    data["text_config"]["linear_attn_config"].update(lac)
    data["dtype"] = data["text_config"]["dtype"] = dtype
    model = read_hf_config(data, where="config.json").model
    assert not any(
        layer.flashkda for layer in model.layers.values() if isinstance(layer, GatedDeltaNetLayer)
    )
    assert _state_pages(model, None) == _state_pages(model, "h100") == {2}


@pytest.mark.parametrize("bad", [0.0, -6, "-5", True])
def test_a_gate_lower_bound_vllm_asserts_on_is_refused(bad: object) -> None:
    # kda.py KimiK3DeltaAttention.__init__ asserts _KDA_GATE_LOGBOUND_MIN (-5.0) <= bound < 0.
    with pytest.raises(ConfigError, match=r"linear_attn_config\.gate_lower_bound"):
        _kimi_k3(gate_lower_bound=bad)


def test_a_null_linear_attn_config_is_mla_on_every_layer() -> None:
    data = _config()
    data["linear_attn_config"] = None
    layers = read_hf_config(data, where="config.json").model.layers
    assert all(isinstance(layer, MLALayer) for layer in layers.values()) and len(layers) == 27


@pytest.mark.parametrize("bad", ["1,2,3", [0, 1], [1.5], None])
def test_bad_kda_layers_are_refused_naming_the_field(bad: object) -> None:
    data = _config()
    data["linear_attn_config"]["kda_layers"] = bad
    with pytest.raises(ConfigError, match=r"linear_attn_config\.kda_layers"):
        read_hf_config(data, where="config.json")


_DTYPES = st.sampled_from([None, *CacheDType])


@given(mixer=st.sampled_from(["kda", "kda_full_rank_gate"]), conv=_DTYPES, ssm=_DTYPES)
def test_kda_state_dtypes_follow_kda_state_dtype(
    mixer: str, conv: CacheDType | None, ssm: CacheDType | None
) -> None:
    # MambaStateDtypeCalculator.kda_state_dtype: conv <- --mamba-cache-dtype; the recurrent
    # state float32 unless Kimi-K3 is given float32 or bfloat16.
    update, why = kda_state_dtypes(mixer, conv, ssm)
    assert update.get("conv_dtype") == conv
    if ssm in (None, CacheDType.float32):
        assert why is None and "ssm_dtype" not in update
    elif mixer == "kda_full_rank_gate" and ssm == CacheDType.bfloat16:
        assert why is None and update["ssm_dtype"] == CacheDType.bfloat16
    else:
        assert why is not None and ssm.value in why


def test_the_command_line_applies_kda_dtypes_by_their_rule(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from kvunits._vllm import VllmArgs, apply_state_dtypes
    from kvunits.cli import main

    base = [
        "plan",
        str(KIMI_LINEAR / "config.json"),
        "--kv-cache-memory-bytes",
        "40G",
        "--max-model-len",
        "32k",
    ]
    # --mamba-cache-dtype float16: the conv state only; the recurrent state stays float32.
    assert main([*base, "--mamba-cache-dtype", "float16"]) == 0
    capsys.readouterr()
    config = apply_state_dtypes(load_config(KIMI_LINEAR), VllmArgs(mamba_cache_dtype="float16"))
    state = config.model.layers["text.0"]
    assert isinstance(state, GatedDeltaNetLayer)
    assert (state.conv_dtype, state.ssm_dtype) == (CacheDType.float16, CacheDType.float32)
    # --mamba-ssm-cache-dtype bfloat16 on Kimi Linear: refused, naming the flag.
    assert main([*base, "--mamba-ssm-cache-dtype", "bfloat16"]) != 0
    assert "--mamba-ssm-cache-dtype" in capsys.readouterr().err


def test_like_vllm_prints_the_grown_block_and_no_backend_note(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from kvunits.cli import main

    argv = [
        "plan",
        str(KIMI_LINEAR / "config.json"),
        "--like-vllm",
        "h100",
        "--kv-cache-memory-bytes",
        "40G",
        "--max-model-len",
        "128k",
        "--kv-cache-layout",
        "per_group",
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    # 128 × cdiv(2170880, 128 × 1152): the block size whatever MLA backend vLLM picks.
    assert "attention block size 1920 token" in out
    assert "MLA backend chooses the block size" not in out


def test_layer_types_without_linear_attn_config_is_mla_everywhere() -> None:
    # transformers 5's KimiLinearConfig writes layer_types and no linear_attn_config; vLLM
    # 0.33 loads kimi_linear with its own KimiLinearConfig (vllm/transformers_utils/config.py),
    # whose is_kda_layer reads linear_attn_config only: every layer MLA, as vLLM's
    # ModelConfig view of such a file says.
    data = _config()
    del data["linear_attn_config"]
    data["layer_types"] = ["linear_attention"] * 3 + ["full_attention"]
    data["num_hidden_layers"] = 4
    layers = read_hf_config(data, where="config.json").model.layers
    assert len(layers) == 4 and all(isinstance(layer, MLALayer) for layer in layers.values())


def test_flashkda_on_another_mixer_is_refused_naming_the_field() -> None:
    # Only kda.py's KimiK3DeltaAttention resolves a KDA prefill backend (FlashKDA).
    from pydantic import ValidationError

    state = next(
        layer
        for layer in load_config(KIMI_K3).model.layers.values()
        if isinstance(layer, GatedDeltaNetLayer)
    )
    with pytest.raises(ValidationError, match="flashkda"):
        GatedDeltaNetLayer.model_validate({**state.model_dump(), "mixer": "gdn"})
