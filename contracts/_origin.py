"""Where a spec's input comes from: Python code, or a config's numbers and text.

A config file writes a count as a plain number (``kv_heads = 32``: the field names its unit),
a size as text (``"750 encoder_token"``), a dtype by name; the loaders read them with
``model_validate``, which keeps taking them. Python code constructs a spec with its keywords,
``FullAttentionLayer(kv_heads=KVHeads(8), head_size=Elements(128))``, which strict mypy checks
against the declared types: there a bare ``32`` is the unit-less int the project refuses, and
``"750 encoder_token"`` a string where a `Window` belongs. So `SpecModel`'s constructor
validates in the *Python* origin (`PYTHON`, pydantic's strict mode besides), where each typed
field takes its own type only, as mypy does, and says what to write instead:

    kv_heads=32 has no unit: write KVHeads(32)

A field's schema asks `in_python` and, there, refuses any other form with `written_in_python`
after reading the value the config way, so that the fix it names is the exact typed value.
"""

from __future__ import annotations

from typing import Any, Final

from pydantic_core import PydanticCustomError

from ._describe import describe

_KEY: Final = "kvunits_origin"

#: The validation context of Python construction (`SpecModel.__init__`).
PYTHON: Final[dict[str, str]] = {_KEY: "python"}


def in_python(info: Any) -> bool:
    """Whether a field is validated for Python construction (a spec's keywords), not for a
    config's text (``model_validate``). ``info`` is pydantic's ``ValidationInfo``."""
    context = info.context
    return type(context) is dict and context.get(_KEY) == "python"


def written_in_python(info: Any, value: object, fix: str, expected: str) -> PydanticCustomError:
    """The error for ``value`` given to a typed field in Python: it names the field, what was
    given and the typed value to write (``fix``), e.g. ``kv_heads=32 has no unit: write
    KVHeads(32)``."""
    field = info.field_name or "the field"
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        given = f"{field} is {describe(value)}, not {expected}"
    elif isinstance(value, int):
        given = f"{field}={value} has no unit"
    else:
        given = f"{field}={value[:60]!r} is a config file's text, not {expected}"
    return PydanticCustomError(
        "unit_error",
        "{message}",
        {
            "message": f"{given}: write {fix}",
            "expected": expected,
            "got": describe(value),
        },
    )
