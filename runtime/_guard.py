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
  interrupt, and a trace function sees one line. An exception before the commit leaves
  everything as it was; one after it comes when the call has done all it does, exactly as if
  it arrived a moment later, in the caller.
* **The token is claimed by identity.** A call claims the coordinator with
  ``claim(0, me)`` (``dict.setdefault``: one atomic operation) for a fresh object ``me``, and
  releases it on the commit's own line. Its exception handler releases the token only if
  ``me`` holds it, so an interrupt between the claim and the handler's ``try``, or at the
  release, never loses the token (the coordinator would refuse every later call) nor
  releases another call's claim (a second thread, or a call from inside a call, that was
  refused with `ConcurrentUseError`).

A call that finds the token taken is refused at once and changes nothing: one scheduler thread
drives a coordinator; concurrent use is a clear error, never a corruption. Reads take the
token too, so that what they return existed at one moment (never half of a step).

Growing a container's capacity where nothing reads it yet is not a change: it may happen
while planning.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from functools import partial
from itertools import starmap
from operator import call
from typing import Any, Final

#: The operations a call makes, in order: ``(function, *arguments)`` each, every function a C
#: callable (a bound method of a list, array, dict or set; `operator.setitem`, `setattr`, ...)
#: that runs no Python code.
Ops = list[tuple[Any, ...]]

#: ``commit(ops_of(ops))``: make every change of `Ops`, in order, in C (see the module
#: docstring). Two calls: ``ops_of`` builds a lazy iterator (no change), ``commit`` consumes it.
commit: Final[Callable[[Any], None]] = deque(maxlen=0).extend
ops_of: Final[Callable[[Ops], Any]] = partial(starmap, call)


class Guard:
    """The token of one coordinator: at most one call holds it.

    Attributes:
        owner: the claim: ``{0: the object of the call holding it}``, empty when free.
        claim: ``owner.setdefault``: ``claim(0, me) is me`` when the call of ``me`` now holds
            the token.
    """

    __slots__ = ("claim", "owner")

    def __init__(self) -> None:
        self.owner: dict[int, object] = {}
        self.claim = self.owner.setdefault

    @property
    def busy(self) -> bool:
        """Whether a call holds the token now."""
        return bool(self.owner)

    def drop(self, me: object) -> None:
        """Release the token if ``me`` holds it (an exception handler's part)."""
        if self.owner.get(0) is me:
            del self.owner[0]
