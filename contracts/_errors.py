"""The kvunits error tree.

Every error kvunits raises for a caller's mistake derives from `KvUnitsError`::

    KvUnitsError
    ├── UnitError
    │   ├── UnitTypeError (TypeError)      wrong unit, no unit, bool, float, str, foreign registry
    │   └── UnitValueError (ValueError)    negative, zero where it matters, not a whole number
    ├── SpecError (ValueError)             a spec inconsistent as a whole (contracts)
    ├── ConfigError (ValueError)           every problem of one config file (contracts)
    ├── AllocationError (RuntimeError)     a step the pools cannot satisfy (runtime)
    ├── AdmissionError (ValueError)        a request that can never fit (runtime)
    ├── RequestError (ValueError)          an unknown request, a step over its limits (runtime)
    ├── KernelArgumentError                a tensor a launcher cannot take (kernels)
    │   ├── KernelTypeError (TypeError)    not a tensor, wrong dtype
    │   └── KernelValueError (ValueError)  shape, device, stride, offsets, lengths, block ids
    └── ResidencyError (LookupError)       a key a query needs is not resident (kernels)

`UnitError` and `SpecError` live here; the others live with the code that raises them
(`contracts._config`, ``runtime``, ``kernels``) and share the root, so
``except KvUnitsError`` catches every kvunits error.
"""

from __future__ import annotations

from typing import Any


class KvUnitsError(Exception):
    """Root of every error kvunits raises for a caller's mistake."""


class UnitError(KvUnitsError):
    """A value is not in the unit, or not of the form, that the contract declares.

    Args:
        message: the full human message (what, the numbers, how to fix it).
        field: the field, argument or config path that held the value, when known.
        expected: the unit or form that was expected, e.g. ``"pooled_block"``.
        got: a short rendering of what was given, e.g. ``"750 encoder_token"``.
    """

    def __init__(
        self,
        message: str,
        *,
        field: str | None = None,
        expected: str | None = None,
        got: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.expected = expected
        self.got = got

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.message, self.field, self.expected, self.got))

    def __str__(self) -> str:
        return self.message


def _rebuild(
    cls: type[UnitError], message: str, field: str | None, expected: str | None, got: str | None
) -> UnitError:
    return cls(message, field=field, expected=expected, got=got)


class UnitTypeError(UnitError, TypeError):
    """The value has the wrong unit, no unit, or a Python type that cannot carry one."""


class UnitValueError(UnitError, ValueError):
    """The value has the right unit but an impossible magnitude (negative, zero, fractional)."""


class SpecError(KvUnitsError, ValueError):
    """A spec, plan or config is inconsistent as a whole (e.g. a window on a full layer)."""
