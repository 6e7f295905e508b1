"""Importing the packages stays cheap: no torch, no triton, pint only on first use of `ureg`;
`kvunits plan` loads only what it needs, and importing builds no pydantic validator."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# Run in a fresh interpreter: the test process has long since imported pint (and maybe torch).
_PROBE = """
import json, sys
import kvunits.contracts, kvunits.runtime
after_import = {m: m in sys.modules for m in ("torch", "triton", "pint")}
registry = kvunits.contracts.ureg
after_ureg = {"pint": "pint" in sys.modules, "same": registry is kvunits.contracts.ureg}
print(json.dumps({"after_import": after_import, "after_ureg": after_ureg}))
"""


def test_import_is_lazy() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["after_import"] == {"torch": False, "triton": False, "pint": False}
    assert result["after_ureg"] == {"pint": True, "same": True}


# `kvunits plan` of a kvunits config: what it loads (issue 14). The modules it must not need
# are the costly ones: pint (text quantities use the unit table of units.txt), the Hugging
# Face readers and the JSON Schema (not a config.json, not `schema`), the allocator (planning
# only), `simulate`, and rich (kvunits._table draws the tables).
_PLAN_PROBE = """
import json, sys
sys.argv = ["kvunits", "plan", *sys.argv[1:]]
import kvunits.cli
status = kvunits.cli.main()
print(json.dumps({"status": status, "modules": sorted(sys.modules)}))
"""

_NEVER = {"pint", "numpy", "torch", "triton"}
_NOT_FOR_A_KVUNITS_FILE = {
    "kvunits.contracts.config._hf",
    "kvunits.contracts.config._hf_families",
    "kvunits.contracts.config._hf_layers",
    "kvunits.contracts.config._schema",
    "kvunits.contracts._registry",
    "kvunits._simulate",
    "kvunits._simulate_cli",
    "kvunits.runtime.coordinator",
    "kvunits.runtime._core",
    "kvunits.runtime.managers",
    "kvunits.runtime.admission",
    "kvunits.runtime.prefix_cache",
}


def _plan_modules(*args: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", _PLAN_PROBE, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["status"] == 0
    return set(result["modules"])


def test_plan_loads_what_it_needs_only() -> None:
    table = _plan_modules()
    assert not table & (_NEVER | _NOT_FOR_A_KVUNITS_FILE)
    assert "kvunits._table" in table and "kvunits.contracts.config._models" in table
    assert "rich" not in table  # kvunits._table draws a table that fits (rich: a wider one)
    # pydantic's plugins are off and not looked for (kvunits._startup)
    assert "importlib.metadata" not in table
    as_json = _plan_modules("--format", "json")
    assert not as_json & (_NEVER | _NOT_FOR_A_KVUNITS_FILE | {"rich"})


def test_a_hugging_face_config_loads_its_readers_still_without_pint() -> None:
    modules = _plan_modules("examples/hf/gemma-3-1b-it/config.json", "--format", "json")
    assert "kvunits.contracts.config._hf_families" in modules
    assert not modules & _NEVER


_BUILT_PROBE = """
import json
import kvunits.contracts, kvunits.contracts.config, kvunits.runtime.capacity
from kvunits.contracts._model import SpecModel

def models(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from models(sub)

print(json.dumps(sorted({m.__name__ for m in models(SpecModel) if m.__pydantic_complete__})))
"""


def test_importing_builds_no_validator() -> None:
    # Every spec model builds its pydantic validator on first use (defer_build): importing
    # costs the classes only, and `kvunits plan` builds just the models it validates.
    done = subprocess.run(
        [sys.executable, "-c", _BUILT_PROBE],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


def test_every_public_name_of_a_lazy_package_loads() -> None:
    # runtime and kvunits.contracts.config import some rooms on first use: each name of __all__ must
    # still be there (and the lazy tables name nothing else).
    import kvunits.contracts.config
    import kvunits.runtime

    for package in (kvunits.runtime, kvunits.contracts.config):
        for name in package.__all__:
            assert getattr(package, name) is not None, (package.__name__, name)
        assert set(getattr(package, "_EXPORTS", getattr(package, "_LAZY", {}))) <= set(
            package.__all__
        )
