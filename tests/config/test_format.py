"""The kvunits config format: the shipped example in TOML, YAML and JSON, the golden plan,
errors with file, field path, expected unit and what was given, and the JSON schema."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kvunits.contracts import (
    Elements,
    EncoderTokens,
    KVHeads,
    KvUnitsError,
    PoolFactor,
    SlidingWindowLayer,
    Tokens,
    Window,
)
from kvunits.contracts.config import (
    ConfigFile,
    ConfigIssue,
    KvUnitsConfig,
    load_config,
    load_config_data,
)
from kvunits.contracts.errors import ConfigError, ConfigWarning
from kvunits.runtime.capacity import plan

from .conftest import EXAMPLES, SHIPPED, VOXTRAL_TOML

Write = Callable[[str, str | bytes], Path]


def _issues(excinfo: pytest.ExceptionInfo[ConfigError]) -> list[str]:
    return [str(issue) for issue in excinfo.value.issues]


# -- the shipped example ----------------------------------------------------------------------


def test_shipped_example_is_the_top_level_example() -> None:
    # The package-data copy (what `kvunits plan` reads from an installed wheel) and the one
    # users see under examples/ must not drift apart.
    assert (EXAMPLES / "voxtral_realtime.toml").read_bytes() == SHIPPED.read_bytes()


@pytest.mark.parametrize("suffix", ["toml", "yaml", "json"])
def test_three_formats_load_the_same_config(suffix: str) -> None:
    reference = load_config(SHIPPED)
    config = load_config(EXAMPLES / f"voxtral_realtime.{suffix}")
    assert config.model == reference.model
    assert config.engine == reference.engine
    assert config.engine_sources == reference.engine_sources


def test_voxtral_example_loads_into_the_spec_models() -> None:
    config = load_config(SHIPPED)
    assert isinstance(config, KvUnitsConfig)
    layers = config.model.layers
    assert len(layers) == 32 + 26
    assert [name for name in layers][:2] == ["audio.0", "audio.1"]
    audio = layers["audio.31"]
    assert isinstance(audio, SlidingWindowLayer)
    assert audio.sliding_window == Window(750, EncoderTokens)
    assert audio.pool == PoolFactor(4)
    assert (audio.kv_heads, audio.head_size) == (KVHeads(32), Elements(64))
    text = layers["text.25"]
    assert isinstance(text, SlidingWindowLayer)
    assert text.sliding_window == Window(8192, Tokens)
    assert text.pool is None
    assert str(config.engine.memory_budget) == "42949672960 byte/rank"
    assert config.engine_sources["memory_budget"] == "file"
    # Frozen all the way down.
    with pytest.raises(ValueError, match="frozen"):
        config.source = "elsewhere"


def test_golden_plan_of_the_voxtral_example() -> None:
    config = load_config(SHIPPED)
    result = plan(config.model, config.engine)
    audio, text = result.groups
    assert (audio.group.name, text.group.name) == ("audio", "text")
    assert (str(audio.sliding_window), str(audio.group.manager.sliding_window)) == (
        "750 encoder_token",
        "189 pooled_block",
    )
    assert str(audio.page_size) == "524288 byte"  # 16 × 4 × 32 × (64 + 64) × 2
    assert str(audio.admission_cap) == "13 cache_block"  # cdiv(188 + 1, 16) + 1
    assert str(audio.bytes_per_request) == "218103808 byte"  # 13 × 32 × 512 KiB
    assert str(text.group.manager.sliding_window) == "8192 token"
    assert str(text.admission_cap) == "641 cache_block"  # cdiv(8191 + 2048, 16) + 1
    assert str(text.page_size) == "65536 byte"
    assert str(result.bytes_per_request) == "1310326784 byte"
    assert (str(audio.num_blocks), str(text.num_blocks)) == ("426 cache_block", "21002 cache_block")
    assert result.concurrent_requests == 32


def test_single_layers_and_groups_together(write: Write) -> None:
    path = write(
        "model.toml",
        """
        [model]
        name = "mixed"
        [model.groups.enc]
        kind = "encoder_only"
        count = 2
        [model.layers.head]
        kind = "full_attention"
        kv_heads = 8
        head_size = 128
        [model.layers."ssm.0"]
        kind = "state"
        state_size = "2 MiB"
        [engine]
        max_model_len = "4096 token"
        """,
    )
    config = load_config(path)
    assert list(config.model.layers) == ["enc.0", "enc.1", "head", "ssm.0"]
    # Unset engine settings take the documented defaults, and say so.
    assert config.engine.block_size_slots == 16
    assert str(config.engine.max_num_batched_tokens) == "2048 token"
    assert config.engine_sources["memory_budget"] == "default"
    assert config.engine_sources["max_model_len"] == "file"
    result = plan(config.model, config.engine)
    assert result.uncached_layers == ("enc.0", "enc.1")


#: One group of every kind, each with its optional fields set (a dtype alias, a pool, V's size).
EVERY_KIND: dict[str, dict[str, Any]] = {
    "full": {"kind": "full_attention", "kv_heads": 8, "head_size": 128, "head_size_v": 64},
    "swa": {"kind": "sliding_window", "sliding_window": "750 encoder_tokens", "pool": 4,
            "kv_heads": 32, "head_size": 64, "dtype": "fp8"},
    "chunked": {"kind": "chunked_local", "chunk": "8192 tok", "kv_heads": 8, "head_size": 128},
    "cross": {"kind": "cross_attention", "encoder_length": "1500 encoder_token", "kv_heads": 8,
              "head_size": 64},
    "enc": {"kind": "encoder_only"},
    "mla": {"kind": "mla", "kv_lora_rank": 512, "qk_rope_head_dim": 64, "dtype": "bf16"},
    "state": {"kind": "state", "state_size": "1 KiB"},
    "m1": {"kind": "mamba1", "conv_kernel": 4, "intermediate_size": 8192, "ssm_state_size": 16},
    "m2": {"kind": "mamba2", "conv_kernel": 4, "intermediate_size": 8192, "num_heads": 128,
           "head_dim": 64, "n_groups": 8, "ssm_state_size": 128, "ssm_dtype": "float32"},
    "gdn": {"kind": "gated_delta_net", "conv_kernel": 4, "num_k_heads": 16, "num_v_heads": 32,
            "head_k_dim": 128, "head_v_dim": 128},
    "shared": {"kind": "kv_shared", "target": "full.0"},
}  # fmt: skip


def test_a_groups_layer_is_its_fields_validated_as_the_layer_spec() -> None:
    # `layer()` builds each layer from the group's already validated fields: the result must
    # be what validating those fields as the layer spec gives (same class, values, fields set).
    from pydantic import TypeAdapter

    from kvunits.contracts import LayerSpec
    from kvunits.contracts.config import ModelConfig

    config = ModelConfig.model_validate({"name": "all", "groups": EVERY_KIND})
    adapter = TypeAdapter[LayerSpec](LayerSpec)
    assert set(config.groups) == set(EVERY_KIND)
    for group in config.groups.values():
        fields = {k: v for k, v in dict(group).items() if k != "count"}
        layer, validated = group.layer(), adapter.validate_python(fields)
        assert type(layer) is type(validated) is type(group).__bases__[0]
        assert layer == validated and layer.model_fields_set == validated.model_fields_set
        assert layer.model_dump() == validated.model_dump()
    assert len(config.spec().layers) == len(EVERY_KIND)


# -- errors -----------------------------------------------------------------------------------


def test_bare_number_names_the_unit_to_add(write: Write) -> None:
    path = write("bare.toml", VOXTRAL_TOML.replace('"750 encoder_token"', "750"))
    with pytest.raises(ConfigError) as excinfo:
        load_config(path)
    assert _issues(excinfo) == [
        f"{path}: model.groups.audio.sliding_window: 750 has no unit: write it as "
        '"750 encoder_token" (the group pools: pool = 4)'
    ]


def test_bare_number_of_a_token_group_says_token(write: Write) -> None:
    path = write("bare.toml", VOXTRAL_TOML.replace('"8192 token"', '"8192"'))
    with pytest.raises(ConfigError, match=r'write it as "8192 token" \(the group has no pool\)'):
        load_config(path)


def test_several_errors_are_reported_together(write: Write) -> None:
    text = (
        VOXTRAL_TOML.replace('"750 encoder_token"', '"750 token"')  # wrong unit: pooled
        .replace("kv_heads = 8", 'kv_heads = "8"')  # a string count
        .replace('memory_budget = "40 GiB"', 'memory_budget = "40"')  # no unit
        .replace('max_model_len = "131072 token"', 'max_model_len = "9 GiB"')  # wrong dimension
        .replace('dtype = "bfloat16"\n\n# The text', 'dtype = "bfloat17"\n\n# The text')
    )
    path = write("many.toml", text)
    with pytest.raises(ConfigError) as excinfo:
        load_config(path)
    issues = excinfo.value.issues
    paths = [issue.path for issue in issues]
    assert paths == [  # in file order within a section; a group's base fields come first
        "model.groups.audio.dtype",
        "model.groups.audio.sliding_window",
        "model.groups.text.kv_heads",
        "engine.max_model_len",
        "engine.memory_budget",
    ]
    assert all(issue.where == str(path) for issue in issues)
    by_path = {issue.path: issue.message for issue in issues}
    assert "counts encoder_token" in by_path["model.groups.audio.sliding_window"]
    assert '"750 encoder_token"' in by_path["model.groups.audio.sliding_window"]
    assert by_path["model.groups.text.kv_heads"] == (
        "expected a whole number of kv_head (a plain integer); got '8' (a str)"
    )
    assert by_path["engine.max_model_len"] == "expected token, got 9 GiB"
    assert by_path["engine.memory_budget"].startswith("'40' has no unit")
    assert "(expected byte)" in by_path["engine.memory_budget"]
    assert "unknown cache dtype 'bfloat17'" in by_path["model.groups.audio.dtype"]


def test_config_error_is_a_value_error_and_pickles() -> None:
    error = ConfigError([ConfigIssue("a.toml", "engine.memory_budget", "'40' has no unit")])
    assert isinstance(error, KvUnitsError)
    assert isinstance(error, ValueError)
    assert str(error) == "a.toml: engine.memory_budget: '40' has no unit"
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is ConfigError
    assert copy.issues == error.issues


_AUDIO = {"kind": "sliding_window", "pool": 4, "kv_heads": 32, "head_size": 64}


@pytest.mark.parametrize(
    ("group", "path", "message"),
    [
        # A missing field names the unit to write it in (the group's own, for a window).
        (
            _AUDIO,
            "sliding_window",
            "required field is missing; expected encoder_token (the group pools), e.g. "
            'sliding_window = "750 encoder_token"',
        ),
        (
            {**_AUDIO, "pool": None, "kind": "chunked_local"},
            "chunk",
            "required field is missing; expected token (the group has no pool)",
        ),
        (
            {**_AUDIO, "kind": "full_attention", "kv_heads": None},
            "kv_heads",
            "required field is missing; expected a whole number of kv_head",
        ),
        (
            {"kind": "state"},
            "state_size",
            'required field is missing; expected byte, e.g. state_size = "1 MiB"',
        ),
        # A plain-integer field takes no unit: its bounds are said with its unit, and the
        # number given is not called "a bare int, no unit".
        (
            {**_AUDIO, "sliding_window": "750 encoder_token", "head_size_v": -1},
            "head_size_v",
            "expected a whole number of element, greater than or equal to 1; got -1 (an int)",
        ),
        (
            {**_AUDIO, "sliding_window": "750 encoder_token", "dtype": 7},
            "dtype",
            "; got 7 (an int)",
        ),
    ],
)
def test_field_errors_name_the_unit(group: dict[str, Any], path: str, message: str) -> None:
    entry = {key: value for key, value in group.items() if value is not None}
    data = {"model": {"name": "m", "groups": {"g": entry}}, "engine": {}}
    with pytest.raises(ConfigError) as excinfo:
        load_config_data(data, where="cfg.toml")
    messages = [i.message for i in excinfo.value.issues if i.path == f"model.groups.g.{path}"]
    assert messages and message in messages[0], _issues(excinfo)


@pytest.mark.parametrize(
    ("data", "path", "message"),
    [
        ({"model": {"name": "m"}}, "model", "declare at least one layer"),
        ({"modle": {}}, "modle", "unknown section"),
        ({"modle": {}}, "model", "missing: a kvunits config needs a [model] section"),
        (
            {"model": {"name": "m", "groups": {"g": {"count": 2}}}},
            "model.groups.g",
            "missing kind: one of full_attention",
        ),
        (
            {"model": {"name": "m", "groups": {"g": {"kind": "swa"}}}},
            "model.groups.g",
            "unknown kind 'swa'",
        ),
        (
            {"model": {"name": "m", "groups": {"g": {"kind": "encoder_only", "colour": 1}}}},
            "model.groups.g.colour",
            "unknown field",
        ),
        (
            {
                "model": {
                    "name": "m",
                    "groups": {"g": {"kind": "encoder_only", "count": 0}},  # reported too
                    "layers": {"x": {"kind": "encoder_only", "count": 2}},
                }
            },
            "model.layers",
            "layers.x is a single layer and takes no count",
        ),
        (
            {"model": {"name": "m", "groups": {"a.b": {"kind": "encoder_only"}}}},
            "model.groups['a.b'] (the name)",
            "String should match pattern",
        ),
        (
            {
                "model": {
                    "name": "m",
                    "groups": {"x": {"kind": "encoder_only"}},
                    "layers": {"x.0": {"kind": "encoder_only"}},
                }
            },
            "model",
            "layer names collide: x.0",
        ),
        (
            {"model": {"name": "m", "groups": {"g": {"kind": "encoder_only", "count": 10**9}}}},
            "model.groups.g.count",
            "less than or equal to 4096",
        ),
        (
            {"model": {"name": "m", "groups": {"g": {"kind": "encoder_only", "count": True}}}},
            "model.groups.g.count",
            "expected a whole number of layer (a plain integer); got True (a bool)",
        ),
        (
            {"model": {"name": "m", "groups": {"g": {"kind": "state", "state_size": "0 byte"}}}},
            "model.groups.g.state_size",
            "state_size must be > 0 byte",
        ),
        (  # a check of the spec layer, reported at the config's own path
            {
                "model": {
                    "name": "m",
                    "layers": {
                        "c": {
                            "kind": "chunked_local",
                            "pool": 4,
                            "chunk": "10 encoder_token",
                            "kv_heads": 1,
                            "head_size": 8,
                        }
                    },
                }
            },
            "model.layers.c.chunk",
            "a chunk must be a whole number of pooled blocks",
        ),
    ],
)
def test_model_section_errors(data: dict[str, Any], path: str, message: str) -> None:
    data = {**data, "engine": {"max_model_len": "4096 token"}}
    with pytest.raises(ConfigError) as excinfo:
        load_config_data(data, where="cfg.toml")
    matching = [i for i in excinfo.value.issues if i.path == path and message in i.message]
    assert matching, _issues(excinfo)


def test_missing_engine_setting_names_every_place_to_set_it() -> None:
    data = {"model": {"name": "m", "groups": {"g": {"kind": "encoder_only"}}}}
    with pytest.raises(ConfigError) as excinfo:
        load_config_data(data, where="cfg.toml")
    assert _issues(excinfo) == [
        'cfg.toml: engine.max_model_len: required and not given: set max_model_len = "8192 '
        'token" in [engine], or KVUNITS_MAX_MODEL_LEN, or --max-model-len'
    ]


def test_pooled_layers_need_the_encoder_limits(write: Write) -> None:
    text = VOXTRAL_TOML.replace('max_encoder_len = "524288 encoder_token"', "")
    with pytest.raises(ConfigError) as excinfo:
        load_config(write("enc.toml", text))
    (issue,) = excinfo.value.issues
    assert issue.path == "engine.max_encoder_len"
    assert "encoder-side (pooled) layers" in issue.message


def test_the_engine_section_is_validated_even_when_the_model_is_not(write: Write) -> None:
    text = VOXTRAL_TOML.replace("count = 26", "count = 0").replace(
        'memory_budget = "40 GiB"', 'memory_budget = "0 GiB"'
    )
    with pytest.raises(ConfigError) as excinfo:
        load_config(write("both.toml", text))
    assert [i.path for i in excinfo.value.issues] == [
        "model.groups.text.count",
        "engine.memory_budget",
    ]


# -- precedence: flag > environment > file > default -------------------------------------------


def test_precedence(monkeypatch: pytest.MonkeyPatch) -> None:
    base = load_config(SHIPPED)
    assert str(base.engine.memory_budget) == "42949672960 byte/rank"
    assert base.engine_sources["cache_dtype"] == "default"

    monkeypatch.setenv("KVUNITS_MEMORY_BUDGET", "80 GiB")
    monkeypatch.setenv("KVUNITS_BLOCK_SIZE_SLOTS", "32")
    monkeypatch.setenv("kvunits_cache_dtype", "fp8")  # names are case-insensitive
    env = load_config(SHIPPED)
    assert str(env.engine.memory_budget) == str(80 << 30) + " byte/rank"
    assert env.engine.block_size_slots == 32
    assert env.engine.cache_dtype is not None and env.engine.cache_dtype.value == "fp8_e4m3"
    assert env.engine_sources["memory_budget"] == "env KVUNITS_MEMORY_BUDGET"
    assert env.engine_sources["max_model_len"] == "file"

    flags = load_config(SHIPPED, flags={"memory_budget": "20 GiB", "block_size_slots": None})
    assert str(flags.engine.memory_budget) == str(20 << 30) + " byte/rank"
    assert flags.engine_sources["memory_budget"] == "flag --memory-budget"
    assert flags.engine.block_size_slots == 32  # an absent flag leaves the environment's


def test_bad_environment_and_flag_values_name_their_source(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KVUNITS_MEMORY_BUDGET", "40")
    monkeypatch.setenv("KVUNITS_MEMORY_BUDGT", "40 GiB")  # a typo: a warning, not an issue
    with pytest.raises(ConfigError) as excinfo, pytest.warns(ConfigWarning) as warned:
        load_config(SHIPPED, flags={"block_size_slots": "16 token", "max_model_len": "8 kB"})
    assert [str(w.message) for w in warned] == [
        "KVUNITS_MEMORY_BUDGT is not a kvunits setting and is ignored; did you mean "
        "KVUNITS_MEMORY_BUDGET? (the settings: kvunits plan --help)"
    ]
    assert sorted(_issues(excinfo)) == sorted(
        [
            "environment: KVUNITS_MEMORY_BUDGET: '40' has no unit; write it with one, e.g. "
            "'40 byte' (expected byte)",
            "command line: --block-size-slots: expected a whole number of slot per cache_block "
            "(a plain integer); got '16 token' (a str)",
            "command line: --max-model-len: expected token, got 8 kB",
        ]
    )
    monkeypatch.delenv("KVUNITS_MEMORY_BUDGT")
    monkeypatch.setenv("KVUNITS_MEMORY_BUDGET", "40 GiB")
    with pytest.raises(ConfigError) as excinfo:  # a negative block size is a number too
        load_config(SHIPPED, flags={"block_size_slots": "-1"})
    assert _issues(excinfo) == [
        "command line: --block-size-slots: expected a whole number of slot per cache_block, "
        "greater than or equal to 1; got -1 (an int)"
    ]


def test_a_variable_that_names_no_setting_warns_and_changes_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Another tool's variables share the prefix; they must not break a plan.
    reference = load_config(SHIPPED)
    monkeypatch.setenv("KVUNITS_ROOT", "/srv/kvunits")
    monkeypatch.setenv("KVUNITS_LOG_LEVEL", "debug")
    with pytest.warns(ConfigWarning) as warned:
        config = load_config(SHIPPED)
    assert config == reference
    assert sorted(str(w.message).split(" is not")[0] for w in warned) == [
        "KVUNITS_LOG_LEVEL",
        "KVUNITS_ROOT",
    ]
    assert all("kvunits reads KVUNITS_<setting>" in str(w.message) for w in warned)


def test_environment_false_reads_no_variable_and_a_mapping_only_itself(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KVUNITS_MEMORY_BUDGET", "40")  # bad, and not read
    monkeypatch.setenv("KVUNITS_ROOT", "/srv")  # unknown, and not read
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        config = load_config(SHIPPED, environment=False)
        given = load_config(SHIPPED, environment={"KVUNITS_BLOCK_SIZE_SLOTS": "32"})
    assert config.engine_sources["memory_budget"] == "file"
    assert given.engine.block_size_slots == 32
    assert given.engine_sources["block_size_slots"] == "env KVUNITS_BLOCK_SIZE_SLOTS"
    with pytest.raises(ConfigError, match="KVUNITS_BLOCK_SIZE_SLOTS"):  # bad values still fail
        load_config(SHIPPED, environment={"KVUNITS_BLOCK_SIZE_SLOTS": "16 token"})


# -- the schema -------------------------------------------------------------------------------


def _properties(schema: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    found: list[tuple[str, dict[str, Any]]] = []
    for name, definition in schema.get("$defs", {}).items():
        for field, prop in definition.get("properties", {}).items():
            found.append((f"{name}.{field}", prop))
    return found


def _x_unit(prop: dict[str, Any]) -> object:
    if "x-unit" in prop:
        return prop["x-unit"]
    for option in prop.get("anyOf", []):
        if "x-unit" in option:
            return option["x-unit"]
    return None


def _is_numeric(prop: dict[str, Any]) -> bool:
    options = [prop, *prop.get("anyOf", [])]
    return any(o.get("type") == "integer" or "pattern" in o for o in options)


def test_schema_shows_the_unit_of_every_sized_field() -> None:
    schema = ConfigFile.model_json_schema()
    props = _properties(schema)
    sized = [(name, prop) for name, prop in props if _is_numeric(prop)]
    assert len(sized) >= 20
    missing = [name for name, prop in sized if _x_unit(prop) is None]
    assert missing == []
    units = {name: _x_unit(prop) for name, prop in sized}
    assert units["SlidingWindowGroup.sliding_window"] == ["encoder_token", "token"]
    assert units["SlidingWindowGroup.pool"] == "encoder_token/pooled_block"
    assert units["SlidingWindowGroup.kv_heads"] == "kv_head"
    assert units["EngineConfig.memory_budget"] == "byte"
    assert units["EngineConfig.max_encoder_len"] == "encoder_token"
    assert units["EngineConfig.block_size_slots"] == "slot/cache_block"
    assert set(schema["properties"]) == {"model", "engine"}
