"""Group markers: a layer group's name as a type, so that mypy keeps one group's values out of
another group's.

A block-table column is a number of cache blocks cut by one group's block size; two groups of
one model (Gemma's full and sliding layers sharing a pool at 32 and 16 tokens a block) read
each other's columns as valid ints. Run time knows each value's group by name (a view's or a
handle's ``group``) and refuses another group's. For mypy to see it too, the group must be a
type: a service declares one small class per group it handles, naming it,

    class Full(GroupMarker, name="full"): ...
    class Sliding(GroupMarker, name="sliding"): ...

and asks for the group by its marker (``coord.group(Full, Tokens)``,
``group.expect(Tokens, Full)``). What the group's handle or view then computes carries the
marker as a type parameter (``Position[CacheBlocks, Full]``, ``BlockIds[Sliding]``), and
mypy refuses a column of ``Full`` in a table of ``Sliding``. A value without a marker (a
group asked for by its name, a table built by hand) has the parameter's default, ``Any``:
mypy accepts it where any group's goes, and the run time checks the name.

A marker is never instantiated: it is a name at both levels (``Full.group_name`` is what
the run time compares).
"""

from __future__ import annotations

import re
from typing import Any, ClassVar, Self

from typing_extensions import TypeVar

from .errors import UnitTypeError, UnitValueError

_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-/#]{0,127}")


class GroupMarker:
    """The base of a service's group markers (see the module doc).

    Example:
        >>> class Audio(GroupMarker, name="audio"): ...
        >>> Audio.group_name
        'audio'
    """

    group_name: ClassVar[str]

    def __init_subclass__(cls, *, name: str, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if type(name) is not str or not _NAME.fullmatch(name):
            raise UnitValueError(
                f"a group marker names its layer group (as group_layers and the coordinator "
                f"name it, e.g. 'text/sliding_window'), got {name!r}",
                field="name",
                expected="a layer group's name",
                got=repr(name),
            )
        cls.group_name = name

    def __new__(cls, *args: object, **kwargs: object) -> Self:
        raise UnitTypeError(
            f"{cls.__name__} is a group marker, a type: pass the class itself "
            f"(coord.group({cls.__name__}, Tokens)), never an instance",
            expected="a GroupMarker subclass",
            got=f"{cls.__name__}()",
        )


#: The group a value belongs to, as a type (a `GroupMarker` subclass), or ``Any``: a value of
#: no marked group, which mypy accepts where any group's goes (the run time checks its name).
GroupT = TypeVar("GroupT", default=Any)


def marker_name(owner: object, field: str = "owner") -> str | None:
    """The group name an ``owner`` argument gives: a marker's ``group_name``, a str as is,
    or None.

    Raises:
        UnitTypeError: neither a group's name, a `GroupMarker` subclass nor None.
    """
    if owner is None or type(owner) is str:
        return owner
    if isinstance(owner, type) and issubclass(owner, GroupMarker) and owner is not GroupMarker:
        return owner.group_name
    raise UnitTypeError(
        f"{field} must be a layer group's name (str), a GroupMarker subclass or None, got "
        f"{owner!r}",
        field=field,
        expected="str | type[GroupMarker] | None",
        got=repr(owner),
    )
