"""One import namespace: every module of kvunits loads once, under ``kvunits.``, and a
checkout's directory imported under its bare name refuses with where it is and the fix.

The repository keeps ``contracts/``, ``runtime/`` and ``kernels/`` at its root; they install as
``kvunits.contracts``, ``kvunits.runtime`` and ``kvunits.kernels``. A checkout's root on
``sys.path`` (the current directory of ``python -c``) also exposes the bare names, and
Hugging Face's ``kernels`` is a real distribution of one of them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

import kvunits

REPO = Path(__file__).resolve().parents[1]
PARTS = ("contracts", "runtime", "kernels")

_LOADED = """
import importlib, json, os, pkgutil, sys
import kvunits
names = []
for root in ("kvunits.contracts", "kvunits.runtime", "kvunits"):
    package = importlib.import_module(root)
    for info in pkgutil.walk_packages(package.__path__, prefix=root + "."):
        if not info.name.startswith(("kvunits.kernels", "kvunits.__main__", "kvunits.examples")):
            importlib.import_module(info.name)
files = {}
for name, module in list(sys.modules.items()):
    path = getattr(module, "__file__", None)
    if path and os.path.realpath(path).startswith(tuple(%r)):
        files.setdefault(os.path.realpath(path), []).append(name)
print(json.dumps(files))
"""


def _python(code: str, cwd: Path, *flags: str, path: list[str] | None = None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONSAFEPATH"}
    if path is not None:
        env["PYTHONPATH"] = os.pathsep.join(path)
    done = subprocess.run(
        [sys.executable, *flags, "-c", code], cwd=cwd, env=env, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    return done.stdout + done.stderr


def test_every_module_loads_once_under_one_name() -> None:
    # From the checkout's root (its directories are then on sys.path too).
    package = Path(kvunits.__file__).parent
    sources = [os.path.realpath(package / part) + os.sep for part in ("", *PARTS)]
    files = json.loads(_python(_LOADED % sources, REPO).strip().splitlines()[-1])
    assert len(files) > 40
    twice = {path: names for path, names in files.items() if len(names) > 1}
    assert not twice, twice  # a second copy would break isinstance across the two
    assert all(name.startswith("kvunits") for names in files.values() for name in names)


@pytest.mark.skipif(
    not (REPO / "kernels" / "__init__.py").is_file(),
    reason="no top-level package directories here (an unpacked sdist holds src/kvunits only)",
)
def test_a_bare_name_refuses_and_points_at_what_it_hides(tmp_path: Path) -> None:
    # A foreign top-level `kernels` (as Hugging Face's), installed where the checkout hides it.
    site = tmp_path / "site"
    (site / "kernels").mkdir(parents=True)
    (site / "kernels" / "__init__.py").write_text("def get_kernel():\n    return 'hub'\n")
    out = _python("import kernels", REPO, path=[str(site)])
    assert f"{REPO / 'kernels'} holds the source of kvunits.kernels" in out
    assert "because the directory above it" in out and "(the current directory" in out
    assert "- for kvunits' package: import kvunits.kernels" in out
    assert f"- for the 'kernels' installed at {site / 'kernels'}, which this directory hides" in out
    assert "start Python with -P (PYTHONSAFEPATH=1)" in out
    # The fix works: without the current directory on sys.path, the foreign package loads.
    fixed = _python("import kernels; print(kernels.get_kernel())", REPO, "-P", path=[str(site)])
    assert fixed.strip() == "hub"
    # Nothing installed under the name: the message says so.
    for name in ("contracts", "runtime"):
        alone = _python(f"import {name}", REPO)
        assert f"holds the source of kvunits.{name}" in alone
        assert f"another package named {name!r}: it is not installed here" in alone


def test_the_version_is_written_once() -> None:
    # pyproject.toml reads kvunits.__version__; the installed metadata and --version agree.
    assert metadata.version("kvunits") == kvunits.__version__
    version = "import kvunits.cli; kvunits.cli.main(['--version'])"
    out = _python(version, REPO)
    assert out.strip() == f"kvunits {kvunits.__version__}"
    assert 'dynamic = ["version"]' in (REPO / "pyproject.toml").read_text()
