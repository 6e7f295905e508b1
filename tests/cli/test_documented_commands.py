"""Every ``kvunits`` command that ``--help``, the README and docs/ show runs as shown, from a
directory that is not the repository (as from an installed wheel: ``examples/...`` is then the
shipped copy), with the installed console script, through a shell (globs, redirections,
variables); and where the docs show a command's output (``$ kvunits ...`` and the lines below
it), it prints exactly that, run from the repository's root.

A model id (``mistralai/Voxtral-Mini-4B-Realtime-2602``) is read from a local Hugging Face cache
made for the test (kvunits never downloads).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from kvunits.cli import main

from ..config.test_hf_cache import MODEL_ID, fake_cache
from .test_cli import KVUNITS, REPO

#: A command line in a help epilog or a README block: "kvunits ..." or "VAR=... kvunits ...",
#: up to a comment ("# ...") or an annotation after three spaces.
_COMMAND = re.compile(r"^(?:\$ )?((?:[A-Z_]+=\S+|[A-Z_]+=\"[^\"]*\" )?kvunits(?: .*)?)$")


def _strip(line: str) -> str:
    line = line.split("  #", 1)[0].split(" # ", 1)[0]
    return re.split(r" {3,}", line.strip(), maxsplit=1)[0].strip()


def commands_in(text: str) -> list[str]:
    """The kvunits command lines of a help text or a README block (continuations joined)."""
    found = []
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index].strip()
        while line.endswith("\\") and index + 1 < len(lines):
            index += 1
            line = line[:-1].rstrip() + " " + lines[index].strip()
        index += 1
        match = _COMMAND.match(_strip(line))
        if match:
            found.append(match[1])
    return found


def _help(*command: str) -> str:
    """What ``kvunits [command] --help`` prints, at the 80 columns of a pipe: the console
    script's own parser, called here (each suite collecting this module would otherwise start
    an interpreter per command); the commands it shows then run through the script itself."""
    out = io.StringIO()
    with (
        pytest.MonkeyPatch.context() as patch,
        contextlib.redirect_stdout(out),
        pytest.raises(SystemExit) as done,
    ):
        patch.setenv("COLUMNS", "80")
        main([*command, "--help"])
    assert done.value.code == 0, out.getvalue()
    return out.getvalue()


def help_commands() -> list[str]:
    text = _help()
    names = re.findall(r"^    (\w+) ", text.split("commands:", 1)[1], re.MULTILINE)
    found = commands_in(text.split("examples:", 1)[1])
    for name in names:
        epilog = _help(name).split("examples:", 1)
        found += commands_in(epilog[1]) if len(epilog) == 2 else []
    return list(dict.fromkeys(found))


def run_in_a_fresh_directory(command: str, where: Path) -> subprocess.CompletedProcess[str]:
    hub = where.parent / "hub"
    if not hub.exists():
        fake_cache(hub)
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("KVUNITS_")}
    env |= {"HF_HUB_CACHE": str(hub), "PATH": f"{KVUNITS.parent}{os.pathsep}{env['PATH']}"}
    return subprocess.run(
        ["bash", "-c", command], cwd=where, env=env, capture_output=True, text=True, timeout=300,
        check=False,
    )  # fmt: skip


def test_commands_are_found_in_help_texts() -> None:
    sample = (
        "examples:\n"
        "  kvunits plan                                   the shipped example\n"
        '  KVUNITS_MEMORY_BUDGET="80 GiB" kvunits plan x.json\n'
        '  kvunits simulate --compare-windows "750 pooled_block" \\\n'
        "      --out sim.png\n"
        "      750 encoder_token → 189 pooled_block  (pool_window: …)\n"
        "    $ kvunits fit x.json   # reverse\n"
    )
    assert commands_in(sample) == [
        "kvunits plan",
        'KVUNITS_MEMORY_BUDGET="80 GiB" kvunits plan x.json',
        'kvunits simulate --compare-windows "750 pooled_block" --out sim.png',
        "kvunits fit x.json",
    ]


HELP_COMMANDS = help_commands() if KVUNITS.is_file() else []
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
_FENCED = re.compile(r"^```(?:bash|sh|shell)\n(.*?)^```", re.S | re.M)
_INDENTED = re.compile(r"(?m)(?:^    .*\n)+")


def doc_commands() -> list[str]:
    """The kvunits commands of the README's and docs' shell blocks and indented blocks."""
    found = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for block in _FENCED.finditer(text):
            found += commands_in(block[1])
        for block in _INDENTED.finditer(text):
            lines = block[0].splitlines()
            shown = [line for line in lines if line.strip().startswith("$ ")]
            found += commands_in("\n".join(shown) if shown else block[0])
    return list(dict.fromkeys(found))


def runnable(command: str) -> bool:
    """Whether every file a command names is one this test has: a shipped example, or the
    model id of its Hugging Face cache (``serve.yaml``, ``~/models/...``: the reader's own)."""
    for token in shlex.split(command):
        names_a_file = "/" in token or re.search(r"\.(json|ya?ml|toml)$", token)
        if token.startswith("-") or "=" in token or not names_a_file or token.startswith(">"):
            continue
        if not token.startswith("examples/") and token != MODEL_ID:
            return False
    return True


def shown_outputs() -> list[tuple[str, list[str]]]:
    """``$ kvunits ...`` with the output lines the docs show below it."""
    found = []
    for doc in DOCS:
        for block in _INDENTED.finditer(doc.read_text(encoding="utf-8")):
            lines = [line[4:] for line in block[0].splitlines()]
            if lines[0].startswith("$ kvunits ") and len(lines) > 1:
                found.append((lines[0][2:], lines[1:]))
    return list({command: (command, output) for command, output in found}.values())


@pytest.mark.slow
@pytest.mark.torchless
@pytest.mark.parametrize(
    "command", [c for c in doc_commands() if c not in HELP_COMMANDS and runnable(c)]
)
def test_every_documented_command_runs_outside_the_repository(
    tmp_path: Path, command: str
) -> None:
    if "--out" in command:
        pytest.importorskip("matplotlib", reason="the figure needs the plot extra")
    where = tmp_path / "work"
    where.mkdir()
    done = run_in_a_fresh_directory(command, where)
    assert done.returncode == 0, f"{command}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"


@pytest.mark.parametrize("command, output", shown_outputs(), ids=lambda x: str(x)[:40])
def test_a_shown_output_is_what_the_command_prints(command: str, output: list[str]) -> None:
    done = run_in_a_fresh_directory(command, REPO)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == output


@pytest.mark.slow
@pytest.mark.torchless
@pytest.mark.parametrize("command", HELP_COMMANDS)
def test_every_help_example_runs_outside_the_repository(tmp_path: Path, command: str) -> None:
    if not runnable(command):
        pytest.skip("it names a file of the reader's own (not a shipped example)")
    if "--out" in command:
        pytest.importorskip("matplotlib", reason="the figure needs the plot extra")
    where = tmp_path / "work"
    where.mkdir()
    done = run_in_a_fresh_directory(command, where)
    assert done.returncode == 0, f"{command}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    for token in shlex.split(command):
        if token.startswith("examples/"):
            assert "reading the shipped" in done.stderr  # and it said so


def test_the_help_shows_enough_commands() -> None:
    assert len(HELP_COMMANDS) >= 20, HELP_COMMANDS
    assert REPO.is_dir() and sys.executable
