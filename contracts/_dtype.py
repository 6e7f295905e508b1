"""Cache dtypes with their exact size in bytes."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Final

from ._origin import in_python, written_in_python
from ._quantity import Bytes
from .errors import SpecError


class CacheDType(StrEnum):
    """The element type stored in the KV cache.

    Example:
        >>> CacheDType.bfloat16.itemsize
        Bytes(2)
    """

    bfloat16 = "bfloat16"
    float16 = "float16"
    float32 = "float32"
    fp8_e4m3 = "fp8_e4m3"
    fp8_e5m2 = "fp8_e5m2"

    @property
    def itemsize(self) -> Bytes:
        """Bytes per element."""
        return Bytes(_ITEMSIZE_BYTES[self])

    @property
    def itemsize_bytes(self) -> int:
        """Bytes per element as a plain int, for hot paths."""
        return _ITEMSIZE_BYTES[self]

    @classmethod
    def parse(cls, name: str) -> CacheDType:
        """Accept the canonical names and the aliases configs use (``bf16``, ``half``, ``fp8``)."""
        # ASCII only, as the config schema's pattern: str.lower() maps some non-ASCII letters
        # to ASCII ones (the Kelvin sign to k), str.strip() takes non-ASCII spaces.
        key = name.strip(" \t\n\r\f\v").lower()
        try:
            if not key.isascii():
                raise ValueError(key)
            return cls(_ALIASES.get(key, key))
        except ValueError:
            known = ", ".join(sorted({*(d.value for d in cls), *_ALIASES}))
            raise SpecError(f"unknown cache dtype {name!r}; known: {known}") from None


_ITEMSIZE_BYTES: Final[dict[CacheDType, int]] = {
    CacheDType.bfloat16: 2,
    CacheDType.float16: 2,
    CacheDType.float32: 4,
    CacheDType.fp8_e4m3: 1,
    CacheDType.fp8_e5m2: 1,
}

_ALIASES: Final[dict[str, str]] = {
    "bf16": "bfloat16",
    "fp16": "float16",
    "half": "float16",
    "fp32": "float32",
    "float": "float32",
    "fp8": "fp8_e4m3",
    "float8_e4m3fn": "fp8_e4m3",
    "float8_e5m2": "fp8_e5m2",
    "fp8_e4m3fn": "fp8_e4m3",
    "torch.float8_e4m3fn": "fp8_e4m3",
    "torch.float8_e5m2": "fp8_e5m2",
    "torch.bfloat16": "bfloat16",
    "torch.float16": "float16",
    "torch.float32": "float32",
}


def parse_dtype_field(value: object, info: Any) -> object:
    """Before-check of a dtype field: a config's name (``"bf16"``) is parsed; in Python
    construction (`kvunits.contracts._origin`) a `CacheDType` member is written instead.

    Raises:
        PydanticCustomError: a name given in Python, with the member to write.
        SpecError: an unknown name.
    """
    if not isinstance(value, str) or type(value) is CacheDType:
        return value
    if in_python(info):
        try:
            fix = f"CacheDType.{CacheDType.parse(value).name}"
        except SpecError:
            fix = (
                "a CacheDType member ("
                + ", ".join(f"CacheDType.{d.name}" for d in CacheDType)
                + ")"
            )
        raise written_in_python(info, value, fix, "a CacheDType")
    return CacheDType.parse(value)
