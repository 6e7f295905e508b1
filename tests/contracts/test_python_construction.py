"""Python construction takes typed values only, as mypy checks it; a config's numbers and text
are read by the loaders (``model_validate``).

The rule (issue 20: static and run-time checks agree): a spec's constructor refuses, in every
field whose declared type carries a unit or a kind, whatever strict mypy refuses there (a bare
int, a config's text, a pint quantity, a dtype's name), with a unit error that names the field
and the typed value to write; ``model_validate`` of the same config dict reads it. The fix the
error names is exact: evaluated, it is the value the loader reads.

The configs below are published models' layers: Voxtral Realtime's encoder (the seed: 750
encoder tokens, P = 4, 32 KV heads of 64), Llama 3.1 8B (8 KV heads of 128), Llama 4's chunked
attention (8192), Whisper's cross-attention (1500 encoder outputs, 20 heads of 64), DeepSeek-V3's
MLA (kv_lora_rank 512, rope 64), Mamba-1/2 and Qwen3-Next's gated delta net dimensions.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import kvunits.contracts as contracts
from kvunits.contracts import (
    ChunkedLocalLayer,
    CrossAttentionLayer,
    EngineSpec,
    FullAttentionLayer,
    MLALayer,
    SlidingWindowLayer,
    SpecValidationError,
    StateLayer,
    deploy,
)
from kvunits.contracts._model import SpecModel
from kvunits.contracts.state import GatedDeltaNetLayer, Mamba1Layer, Mamba2Layer

CONFIGS: list[tuple[type[SpecModel], dict[str, Any]]] = [
    (FullAttentionLayer, {"kv_heads": 8, "head_size": 128, "dtype": "fp8"}),
    (
        SlidingWindowLayer,
        {"sliding_window": "750 encoder_token", "pool": 4, "kv_heads": 32, "head_size": 64},
    ),
    (ChunkedLocalLayer, {"chunk": "8192 token", "kv_heads": 8, "head_size": 128}),
    (
        CrossAttentionLayer,
        {"encoder_length": "1500 encoder_token", "kv_heads": 20, "head_size": 64},
    ),
    (MLALayer, {"kv_lora_rank": 512, "qk_rope_head_dim": 64, "dtype": "bf16"}),
    (StateLayer, {"state_size": "1 MiB"}),
    (Mamba1Layer, {"intermediate_size": 8192, "ssm_state_size": 16, "conv_kernel": 4}),
    (
        Mamba2Layer,
        {
            "intermediate_size": 8192,
            "num_heads": 128,
            "head_dim": 64,
            "n_groups": 8,
            "ssm_state_size": 128,
            "conv_kernel": 4,
            "ssm_dtype": "float32",
        },
    ),
    (
        GatedDeltaNetLayer,
        {
            "num_k_heads": 16,
            "num_v_heads": 32,
            "head_k_dim": 128,
            "head_v_dim": 128,
            "conv_kernel": 4,
        },
    ),
    (
        EngineSpec,
        {
            "max_model_len": "4096 token",
            "max_num_batched_tokens": "512 token",
            "max_encoder_len": "40000 encoder_token",
            "max_encoder_tokens_per_step": "4 encoder_token",
            "memory_budget": "40 GiB",
            "cache_dtype": "fp8",
        },
    ),
]

#: What an error's fix may name (the public classes), to evaluate it.
NAMESPACE = {**vars(contracts), "RankBytes": deploy.RankBytes}


def _typed_fields(model: type[SpecModel], config: dict[str, Any]) -> list[str]:
    # Fields whose declared type carries a unit or a kind (a plain int field, conv_kernel,
    # takes a plain int in Python too).
    typed = model.model_validate(config)
    return [f for f in config if type(getattr(typed, f)) not in (int, str, bool, float)]


CASES = [(m, c, f) for m, c in CONFIGS for f in _typed_fields(m, c)]


def _refusal(model: type[SpecModel], config: dict[str, Any], field: str, raw: object) -> str:
    """The one error of constructing ``model`` in Python with ``field`` given as ``raw`` and
    every other field typed (as the loader reads it)."""
    typed = model.model_validate(config)
    kwargs = {name: getattr(typed, name) for name in config}
    kwargs[field] = raw
    with pytest.raises(SpecValidationError) as info:
        model(**kwargs)
    (error,) = info.value.errors()
    assert error["type"] == "unit_error" and error["loc"] == (field,), error
    return str(error["msg"])


@pytest.mark.parametrize(
    ("model", "config", "field"), CASES, ids=[f"{m.__name__}.{f}" for m, _, f in CASES]
)
def test_a_config_value_in_python_names_the_typed_value_to_write(
    model: type[SpecModel], config: dict[str, Any], field: str
) -> None:
    message = _refusal(model, config, field, config[field])
    assert message.startswith(f"{field}={config[field]!r} "), message
    fix = re.fullmatch(r".*: write (.+)", message)
    assert fix is not None, message
    assert eval(fix[1], NAMESPACE) == getattr(model.model_validate(config), field), message


def test_the_issue_example() -> None:
    message = _refusal(FullAttentionLayer, CONFIGS[0][1], "kv_heads", 32)
    assert message == "kv_heads=32 has no unit: write KVHeads(32)"
    message = _refusal(SlidingWindowLayer, CONFIGS[1][1], "pool", 4)
    assert message == "pool=4 has no unit: write PoolFactor(4)"


COUNT_FIELDS = [
    (m, c, f)
    for m, c, f in CASES
    if type(c[f]) is int and f != "pool"  # pool is a factor; its bound is tested below
]


@given(data=st.data())
def test_every_count_read_from_a_config_is_refused_bare_in_python(data: st.DataObject) -> None:
    model, config, field = data.draw(st.sampled_from(COUNT_FIELDS))
    count_class = type(getattr(model.model_validate(config), field))
    n = data.draw(st.integers(1, count_class.maximum))
    variant = {**config, field: n}
    try:
        read = getattr(model.model_validate(variant), field)
    except SpecValidationError:
        return  # a combination the spec refuses as a whole (heads that do not divide)
    assert read == count_class(n)
    message = _refusal(model, variant, field, n)
    assert message == f"{field}={n} has no unit: write {count_class.__name__}({n})"


@given(p=st.integers(-3, (1 << 16) + 3))
def test_a_bare_pool_factor_is_refused_in_python_whatever_it_is(p: int) -> None:
    message = _refusal(SlidingWindowLayer, CONFIGS[1][1], "pool", p)
    assert message.startswith(f"pool={p} has no unit: write PoolFactor(")


def test_nested_specs_are_python_construction_too() -> None:
    """A layer given as a config dict inside a model built in Python: mypy refuses the dict,
    and the run time the bare count inside it."""
    layer = FullAttentionLayer.model_validate(CONFIGS[0][1])
    model = contracts.ModelSpec(name="m", layers={"a": layer})
    assert model.layers["a"] == layer
    as_data: Any = {"a": {"kind": "full_attention", **CONFIGS[0][1]}}  # mypy: [dict-item]
    with pytest.raises(SpecValidationError, match=r"kv_heads=8 has no unit: write KVHeads\(8\)"):
        contracts.ModelSpec(name="m", layers=as_data)
    # The loader's path (the model's config as data) reads it.
    read = contracts.ModelSpec.model_validate(
        {"name": "m", "layers": {"a": {"kind": "full_attention", **CONFIGS[0][1]}}}
    )
    assert read == model


def test_model_copy_updates_like_a_config() -> None:
    """``model_copy(update=...)`` takes a mapping (mypy sees no field types there) and validates
    it as data: a config's forms are read, a wrong unit refused."""
    layer = FullAttentionLayer.model_validate(CONFIGS[0][1])
    assert layer.model_copy(update={"kv_heads": 4}).kv_heads == contracts.KVHeads(4)
    with pytest.raises(SpecValidationError, match="expected kv_head"):
        layer.model_copy(update={"kv_heads": contracts.Elements(4)})
