"""Suite-wide settings: hypothesis runs without per-example deadlines (CI machines are slow
and shared), with a fixed example budget so the suite's time stays predictable. Under CI
(``CI`` set) the examples are derandomized, so a landing is reproducible run to run; local
runs keep exploring new examples. ``--examples quick`` runs a fifth of every budget
(`tests.examples`); a test that names no budget runs hypothesis' 100, or a fifth of it."""

import os

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
