"""Suite-wide settings: hypothesis runs without per-example deadlines (CI machines are slow
and shared), with a fixed example budget so the suite's time stays predictable. Under CI
(``CI`` set) the examples are derandomized, so a landing is reproducible run to run; local
runs keep exploring new examples. ``--examples quick`` runs a fifth of every budget
(`tests.examples`); a test that names no budget runs hypothesis' 100, or a fifth of it."""

import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from . import examples


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--examples",
        choices=examples.MODES,
        default="full",
        help="property tests' example budgets: full (CI's main job), or a fifth of each "
        "(quick: CI's version jobs)",
    )


def pytest_configure(config: pytest.Config) -> None:
    examples.MODE = config.getoption("examples")
    settings.register_profile(
        "kvunits",
        max_examples=examples.examples(100),
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
        print_blob=True,
    )
    settings.register_profile(
        "kvunits-ci", parent=settings.get_profile("kvunits"), derandomize=True
    )
    settings.load_profile("kvunits-ci" if os.environ.get("CI") else "kvunits")


@pytest.fixture(scope="session")
def mypy_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One mypy cache for the session's mypy runs with the repository's ``mypy.ini`` (the docs'
    snippets, tests/typing's snippets): the first checks kvunits and what it imports, the next
    reuse that and check their own files. Every run must then pass the same options that bear
    on the cache (a module's own, such as ``allow-redefinition``, go in its ``# mypy:`` line).
    Fresh per session, but seeded with a copy of the checkout's own cache where there is one
    (CI's main job runs strict mypy over the project first, with the same ``mypy.ini``): mypy
    checks every entry it reads against the file, its options and its own version and redoes
    what differs, so a copy saves the first run the project's check and can only cost a
    recheck; the checkout's cache is never written to."""
    path = tmp_path_factory.mktemp("mypy-cache")
    seed = Path(__file__).resolve().parent.parent / ".mypy_cache"
    if seed.is_dir():
        shutil.copytree(seed, path, dirs_exist_ok=True)
    return path
