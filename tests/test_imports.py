"""Importing the packages stays cheap: no torch, no triton, and pint only on first use."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# Run in a fresh interpreter: the test process has long since imported pint (and maybe torch).
_PROBE = """
import json, sys
import contracts, runtime
after_import = {m: m in sys.modules for m in ("torch", "triton", "pint")}
registry = contracts.ureg
after_ureg = {"pint": "pint" in sys.modules, "same": registry is contracts.ureg}
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
