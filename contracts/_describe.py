"""`describe`: any value, rendered for an error message with what kind of thing it is.

The bottom of contracts (it imports nothing of it), so that every module can name what it was
given: the quantities, the registry, the factors and the config loader all use it.
"""

from __future__ import annotations


def describe(value: object) -> str:
    """Render any value for an error message, saying what kind of thing it is."""
    # A kvunits quantity ("750 encoder_token") or kind ("750 encoder_token (a window)"),
    # recognised by its shape: this module sits below those classes and cannot import them.
    unit, magnitude = getattr(type(value), "unit", None), getattr(value, "_value", None)
    if isinstance(unit, str) and type(magnitude) is int:
        return str(value)
    kind = getattr(type(value), "kind", None)
    if isinstance(kind, str) and isinstance(getattr(value, "unit", None), type):
        return f"{value} (a {kind})"
    if isinstance(value, bool):
        return f"{value!r} (a bool)"
    if isinstance(value, int):
        return f"{value} (a bare int, no unit)"
    if isinstance(value, float):
        return f"{value!r} (a float)"
    if isinstance(value, str):
        text = value if len(value) <= 40 else value[:37] + "..."
        return f"{text!r} (a str)"
    return f"a {type(value).__name__}"
