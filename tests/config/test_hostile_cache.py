"""Files a user or a cache names, and the paths that name them (issue 24, items 4 and 5).

The rule (``kvunits.contracts.config._files``): every file kvunits reads because a user or a
cache names it (a config, a model directory's ``config.json``, the cache's ``refs/main``, the
JSON files beside a ``config.json``) is opened without blocking, read only if it is a regular
file, up to a bound, and its content is never echoed; a path is refused, before any system
call, when the operating system could not take it (a NUL character, a name longer than a file
system allows). Each refusal is one `ConfigError` line, and the command line prints it
without a traceback (exit 2).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvunits.cli import main
from kvunits.contracts.config import ConfigError, load_config

from ..cli.test_cli import run
from ..examples import examples
from .test_hf_cache import CONFIG, MODEL_ID, REVISION, fake_cache

POSIX = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX FIFOs and devices")
#: A refusal that takes longer than this is a hang (the refusals measure in milliseconds).
HANG_S = 10.0
SECRET = "TOP-SECRET-0123456789abcdef0123456789abcdef-NOT-A-REVISION"


def _refusal(load: Callable[[], object]) -> ConfigError:
    """The ConfigError ``load`` raises, in a thread that must finish within `HANG_S`."""
    outcome: list[BaseException] = []

    def target() -> None:
        try:
            load()
        except BaseException as exc:  # the test inspects whatever escapes
            outcome.append(exc)

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(HANG_S)
    assert not worker.is_alive(), "the load hangs"
    (error,) = outcome
    assert isinstance(error, ConfigError), repr(error)
    return error


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake hub cache holding MODEL_ID; returns its ``refs/main``."""
    for name in ("HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    snapshot = fake_cache(tmp_path / "hub")
    return snapshot.parents[1] / "refs" / "main"


def _replace_with_fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def _link_to(path: Path, target: Path | str) -> None:
    path.unlink()
    path.symlink_to(target)


# -- refs/main --------------------------------------------------------------------------------


@POSIX
def test_a_fifo_as_refs_main_is_refused_without_waiting(cache: Path) -> None:
    # It used to block in open() for a writer that never comes: the command hung forever.
    _replace_with_fifo(cache)
    error = _refusal(lambda: load_config(MODEL_ID))
    assert str(error) == f"{MODEL_ID}: {cache}: not a regular file: a FIFO"


@POSIX
def test_refs_main_linked_to_dev_zero_is_refused_not_read(cache: Path) -> None:
    # It used to read until memory ran out (a MemoryError traceback).
    _link_to(cache, "/dev/zero")
    error = _refusal(lambda: load_config(MODEL_ID))
    assert str(error) == f"{MODEL_ID}: {cache}: not a regular file: a character device"


def test_refs_main_linked_to_a_foreign_file_never_echoes_it(cache: Path, tmp_path: Path) -> None:
    # It used to print the file's first 60 characters in the error.
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET + "\n")
    _link_to(cache, secret)
    message = str(_refusal(lambda: load_config(MODEL_ID)))
    assert "SECRET" not in message and "0123456789abcdef" not in message
    assert message == (
        f"{MODEL_ID}: {cache} does not hold a revision: a revision is 40 hexadecimal digits "
        "(huggingface_hub writes the commit hash there); fix or delete the file, or pass the "
        "snapshot's config.json"
    )


def test_a_large_refs_main_is_refused_by_its_size(cache: Path) -> None:
    cache.write_bytes(b"0" * (1 << 20))
    message = str(_refusal(lambda: load_config(MODEL_ID)))
    assert message.endswith(
        f"{cache}: 1048576 byte is larger than the 4096 byte a revision file may have"
    )


def test_refs_main_with_the_trailing_newline_git_writes_is_read(cache: Path) -> None:
    cache.write_text(REVISION + "\n")
    assert load_config(MODEL_ID).source.endswith(f"{REVISION}/config.json")


# -- config.json ------------------------------------------------------------------------------


@POSIX
@pytest.mark.parametrize("where", ["model directory", "cache snapshot"])
def test_a_fifo_in_place_of_config_json_is_named_a_fifo(
    cache: Path, tmp_path: Path, where: str
) -> None:
    # It used to be reported as "a directory with no config.json".
    if where == "model directory":
        directory = tmp_path / "model"
        directory.mkdir()
        os.mkfifo(directory / "config.json")
        error = _refusal(lambda: load_config(directory))
    else:
        directory = cache.parents[1] / "snapshots" / REVISION
        _replace_with_fifo(directory / "config.json")
        error = _refusal(lambda: load_config(MODEL_ID))
    assert str(error) == f"{directory / 'config.json'}: not a regular file: a FIFO"


@POSIX
def test_a_config_linked_to_dev_zero_or_a_directory_is_named(tmp_path: Path) -> None:
    zero = tmp_path / "zero" / "config.json"
    zero.parent.mkdir()
    zero.symlink_to("/dev/zero")
    assert str(_refusal(lambda: load_config(zero.parent))) == (
        f"{zero}: not a regular file: a character device"
    )
    folder = tmp_path / "folder" / "config.json"
    folder.mkdir(parents=True)
    assert str(_refusal(lambda: load_config(folder.parent))) == (
        f"{folder}: not a regular file: a directory"
    )


def test_a_dangling_config_link_is_a_missing_file(tmp_path: Path) -> None:
    (tmp_path / "config.json").symlink_to(tmp_path / "nowhere.json")
    assert str(_refusal(lambda: load_config(tmp_path))).endswith(
        "config.json: cannot read: No such file or directory"
    )


@POSIX
def test_the_command_line_reports_a_fifo_cache_in_one_line(tmp_path: Path) -> None:
    snapshot = fake_cache(tmp_path)
    _replace_with_fifo(snapshot.parents[1] / "refs" / "main")
    done = run("plan", MODEL_ID, env={"HF_HUB_CACHE": str(tmp_path)})
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "not a regular file: a FIFO" in done.stderr


# -- paths ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("a\x00b.toml", "a\\x00b.toml: the path holds a NUL character (at 1); no file has one"),
        ("org/na\x00me", "org/na\\x00me: the path holds a NUL character (at 6); no file has one"),
        ("models\x00", "models\\x00: the path holds a NUL character (at 6); no file has one"),
    ],
)
def test_a_nul_in_a_path_or_model_id_is_a_config_error(path: str, message: str) -> None:
    # A bare ValueError ("embedded null byte") used to escape load_config.
    assert str(_refusal(lambda: load_config(path))) == message


def test_a_name_longer_than_a_file_system_allows(tmp_path: Path) -> None:
    long = tmp_path / ("a" * 300 + ".toml")
    assert str(_refusal(lambda: load_config(long))).endswith(
        ": a name in the path is 305 bytes long; a file system allows at most 255 (NAME_MAX)"
    )


def test_a_path_longer_than_a_system_call_takes(tmp_path: Path) -> None:
    deep = "/".join(["d" * 200] * 25) + "/config.json"  # short names, 5 036 bytes in all
    message = str(_refusal(lambda: load_config(deep)))
    assert message.endswith(
        ": the path is 5036 bytes long; a system call takes at most 4095 (PATH_MAX)"
    )
    assert message.startswith("d" * 60 + "… (5036 characters)")


def test_a_model_id_of_5000_characters(capsys: pytest.CaptureFixture[str]) -> None:
    model_id = "org/" + "m" * 4996
    message = str(_refusal(lambda: load_config(model_id)))
    assert message == (
        "org/" + "m" * 56 + "… (5000 characters): a name in the path is 4996 bytes long; a "
        "file system allows at most 255 (NAME_MAX), and a Hugging Face model id is "
        "org/name, each at most 96 characters"
    )
    assert main(["plan", model_id]) == 2
    err = capsys.readouterr().err
    assert err == message + "\n"


def test_from_the_shell_a_5000_character_model_id_is_one_line(tmp_path: Path) -> None:
    done = run("check", "org/" + "m" * 4996, "a\x01b.json", env={"HF_HUB_CACHE": str(tmp_path)})
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    assert len(lines) == 2 and "Traceback" not in done.stderr, done.stderr
    assert "NAME_MAX" in lines[0] and lines[1].startswith("a\\x01b.json: cannot read")


def test_simulate_out_with_a_nul_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--duration", "5", "--out", "sim\x00.png"]) == 2
    assert "NUL character" in capsys.readouterr().err


@settings(max_examples=examples(300), deadline=None)
@given(
    st.lists(
        st.sampled_from(["a", "/", ".", "-", "\x00", "é", "json", "toml", "x" * 120, "\n"]),
        max_size=60,
    ).map("".join)
)
def test_any_path_loads_or_is_a_config_error(path: str) -> None:
    # Whatever the text: a config, or a ConfigError; never another exception.
    try:
        load_config(path)
    except ConfigError as error:
        assert error.issues
        assert all("\n" not in str(issue) for issue in error.issues)


def test_the_shipped_paths_still_load() -> None:
    assert load_config(CONFIG).model.name == "voxtral-mini-4b-realtime-2602"
    assert load_config(CONFIG.parent).model.name == "voxtral-mini-4b-realtime-2602"
