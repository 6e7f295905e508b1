"""State layers of recurrent mixers: their tensors, per tensor-parallel rank, as vLLM sizes them.

Golden shapes: vLLM 0.33.0 ``MambaStateShapeCalculator`` (model_executor/layers/mamba/
mamba_utils.py: ``mamba1_state_shape``, ``mamba2_state_shape``,
``gated_delta_net_state_shape``) for the published geometries of Jamba-v0.1 (I = 2 × 4096,
N 16, K 4), Qwen3-Next-80B-A3B (Hk 16, Hv 32, Dk = Dv = 128, K 4) and Nemotron-H-8B (H 128,
P 64, G 8, N 128, K 4); the research notes ran vLLM's own calculator on them at tp 1, 2, 4, 8
and got these numbers. The page of a state layer's manager view is the state's bytes
(``MambaSpec.page_size_bytes``, v1/kv_cache_interface.py:1121-1129), one per request.
"""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from kvunits.contracts import (
    Bytes,
    CacheDType,
    Elements,
    EngineSpec,
    FullAttentionLayer,
    Heads,
    KVHeads,
    KVSharedLayer,
    Layers,
    ModelSpec,
    SpecError,
    group_layers,
    kernel_view,
    manager_view,
)
from kvunits.contracts.state import GatedDeltaNetLayer, Mamba1Layer, Mamba2Layer, StateTensor

BF16, FP32 = CacheDType.bfloat16, CacheDType.float32
JAMBA = Mamba1Layer(intermediate_size=Elements(8192), ssm_state_size=Elements(16), conv_kernel=4)
QWEN3_NEXT = GatedDeltaNetLayer(
    num_k_heads=Heads(16),
    num_v_heads=Heads(32),
    head_k_dim=Elements(128),
    head_v_dim=Elements(128),
    conv_kernel=4,
)
NEMOTRON_H = Mamba2Layer(
    intermediate_size=Elements(128 * 64),
    num_heads=Heads(128),
    head_dim=Elements(64),
    n_groups=8,
    ssm_state_size=Elements(128),
    conv_kernel=4,
    ssm_dtype=FP32,
)


@pytest.mark.parametrize(
    ("layer", "tp", "conv", "ssm", "total"),
    [
        # mamba1: conv (K − 1, I/tp), ssm (I/tp, N); bf16: 3·8192·2 + 8192·16·2 = 311296.
        (JAMBA, 1, (3, 8192), (8192, 16), 311296),
        (JAMBA, 2, (3, 4096), (4096, 16), 155648),
        (JAMBA, 8, (3, 1024), (1024, 16), 38912),
        # GDN: conv (K − 1, (2·16·128 + 32·128)/tp), recurrent (32/tp, 128, 128);
        # bf16: 3·8192·2 + 32·128·128·2 = 49152 + 1048576 = 1097728.
        (QWEN3_NEXT, 1, (3, 8192), (32, 128, 128), 1097728),
        (QWEN3_NEXT, 4, (3, 2048), (8, 128, 128), 274432),
        (QWEN3_NEXT, 8, (3, 1024), (4, 128, 128), 137216),
        # mamba2: conv (K − 1, (H·P + 2·G·N)/tp), ssm (H/tp, P, N) in float32:
        # 3·10240·2 + 128·64·128·4 = 61440 + 4194304 = 4255744.
        (NEMOTRON_H, 1, (3, 10240), (128, 64, 128), 4255744),
        (NEMOTRON_H, 2, (3, 5120), (64, 64, 128), 2127872),
        (NEMOTRON_H, 8, (3, 1280), (16, 64, 128), 531968),
    ],
)
def test_state_shapes_per_rank(
    layer: Mamba1Layer | Mamba2Layer | GatedDeltaNetLayer,
    tp: int,
    conv: tuple[int, ...],
    ssm: tuple[int, ...],
    total: int,
) -> None:
    tensors = layer.state_tensors(tp)
    assert [t.shape for t in tensors] == [conv, ssm]
    assert sum(t.size.numerical_value_in(Bytes) for t in tensors) == total


def test_qwen3_5_recurrent_state_in_float32() -> None:
    # Qwen3.5's config hook sets the recurrent state's dtype from mamba_ssm_dtype (float32):
    # 49152 + 32·128·128·4 = 2146304 (models/config.py:953-983).
    layer = QWEN3_NEXT.model_copy(update={"ssm_dtype": FP32})
    assert layer.state_tensors()[1] == StateTensor("recurrent", (32, 128, 128), FP32)
    assert str(layer.state_size) == "2146304 byte"


def test_mamba2_groups_are_replicated_when_tp_does_not_divide_them() -> None:
    # extra_groups_for_head_shards: G = 1 at tp 2 becomes 2 groups, one per rank.
    layer = Mamba2Layer(
        intermediate_size=Elements(8192),
        num_heads=Heads(128),
        head_dim=Elements(64),
        n_groups=1,
        ssm_state_size=Elements(128),
        conv_kernel=4,
    )
    assert layer.state_tensors(2)[0].shape == (3, (8192 + 2 * 2 * 128) // 2)
    assert layer.state_tensors(1)[0].shape == (3, 8192 + 2 * 1 * 128)


def test_a_split_that_is_not_exact_is_refused() -> None:
    with pytest.raises(SpecError, match="num_v_heads = 32 is not divisible by the tensor-par"):
        QWEN3_NEXT.state_tensors(64)  # the conv dim, 8192, splits in 64; 32 heads do not
    with pytest.raises(SpecError, match=r"conv dim \(2·Hk·Dk \+ Hv·Dv\) = 4864 is not divis"):
        QWEN3_NEXT.model_copy(update={"num_k_heads": 3}).state_tensors(3)
    with pytest.raises(SpecError, match="tp must be an int >= 1"):
        JAMBA.state_tensors(0)


def test_manager_view_is_one_state_page_and_no_kernel_view() -> None:
    spec = manager_view(NEMOTRON_H, block_size_slots=16)
    assert (spec.kind, spec.page_size, spec.dtype) == ("state", Bytes(4255744), FP32)
    # The attention cache dtype never applies to a state (vLLM's mamba_cache_dtype is its own).
    assert manager_view(NEMOTRON_H, 16, cache_dtype=CacheDType.fp8_e4m3).page_size == Bytes(4255744)
    with pytest.raises(SpecError, match="a mamba2 layer has no paged KV cache"):
        kernel_view(NEMOTRON_H, 16)


def test_mixer_fields_are_checked() -> None:
    with pytest.raises(ValidationError, match="greater than or equal to 1"):
        Mamba1Layer(intermediate_size=Elements(0), ssm_state_size=Elements(16), conv_kernel=4)
    with pytest.raises(ValidationError, match="unknown cache dtype"):
        Mamba1Layer.model_validate(
            {"intermediate_size": 8, "ssm_state_size": 16, "conv_kernel": 4, "ssm_dtype": "int3"}
        )


def test_kv_shared_layers_point_at_a_cached_layer() -> None:
    attention = FullAttentionLayer(kv_heads=KVHeads(1), head_size=Elements(8))
    model = ModelSpec(name="m", layers={"a": attention, "b": KVSharedLayer(target="a"), "s": JAMBA})
    engine = EngineSpec.model_validate(
        {"max_model_len": "64 token", "max_num_batched_tokens": "8 token", "memory_budget": "1 GiB"}
    )
    groups, uncached = group_layers(model, engine)
    assert uncached == ("b",)
    assert [g.num_layers for g in groups] == [Layers(1), Layers(1)]
    for target in ("nope", "s"):
        with pytest.raises(ValidationError, match=f"shares the KV cache of '{target}'"):
            ModelSpec(name="m", layers={"s": JAMBA, "b": KVSharedLayer(target=target)})
    with pytest.raises(SpecError, match="a kv_shared layer keeps no KV cache of its own"):
        manager_view(KVSharedLayer(target="a"), 16)
