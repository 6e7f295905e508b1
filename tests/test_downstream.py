"""kvunits installed as the README says (``pip install -e .``, or a wheel) is visible to mypy
elsewhere.

CI is what kvunits is for: a service's own repository runs mypy over code that imports
``contracts``. setuptools' default editable install is an import hook, which mypy cannot
follow: kvunits was ``import-not-found`` downstream, and with the common
``ignore_missing_imports = True`` mypy passed code full of unit errors. The project now
declares its layout (``package-dir``) so that the editable install is a plain path entry,
which mypy reads. This test builds a throw-away project next to no kvunits source (its own
directory, no ``MYPYPATH``), runs strict mypy there with the interpreter kvunits is installed
in, and checks that each unit mistake is reported and nothing else (no missing import).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

APP = '''\
"""A downstream service's capacity check, as its authors would write it."""

from pydantic import BaseModel

from kvunits.contracts import (
    AdmissionCap,
    BlockSize,
    Elements,
    EncoderTokens,
    GroupMarker,
    KVHeads,
    PoolBlocks,
    PooledBlocks,
    PoolFactor,
    Position,
    SlidingWindowLayer,
    Tokens,
    Window,
    flash_attn_window_size,
    manager_view,
    pool_length,
    pool_window,
    slots_to_cache_blocks_ceil,
)
from kvunits.contracts.deploy import RankBlocks, engine_blocks
from kvunits.runtime import KVCacheCoordinator

layer = SlidingWindowLayer(
    sliding_window=Window(750, EncoderTokens),
    pool=PoolFactor(4),
    kv_heads=KVHeads(32),
    head_size=Elements(64),
)
manager = manager_view(layer, block_size_slots=16).expect(PooledBlocks)
window = pool_window(Window(750, EncoderTokens), PoolFactor(4))
cap: AdmissionCap = manager.max_admission_blocks_per_request(PooledBlocks(1), PooledBlocks(8192))
window_size = flash_attn_window_size(layer.sliding_window)


class EncoderConfig(BaseModel):
    """The service's own config model: the encoder's window, in encoder tokens."""

    sliding_window: Window[EncoderTokens]


def coordinator_blocks(coord: KVCacheCoordinator) -> list[str]:
    return list(coord.group_names)


class Full(GroupMarker, name="full"): ...


class Sliding(GroupMarker, name="sliding"): ...


seed = pool_length(Window(750, EncoderTokens), PoolFactor(4))  # ERROR
mixed = EncoderTokens(750) + PooledBlocks(1)  # ERROR
wrong = manager.max_admission_blocks_per_request(EncoderTokens(1), PooledBlocks(8192))  # ERROR
blocks = slots_to_cache_blocks_ceil(window, BlockSize(16, PooledBlocks))  # ERROR
bare = manager.block_table_width(8192)  # ERROR
anonymous = cap.value  # ERROR
# One mistake per class of issue 20: whose value it is (one rank's pages for the engine's,
# a column of one layer group in another group's table),
one_rank = engine_blocks(RankBlocks(2111))  # ERROR


def column_of(coord: KVCacheCoordinator) -> int:
    full, sliding = coord.group(Full, Tokens), coord.group(Sliding, Tokens)
    return coord.block_table("r", sliding)[full.block_of(Position(599, Tokens))]  # ERROR


# what a count means (a window's span where the cap belongs, a cap against a pool's size),
admit = manager.window_blocks() <= cap  # ERROR
never = cap <= PoolBlocks(14)  # ERROR
# a plain int at the edge (a layer's KV heads divided by hand),
per_rank = layer.kv_heads // 8  # ERROR
# a backend's convention (the manager's pooled window handed to FlashAttention),
pooled = flash_attn_window_size(manager.sliding_window)  # ERROR
# a generic field's unit (the seed's pooled window in an encoder-token field).
config = EncoderConfig(sliding_window=manager.expect(PooledBlocks).sliding_window)  # ERROR
'''

#: What strict mypy must say about the marked lines, in order (the unit names included).
EXPECTED = [
    'Argument 1 to "pool_length" has incompatible type "Window[EncoderTokens]"; '
    'expected "EncoderTokens"  [arg-type]',
    'Unsupported operand types for + ("EncoderTokens" and "PooledBlocks")  [operator]',
    'Argument 1 to "max_admission_blocks_per_request" of "ManagerSpec" has incompatible type '
    '"EncoderTokens"; expected "PooledBlocks"  [arg-type]',
    'No overload variant of "slots_to_cache_blocks_ceil" matches argument types '
    '"Window[PooledBlocks]", "BlockSize[PooledBlocks]"  [call-overload]',
    'Argument 1 to "block_table_width" of "ManagerSpec" has incompatible type "int"; '
    'expected "PooledBlocks"  [arg-type]',
    '"AdmissionCap" has no attribute "value"  [attr-defined]',
    'Argument 1 to "engine_blocks" has incompatible type "RankBlocks"; expected '
    '"Sequence[RankBlocks]"  [arg-type]',
    'Invalid index type "Position[CacheBlocks, Full]" for "BlockIds[Sliding]"; expected type '
    '"Position[CacheBlocks, Sliding] | int"  [index]',
    'Unsupported operand types for <= ("SpanBlocks" and "AdmissionCap")  [operator]',
    'Unsupported operand types for <= ("AdmissionCap" and "PoolBlocks")  [operator]',
    'Unsupported operand types for // ("KVHeads" and "int")  [operator]',
    'Argument 1 to "flash_attn_window_size" has incompatible type "Window[PooledBlocks] | '
    'None"; expected "Window[EncoderTokens] | Window[Tokens] | None"  [arg-type]',
    'Argument "sliding_window" to "EncoderConfig" has incompatible type '
    '"Window[PooledBlocks] | None"; expected "Window[EncoderTokens]"  [arg-type]',
]


_INSTALLED = (
    "from importlib import metadata; "
    "print(metadata.distribution('kvunits').read_text('direct_url.json') or '{}')"
)


def _editable_checkout(cwd: Path, env: dict[str, str]) -> Path | None:
    """The checkout an editable install of kvunits points at, as an interpreter started
    outside this checkout sees it (None: not an editable install)."""
    done = subprocess.run(
        [sys.executable, "-c", _INSTALLED],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    info = json.loads(done.stdout)
    if not info.get("dir_info", {}).get("editable"):
        return None
    return Path(info["url"].removeprefix("file://")).resolve()


@pytest.mark.slow
@pytest.mark.parametrize("ignore_missing_imports", [False, True])
def test_strict_mypy_in_another_project_sees_kvunits(
    tmp_path: Path, ignore_missing_imports: bool
) -> None:
    project = tmp_path / "service"
    project.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("MYPYPATH", "PYTHONPATH")}
    checkout = _editable_checkout(project, env)
    # An editable install must be this checkout's (else another checkout's code is tested);
    # a regular install (a wheel, as the sdist's tests run) is what it is.
    assert checkout in (REPO, None), (
        f"kvunits is installed editable from another checkout ({checkout}): run the README's "
        "set-up (pip install -e .) here, as scripts/test does"
    )
    (project / "capacity.py").write_text(APP)
    (project / "pyproject.toml").write_text(
        "[project]\nname = 'service'\nversion = '0'\n\n[tool.mypy]\nstrict = true\n"
        + ("ignore_missing_imports = true\n" if ignore_missing_imports else "")
    )
    done = subprocess.run(
        [
            sys.executable, "-m", "mypy", "--no-incremental", "--cache-dir", str(tmp_path / "c"),
            "--no-pretty", "--show-error-codes", "--hide-error-context", "--no-color-output",
            "capacity.py",
        ],
        cwd=project, env=env, capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stdout + done.stderr
    errors = re.findall(r"^capacity\.py:(\d+): error: (.+)$", done.stdout, re.MULTILINE)
    marked = [n for n, line in enumerate(APP.splitlines(), start=1) if line.endswith("# ERROR")]
    # Every mistake reported on its line with its units, and nothing else: in particular no
    # import-not-found, and with ignore_missing_imports no silent pass.
    assert [(int(n), message) for n, message in errors] == list(
        zip(marked, EXPECTED, strict=True)
    ), done.stdout + done.stderr
