"""Where a config comes from: a file, a model directory, or a model id in the local Hugging
Face cache (never the network).

The cache is the one ``huggingface_hub`` fills: ``$HF_HUB_CACHE``, else
``$HUGGINGFACE_HUB_CACHE``, else ``$HF_HOME/hub``, else ``$XDG_CACHE_HOME/huggingface/hub``,
else ``~/.cache/huggingface/hub``. A model ``org/name`` lives in ``models--org--name``; the
revision its ``main`` branch points to is written in ``refs/main``, and the files of that
revision are in ``snapshots/<revision>/``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Final

from ._issues import config_error
from ._read import FORMATS

#: A Hugging Face model id, ``org/name`` (one slash, no ``..``).
_MODEL_ID: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}")
_REVISION: Final = re.compile(r"[0-9a-f]{40}")


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
    ``main``.

    Raises:
        ConfigError: a directory without ``config.json``; a model id that is not cached.
    """
    text = os.fspath(path)
    candidate = Path(text)
    if candidate.is_dir():
        return _in_directory(candidate, text), None
    if (
        candidate.exists()
        or candidate.suffix.lower() in FORMATS
        or not _MODEL_ID.fullmatch(text)
        or ".." in text
    ):
        return candidate, None
    return _cached(text, revision or "main"), text.rsplit("/", 1)[1]


def _in_directory(directory: Path, where: str) -> Path:
    config = directory / "config.json"
    if config.is_file():
        return config
    if (directory / "params.json").is_file():
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
    if not repo.is_dir():
        raise config_error(
            model_id,
            f"no such file, and no model {model_id} in the local Hugging Face cache "
            f"({hub}; set by HF_HUB_CACHE or HF_HOME). kvunits never downloads: fetch it "
            f"with `huggingface-cli download {model_id} config.json`, or pass a config.json path",
        )
    if _REVISION.fullmatch(branch) and (repo / "snapshots" / branch).is_dir():
        return _in_directory(repo / "snapshots" / branch, model_id)
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}", branch):
        raise config_error(model_id, f"revision {branch[:60]!r} is not a branch, tag or commit")
    ref = repo / "refs" / branch
    try:
        revision = ref.read_text(encoding="utf-8").strip()
    except OSError:
        snapshots = sorted(p.name for p in (repo / "snapshots").glob("*"))[:5]
        raise config_error(
            model_id,
            f"cached in {repo}, but without refs/{branch}, so the revision is unknown"
            + (
                f" (snapshots: {', '.join(snapshots)}); pass one's config.json" if snapshots else ""
            ),
        ) from None
    if not _REVISION.fullmatch(revision):
        raise config_error(model_id, f"{ref} does not hold a revision: {revision[:60]!r}")
    snapshot = repo / "snapshots" / revision
    if not snapshot.is_dir():
        raise config_error(
            model_id,
            f"refs/{branch} names revision {revision}, which is not in {repo / 'snapshots'}",
        )
    return _in_directory(snapshot, model_id)
