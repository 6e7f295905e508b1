"""Layer, model and engine specs: what each layer kind accepts, what it rejects and how the
error reads. Every size carries its unit; the unit of a window follows the layer's pooling."""

from __future__ import annotations

import pickle
import re
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

import kvunits.contracts
import kvunits.contracts.config
from kvunits.contracts import (
    Bytes,
    CacheDType,
    Chunk,
    ChunkedLocalLayer,
    CrossAttentionLayer,
    Elements,
    EncoderOnlyLayer,
    EncoderTokens,
    EngineSpec,
    FullAttentionLayer,
    Heads,
    KVHeads,
    KvUnitsError,
    Layers,
    MLALayer,
    ModelSpec,
    PooledBlocks,
    PoolFactor,
    SlidingWindowLayer,
    SpecError,
    SpecValidationError,
    StateLayer,
    Tokens,
    Window,
    ureg,
)
from kvunits.contracts._model import SpecModel
from kvunits.contracts.deploy import RankBytes, RankKVHeads

BF16 = CacheDType.bfloat16


def only_error(exc: pytest.ExceptionInfo[ValidationError]) -> dict[str, Any]:
    """The single error of a validation failure (a second, derived error is itself a bug)."""
    errors = exc.value.errors()
    assert len(errors) == 1, errors
    error: dict[str, Any] = dict(errors[0])
    return error


def swa(**fields: object) -> SlidingWindowLayer:
    """A sliding-window layer from config-like input (strings, plain ints for counts)."""
    return SlidingWindowLayer.model_validate({"kv_heads": 8, "head_size": 128, **fields})


# -- every layer kind builds, with its units -------------------------------------------------


def test_full_attention_defaults() -> None:
    layer = FullAttentionLayer(kv_heads=KVHeads(8), head_size=Elements(128))
    assert layer.kind == "full_attention"
    assert layer.dtype is BF16
    assert layer.head_size_v is None and layer.head_size_v_or_k == Elements(128)
    assert layer.head_size_k == Elements(128)
    assert layer.pool is None and not layer.pooled


def test_k_and_v_head_sizes_may_differ() -> None:
    layer = FullAttentionLayer(
        kv_heads=KVHeads(8), head_size=Elements(192), head_size_v=Elements(128)
    )
    assert (layer.head_size_k, layer.head_size_v_or_k) == (Elements(192), Elements(128))


def test_pooled_layer_counts_encoder_tokens() -> None:
    layer = swa(
        sliding_window="750 encoder_token", pool=4, kv_heads=KVHeads(32), head_size=Elements(64)
    )
    assert layer.sliding_window == Window(750, EncoderTokens)
    assert layer.sliding_window.unit is EncoderTokens
    assert layer.pool == PoolFactor(4) and layer.pooled


@pytest.mark.parametrize(
    "window",
    [
        "750 encoder_token",
        "750 encoder_tokens",
        "  750   encoder_token ",
        "750 encoder_tok",
        Window(750, EncoderTokens),
    ],
)
def test_window_input_forms(window: object) -> None:
    assert swa(sliding_window=window, pool=4).sliding_window == Window(750, EncoderTokens)


def test_window_from_a_pint_quantity_of_the_registry() -> None:
    assert swa(sliding_window=ureg.Quantity(750, "encoder_token"), pool=4).sliding_window == Window(
        750, EncoderTokens
    )


def test_token_layer_window() -> None:
    layer = SlidingWindowLayer(
        sliding_window=Window(4096, Tokens), kv_heads=KVHeads(8), head_size=Elements(128)
    )
    assert layer.sliding_window == Window(4096, Tokens) and not layer.pooled


def test_pool_of_one_is_still_an_encoder_layer() -> None:
    # P = 1 means "encoder side, no pooling": the window is in encoder tokens.
    layer = swa(sliding_window="750 encoder_token", pool=1)
    assert layer.pooled and layer.sliding_window == Window(750, EncoderTokens)


def test_chunked_local_layer() -> None:
    layer = ChunkedLocalLayer.model_validate(
        {"chunk": "8192 token", "kv_heads": 8, "head_size": 128}
    )
    assert layer.chunk == Chunk(8192, Tokens)
    pooled = ChunkedLocalLayer.model_validate(
        {"chunk": "64 encoder_token", "pool": 4, "kv_heads": 8, "head_size": 64}
    )
    assert pooled.chunk == Chunk(64, EncoderTokens)


def test_cross_attention_layer_is_encoder_side() -> None:
    layer = CrossAttentionLayer.model_validate(
        {"encoder_length": "1500 encoder_token", "kv_heads": 20, "head_size": 64}
    )
    assert layer.encoder_length == EncoderTokens(1500)
    # Its cache is on the encoder side even without a pool (P = 1).
    assert layer.pooled and layer.pool is None and layer.pool_factor == PoolFactor(1)
    pooled = CrossAttentionLayer(
        encoder_length=EncoderTokens(1500),
        pool=PoolFactor(2),
        kv_heads=KVHeads(20),
        head_size=Elements(64),
    )
    assert pooled.pool_factor == PoolFactor(2)


def test_encoder_only_layer_has_no_fields() -> None:
    assert EncoderOnlyLayer().kind == "encoder_only"


def test_mla_layer() -> None:
    layer = MLALayer.model_validate({"kv_lora_rank": 512, "qk_rope_head_dim": 64, "dtype": "fp8"})
    assert (layer.kv_lora_rank, layer.qk_rope_head_dim) == (Elements(512), Elements(64))
    assert layer.dtype is CacheDType.fp8_e4m3


@pytest.mark.parametrize(
    ("text", "size"),
    [("2 MiB", 2 * 1024 * 1024), ("2097152 byte", 2097152), ("2 MB", 2_000_000), ("1 B", 1)],
)
def test_state_layer_sizes(text: str, size: int) -> None:
    assert StateLayer.model_validate({"state_size": text}).state_size == Bytes(size)


# -- windows and chunks: the unit must be the layer's kernel unit ----------------------------


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        # A bare int names the unit to add, the layer's own one.
        (
            {"sliding_window": 750, "pool": 4},
            "sliding_window 750 has no unit: write it as '750 encoder_token'",
        ),
        ({"sliding_window": 4096}, "sliding_window 4096 has no unit: write it as '4096 token'"),
        # The manager's unit is never written in a model config.
        (
            {"sliding_window": "189 pooled_block", "pool": 4},
            "expected encoder_token or token, got 189 pooled_block; a manager-side unit cannot "
            "be written here",
        ),
        # In Python, a window is a Window: a length is refused, with the call to write.
        (
            {"sliding_window": EncoderTokens(750), "pool": 4},
            "expected a window of encoder_token or token, got the length EncoderTokens(750) "
            "(encoder_token): write Window(750, EncoderTokens)",
        ),
        (
            {"sliding_window": PooledBlocks(189), "pool": 4},
            "expected a window of encoder_token or token, got the length PooledBlocks(189) "
            "(pooled_block)",
        ),
        (
            {"sliding_window": Window(189, PooledBlocks), "pool": 4},
            "expected a window of encoder_token or token, got Window(189, PooledBlocks)",
        ),
        (
            {"sliding_window": Chunk(750, Tokens)},
            "expected a window of encoder_token or token, got Chunk(750, Tokens), a chunk of token",
        ),
        # A pooled layer's window is in encoder tokens, an unpooled layer's in tokens.
        (
            {"sliding_window": "750 token", "pool": 4},
            "window is 750 token but the layer pools (pool = 4), so it counts encoder_token; "
            'write "750 encoder_token"',
        ),
        (
            {"sliding_window": "750 encoder_token"},
            "window is 750 encoder_token but the layer has no pool, so it counts token; write "
            '"750 token", or set pool',
        ),
        ({"sliding_window": "0 token"}, "a window must be >= 1 token (it holds the current "),
        ({"sliding_window": "-5 token"}, "is not '<integer> <unit>'"),
        ({"sliding_window": "750", "pool": 4}, "'750' has no unit"),
        ({"sliding_window": 750.0, "pool": 4}, "got 750.0 (a float)"),
        ({"sliding_window": True}, "got True (a bool)"),
        ({"sliding_window": "750 bananas"}, "unknown unit 'bananas'"),
        ({"sliding_window": "40 GiB"}, "expected encoder_token or token"),
    ],
)
def test_window_rejections(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError) as exc:
        swa(**fields)
    error = only_error(exc)
    assert error["loc"] == ("sliding_window",)
    assert message in error["msg"], error["msg"]


def test_spec_validation_errors_are_kvunits_errors_with_field_paths() -> None:
    """One error family: a spec model's validation error is pydantic's ValidationError (the
    field path kept) *and* a KvUnitsError, from the constructor and from model_validate*."""
    window = {"kind": "sliding_window", "sliding_window": 750, "kv_heads": 1, "head_size": 8}
    attempts: list[Any] = [
        lambda: ModelSpec.model_validate({"name": "m", "layers": {"a": window}}),
        lambda: EngineSpec.model_validate_json('{"max_model_len": "9 GiB"}'),
        lambda: EngineSpec.model_validate_strings({"max_model_len": "9 GiB"}),
        lambda: SlidingWindowLayer.model_validate({"sliding_window": 750, **window}),
    ]
    paths = [
        ("layers", "a", "sliding_window", "sliding_window"),
        ("max_model_len",),
        ("max_model_len",),
        ("sliding_window",),
    ]
    for attempt, path in zip(attempts, paths, strict=True):
        with pytest.raises(KvUnitsError) as exc:
            attempt()
        err = exc.value
        assert type(err) is SpecValidationError
        assert isinstance(err, SpecError)
        assert isinstance(err, ValidationError)
        assert isinstance(err, ValueError)
        assert err.errors()[0]["loc"] == path
        assert err.message == str(err) and path[-1] in str(err)
        clone = pickle.loads(pickle.dumps(err))
        assert type(clone) is SpecValidationError
        assert [(e["loc"], e["msg"]) for e in clone.errors()] == [
            (e["loc"], e["msg"]) for e in err.errors()
        ]
    # pydantic's own error types keep their type and context (rebuilt by name).
    with pytest.raises(SpecValidationError) as missing:
        FullAttentionLayer(head_size=Elements(8))  # type: ignore[call-arg]
    assert missing.value.errors()[0]["type"] == "missing"


def test_every_public_model_is_a_spec_model() -> None:
    """Each pydantic model a user can reach (contracts, kvunits.contracts.config) raises the
    family's SpecValidationError: they all derive from SpecModel."""
    models = {
        obj
        for module in (kvunits.contracts, kvunits.contracts.config)
        for obj in vars(module).values()
        if isinstance(obj, type) and issubclass(obj, BaseModel)
    }
    assert len(models) >= 10
    assert not [m.__name__ for m in models if not issubclass(m, SpecModel)]


def test_missing_window_is_an_error() -> None:
    with pytest.raises(ValidationError, match="window\n  Field required"):
        swa(pool=4)


def test_a_bad_pool_is_reported_once_not_again_as_a_window_error() -> None:
    # Before the fix, a rejected pool also produced "the layer has no pool, so it counts token"
    # on the (correct) encoder-token window.
    with pytest.raises(ValidationError) as exc:
        swa(sliding_window="750 encoder_token", pool=0)
    error = only_error(exc)
    assert error["loc"] == ("pool",)
    assert "PoolFactor must be >= 1 (1 means the layer does not pool), got 0" in error["msg"]


@pytest.mark.parametrize(
    ("pool", "got"),
    [(True, "True (a bool)"), (4.0, "4.0 (a float)"), ("4", "'4' (a str)"), (-1, "got -1")],
)
def test_pool_rejections(pool: object, got: str) -> None:
    with pytest.raises(ValidationError) as exc:
        swa(sliding_window="750 encoder_token", pool=pool)
    error = only_error(exc)
    assert error["loc"] == ("pool",) and got in error["msg"]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"chunk": 8192}, "chunk 8192 has no unit: write it as '8192 token'"),
        ({"chunk": 64, "pool": 4}, "chunk 64 has no unit: write it as '64 encoder_token'"),
        ({"chunk": "0 token"}, "a chunk must be >= 1 token, got 0"),
        ({"chunk": Tokens(8192)}, "expected a chunk of encoder_token or token, got the length"),
        ({"chunk": "16 pooled_block", "pool": 4}, "a manager-side unit cannot be written here"),
        ({"chunk": "64 token", "pool": 4}, "so it counts encoder_token"),
        # The manager starts a chunk every cdiv(chunk, P) slots: with P = 4 and a chunk of 6
        # tokens that is every 8 tokens, while the kernel starts one every 6. At encoder token
        # 16 (slot 4) the manager would free slot 3, which holds tokens 12-15 of the kernel's
        # current chunk [12, 18).
        (
            {"chunk": "6 encoder_token", "pool": 4},
            "chunk is 6 encoder_token but the layer pools by 4: a chunk must be a whole number "
            'of pooled blocks; write a multiple of 4 encoder_token, e.g. "8 encoder_token"',
        ),
    ],
)
def test_chunk_rejections(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError) as exc:
        ChunkedLocalLayer.model_validate({"kv_heads": 8, "head_size": 64, **fields})
    error = only_error(exc)
    assert error["loc"] == ("chunk",)
    assert message in error["msg"], error["msg"]


@pytest.mark.parametrize(
    ("length", "message"),
    [
        (1500, "1500 has no unit: write it as '1500 encoder_token'"),
        ("1500 token", "expected encoder_token, got 1500 token"),
        ("375 pooled_block", "a manager-side unit cannot be written here"),
        # 0 encoder outputs would give a cap of 0 blocks (plan() divided by it before the fix).
        ("0 encoder_token", "encoder_length must be >= 1 encoder_token, got 0 encoder_token"),
    ],
)
def test_cross_attention_rejections(length: object, message: str) -> None:
    with pytest.raises(ValidationError) as exc:
        CrossAttentionLayer.model_validate(
            {"encoder_length": length, "kv_heads": 8, "head_size": 64}
        )
    error = only_error(exc)
    assert error["loc"] == ("encoder_length",)
    assert message in error["msg"], error["msg"]


@pytest.mark.parametrize(
    ("size", "message"),
    [
        (2097152, "2097152 has no unit: write it as '2097152 byte'"),
        ("0 byte", "state_size must be > 0 byte"),
        ("2 token", "expected byte, got 2 token"),
        ("1.5 MiB", "is not '<integer> <unit>'"),
    ],
)
def test_state_rejections(size: object, message: str) -> None:
    with pytest.raises(ValidationError) as exc:
        StateLayer.model_validate({"state_size": size})
    error = only_error(exc)
    assert error["loc"] == ("state_size",)
    assert message in error["msg"], error["msg"]


# -- counts: real positive ints only ----------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        (True, "int_type"),
        (False, "int_type"),
        (8.0, "int_type"),
        ("8", "int_type"),
        (None, "int_type"),
        (0, "greater_than_equal"),
        (-8, "greater_than_equal"),
        ((1 << 20) + 1, "less_than_equal"),
        # Another count where this one belongs: a rank's heads, elements for heads.
        (RankKVHeads(8), "unit_error"),
        (Heads(8), "unit_error"),
    ],
)
@pytest.mark.parametrize("field", ["kv_heads", "head_size", "head_size_v"])
def test_head_count_rejections(field: str, value: object, kind: str) -> None:
    fields: dict[str, object] = {"kv_heads": 8, "head_size": 64, field: value}
    if field == "head_size_v" and value is None:
        assert FullAttentionLayer.model_validate(fields).head_size_v is None  # None: "same as K"
        return
    with pytest.raises(ValidationError) as exc:
        FullAttentionLayer.model_validate(fields)
    error = only_error(exc)
    assert (error["loc"], error["type"]) == ((field,), kind)
    if kind == "unit_error":  # both units named
        assert str(value).split()[1] in error["msg"] and "is not a count of" in error["msg"]


@pytest.mark.parametrize(
    ("field", "text", "count"),
    [
        ("kv_heads", "8 kv_head", KVHeads(8)),
        ("kv_heads", 8, KVHeads(8)),
        ("head_size", "64 element", Elements(64)),
        ("head_size", 64, Elements(64)),
    ],
)
def test_a_config_writes_a_count_as_an_int_or_with_its_unit(
    field: str, text: object, count: object
) -> None:
    fields: dict[str, object] = {"kv_heads": 8, "head_size": 64, field: text}
    layer = FullAttentionLayer.model_validate(fields)
    assert getattr(layer, field) == count
    assert layer.model_dump()[field] == count.numerical_value_in(type(count))  # type: ignore[attr-defined]


@pytest.mark.parametrize("field", ["kv_lora_rank", "qk_rope_head_dim"])
@pytest.mark.parametrize("value", [True, 512.0, "512", 0])
def test_mla_count_rejections(field: str, value: object) -> None:
    fields: dict[str, object] = {"kv_lora_rank": 512, "qk_rope_head_dim": 64, field: value}
    with pytest.raises(ValidationError) as exc:
        MLALayer.model_validate(fields)
    assert only_error(exc)["loc"] == (field,)


# -- unknown fields, frozen models ------------------------------------------------------------


@pytest.mark.parametrize(
    ("cls", "fields", "extra"),
    [
        (FullAttentionLayer, {"kv_heads": 8, "head_size": 64}, "windw"),
        # A full-attention layer has no window: a stray one is an error, not ignored.
        (FullAttentionLayer, {"kv_heads": 8, "head_size": 64}, "sliding_window"),
        (
            SlidingWindowLayer,
            {"kv_heads": 8, "head_size": 64, "sliding_window": "8 token"},
            "chunk",
        ),
        (MLALayer, {"kv_lora_rank": 512, "qk_rope_head_dim": 64}, "kv_heads"),
        (MLALayer, {"kv_lora_rank": 512, "qk_rope_head_dim": 64}, "pool"),
        (StateLayer, {"state_size": "1 MiB"}, "dtype"),
        (EncoderOnlyLayer, {}, "sliding_window"),
        (
            CrossAttentionLayer,
            {"kv_heads": 8, "head_size": 64, "encoder_length": "8 encoder_token"},
            "max_len",
        ),
    ],
)
def test_unknown_fields_are_rejected(
    cls: type[BaseModel], fields: dict[str, object], extra: str
) -> None:
    with pytest.raises(ValidationError) as exc:
        cls.model_validate({**fields, extra: "8 token"})
    error = only_error(exc)
    assert (error["loc"], error["type"]) == ((extra,), "extra_forbidden")


def test_kind_is_fixed_per_class() -> None:
    with pytest.raises(ValidationError, match="kind"):
        FullAttentionLayer.model_validate(
            {"kind": "sliding_window", "kv_heads": 8, "head_size": 64}
        )


@pytest.mark.parametrize(
    ("layer", "field", "value"),
    [
        (FullAttentionLayer(kv_heads=KVHeads(8), head_size=Elements(64)), "kv_heads", 16),
        (
            SlidingWindowLayer(
                sliding_window=Window(8, Tokens), kv_heads=KVHeads(8), head_size=Elements(64)
            ),
            "sliding_window",
            Tokens(9),
        ),
        (StateLayer(state_size=Bytes(8)), "state_size", Bytes(9)),
        (
            MLALayer(kv_lora_rank=Elements(512), qk_rope_head_dim=Elements(64)),
            "dtype",
            CacheDType.float32,
        ),
    ],
)
def test_layers_are_frozen(layer: BaseModel, field: str, value: object) -> None:
    before = getattr(layer, field)
    with pytest.raises(ValidationError, match="Instance is frozen"):
        setattr(layer, field, value)
    assert getattr(layer, field) == before


def test_layers_are_values() -> None:
    a = swa(sliding_window="750 encoder_token", pool=4)
    b = SlidingWindowLayer(
        sliding_window=Window(750, EncoderTokens),
        pool=PoolFactor(4),
        kv_heads=KVHeads(8),
        head_size=Elements(128),
    )
    assert a == b and hash(a) == hash(b)
    assert pickle.loads(pickle.dumps(a)) == a


# -- cache dtypes ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "dtype", "itemsize"),
    [
        ("bfloat16", CacheDType.bfloat16, 2),
        ("bf16", CacheDType.bfloat16, 2),
        ("torch.bfloat16", CacheDType.bfloat16, 2),
        ("float16", CacheDType.float16, 2),
        ("fp16", CacheDType.float16, 2),
        ("half", CacheDType.float16, 2),
        ("float32", CacheDType.float32, 4),
        ("fp32", CacheDType.float32, 4),
        ("float", CacheDType.float32, 4),
        ("fp8", CacheDType.fp8_e4m3, 1),
        ("fp8_e4m3", CacheDType.fp8_e4m3, 1),
        ("FP8_E4M3", CacheDType.fp8_e4m3, 1),
        ("fp8_e4m3fn", CacheDType.fp8_e4m3, 1),
        ("float8_e4m3fn", CacheDType.fp8_e4m3, 1),
        ("torch.float8_e4m3fn", CacheDType.fp8_e4m3, 1),
        ("fp8_e5m2", CacheDType.fp8_e5m2, 1),
        ("float8_e5m2", CacheDType.fp8_e5m2, 1),
        ("torch.float8_e5m2", CacheDType.fp8_e5m2, 1),
    ],
)
def test_dtype_aliases_and_itemsize(name: str, dtype: CacheDType, itemsize: int) -> None:
    assert CacheDType.parse(name) is dtype
    layer = FullAttentionLayer.model_validate({"kv_heads": 1, "head_size": 1, "dtype": name})
    assert layer.dtype is dtype
    assert dtype.itemsize == Bytes(itemsize) and dtype.itemsize_bytes == itemsize
    assert str(dtype.itemsize) == f"{itemsize} byte"


def test_every_dtype_has_a_size() -> None:
    assert {d.value: d.itemsize_bytes for d in CacheDType} == {
        "bfloat16": 2,
        "float16": 2,
        "float32": 4,
        "fp8_e4m3": 1,
        "fp8_e5m2": 1,
    }


@pytest.mark.parametrize("value", ["int4", "fp4", "auto", 2, None])
def test_unknown_dtypes_are_rejected(value: object) -> None:
    with pytest.raises(ValidationError) as exc:
        FullAttentionLayer.model_validate({"kv_heads": 1, "head_size": 1, "dtype": value})
    assert only_error(exc)["loc"] == ("dtype",)


def test_unknown_dtype_message_lists_the_known_names() -> None:
    with pytest.raises(ValueError, match=r"unknown cache dtype 'int4'; known: bf16, bfloat16"):
        CacheDType.parse("int4")


# -- models: named layers, discriminated by kind ---------------------------------------------

VOXTRAL_CONFIG: dict[str, object] = {
    "name": "voxtral-realtime",
    "layers": {
        "audio.0": {
            "kind": "sliding_window",
            "sliding_window": "750 encoder_token",
            "pool": 4,
            "kv_heads": 32,
            "head_size": 64,
            "dtype": "bf16",
        },
        "text.0": {"kind": "full_attention", "kv_heads": 8, "head_size": 128},
        "whisper.0": {"kind": "encoder_only"},
        "xattn.0": {
            "kind": "cross_attention",
            "encoder_length": "1500 encoder_token",
            "kv_heads": 8,
            "head_size": 64,
        },
        "mla.0": {"kind": "mla", "kv_lora_rank": 512, "qk_rope_head_dim": 64},
        "mamba.0": {"kind": "state", "state_size": "2 MiB"},
        "local.0": {
            "kind": "chunked_local",
            "chunk": "8192 token",
            "kv_heads": 8,
            "head_size": 128,
        },
    },
}


def test_model_from_config_dicts() -> None:
    model = ModelSpec.model_validate(VOXTRAL_CONFIG)
    kinds = {name: type(layer) for name, layer in model.layers.items()}
    assert kinds == {
        "audio.0": SlidingWindowLayer,
        "text.0": FullAttentionLayer,
        "whisper.0": EncoderOnlyLayer,
        "xattn.0": CrossAttentionLayer,
        "mla.0": MLALayer,
        "mamba.0": StateLayer,
        "local.0": ChunkedLocalLayer,
    }
    audio = model.layers["audio.0"]
    assert isinstance(audio, SlidingWindowLayer) and audio.sliding_window == Window(
        750, EncoderTokens
    )


def test_model_round_trips_through_json_with_units() -> None:
    model = ModelSpec.model_validate(VOXTRAL_CONFIG)
    data = model.model_dump(mode="json")
    assert data["layers"]["audio.0"]["sliding_window"] == "750 encoder_token"
    assert data["layers"]["audio.0"]["pool"] == 4
    assert data["layers"]["mamba.0"]["state_size"] == "2097152 byte"
    assert ModelSpec.model_validate(data) == model
    assert ModelSpec.model_validate_json(model.model_dump_json()) == model


def test_model_errors_name_the_layer_and_field() -> None:
    config: dict[str, Any] = {
        "name": "m",
        "layers": {
            "enc.3": {
                "kind": "sliding_window",
                "sliding_window": 750,
                "pool": 4,
                "kv_heads": 32,
                "head_size": 64,
            }
        },
    }
    with pytest.raises(ValidationError) as exc:
        ModelSpec.model_validate(config)
    error = only_error(exc)
    assert error["loc"] == ("layers", "enc.3", "sliding_window", "sliding_window")
    assert "750 has no unit: write it as '750 encoder_token'" in error["msg"]


def test_unknown_layer_kind() -> None:
    with pytest.raises(ValidationError, match="does not match any of the expected tags"):
        ModelSpec.model_validate({"name": "m", "layers": {"a": {"kind": "linear_attention"}}})


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"name": "", "layers": {"a": {"kind": "encoder_only"}}}, "at least 1 character"),
        ({"name": "m", "layers": {}}, "at least 1 item"),
        ({"name": "m", "layers": {"a b": {"kind": "encoder_only"}}}, "layer name 'a b' must match"),
        ({"name": "m", "layers": {"": {"kind": "encoder_only"}}}, "layer name '' must match"),
        ({"name": "m", "layers": {"a": {"kind": "encoder_only"}}, "dtype": "bf16"}, "Extra inputs"),
    ],
)
def test_model_rejections(config: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=re.escape(message)):
        ModelSpec.model_validate(config)


def test_stacked_names_layers_by_stack_and_index() -> None:
    enc = SlidingWindowLayer(
        sliding_window=Window(750, EncoderTokens),
        pool=PoolFactor(4),
        kv_heads=KVHeads(32),
        head_size=Elements(64),
    )
    dec = FullAttentionLayer(kv_heads=KVHeads(8), head_size=Elements(128))
    model = ModelSpec.stacked("voxtral", {"audio": (enc, Layers(32)), "text": (dec, Layers(26))})
    assert len(model.layers) == 58
    names = list(model.layers)
    assert names[0] == "audio.0" and names[31] == "audio.31" and names[32] == "text.0"
    assert model.layers["text.25"] is dec
    with pytest.raises(ValidationError, match="Instance is frozen"):
        model.name = "other"  # type: ignore[misc]  # frozen: also rejected statically


# -- the engine ------------------------------------------------------------------------------


def engine(**fields: object) -> EngineSpec:
    base: dict[str, object] = {
        "max_model_len": "8192 token",
        "max_num_batched_tokens": "2048 token",
        "memory_budget": "40 GiB",
    }
    return EngineSpec.model_validate({**base, **fields})


def test_engine_defaults_and_units() -> None:
    e = engine()
    assert e.block_size_slots == 16
    assert e.max_model_len == Tokens(8192) and e.max_num_batched_tokens == Tokens(2048)
    assert e.memory_budget == RankBytes(40 * 1024**3)
    assert str(e.memory_budget) == "42949672960 byte/rank"
    assert e.max_encoder_len is None and e.cache_dtype is None
    assert engine(cache_dtype="auto").cache_dtype is None
    assert engine(cache_dtype="fp8").cache_dtype is CacheDType.fp8_e4m3
    e = engine(max_encoder_len="6000 encoder_token", max_encoder_tokens_per_step="4 encoder_token")
    assert e.max_encoder_len == EncoderTokens(6000)


@pytest.mark.parametrize(
    ("fields", "loc", "message"),
    [
        ({"max_model_len": 8192}, "max_model_len", "8192 has no unit: write it as '8192 token'"),
        ({"max_model_len": "8192 encoder_token"}, "max_model_len", "expected token"),
        ({"max_model_len": "0 token"}, "max_model_len", "must be > 0, got 0 token"),
        (
            {"max_num_batched_tokens": "512 pooled_block"},
            "max_num_batched_tokens",
            "expected token",
        ),
        ({"memory_budget": "0 byte"}, "memory_budget", "must be > 0, got 0 byte"),
        ({"memory_budget": "40 GiB tokens"}, "memory_budget", "is not '<integer> <unit>'"),
        ({"max_encoder_len": "6000 token"}, "max_encoder_len", "expected encoder_token"),
        ({"max_encoder_len": "0 encoder_token"}, "max_encoder_len", "must be > 0"),
        ({"block_size_slots": True}, "block_size_slots", "valid integer"),
        ({"block_size_slots": 16.0}, "block_size_slots", "valid integer"),
        ({"block_size_slots": 0}, "block_size_slots", "greater than or equal to 1"),
        ({"cache_dtype": "int4"}, "cache_dtype", "unknown cache dtype 'int4'"),
        ({"max_len": "8192 token"}, "max_len", "Extra inputs are not permitted"),
    ],
)
def test_engine_rejections(fields: dict[str, object], loc: str, message: str) -> None:
    with pytest.raises(ValidationError) as exc:
        engine(**fields)
    error = only_error(exc)
    assert error["loc"] == (loc,)
    assert message in error["msg"], error["msg"]
