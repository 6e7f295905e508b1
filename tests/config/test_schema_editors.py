"""The schema as an editor uses it: one mistake, one error; files that name their schema load.

Editors (VS Code's JSON and YAML support, taplo for TOML) validate with standard JSON Schema:
pydantic's ``discriminator`` is an OpenAPI keyword they ignore, so a ``oneOf`` over eleven layer
kinds reported about a dozen errors for one wrong value. Here every single mistake of a set
generated from the shipped example (each field of each group and of the engine given a wrong
unit or type, an unknown key, an unknown or missing ``kind``) is checked with a JSON Schema
validator (python-jsonschema, draft 2020-12), counting the errors an editor would list, nested
ones included: exactly one, at the field, and the loader refuses the same file.
"""

from __future__ import annotations

import copy
import json
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from kvunits.contracts.config import config_json_schema, load_config, load_config_data
from kvunits.contracts.errors import ConfigError

from .conftest import EXAMPLES, SHIPPED

SCHEMA = config_json_schema()
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)
BASE: dict[str, Any] = tomllib.loads(SHIPPED.read_text(encoding="utf-8"))

Mutation = tuple[str, Callable[[dict[str, Any]], None]]


def _leaves(errors: list[jsonschema.ValidationError]) -> list[jsonschema.ValidationError]:
    found: list[jsonschema.ValidationError] = []
    for error in errors:
        found += _leaves(list(error.context)) if error.context else [error]
    return found


def _wrong_value(value: object) -> object:
    """A value of the wrong unit (a quantity) or type (anything else)."""
    if isinstance(value, str) and value[:1].isdigit():
        number = value.split()[0]
        return f"{number} pooled_block" if "pooled_block" not in value else f"{number} GiB"
    if isinstance(value, bool | int):
        return str(value)
    return 16


def _mutations() -> Iterator[Mutation]:
    sections: list[tuple[str, dict[str, Any]]] = [("engine", BASE["engine"])]
    sections += [(f"model.groups.{g}", v) for g, v in BASE["model"]["groups"].items()]
    for where, section in sections:
        keys = where.split(".")
        for field, value in section.items():

            def wrong(
                c: dict[str, Any], k: list[str] = keys, f: str = field, v: Any = value
            ) -> None:
                _at(c, k)[f] = _wrong_value(v)

            yield f"{where}.{field}: {_wrong_value(value)!r}", wrong

        def extra(c: dict[str, Any], k: list[str] = keys) -> None:
            _at(c, k)["colour"] = "blue"

        yield f"{where}.colour", extra
        if where.startswith("model."):

            def unknown_kind(c: dict[str, Any], k: list[str] = keys) -> None:
                _at(c, k)["kind"] = "sliding"

            def no_kind(c: dict[str, Any], k: list[str] = keys) -> None:
                del _at(c, k)["kind"]

            yield f"{where}.kind: 'sliding'", unknown_kind
            yield f"{where}.kind missing", no_kind


def _at(config: dict[str, Any], keys: list[str]) -> dict[str, Any]:
    node = config
    for key in keys:
        node = node[key]
    return node


MUTATIONS = list(_mutations())


def test_the_shipped_example_is_valid() -> None:
    assert list(VALIDATOR.iter_errors(BASE)) == []
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$id"] == "urn:kvunits:config"
    assert "discriminator" not in json.dumps(SCHEMA)  # an OpenAPI keyword, not JSON Schema


@pytest.mark.parametrize("mutation", MUTATIONS, ids=[name for name, _ in MUTATIONS])
def test_one_mistake_is_one_error(mutation: Mutation) -> None:
    name, mutate = mutation
    config = copy.deepcopy(BASE)
    mutate(config)
    errors = _leaves(list(VALIDATOR.iter_errors(config)))
    assert len(errors) == 1, [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in errors]
    field = name.split(":")[0].split(" ")[0]
    reported = ".".join(map(str, errors[0].absolute_path))
    assert field.startswith(reported), (reported, field)  # at the field (or its group: a key)
    with pytest.raises(ConfigError):
        load_config_data(config, where="mutated.toml", environment=False)


def test_the_examples_name_their_schema_and_load() -> None:
    # The committed copy is what `kvunits schema` prints (editors read it from the examples).
    copy_on_disk = EXAMPLES / "schema" / "kvunits.schema.json"
    assert json.loads(copy_on_disk.read_text(encoding="utf-8")) == SCHEMA, (
        "examples/schema/kvunits.schema.json is stale: "
        "kvunits schema > examples/schema/kvunits.schema.json"
    )
    reference = "./schema/kvunits.schema.json"
    toml_text = (EXAMPLES / "voxtral_realtime.toml").read_text(encoding="utf-8")
    yaml_text = (EXAMPLES / "voxtral_realtime.yaml").read_text(encoding="utf-8")
    json_text = (EXAMPLES / "voxtral_realtime.json").read_text(encoding="utf-8")
    assert toml_text.startswith(f"#:schema {reference}\n")  # taplo / Even Better TOML
    assert yaml_text.startswith(f"# yaml-language-server: $schema={reference}\n")
    assert json.loads(json_text)["$schema"] == reference
    configs = [load_config(EXAMPLES / f"voxtral_realtime.{x}") for x in ("toml", "yaml", "json")]
    assert configs[0].model == configs[1].model == configs[2].model
    # The YAML and JSON examples are valid to an editor too.
    assert list(VALIDATOR.iter_errors(yaml.safe_load(yaml_text))) == []
    assert list(VALIDATOR.iter_errors(json.loads(json_text))) == []


def test_a_toml_file_may_name_its_schema_as_a_key_too(tmp_path: Path) -> None:
    text = '"$schema" = "https://example.org/kvunits.schema.json"\n' + SHIPPED.read_text()
    path = tmp_path / "named.toml"
    path.write_text(text, encoding="utf-8")
    assert load_config(path).model == load_config(SHIPPED).model
    path.write_text('"$schema" = 3\n' + SHIPPED.read_text(), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"\['\$schema'\]: the schema an editor reads"):
        load_config(path)
