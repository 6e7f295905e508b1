"""Values the second probe found read wrong (issue 24, item 8), each with the rule it breaks.

* An integer beyond int64 is refused with its field's path, in every format (JSON named none:
  350 of the probe's fuzz inputs).
* ``architectures`` is a list of class names; a file that writes something else is told what.
* Query heads are a whole multiple of KV heads (grouped-query attention): vLLM's ``Attention``
  layer asserts ``num_heads % num_kv_heads == 0`` ("num_heads (...) is not divisible by
  num_kv_heads (...)", ``vllm/attention/layer.py``, ``Attention.__init__``; vLLM's test
  ``test_num_heads_not_divisble_by_num_kv_heads``), so 3 or 64 KV heads of 32 is no model
  vLLM serves.
* ``count = 32.0``: JSON Schema reads a number with a zero fraction as an integer and cannot
  refuse it, so the loader reads it as the integer too, in a kvunits config (a Hugging Face
  ``config.json`` is read as vLLM reads it: its integers are integers); 32.5 is refused.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvunits.contracts import KVHeads
from kvunits.contracts.config import (
    ConfigError,
    config_json_schema,
    load_config,
    load_config_data,
)
from kvunits.contracts.config._read import parse_config_text

from ..examples import examples
from .conftest import EXAMPLES, VOXTRAL_TOML
from .test_hf_fuzz import mutated

LLAMA = json.loads((EXAMPLES / "hf" / "llama-3.1-8b" / "config.json").read_text())
GEMMA4 = json.loads((EXAMPLES / "hf" / "gemma-4-26b-a4b" / "config.json").read_text())
BIG = 10**23
NO_CLASS = "expected a class name (a string, e.g. LlamaForCausalLM), got"
NO_LIST = "expected a list of class names, got"
UNSAID = "the file does not say which model it is"


def _issues(load: Any) -> list[tuple[str, str]]:
    with pytest.raises(ConfigError) as excinfo:
        load()
    return [(issue.path, issue.message) for issue in excinfo.value.issues]


# -- integers beyond int64 --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (str(BIG), "integer out of the int64 range (24 digits)"),
        ("-" + str(BIG), "integer out of the int64 range (24 digits)"),
        (str(2**63), "integer out of the int64 range"),
        ("9" * 300_000, "integer out of the int64 range (300000 digits)"),
    ],
)
def test_a_json_integer_beyond_int64_names_its_field(text: str, message: str) -> None:
    # "not valid JSON: integer 99999… is out of the int64 range", with no path, before.
    hf = json.dumps(LLAMA).replace('"num_hidden_layers": 32', f'"num_hidden_layers": {text}')
    assert _issues(lambda: parse_config_text(hf, "json", where="c.json")) == [
        ("num_hidden_layers", message)
    ]
    ours = '{"model": {"name": "m", "groups": {"a": {"count": ' + text + "}}}}"
    assert _issues(lambda: parse_config_text(ours, "json", where="c.json")) == [
        ("model.groups.a.count", message)
    ]


def _with_big_ints(node: Any, draw: st.DrawFn) -> Any:
    """``node`` with some of its integers made larger than int64."""
    if isinstance(node, dict):
        return {key: _with_big_ints(value, draw) for key, value in node.items()}
    if isinstance(node, list):
        return [_with_big_ints(value, draw) for value in node]
    if isinstance(node, int) and not isinstance(node, bool) and draw(st.booleans()):
        return draw(st.sampled_from([2**63, -(2**63) - 1, BIG, -BIG, 10**40]))
    return node


@st.composite
def big_int_configs(draw: st.DrawFn) -> dict[str, Any]:
    return _with_big_ints(draw(mutated()), draw)  # type: ignore[no-any-return]


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(big_int_configs())
def test_every_integer_beyond_int64_of_a_file_names_its_field(data: dict[str, Any]) -> None:
    text = json.dumps(data)
    try:
        parse_config_text(text, "json", where="config.json")
    except ConfigError as error:
        for issue in error.issues:
            if "int64" in issue.message:
                assert issue.path, issue


# -- architectures ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "path", "message"),
    [
        ([1], "architectures[0]", f"{NO_CLASS} int 1"),
        ("LlamaForCausalLM", "architectures", f"{NO_LIST} str 'LlamaForCausalLM'"),
        ([], "architectures", "an empty list, and no model_type: " + UNSAID),
        ([None], "architectures[0]", f"{NO_CLASS} NoneType None"),
    ],
)
def test_architectures_that_are_no_class_names_are_reported_as_they_are(
    value: object, path: str, message: str
) -> None:
    # [1] was "architecture none is not one kvunits reads".
    data = {"architectures": value, "num_hidden_layers": 2}
    assert _issues(lambda: load_config_data(data, where="c.json")) == [(path, message)]


@pytest.mark.parametrize("value", [[1], ["LlamaForCausalLM", None], [{"name": "x"}]])
def test_a_non_class_entry_is_refused_even_beside_a_model_type(value: list[object]) -> None:
    # A model_type used to hide it: [1] beside model_type llama planned Llama's defaults.
    data = {"architectures": value, "model_type": "llama", "num_hidden_layers": 2}
    issues = _issues(lambda: load_config_data(data, where="c.json"))
    index = next(i for i, v in enumerate(value) if not isinstance(v, str))
    assert issues[0][0] == f"architectures[{index}]"
    assert issues[0][1].startswith(NO_CLASS)


def test_an_unknown_architecture_is_still_named() -> None:
    issues = _issues(lambda: load_config_data({"architectures": ["NopeForCausalLM"]}, where="c"))
    assert issues[0][0] == "architectures"
    assert issues[0][1].startswith("no model_type, and architecture 'NopeForCausalLM' is not one")


# -- grouped-query attention ------------------------------------------------------------------


@pytest.mark.parametrize("kv", [3, 64, 5, 31])
def test_kv_heads_must_divide_the_attention_heads(kv: int) -> None:
    data = {**LLAMA, "num_key_value_heads": kv}
    assert _issues(lambda: load_config_data(data, where="c.json")) == [
        (
            "num_key_value_heads",
            f"{kv} KV heads do not divide the 32 attention heads: each KV head serves a whole "
            "group of query heads, and vLLM refuses such a model (its Attention layer asserts "
            "num_heads % num_kv_heads == 0)",
        )
    ]


@pytest.mark.parametrize("kv", [1, 2, 4, 8, 16, 32])
def test_kv_heads_that_divide_are_read(kv: int) -> None:
    config = load_config_data({**LLAMA, "num_key_value_heads": kv}, where="c.json")
    assert {layer.kv_heads for layer in config.model.layers.values()} == {KVHeads(kv)}  # type: ignore[union-attr]


def test_gemma4s_global_kv_heads_must_divide_too() -> None:
    # Gemma 4's full-attention layers have num_global_key_value_heads KV heads (with
    # attention_k_eq_v) for the same num_attention_heads query heads.
    data = copy.deepcopy(GEMMA4)
    text = data["text_config"]
    assert text["num_attention_heads"] == 16 and text["attention_k_eq_v"] is True
    text["num_global_key_value_heads"] = 3
    issues = _issues(lambda: load_config_data(data, where="c.json"))
    assert issues == [
        (
            "text_config.num_global_key_value_heads",
            "3 KV heads do not divide the 16 attention heads: each KV head serves a whole "
            "group of query heads, and vLLM refuses such a model (its Attention layer asserts "
            "num_heads % num_kv_heads == 0)",
        )
    ]


# -- count = 32.0 -----------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["toml", "yaml", "json"])
def test_an_integral_number_is_the_integer_in_a_kvunits_config(fmt: str, tmp_path: Path) -> None:
    base = load_config(tmp_path_write(tmp_path, "base.toml", VOXTRAL_TOML))
    edited = VOXTRAL_TOML.replace("count = 32", "count = 32.0").replace(
        "kv_heads = 32", "kv_heads = 3.2e1"
    )
    assert edited != VOXTRAL_TOML
    tree = parse_config_text(edited, "toml", where="x")
    if fmt == "toml":
        path = tmp_path_write(tmp_path, "c.toml", edited)
    elif fmt == "json":
        path = tmp_path_write(tmp_path, "c.json", json.dumps(tree))
    else:
        import yaml

        path = tmp_path_write(tmp_path, "c.yaml", yaml.safe_dump(tree))
    assert "32.0" in path.read_text() or "3.2e+01" in path.read_text()
    assert load_config(path).model == base.model


def tmp_path_write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("value", [32.5, 1e300, float("-inf")])
def test_a_fraction_is_still_no_integer(value: float, tmp_path: Path) -> None:
    tree = parse_config_text(VOXTRAL_TOML, "toml", where="x")
    tree["model"]["groups"]["audio"]["count"] = value
    issues = _issues(lambda: load_config_data(tree, where="c.json"))
    assert issues[0][0] == "model.groups.audio.count"


def test_the_schema_takes_what_the_loader_takes() -> None:
    tree = parse_config_text(VOXTRAL_TOML, "toml", where="x")
    tree["model"]["groups"]["audio"]["count"] = 32.0
    jsonschema.Draft202012Validator(config_json_schema()).validate(tree)
    assert len(load_config_data(tree, where="c.json").model.layers) >= 32
    assert "never 32.0" not in json.dumps(config_json_schema())
