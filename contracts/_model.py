"""`SpecModel`: the frozen pydantic base of every spec model, raising kvunits' own errors.

pydantic raises its ``ValidationError`` from a model's constructor and ``model_validate*``;
a spec model re-raises it as `SpecValidationError`, which *is* that ``ValidationError`` (the
same ``errors()``, field paths and message) and a `KvUnitsError`, so that ``except
KvUnitsError`` catches every caller mistake at the public API, spec validation included.
Nested models are validated inside pydantic-core and reach the caller as one error of the
outermost model, converted once. ``model_copy(update=...)``, which pydantic does not validate,
validates the updated fields here: a copy is no way around a field's unit or kind.

The constructor is Python code, which strict mypy checks against the declared types: it
validates in the Python origin (`kvunits.contracts._origin`, pydantic's strict mode besides),
where a typed field refuses a bare int, a config's text or a dtype's name, as mypy does, and
names the typed value to write. ``model_validate*`` is the loaders' path and reads a config's
numbers and text.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, ValidationError

from ._origin import PYTHON
from .errors import SpecValidationError


class SpecModel(BaseModel):
    """A pydantic model whose validation errors are `SpecValidationError` (see module doc)."""

    # Each model's validator is built on its first use, not at import: `kvunits plan` then
    # builds the few it validates, and `import contracts` stays cheap.
    model_config = ConfigDict(defer_build=True)

    def __init__(self, /, **data: Any) -> None:
        __tracebackhide__ = True
        try:
            # Python construction: each field takes its declared type, as strict mypy checks
            # it (`_origin`); a config's numbers and text go through model_validate.
            self.__pydantic_validator__.validate_python(
                data, self_instance=self, strict=True, context=PYTHON
            )
        except SpecValidationError:
            raise
        except ValidationError as exc:
            raise SpecValidationError.from_pydantic(exc) from None

    # This __init__ sets the origin and converts the error a caller sees. Marked as pydantic's
    # own, it is not called for a model nested in another one (pydantic-core then validates
    # the fields in place, once, in the outer call's origin, instead of calling back into
    # Python per nested model): the outermost model's error is converted, once.
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]

    @classmethod
    def model_validate(cls, obj: Any, **kwargs: Any) -> Self:
        try:
            return super().model_validate(obj, **kwargs)
        except SpecValidationError:
            raise
        except ValidationError as exc:
            raise SpecValidationError.from_pydantic(exc) from None

    @classmethod
    def model_validate_json(cls, json_data: str | bytes | bytearray, **kwargs: Any) -> Self:
        try:
            return super().model_validate_json(json_data, **kwargs)
        except SpecValidationError:
            raise
        except ValidationError as exc:
            raise SpecValidationError.from_pydantic(exc) from None

    @classmethod
    def model_validate_strings(cls, obj: Any, **kwargs: Any) -> Self:
        try:
            return super().model_validate_strings(obj, **kwargs)
        except SpecValidationError:
            raise
        except ValidationError as exc:
            raise SpecValidationError.from_pydantic(exc) from None

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy; with ``update``, validated as a new model (pydantic's own copy is not).

        Raises:
            SpecValidationError: an updated field is not of its unit or kind.
        """
        if not update:
            return super().model_copy(deep=deep)
        fields = {name: getattr(self, name) for name in type(self).model_fields}
        return self.model_validate({**fields, **update}, by_name=True)
