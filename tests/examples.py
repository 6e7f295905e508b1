"""How many examples a property test runs.

Each test names its full budget (hypothesis' default of 100 where it names none); CI's main job
runs every budget in full. The version jobs (``scripts/test``: the dependency floors, the wheel
under Python 3.12, Python 3.13) run ``pytest --examples quick``: a fifth of each budget, at
least 10. They check that the same code behaves under another Python or another version of a
dependency, which every test with a few examples shows, while the breadth of the examples is the
main job's. With ``CI`` set the examples are derandomized, so a landing stays reproducible.
"""

#: "full" or "quick": set from pytest's ``--examples`` (tests/conftest.py) before any test
#: module is imported, since the budgets are read where the tests are defined.
MODE = "full"
MODES = ("full", "quick")


def examples(full: int) -> int:
    """The examples to run of a test whose full budget is ``full``."""
    return max(10, full // 5) if MODE == "quick" else full


def every() -> int:
    """The step between the events at which a test interrupts a call "anywhere" (the 1st, 2nd,
    ... event of its code, each in a run of its own): every event in full, every fifth in quick
    mode (the 1st, 6th, 11th, ... to the call's end), as a fifth of the examples. A test that
    asserts a least number of interrupts divides it by this step."""
    return 5 if MODE == "quick" else 1
