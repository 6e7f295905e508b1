"""The CI recipes work as documented: the pre-commit hooks, run as pre-commit runs them (the
entry, its args, then the staged file names), and the workflow of docs/ci.md."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

import kvunits

from .test_cli import KVUNITS, REPO

HOOKS: list[dict[str, Any]] = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
SHIPPED = Path(kvunits.__file__).parent / "examples" / "voxtral_realtime.toml"


def _hook(name: str) -> dict[str, Any]:
    (hook,) = [h for h in HOOKS if h["id"] == name]
    return hook


def test_the_hooks_declare_what_pre_commit_requires() -> None:
    assert [h["id"] for h in HOOKS] == ["kvunits-check", "kvunits-mypy"]
    for hook in HOOKS:
        assert {"id", "name", "entry", "language"} <= set(hook)
        assert hook["language"] == "python"  # pre-commit installs this repository: kvunits
        script = shlex.split(hook["entry"])[0]
        assert KVUNITS.with_name(script).is_file(), f"{script} is not installed by kvunits[dev]"


@pytest.mark.parametrize(
    "path, checked",
    [
        ("kvunits.toml", True),
        ("deploy/audio.kvunits.yaml", True),
        ("deploy/kvunits.yml", True),
        ("configs/model.kvunits.json", True),
        (".pre-commit-config.yaml", False),
        ("pyproject.toml", False),
        ("kvunits.toml.bak", False),
        ("notkvunits.toml", False),
    ],
)
def test_the_check_hook_takes_kvunits_configs_by_name(path: str, checked: bool) -> None:
    assert bool(re.search(_hook("kvunits-check")["files"], path)) is checked


def test_the_check_hook_passes_a_valid_config_and_fails_a_broken_one(tmp_path: Path) -> None:
    good = tmp_path / "voxtral.kvunits.toml"
    shutil.copyfile(SHIPPED, good)
    bad = tmp_path / "broken.kvunits.toml"
    bad.write_text(SHIPPED.read_text().replace('"750 encoder_token"', "750"))
    command = [str(KVUNITS.with_name("kvunits")), *shlex.split(_hook("kvunits-check")["entry"])[1:]]
    assert subprocess.run([*command, str(good)], capture_output=True, check=False).returncode == 0
    done = subprocess.run([*command, str(good), str(bad)], capture_output=True, text=True,
                          check=False)  # fmt: skip
    assert done.returncode == 2
    assert "broken.kvunits.toml: model.groups.audio.sliding_window: 750 has no unit" in done.stderr


def test_the_workflow_of_the_docs_is_valid_yaml_with_commands_that_exist() -> None:
    text = (REPO / "docs" / "ci.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```yaml\n(.*?)^```", text, re.S | re.M)
    workflow = yaml.safe_load(next(b for b in blocks if b.startswith("name: kvunits")))
    runs = [step["run"] for step in workflow["jobs"]["check"]["steps"] if "run" in step]
    check = next(r for r in runs if r.startswith("kvunits check"))
    from kvunits.cli import build_parser

    args = build_parser("check").parse_args(shlex.split(check.split(">")[0])[1:])
    assert args.format == "json"
    config = yaml.safe_load(next(b for b in blocks if b.startswith("repos:")))
    assert {h["id"] for h in config["repos"][0]["hooks"]} == {h["id"] for h in HOOKS}
