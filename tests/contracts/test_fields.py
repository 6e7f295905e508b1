"""Every quantity class, and the generic kinds ``Window[U]``, ``Chunk[U]``, ``Position[U]``,
as a field of a user's own pydantic model: another unit is refused with a ValidationError that
names both units, and the field's JSON Schema refuses it too (its pattern admits the field's
own unit's spellings only).

The seed's mistake written as config: a field typed ``Window[EncoderTokens]`` given
``"750 pooled_block"`` used to yield ``Window(750, PooledBlocks)``.
"""

from __future__ import annotations

import itertools
from typing import Any

import jsonschema
import pytest
from pydantic import BaseModel, ValidationError, create_model

from kvunits.contracts import (
    Bytes,
    CacheBlocks,
    Chunk,
    Elements,
    EncoderTokens,
    Heads,
    IntQuantity,
    KVHeads,
    Layers,
    PooledBlocks,
    Position,
    StageLayers,
    Tokens,
    Window,
)
from kvunits.contracts.deploy import RankBlocks, RankBytes, RankKVHeads, RankTokens

LENGTHS = [EncoderTokens, PooledBlocks, Tokens, CacheBlocks, Bytes]
COUNTS = [Heads, KVHeads, Elements, Layers, StageLayers]
RANKS = [RankBlocks, RankKVHeads, RankTokens]  # RankBytes reads plain bytes: see below
CLASSES: list[type[IntQuantity]] = [*LENGTHS, *COUNTS, *RANKS]


def _model(annotation: Any) -> type[BaseModel]:
    return create_model("Service", x=(annotation, ...))


def _refusal(model: type[BaseModel], value: object) -> str:
    with pytest.raises(ValidationError) as info:
        model(x=value)
    (error,) = info.value.errors()
    assert error["type"] == "unit_error", error
    return str(error["msg"])


@pytest.mark.parametrize(("cls", "other"), list(itertools.permutations(CLASSES, 2)))
def test_a_quantity_field_refuses_another_unit_naming_both(
    cls: type[IntQuantity], other: type[IntQuantity]
) -> None:
    model = _model(cls)
    assert model(x=cls(5)).x == cls(5)  # type: ignore[attr-defined]
    for given in (other(5), f"5 {other.unit}"):
        message = _refusal(model, given)
        assert _names(cls, message) and _names(other, message), message


def _names(cls: type[IntQuantity], message: str) -> bool:
    # A byte quantity may be written with its symbol ("5 B"), as pint's short form writes it.
    return cls.unit in message or (cls is Bytes and " B" in message)


@pytest.mark.parametrize("cls", CLASSES)
def test_a_quantity_field_reads_its_own_unit_as_text(cls: type[IntQuantity]) -> None:
    model = _model(cls)
    assert model(x=f"5 {cls.unit}").x == cls(5)  # type: ignore[attr-defined]


def test_a_ranks_memory_setting_is_written_in_bytes() -> None:
    # A config's memory setting is one device's by definition: "40 GiB" reads as byte/rank.
    model = _model(RankBytes)
    assert model(x="2 KiB").x == RankBytes(2048)  # type: ignore[attr-defined]
    message = _refusal(model, Bytes(5))
    assert "byte/rank" in message and "5 byte" in message


KINDS: list[tuple[Any, type[IntQuantity], int]] = [
    (Window, unit, 750) for unit in (EncoderTokens, PooledBlocks, Tokens)
] + [(Chunk, unit, 64) for unit in (EncoderTokens, PooledBlocks, Tokens)]
KINDS += [(Position, unit, 12) for unit in (EncoderTokens, PooledBlocks, Tokens, CacheBlocks)]


@pytest.mark.parametrize(("kind", "unit", "n"), KINDS)
def test_a_generic_kind_field_takes_its_unit_only(
    kind: Any, unit: type[IntQuantity], n: int
) -> None:
    model = _model(kind[unit])
    assert model(x=f"{n} {unit.unit}").x == kind(n, unit)  # type: ignore[attr-defined]
    assert model(x=kind(n, unit)).x == kind(n, unit)  # type: ignore[attr-defined]
    assert model(x=kind(n, unit)).model_dump() == {"x": f"{n} {unit.unit}"}
    schema = model.model_json_schema()["properties"]["x"]
    assert schema["x-unit"] == unit.unit and schema["x-kind"] == kind.kind
    jsonschema.validate({"x": f"{n} {unit.unit}"}, model.model_json_schema())
    for other in kind.units:
        if other is unit:
            continue
        for given in (f"{n} {other.unit}", kind(n, other)):
            message = _refusal(model, given)
            assert unit.unit in message and other.unit in message, message
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({"x": f"{n} {other.unit}"}, model.model_json_schema())


def test_the_seeds_mistake_as_a_field() -> None:
    # Voxtral's window is 750 encoder tokens; written as 750 pooled blocks it reserved 48
    # cache blocks a request instead of 13. A field says which unit it takes, and keeps to it.
    class EncoderLayer(BaseModel):
        sliding_window: Window[EncoderTokens]

    message = _refusal_of(EncoderLayer, "750 pooled_block")
    assert "expected encoder_token, got 750 pooled_block" in message
    layer = EncoderLayer.model_validate({"sliding_window": "750 encoder_token"})
    assert layer.sliding_window == Window(750, EncoderTokens)


def _refusal_of(model: type[BaseModel], text: str) -> str:
    with pytest.raises(ValidationError) as info:
        model.model_validate({"sliding_window": text})
    return str(info.value.errors()[0]["msg"])


@pytest.mark.parametrize("cls", [*LENGTHS, *COUNTS])
def test_a_quantity_fields_schema_refuses_another_unit(cls: type[IntQuantity]) -> None:
    schema = _model(cls).model_json_schema()
    if schema["properties"]["x"].get("type") == "integer":
        return  # a count a config writes as a plain integer: its unit is the field's
    jsonschema.validate({"x": f"5 {cls.unit}"}, schema)
    for other in LENGTHS:
        if other is not cls:
            with pytest.raises(jsonschema.ValidationError):
                jsonschema.validate({"x": f"5 {other.unit}"}, schema)
