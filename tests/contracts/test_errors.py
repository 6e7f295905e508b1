"""The error tree: one module defines it, its docstring draws it, every error pickles."""

from __future__ import annotations

import pickle
import re
from typing import Any

import pytest

import kvunits.contracts
import kvunits.contracts.config
import kvunits.runtime
from kvunits.contracts import (
    CacheBlocks,
    EncoderTokens,
    EngineSpec,
    Position,
    errors,
)
from kvunits.contracts.errors import ConfigIssue, KvUnitsError


def _tree() -> dict[str, list[str]]:
    """Each class of `kvunits.contracts.errors` and its bases within the tree, from the classes."""
    classes = {
        name: cls
        for name, cls in vars(errors).items()
        if isinstance(cls, type) and issubclass(cls, KvUnitsError)
    }
    return {
        name: sorted(b.__name__ for b in cls.__bases__ if issubclass(b, KvUnitsError))
        for name, cls in classes.items()
    }


def _drawn() -> dict[str, list[str]]:
    """The same, read from the tree drawn in the module docstring (a class with two bases in
    the tree is drawn under each)."""
    assert errors.__doc__ is not None
    parents: dict[int, str] = {}
    drawn: dict[str, list[str]] = {}
    for line in errors.__doc__.splitlines():
        found = re.match(r"^    ([│ ├└─]*)([A-Z][A-Za-z]+)", line)
        if found is None:
            continue
        depth = len(found.group(1)) // 4
        name = found.group(2)
        parents[depth] = name
        drawn[name] = sorted({*drawn.get(name, []), *([parents[depth - 1]] if depth else [])})
    return drawn


def test_the_drawing_is_the_tree() -> None:
    assert _drawn() == _tree()


def test_each_package_exports_the_errors_it_raises() -> None:
    for name in ("KvUnitsError", "UnitError", "UnitTypeError", "UnitValueError", "SpecError"):
        assert getattr(kvunits.contracts, name) is getattr(errors, name)
    assert kvunits.contracts.config.ConfigError is errors.ConfigError
    for name in ("AllocationError", "AdmissionError", "RequestError", "ConcurrentUseError"):
        assert getattr(kvunits.runtime, name) is getattr(errors, name)
    kernels = pytest.importorskip("kvunits.kernels", reason="the kernels extra is not installed")
    for name in (
        "KernelArgumentError",
        "KernelTypeError",
        "KernelValueError",
        "CacheDTypeError",
        "ResidencyError",
    ):
        assert getattr(kernels, name) is getattr(errors, name)


_FIELDS: dict[str, dict[str, Any]] = {
    "UnitError": {"field": "audio.sliding_window", "expected": "pooled_block", "got": "750"},
    "AllocationError": {
        "group": "audio",
        "needed": CacheBlocks(3),
        "free": CacheBlocks(1),
        "request_id": "r1",
    },
    "AdmissionError": {
        "request_id": "r1",
        "group": "audio",
        "cap": CacheBlocks(13),
        "usable": CacheBlocks(12),
    },
    "RequestError": {"request_id": "r1", "group": "text"},
    "ConcurrentUseError": {"operation": "allocate"},
    "KernelArgumentError": {"argument": "k_cache"},
    "ResidencyError": {
        "request": 2,
        "query_position": Position(756, EncoderTokens),
        "logical_block": 0,
        "table_entry": 0,
    },
}


def _fields(cls: type[KvUnitsError]) -> dict[str, Any]:
    for base in cls.__mro__:
        if base.__name__ in _FIELDS:
            return _FIELDS[base.__name__]
    return {}


@pytest.mark.parametrize("name", sorted(_tree()), ids=str)
def test_every_error_pickles_with_its_fields(name: str) -> None:
    cls = getattr(errors, name)
    if cls is errors.ConfigError:
        issue = ConfigIssue("bad.toml", "engine.max_model_len", "expected token, got 9 GiB")
        err = cls([issue])
        assert str(err) == "bad.toml: engine.max_model_len: expected token, got 9 GiB"
    elif cls is errors.SpecValidationError:
        # pydantic-core builds it: from a spec model's own validation error.
        with pytest.raises(errors.SpecValidationError) as info:
            EngineSpec.model_validate({"max_model_len": "9 GiB"})
        spec_error = info.value
        clone = pickle.loads(pickle.dumps(spec_error))
        assert type(clone) is cls and str(clone) == str(spec_error)
        # (a ValueError in an entry's context compares by identity: compare what it says)
        assert [(e["type"], e["loc"], e["msg"]) for e in clone.errors()] == [
            (e["type"], e["loc"], e["msg"]) for e in spec_error.errors()
        ]
        return
    else:
        err = cls("what went wrong, the numbers, the fix", **_fields(cls))
    clone = pickle.loads(pickle.dumps(err))
    assert type(clone) is cls and str(clone) == str(err)
    assert vars(clone) == vars(err)
