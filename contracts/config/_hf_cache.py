"""Where a config comes from: a file, a model directory, or a model id in the local Hugging
Face cache (never the network).

The cache is the one ``huggingface_hub`` fills: ``$HF_HUB_CACHE``, else
``$HUGGINGFACE_HUB_CACHE``, else ``$HF_HOME/hub``, else ``$XDG_CACHE_HOME/huggingface/hub``,
else ``~/.cache/huggingface/hub``. A model ``org/name`` lives in ``models--org--name``; the
revision its ``main`` branch points to is written in ``refs/main``, and the files of that
revision are in ``snapshots/<revision>/``.
"""

from __future__ import annotations

import itertools
import os
import re
from pathlib import Path
from typing import Final

from ._files import check_path, file_kind, read_regular_file, shown_path
from ._issues import config_error
from ._read import FORMATS

#: A Hugging Face model id, ``org/name`` (one slash, no ``..``).
_MODEL_ID: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}")
_REVISION: Final = re.compile(r"[0-9a-f]{40}")
#: The most ``refs/main`` may hold: a revision and a newline are 41 bytes.
MAX_REF_BYTES: Final = 4096
#: The most entries of a ``snapshots`` folder looked at to list its revisions.
_MAX_LISTED: Final = 1000


def hub_cache() -> Path:
    """The local Hugging Face hub cache, as ``huggingface_hub`` finds it."""
    for variable in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        value = os.environ.get(variable)
        if value:
            return Path(os.path.expandvars(os.path.expanduser(value)))
    home = os.environ.get("HF_HOME")
    if home:
        return Path(os.path.expandvars(os.path.expanduser(home))) / "hub"
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(xdg) / "huggingface" / "hub"


def locate_config(
    path: str | os.PathLike[str], revision: str | None = None
) -> tuple[Path, str | None]:
    """The config file to read for ``path``, and the model's name when the file's directory
    does not say it (a cache snapshot is named by its revision).

    ``path`` is a config file; a model directory (its ``config.json``); or, when no such
    file exists, a model id ``org/name`` found in the local Hugging Face cache, at
    ``revision`` (a branch or tag under ``refs/``, or a commit; vLLM's ``--revision``) or
    ``main``. Every file is then read as ``_files`` reads what a user or a cache names:
    regular files only, bounded, never echoed.

    Raises:
        ConfigError: a path no system call takes (``_files.check_path``); a directory without
            ``config.json``; a model id that is not cached, or whose cache entry is broken.
    """
    text = check_path(path)
    candidate = Path(text)
    if file_kind(candidate) == "a directory":
        return _in_directory(candidate, text), None
    if (
        os.path.lexists(candidate)
        or candidate.suffix.lower() in FORMATS
        or not _MODEL_ID.fullmatch(text)
        or ".." in text
    ):
        return candidate, None
    return _cached(text, revision or "main"), text.rsplit("/", 1)[1]


def _in_directory(directory: Path, where: str) -> Path:
    config = directory / "config.json"
    if os.path.lexists(config):
        return config  # whatever it is: the reader says what, if it is no regular file
    if os.path.lexists(directory / "params.json"):
        raise config_error(
            where,
            "a model directory with a Mistral-format params.json but no config.json: kvunits "
            "reads the transformers config.json",
        )
    raise config_error(
        where, "a directory with no config.json (a model directory holds its config.json)"
    )


def _cached(model_id: str, branch: str = "main") -> Path:
    hub = hub_cache()
    org, name = model_id.split("/")
    repo = hub / f"models--{org}--{name}"
    if file_kind(repo) != "a directory":
        raise config_error(
            model_id,
            f"no such file, and no model {model_id} in the local Hugging Face cache "
            f"({shown_path(hub)}; set by HF_HUB_CACHE or HF_HOME). kvunits never downloads: "
            f"fetch it with `huggingface-cli download {model_id} config.json`, or pass a "
            "config.json path",
        )
    if _REVISION.fullmatch(branch) and file_kind(repo / "snapshots" / branch) == "a directory":
        return _in_directory(repo / "snapshots" / branch, model_id)
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}", branch):
        raise config_error(model_id, f"revision {branch[:60]!r} is not a branch, tag or commit")
    ref = repo / "refs" / branch
    if not os.path.lexists(ref):
        snapshots = _revisions(repo / "snapshots")
        raise config_error(
            model_id,
            f"cached in {shown_path(repo)}, but without refs/{branch}, so the revision is "
            "unknown"
            + (
                f" (snapshots: {', '.join(snapshots)}); pass one's config.json" if snapshots else ""
            ),
        )
    raw = read_regular_file(ref, max_bytes=MAX_REF_BYTES, what="a revision file", where=model_id)
    revision = raw.decode("ascii", errors="replace").strip()
    if not _REVISION.fullmatch(revision):
        # Never the file's content: refs/main may be a link to any file.
        raise config_error(
            model_id,
            f"{shown_path(ref)} does not hold a revision: a revision is 40 hexadecimal digits "
            "(huggingface_hub writes the commit hash there); fix or delete the file, or pass "
            "the snapshot's config.json",
        )
    snapshot = repo / "snapshots" / revision
    if file_kind(snapshot) != "a directory":
        raise config_error(
            model_id,
            f"refs/{branch} names revision {revision}, which is not in "
            f"{shown_path(repo / 'snapshots')}",
        )
    return _in_directory(snapshot, model_id)


def _revisions(snapshots: Path) -> list[str]:
    """Up to 5 revisions of a cache's ``snapshots`` folder, in order, looking at no more than
    `_MAX_LISTED` entries (the names that are revisions only: nothing else is echoed)."""
    try:
        with os.scandir(snapshots) as entries:
            names = [entry.name for entry in itertools.islice(entries, _MAX_LISTED)]
    except (OSError, ValueError):
        return []
    return sorted(name for name in names if _REVISION.fullmatch(name))[:5]
