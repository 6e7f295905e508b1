"""The program's own set-up (`kvunits._startup`): pydantic's plugin loader stood in for while
plugins are off, and the collector's threshold. Each check that changes the process runs in a
fresh interpreter; the stand-in is compared with pydantic's own loader."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kvunits import _startup

REPO = Path(__file__).resolve().parents[2]


def _run(code: str, **env: str) -> Any:
    environ = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env={**environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_stand_in_answers_what_pydantics_loader_answers_with_plugins_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pydantic.plugin import _loader

    monkeypatch.setenv("PYDANTIC_DISABLE_PLUGINS", "__all__")
    assert tuple(_loader.get_plugins()) == _startup.no_plugins() == ()


def test_the_stand_in_hands_any_other_name_to_pydantics_loader() -> None:
    # A pydantic that imports more than get_plugins from its loader still gets it; the import
    # system's questions (__path__ …) get a plain module's answer, not pydantic's module.
    result = _run(
        """
import json, sys
from kvunits import _startup
_startup.prepare_process()
stand_in = sys.modules["pydantic.plugin._loader"]
path = hasattr(stand_in, "__path__")
loaded_before = "importlib.metadata" in sys.modules
group = stand_in.PYDANTIC_ENTRY_POINT_GROUP
real = sys.modules["pydantic.plugin._loader"]
print(json.dumps({"path": path, "before": loaded_before, "group": group,
                  "replaced": real is not stand_in, "real_plugins": list(real.get_plugins())}))
"""
    )
    assert result == {
        "path": False,
        "before": False,
        "group": "pydantic",
        "replaced": True,
        "real_plugins": [],
    }


_VALIDATE = """
import gc, json, os, sys
from kvunits import _startup
_startup.prepare_process()
import pydantic

class M(pydantic.BaseModel):
    x: int

M(x=1)
print(json.dumps({"metadata": "importlib.metadata" in sys.modules,
                  "env": os.environ["PYDANTIC_DISABLE_PLUGINS"],
                  "threshold": gc.get_threshold()[0]}))
"""


def test_a_validator_is_built_without_looking_for_plugins() -> None:
    result = _run(_VALIDATE)
    assert result == {
        "metadata": False,
        "env": "__all__",
        "threshold": _startup.GC_THRESHOLD_ALLOCATIONS,
    }


@pytest.mark.parametrize("setting", ["1", "logfire", ""])
def test_plugins_stay_as_the_user_set_them(setting: str) -> None:
    # Only __all__ puts the stand-in in; any other setting is pydantic's to read.
    result = _run(_VALIDATE, PYDANTIC_DISABLE_PLUGINS=setting)
    assert result["env"] == setting
    assert result["metadata"] is True


def test_a_caller_of_main_keeps_its_process_as_it_was() -> None:
    # main(argv) is a library call: the caller's environment and collector are its own.
    result = _run(
        """
import contextlib, gc, io, json, os, sys
from kvunits.cli import main
before = gc.get_threshold()
with contextlib.redirect_stdout(io.StringIO()):
    status = main(["plan", "--format", "json"])
print(json.dumps({"status": status, "same": gc.get_threshold() == before,
                  "env": "PYDANTIC_DISABLE_PLUGINS" in os.environ,
                  "plugins_looked_for": "importlib.metadata" in sys.modules}))
"""
    )
    assert result == {"status": 0, "same": True, "env": False, "plugins_looked_for": True}
