"""`SpecModel`: the frozen pydantic base of every spec model, raising kvunits' own errors.

pydantic raises its ``ValidationError`` from a model's constructor and ``model_validate*``;
a spec model re-raises it as `SpecValidationError`, which *is* that ``ValidationError`` (the
same ``errors()``, field paths and message) and a `KvUnitsError`, so that ``except
KvUnitsError`` catches every caller mistake at the public API, spec validation included.
Nested models are validated inside pydantic-core and reach the caller as one error of the
outermost model, converted once. ``model_copy(update=...)``, which pydantic does not validate,
validates the updated fields here: a copy is no way around a field's unit or kind.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, ValidationError

from .errors import SpecValidationError


class SpecModel(BaseModel):
    """A pydantic model whose validation errors are `SpecValidationError` (see module doc)."""

    # Each model's validator is built on its first use, not at import: `kvunits plan` then
    # builds the few it validates, and `import contracts` stays cheap.
    model_config = ConfigDict(defer_build=True)

    def __init__(self, /, **data: Any) -> None:
        try:
            super().__init__(**data)
        except SpecValidationError:
            raise
        except ValidationError as exc:
            raise SpecValidationError.from_pydantic(exc) from None

    # This __init__ only converts the error a caller sees; it adds no validation. Marked as
    # pydantic's own, it is not called for a model nested in another one (pydantic-core then
    # validates the fields in place, once, instead of calling back into Python per nested
    # model): the outermost model's error is converted, once.
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
