"""Every error kvunits raises for a caller's mistake, in one tree.

::

    KvUnitsError
    ├── UnitError                          a value not in the unit or form the contract declares
    │   ├── UnitTypeError (TypeError)      wrong unit or kind, no unit, bool, float, str, foreign
    │   │   │                              registry
    │   │   └── CacheDTypeError            (and a KernelTypeError, below)
    │   ├── UnitValueError (ValueError)    negative, zero where it matters, not a whole number
    │   └── UnitAttributeError             a magnitude read without naming its unit (``.value``)
    │                                      (AttributeError)
    ├── SpecError (ValueError)             a spec, plan or group inconsistent as a whole
    │   └── SpecValidationError            a spec model's fields rejected by pydantic, with
    │                                      their paths (also ``pydantic.ValidationError``)
    ├── ConfigError (ValueError)           every problem of one config (file, environment, flags)
    ├── AllocationError (RuntimeError)     not enough free cache blocks *now*: retry, preempt
    ├── AdmissionError (ValueError)        a request that can *never* fit: refuse it
    ├── RequestError (ValueError)          the allocator's protocol broken: unknown or duplicate
    │                                      request, a step beyond its declared limits, a bad id
    ├── ConcurrentUseError (RuntimeError)  a coordinator entered while a call was in progress
    ├── KernelArgumentError                a tensor a kernel launcher cannot take
    │   ├── KernelTypeError (TypeError)    not a tensor, wrong dtype
    │   │   └── CacheDTypeError            a cache of another dtype than its group stores
    │   └── KernelValueError (ValueError)  shape, device, stride, offsets, lengths, block ids
    └── ResidencyError (LookupError)       a key a query needs is not resident in the cache

One warning stands apart: `ConfigWarning` (a ``UserWarning``), a setting kvunits ignores (a
``KVUNITS_*`` environment variable that names none). Each leaf also inherits the builtin it
resembles, so ``except ValueError`` in caller code keeps
working, and ``except KvUnitsError`` catches them all. Every error carries typed fields (the
field or argument at fault, the expected unit, what was given, the group and request) and
pickles with them, so it crosses a process boundary intact. `contracts`, ``runtime`` and
``kernels`` re-export the classes they raise; all are defined here.

This module imports only ``pydantic_core`` at run time (`SpecValidationError` is also its
``ValidationError``); the quantity types below are annotations only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, final, get_args

from pydantic_core import PydanticCustomError, ValidationError
from pydantic_core.core_schema import ErrorType

if TYPE_CHECKING:
    from kvunits.contracts import AdmissionCap, CacheBlocks, EncoderTokens, Position, Tokens


class KvUnitsError(Exception):
    """Root of every error kvunits raises for a caller's mistake.

    Args:
        message: the full human message: what is wrong, the numbers, how to fix it.
    """

    message: str

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> tuple[Any, ...]:
        # Every attribute besides the message is a keyword argument of the class.
        fields = {k: v for k, v in vars(self).items() if k != "message"}
        return (_rebuild, (type(self), self.message, fields))


def _rebuild(cls: type[KvUnitsError], message: str, fields: dict[str, Any]) -> KvUnitsError:
    return cls(message, **fields)


# -- contracts ---------------------------------------------------------------------------------


class UnitError(KvUnitsError):
    """A value is not in the unit, or not of the form, that the contract declares.

    Args:
        message: the full human message.
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
        self.field = field
        self.expected = expected
        self.got = got


class UnitTypeError(UnitError, TypeError):
    """The value has the wrong unit, no unit, or a Python type that cannot carry one."""


class UnitValueError(UnitError, ValueError):
    """The value has the right unit but an impossible magnitude (negative, zero, fractional)."""


class UnitAttributeError(UnitError, AttributeError):
    """A plain number read out of a quantity without naming its unit.

    A quantity has no ``.value``: ``q.numerical_value_in(EncoderTokens)`` names the unit the
    number counts, so that ``PooledBlocks(w.numerical_value_in(EncoderTokens))`` reads as the
    relabelling it is. Also an ``AttributeError``, so ``hasattr`` and ``getattr(q, name, d)``
    keep working.
    """


class SpecError(KvUnitsError, ValueError):
    """A spec, plan or config is inconsistent as a whole (e.g. a chunk that is not a whole
    number of cache blocks), or names a group that does not exist."""


#: pydantic's own error types (``missing``, ``int_type``, …): rebuilt by name, with their context.
_PYDANTIC_ERROR_TYPES: Final = frozenset(get_args(ErrorType))


class SpecValidationError(ValidationError, SpecError):
    """A spec model (a layer, model or engine spec, a config section) refused its input.

    It *is* pydantic's ``ValidationError`` (``.errors()`` lists every problem with its field
    path, ``str`` prints them as pydantic does) and a `KvUnitsError`, so ``except
    KvUnitsError`` catches spec validation like every other mistake. The spec models raise it
    from their constructor and ``model_validate*``; build one with `from_pydantic`.

    Example:
        >>> from kvunits.contracts import Elements, KVHeads, PoolFactor, SlidingWindowLayer
        >>> try:
        ...     SlidingWindowLayer(sliding_window="750", pool=PoolFactor(4), kv_heads=KVHeads(8),
        ...                        head_size=Elements(64))
        ... except KvUnitsError as exc:
        ...     print(type(exc).__name__, exc.errors()[0]["loc"])
        SpecValidationError ('sliding_window',)
    """

    def __init__(self, *args: Any) -> None:
        # pydantic-core builds the error and its message; KvUnitsError's __init__ (which
        # takes one message) does not apply.
        BaseException.__init__(self, *args)

    @classmethod
    def from_pydantic(cls, error: ValidationError) -> SpecValidationError:
        """The same errors (type, field path, input, message) as a `SpecValidationError`."""
        details: list[Any] = []
        for item in error.errors():
            name, ctx = item["type"], item.get("ctx")
            detail: dict[str, Any] = {"type": name, "loc": item["loc"], "input": item["input"]}
            if name not in _PYDANTIC_ERROR_TYPES:
                # A custom error (kvunits' own ``unit_error``): its message is already final.
                ctx = {**(ctx or {}), "message": item["msg"]}
                detail["type"] = PydanticCustomError(name, "{message}", ctx)
            elif ctx is not None:
                detail["ctx"] = ctx
            details.append(detail)
        return cls.from_exception_data(error.title, details)

    @property
    def message(self) -> str:  # type: ignore[override]  # KvUnitsError's attribute, derived
        """The full human message: pydantic's rendering of every error."""
        return str(self)


@final
@dataclass(frozen=True, slots=True)
class ConfigIssue:
    """One problem of a config, located precisely.

    Attributes:
        where: the file, or ``"environment"`` / ``"command line"`` for an engine setting
            that came from there.
        path: the field: a dotted path in the file (``model.groups.audio.sliding_window``),
            an environment variable (``KVUNITS_MEMORY_BUDGET``) or a flag (``--memory-budget``).
        message: what is wrong, with the expected unit and what was given.
    """

    where: str
    path: str
    message: str

    def __str__(self) -> str:
        if not self.path:
            return f"{self.where}: {self.message}"
        return f"{self.where}: {self.path}: {self.message}"


class ConfigError(KvUnitsError, ValueError):
    """A config (file, environment or flags) is invalid; ``issues`` lists every problem.

    ``str(error)`` is one issue per line, ready for a terminal.
    """

    def __init__(self, issues: Sequence[ConfigIssue]) -> None:
        self.issues: tuple[ConfigIssue, ...] = tuple(issues)
        super().__init__("\n".join(str(issue) for issue in self.issues))

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.issues,))


class ConfigWarning(UserWarning):
    """A config setting kvunits ignores, with the reason: a ``KVUNITS_*`` environment
    variable that names no setting (a typo, or another tool's). Not a `KvUnitsError`:
    nothing was refused."""


# -- runtime -----------------------------------------------------------------------------------


class AllocationError(KvUnitsError, RuntimeError):
    """A group has fewer free cache blocks than a step or an admission needs, right now.

    Nothing was changed: a failed step or admission leaves every pool, table and length as it
    was. The condition is transient (blocks come back when requests finish).

    Args:
        message: the full message (what, the numbers, what to do).
        group: the name of the first group that fell short.
        needed: cache blocks the operation needs in that group.
        free: cache blocks it could have used there (free, plus what the step evicts, or
            not yet reserved for admission).
        request_id: the request concerned.

    Example:
        >>> from kvunits.contracts import CacheBlocks
        >>> err = AllocationError("short", group="audio", needed=CacheBlocks(3),
        ...                       free=CacheBlocks(1), request_id="r1")
        >>> str(err.shortfall)
        '2 cache_block'
    """

    def __init__(
        self,
        message: str,
        *,
        group: str,
        needed: CacheBlocks,
        free: CacheBlocks,
        request_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self.group = group
        self.needed = needed
        self.free = free
        self.request_id = request_id

    @property
    def shortfall(self) -> CacheBlocks:
        """How many cache blocks the group lacked."""
        return self.needed - self.free


class AdmissionError(KvUnitsError, ValueError):
    """A request can never be served: its admission cap exceeds what a group can ever give,
    or it declares a length beyond the group's limit. Refuse it; queueing it would wait
    forever.

    Args:
        message: the full message.
        request_id: the refused request.
        group: the group that refuses it.
        cap: cache blocks the request can hold at once in that group (its admission cap).
        usable: cache blocks the group has for requests (its pool less the null block).
    """

    def __init__(
        self,
        message: str,
        *,
        request_id: str,
        group: str,
        cap: AdmissionCap,
        usable: CacheBlocks,
    ) -> None:
        super().__init__(message)
        self.request_id = request_id
        self.group = group
        self.cap = cap
        self.usable = usable


class RequestError(KvUnitsError, ValueError):
    """The caller broke the allocator's protocol for one request.

    Args:
        message: the full message.
        request_id: the request concerned.
        group: the group concerned, when there is one.
    """

    def __init__(self, message: str, *, request_id: str, group: str | None = None) -> None:
        super().__init__(message)
        self.request_id = request_id
        self.group = group


class ConcurrentUseError(KvUnitsError, RuntimeError):
    """A coordinator was entered while another call on it was still in progress: a second
    thread (a coordinator is driven by one scheduler thread), or a callback from inside a call.

    The call that raises changed nothing, and the call in progress completes as if alone.
    Share a coordinator between threads only under one lock held around every call.

    Args:
        message: the full message.
        operation: the call that found the coordinator busy (``"allocate"``, ``"admit"``, …).
    """

    def __init__(self, message: str, *, operation: str) -> None:
        super().__init__(message)
        self.operation = operation


# -- kernels -----------------------------------------------------------------------------------


class KernelArgumentError(KvUnitsError):
    """A tensor (or metadata) argument that a kernel launcher cannot take.

    Raised as one of its two leaves; catch this class for either. A wrong *unit* is a
    `UnitTypeError`, a spec the kernels cannot run a `SpecError`.

    Args:
        message: the full human message (the argument, what it got, what it needs).
        argument: the launcher argument at fault, e.g. ``"k_cache"`` or ``"slot_mapping"``.
    """

    def __init__(self, message: str, *, argument: str) -> None:
        super().__init__(message)
        self.argument = argument


class KernelTypeError(KernelArgumentError, TypeError):
    """Not a tensor, or a tensor of the wrong dtype."""


@final
class CacheDTypeError(KernelTypeError, UnitTypeError):
    """A cache tensor whose dtype is not the one its layer's group stores.

    The dtype a page was sized with owns the page: a cache of one dtype used for a group that
    stores another reads every page at the wrong stride (an engine-wide dtype applied to a
    group with its own: TensorRT-LLM #16304; one group's bf16 pages read as another's fp8:
    vLLM #37429). Both a `KernelTypeError` (a tensor the launcher cannot take) and a
    `UnitTypeError` (bytes of one dtype are not bytes of another), so ``except UnitError``
    catches it as it catches every unit mistake.

    Args:
        message: the full human message.
        argument: the launcher argument at fault (``"k_cache"``, ``"v_cache"``).
        field: the same argument.
        expected: the dtype the group stores.
        got: the tensor's dtype.
        group: the layer group the layer belongs to (None: a view not grouped).
    """

    def __init__(
        self,
        message: str,
        *,
        argument: str,
        field: str | None = None,
        expected: str | None = None,
        got: str | None = None,
        group: str | None = None,
    ) -> None:
        KvUnitsError.__init__(self, message)
        self.argument = argument
        self.field = field if field is not None else argument
        self.expected = expected
        self.got = got
        self.group = group


class KernelValueError(KernelArgumentError, ValueError):
    """A tensor of the wrong shape, device or strides, or metadata with impossible values
    (offsets that decrease, a length shorter than the step, a block id outside the cache)."""


class ResidencyError(KvUnitsError, LookupError):
    """A query's window needs a key whose cache block is not in the block table.

    Args:
        message: the full human message.
        request: the request's index in the batch (row of the block table).
        query_position: the position of the first query that needs the block, in the kernel's
            unit (encoder tokens for a pooled layer).
        logical_block: the block-table column that holds (or should hold) the needed keys.
        table_entry: the cache-block id found there (0: the null block), or None when the
            column lies beyond the table's width.
    """

    def __init__(
        self,
        message: str,
        *,
        request: int,
        query_position: Position[EncoderTokens] | Position[Tokens],
        logical_block: int,
        table_entry: int | None,
    ) -> None:
        super().__init__(message)
        self.request = request
        self.query_position = query_position
        self.logical_block = logical_block
        self.table_entry = table_entry
