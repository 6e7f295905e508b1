"""One call at a time, and all of a call or none of it, whatever interrupts it.

Every public call of a coordinator is atomic: if it raises, by a caller's mistake, a shortfall,
a bug, or an exception it did not cause (``KeyboardInterrupt``, an asynchronous exception, a
trace function raising), nothing changed. That is made true by design, not by undoing:

* **Plan, then commit.** A call first reads and checks, changing nothing: the changes it will
  make are collected as data (a list of operations, `Ops`), with every value computed. Then
  one statement makes them all: `commit` runs the operations in C (``deque.extend`` over
  ``starmap``), so no line of Python runs between two of them, and neither a signal handler
  nor a trace function can interrupt the sequence (CPython runs both only between bytecodes
  of Python code). A call whose changes are a few stores writes them as stores on one line
  instead (``st[o] = r; st[o + 1] = q``): stores run no Python code and check for no
  interrupt, and a trace function sees one line. Such a line may end with one call of a C
  function that completes them (a tail's append, or `commit` of the few ops no store makes,
  its iterator made before the line): the interpreter checks for an interrupt after a call,
  when all is done. An exception before the commit leaves
  everything as it was; one after it comes when the call has done all it does, exactly as if
  it arrived a moment later, in the caller.
* **The token is claimed by identity.** A call claims the coordinator with
  ``claim(0, me)`` (``dict.setdefault``: one atomic operation) for a fresh object ``me``, its
  local variable ``me``, and releases it on the commit's own line. Its exception handler
  releases the token only if ``me`` holds it, so it never releases another call's claim (a
  second thread, or a call from inside a call, that was refused with `ConcurrentUseError`).
* **A token whose call no longer runs is taken over.** An interrupt can still strike in an
  exception handler before its release (a caller's mistake and an interrupt at once): the
  token then stays with a call that has ended, having changed nothing or all it does. A
  call that finds the token taken (`Guard.contend`) looks for its holder on every thread's
  stack (a frame whose ``me`` is the holder): a running holder is a concurrent call, refused;
  an ended one is replaced, so no interrupt ever leaves the coordinator refusing every call.

A call that finds the token taken is refused at once and changes nothing: one scheduler thread
drives a coordinator; concurrent use is a clear error, never a corruption. Reads take the
token too, so that what they return existed at one moment (never half of a step).

Growing a container's capacity where nothing reads it yet is not a change: it may happen
while planning.
"""

from __future__ import annotations

import os
import sys
from collections import deque
from collections.abc import Callable
from functools import partial
from itertools import starmap
from operator import call
from threading import get_ident
from types import FrameType
from typing import Any, Final

#: The operations a call makes, in order: ``(function, *arguments)`` each, every function a C
#: callable (a bound method of a list, array, dict or set; `operator.setitem`, `setattr`, ...)
#: that runs no Python code.
Ops = list[tuple[Any, ...]]

#: ``commit(ops_of(ops))``: make every change of `Ops`, in order, in C (see the module
#: docstring). Two calls: ``ops_of`` builds a lazy iterator (no change), ``commit`` consumes it.
commit: Final[Callable[[Any], None]] = deque(maxlen=0).extend
ops_of: Final[Callable[[Ops], Any]] = partial(starmap, call)

#: Where the calls that claim a token are: the runtime's modules, and the functions the
#: runtime generates (named ``<kvunits ...>``).
_CALLS: Final = (os.path.join(os.path.dirname(__file__), ""), "<kvunits ")


class Guard:
    """The token of one coordinator: at most one call holds it.

    Attributes:
        owner: the claim: ``{0: the object of the call holding it}``, empty when free.
        claim: ``owner.setdefault``: ``claim(0, me) is me`` when the call of ``me`` now holds
            the token.
    """

    __slots__ = ("claim", "owner")

    def __init__(self) -> None:
        # Its table made now (a dict keeps it after the key is deleted): built, not left
        # behind by the first call.
        self.owner: dict[int, object] = {0: self}
        del self.owner[0]
        self.claim = self.owner.setdefault

    @property
    def busy(self) -> bool:
        """Whether a running call holds the token now."""
        held = self.owner.get(0)
        return held is not None and _running(held)

    def drop(self, me: object) -> None:
        """Release the token if ``me`` holds it (an exception handler's part)."""
        if self.owner.get(0) is me:
            del self.owner[0]

    def contend(
        self, me: object, refuse: Callable[[str], BaseException], operation: str
    ) -> None:
        """After ``claim(0, me)`` failed: take the token over if its holder has ended (see the
        module docstring), else raise ``refuse(operation)``."""
        held = self.owner.get(0)
        if held is None:
            if self.claim(0, me) is me:
                return
        elif not _running(held) and _swap(self.owner, held, me):
            return
        raise refuse(operation)


def _running(holder: object) -> bool:
    """Whether a call holding the token as ``me`` may run on some thread now.

    On this thread, a frame whose ``me`` is the holder. On another, any frame of a kvunits
    call that claims a token (``me`` among its locals' names, in the runtime's files or the
    functions it generates): its locals are not read, since reading another thread's frame's
    locals (``f_locals`` makes them a dict from the live frame) crashed CPython 3.11 once in
    a test run, a reader thread beside a stepping one. Such a call may be the holder, so the
    token is not taken over while it runs (a call of another coordinator there delays a
    takeover until it returns; the interrupts that leave a token with an ended call strike
    on the caller's own thread)."""
    here = get_ident()
    for thread, frame in sys._current_frames().items():
        at: FrameType | None = frame
        while at is not None:
            code = at.f_code
            if "me" in code.co_varnames:
                if thread == here:
                    if at.f_locals.get("me") is holder:
                        return True
                elif code.co_filename.startswith(_CALLS):
                    return True
            at = at.f_back
    return False


def _swap(owner: dict[int, object], held: object, me: object) -> bool:
    """Replace an ended holder: compare and set on one line of stores and loads (no call, so
    no thread switch and no interrupt in between)."""
    try:
        if owner[0] is held: owner[0] = me  # noqa: E701 - one line: see the docstring
    except KeyError:  # released meanwhile, by a call that took it over and ended
        return False
    return owner.get(0) is me
