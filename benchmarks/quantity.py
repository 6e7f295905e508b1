"""Micro-benchmark: what a typed quantity costs against a plain int.

Model: each figure is the time of one Python-level operation, in nanoseconds: the best of
``--repeat`` timeit runs of ``--number`` loops each, minus the time of an empty loop body, so
that the ratio compares the operations themselves. The typed side is what a hot path pays when
it keeps the unit (``EncoderTokens``, a `Position`); the plain side is what it pays on plain
ints. "int out" prices the two ways a number leaves a quantity: ``numerical_value_in`` (which
checks the unit it names) and ``kvunits.contracts.internal.magnitude`` (for a hot path that has just
checked the class), against reading a plain int.

Run:
    .venv/bin/python -m benchmarks.quantity
"""

from __future__ import annotations

import argparse
import platform
import timeit
from dataclasses import dataclass

from kvunits.contracts import EncoderTokens, Position
from kvunits.contracts.internal import magnitude


@dataclass(frozen=True)
class Case:
    """One operation, written once for the typed quantity and once for a plain int."""

    name: str
    typed: str
    plain: str


CASES = (
    Case("construct", "EncoderTokens(n)", "int(n)"),
    Case("add", "a + b", "x + y"),
    Case("compare <", "a < b", "x < y"),
    Case("compare ==", "a == b", "x == y"),
    Case("pos + len", "p + b", "x + y"),
    Case("int out", "a.numerical_value_in(EncoderTokens)", "int(x)"),
    Case("int out (hot)", "magnitude(a)", "int(x)"),
)

SETUP_NAMESPACE: dict[str, object] = {
    "EncoderTokens": EncoderTokens,
    "n": 750,
    "a": EncoderTokens(750),
    "b": EncoderTokens(4),
    "p": Position(750, EncoderTokens),
    "magnitude": magnitude,
    "x": 750,
    "y": 4,
}


def ns_per_op(statement: str, number: int, repeat: int) -> float:
    """Best time of one execution of ``statement``, in nanoseconds, loop overhead included."""
    timer = timeit.Timer(statement, globals=dict(SETUP_NAMESPACE))
    return min(timer.repeat(repeat=repeat, number=number)) / number * 1e9


def main() -> None:
    """Time every case and print ns per operation and the typed/plain ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--number", type=int, default=1_000_000, help="loops per timeit run")
    parser.add_argument("--repeat", type=int, default=5, help="timeit runs; the best is kept")
    args = parser.parse_args()

    overhead = ns_per_op("pass", args.number, args.repeat)
    print(
        f"{platform.python_implementation()} {platform.python_version()}, "
        f"best of {args.repeat} x {args.number:,} loops; empty loop {overhead:.1f} ns, "
        "subtracted below"
    )
    print(f"{'operation':<12} {'typed ns/op':>12} {'plain ns/op':>12} {'typed/plain':>12}")
    for case in CASES:
        typed = ns_per_op(case.typed, args.number, args.repeat) - overhead
        plain = ns_per_op(case.plain, args.number, args.repeat) - overhead
        print(f"{case.name:<12} {typed:>12.1f} {plain:>12.1f} {typed / plain:>11.1f}x")


if __name__ == "__main__":
    main()
