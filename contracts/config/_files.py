"""Files a user or a cache names: the one way kvunits opens them.

The rule, for every file kvunits reads because a user named it (a config, a model directory)
or because a cache or a model directory names it (``refs/main``, ``snapshots/<rev>/
config.json``, the JSON files beside a ``config.json``):

1. **The path first** (`check_path`): refused before any system call when no system call
   could take it: a NUL character, a name longer than ``NAME_MAX`` (255 bytes), a path
   longer than ``PATH_MAX`` (4095 bytes). Python raises a bare ``ValueError`` or ``OSError``
   there; kvunits a `ConfigError` naming the limit.
2. **Open without blocking, check the open file** (`open_regular_file`): ``O_NONBLOCK``, so
   that a FIFO never waits for a writer; the file type is read from the open descriptor (no
   race with a path swapped in between), and anything but a regular file is refused, named
   for what it is (a FIFO, a character device such as ``/dev/zero``, a directory).
3. **Read up to a bound** (`read_regular_file`): each caller states the most its file may
   hold; a larger file is refused by its size, and one that grows while read by the bytes
   read.
4. **Never echo**: errors name the path, the file's kind and sizes, never its content (a link
   from ``refs/main`` to any file must not print that file).

A path in a message is shown whole up to `MAX_SHOWN_CHARS`, else its start and its length,
control characters escaped (`shown_path`).

Example:
    >>> try:
    ...     check_path("model\\x00.toml")
    ... except ConfigError as error:
    ...     print(error)
    model\\x00.toml: the path holds a NUL character (at 5); no file has one
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from typing import BinaryIO, Final

from ..errors import ConfigError
from ._issues import config_error

#: The longest name of one path component, in bytes (Linux's and macOS's ``NAME_MAX``).
NAME_MAX: Final = 255
#: The longest path a system call takes, in bytes, its terminating NUL excluded (Linux's
#: ``PATH_MAX`` of 4096 with it).
PATH_MAX: Final = 4095
#: The longest path a message shows whole.
MAX_SHOWN_CHARS: Final = 200
_SHOWN_START: Final = 60

#: A text of a model id's shape, of any length (`_hf_cache` bounds its parts to 96).
_MODEL_ID_SHAPE: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*")

_KINDS: Final = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def shown_path(path: str | os.PathLike[str]) -> str:
    """``path`` as messages show it: whole, or its first characters and its length.

    Example:
        >>> shown_path("org/" + "m" * 300)
        'org/mmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmm… (304 characters)'
    """
    text = os.fspath(path)
    shown = text if len(text) <= MAX_SHOWN_CHARS else text[:_SHOWN_START]
    # Control characters escaped: a message is one line, and moves no terminal's cursor.
    shown = "".join(c if c.isprintable() else repr(c)[1:-1] for c in shown)
    return shown if len(text) <= MAX_SHOWN_CHARS else f"{shown}… ({len(text)} characters)"


def check_path(path: str | os.PathLike[str]) -> str:
    """``path`` as text, if a system call can take it (rule 1 of the module doc).

    Raises:
        ConfigError: a NUL character, a name longer than `NAME_MAX` bytes or a path longer
            than `PATH_MAX` bytes (in the file system's encoding), naming the limit.
    """
    text = os.fspath(path)
    where = shown_path(text)
    if "\x00" in text:
        raise config_error(
            where, f"the path holds a NUL character (at {text.index(chr(0))}); no file has one"
        )
    try:
        encoded = os.fsencode(text)
    except UnicodeError:
        raise config_error(where, "the path cannot be encoded for the file system") from None
    longest = max((len(part) for part in encoded.split(b"/")), default=0)
    if longest > NAME_MAX:
        hint = (
            ", and a Hugging Face model id is org/name, each at most 96 characters"
            if _MODEL_ID_SHAPE.fullmatch(text)
            else ""
        )
        raise config_error(
            where,
            f"a name in the path is {longest} bytes long; a file system allows at most "
            f"{NAME_MAX} (NAME_MAX){hint}",
        )
    if len(encoded) > PATH_MAX:
        raise config_error(
            where,
            f"the path is {len(encoded)} bytes long; a system call takes at most {PATH_MAX} "
            "(PATH_MAX)",
        )
    return text


def file_kind(path: str | os.PathLike[str]) -> str | None:
    """What ``path`` is, links followed: ``"a regular file"``, ``"a directory"``, ``"a
    FIFO"``, …; None when nothing can be found there (no file, a dangling link, a path no
    system call takes, no permission to look)."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    return _kind(mode)


def _kind(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "a regular file"
    return next((name for test, name in _KINDS if test(mode)), "not a file kvunits knows")


def _refusal(path: str, where: str | None, message: str) -> ConfigError:
    # The file is the place of the error, or, when the caller names another place (the
    # model id whose cache holds the file), the first word of the message.
    if where is None:
        return config_error(shown_path(path), message)
    return config_error(where, f"{shown_path(path)}: {message}")


@contextmanager
def open_regular_file(
    path: str | os.PathLike[str], *, where: str | None = None
) -> Iterator[BinaryIO]:
    """Open ``path`` for reading in binary, if it is a regular file (rules 1 and 2 of the
    module doc); for readers that take a part of a large file (a safetensors header).

    Args:
        path: the file.
        where: the place errors name (default: the file itself, shortened by `shown_path`);
            when it is another (a model id), the message names the file.

    Raises:
        ConfigError: the path is refused, the file cannot be opened, or is not a regular
            file (the message says what it is).
    """
    text = os.fspath(path)
    if where is None:
        check_path(text)
    else:
        try:
            check_path(text)
        except ConfigError as error:
            raise _refusal(text, where, error.issues[0].message) from None
    try:
        # O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever.
        handle = open(text, "rb", opener=_open_nonblocking)  # noqa: SIM115 (closed below)
    except OSError as exc:
        kind = file_kind(text)  # a directory cannot be opened: name it as what it is
        if kind not in (None, "a regular file"):
            raise _refusal(text, where, f"not a regular file: {kind}") from None
        raise _refusal(text, where, f"cannot read: {exc.strerror or exc}") from None
    with handle:
        mode = os.fstat(handle.fileno()).st_mode
        if not stat.S_ISREG(mode):
            raise _refusal(text, where, f"not a regular file: {_kind(mode)}")
        yield handle


def read_regular_file(
    path: str | os.PathLike[str], *, max_bytes: int, what: str, where: str | None = None
) -> bytes:
    """The bytes of ``path``, a regular file of at most ``max_bytes`` (rules 1 to 4 of the
    module doc).

    Args:
        path: the file.
        max_bytes: the most it may hold.
        what: the file, in messages (``"a config"``, ``"a revision file"``).
        where: as for `open_regular_file`.

    Raises:
        ConfigError: as `open_regular_file`; or the file is larger than ``max_bytes`` (its
            size, never its content, in the message).
    """
    text = os.fspath(path)
    with open_regular_file(text, where=where) as handle:
        size = os.fstat(handle.fileno()).st_size
        if size > max_bytes:
            raise _refusal(
                text, where, f"{size} byte is larger than the {max_bytes} byte {what} may have"
            )
        try:
            raw = handle.read(max_bytes + 1)
        except OSError as exc:
            raise _refusal(text, where, f"cannot read: {exc.strerror or exc}") from None
    if len(raw) > max_bytes:  # it grew after the size check
        raise _refusal(text, where, f"larger than the {max_bytes} byte {what} may have")
    return raw


def _open_nonblocking(path: str, flags: int) -> int:
    return os.open(path, flags | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
