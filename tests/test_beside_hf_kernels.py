"""kvunits installs beside Hugging Face's ``kernels`` (either order) and both keep working.

kvunits used to install a top-level ``kernels`` package, as Hugging Face's kernel hub does
(transformers' ``kernels`` extra pulls it in): whichever was installed second overwrote the
other's ``kernels/__init__.py``, silently. kvunits now installs one top-level name,
``kvunits``. This test builds a wheel from the sdist (or takes ``TEST_WHEEL``, the one
``scripts/test``'s sdist job built), installs it and Hugging Face's ``kernels`` from the
package index into fresh environments in both orders, and checks that no file belongs to both
distributions, that each imports as itself (``kernels.get_kernel``; ``kvunits.contracts``,
``kvunits.runtime``, the command line), that ``pip check`` is clean, and that uninstalling one
leaves the other working. Without torch (not installed here: a CUDA build is gigabytes),
``kvunits.kernels`` must say which extra to install. Skipped where the index does not have
Hugging Face's ``kernels``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

_PROBE = """
import importlib.metadata as metadata, json, kernels, kvunits, kvunits.contracts, kvunits.runtime
out = {"kernels": kernels.__file__, "get_kernel": callable(kernels.get_kernel),
       "kvunits": kvunits.__file__}
try:
    import kvunits.kernels
except ModuleNotFoundError as exc:
    out["kvunits.kernels"] = str(exc)
files = {d.metadata["Name"].lower(): {str(f) for f in d.files or ()}
         for d in metadata.distributions() if d.metadata["Name"].lower() in ("kvunits", "kernels")}
out["both"] = sorted(files["kvunits"] & files["kernels"])
out["kvunits_top"] = sorted({f.split("/")[0] for f in files["kvunits"] if not f.startswith("..")})
print(json.dumps(out))
"""


def _run(*command: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run(
        [str(c) for c in command], cwd=cwd, env=env, capture_output=True, text=True,
        timeout=900, check=False,
    )  # fmt: skip


def _ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, f"{done.args}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """kvunits' wheel, built from its sdist (``TEST_WHEEL`` if the caller built it)."""
    given = os.environ.get("TEST_WHEEL")
    if given:
        return Path(given)
    out = tmp_path_factory.mktemp("dist")
    build = "from setuptools import build_meta; print(build_meta.build_sdist({!r}))"
    sdist = _ok(_run(sys.executable, "-c", build.format(str(out)), cwd=REPO)).split()[-1]
    _ok(_run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", out,
             out / sdist, cwd=out))  # fmt: skip
    (found,) = out.glob("kvunits-*.whl")
    return found


@pytest.fixture(scope="module")
def hf_kernels_available(tmp_path_factory: pytest.TempPathFactory) -> None:
    where = tmp_path_factory.mktemp("probe")
    done = _run(sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", where,
                "kernels", cwd=where)  # fmt: skip
    if done.returncode != 0:
        pytest.skip("Hugging Face's kernels is not on the package index here")


def _environment(where: Path, wheel: Path, order: tuple[str, str]) -> Path:
    _ok(_run(sys.executable, "-m", "venv", where, cwd=where.parent))
    python = where / "bin" / "python"
    for name in order:
        spec = str(wheel) if name == "kvunits" else "kernels"
        # No bytecode: the probes import a few modules of what pip would compile in full.
        _ok(_run(python, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                 "--no-compile", spec, cwd=where))  # fmt: skip
    return python


def _probe(python: Path, where: Path) -> dict[str, object]:
    result: dict[str, object] = json.loads(_ok(_run(python, "-c", _PROBE, cwd=where)))
    return result


@pytest.mark.slow
@pytest.mark.network
@pytest.mark.usefixtures("hf_kernels_available")
@pytest.mark.parametrize("order", [("kvunits", "kernels"), ("kernels", "kvunits")])
def test_both_work_in_either_order(tmp_path: Path, wheel: Path, order: tuple[str, str]) -> None:
    python = _environment(tmp_path / "env", wheel, order)
    site = Path(_ok(_run(python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))",
                         cwd=tmp_path)).strip())  # fmt: skip
    _ok(_run(python, "-m", "pip", "check", cwd=tmp_path))
    found = _probe(python, tmp_path)
    assert found["kernels"] == str(site / "kernels" / "__init__.py")  # Hugging Face's
    assert found["get_kernel"] is True
    assert found["kvunits"] == str(site / "kvunits" / "__init__.py")
    assert found["both"] == []  # no file belongs to both distributions
    assert found["kvunits_top"] == ["kvunits", wheel.name.split("-py3")[0] + ".dist-info"]
    assert 'pip install "kvunits[kernels]"' in str(found["kvunits.kernels"])  # no torch here
    plan = _ok(_run(python.parent / "kvunits", "plan", "--format", "json", cwd=tmp_path))
    assert json.loads(plan)["model"] == "voxtral-mini-4b-realtime"
    # Uninstalling the one installed first leaves the other whole.
    first = order[0]
    _ok(_run(python, "-m", "pip", "uninstall", "-y", "-q", first, cwd=tmp_path))
    if first == "kernels":
        _ok(_run(python, "-c", "import kvunits.contracts, kvunits.runtime", cwd=tmp_path))
        assert not (site / "kernels").exists()
    else:
        survivor = "import kernels; assert callable(kernels.get_kernel); print(kernels.__file__)"
        assert _ok(_run(python, "-c", survivor, cwd=tmp_path)).strip() == found["kernels"]
        assert not (site / "kvunits").exists()
    assert sysconfig.get_path("purelib") != str(site)  # a fresh environment, not this one
