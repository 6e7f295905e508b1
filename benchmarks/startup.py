"""Benchmark: the cold start of ``kvunits plan``, against a bare interpreter, in one run.

Model: each figure is one whole process, from ``fork`` to exit, as a user waits for it: the
interpreter's start, every import, reading the shipped example, planning, printing. The
commands run in rounds, each round running every command once in a rotated order, and each
figure is the median over the rounds: on a shared machine a burst of load then lands on one
round of every command rather than on every round of one. Beside the wall time, the child's
CPU time (user + system, from ``wait4``) is printed, which load on other cores disturbs less.
The ratio column divides by the bare interpreter (``python -c pass``) of the same run.

The bytecode of kvunits is cached, as an installed package has it (pip compiles it when it
installs; an editable checkout writes ``__pycache__`` on its first run): a warm-up round writes
it, with ``PYTHONDONTWRITEBYTECODE`` removed from the children's environment.
``--no-bytecode-cache`` keeps the variable (if set) and measures a checkout that compiles its
sources at every start. ``--instructions`` also counts the instructions each process executes
(valgrind's callgrind, one run each, ``PYTHONHASHSEED=0``): the same from run to run whatever
the load, so two versions compare exactly. ``--importtime`` prints, after the table, the
imports of ``kvunits plan`` that take longest (self time, ``python -X importtime``).

Goal (issue 14): ``kvunits plan`` of the shipped example in at most 0.2 s on a 2-core machine.

Run:
    .venv/bin/python -m benchmarks.startup
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Command:
    """One process to time: its name and its command line."""

    name: str
    argv: tuple[str, ...]


def commands() -> tuple[Command, ...]:
    """The processes timed: the bare interpreter, imports, and the command line as a user runs
    it (the installed ``kvunits`` script beside this interpreter, else ``python -m kvunits``)."""
    python = sys.executable
    script = Path(python).with_name("kvunits")
    kvunits = (str(script),) if script.is_file() else (python, "-m", "kvunits")
    return (
        Command("python -c pass (baseline)", (python, "-c", "pass")),
        Command("import kvunits.contracts", (python, "-c", "import kvunits.contracts")),
        Command("kvunits --help", (*kvunits, "--help")),
        Command("kvunits plan --format json", (*kvunits, "plan", "--format", "json")),
        Command("kvunits plan", (*kvunits, "plan")),
        Command("python -m kvunits plan", (python, "-m", "kvunits", "plan")),
    )


#: The command the goal is about, and the goal in seconds.
GOAL_COMMAND, GOAL_S = "kvunits plan", 0.2


def run_once(argv: tuple[str, ...], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of one process (its output discarded)."""
    start = time.perf_counter()
    process = subprocess.Popen(
        argv,
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert process.stderr is not None
    errors = process.stderr.read()
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({process.returncode}):\n{errors.decode()}")
    return wall, usage.ru_utime + usage.ru_stime


def instructions(argv: tuple[str, ...], env: dict[str, str]) -> int:
    """The instructions one process executes, counted by valgrind's callgrind (about 60 times
    slower, and the same from run to run: a figure that load on the machine does not move)."""
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *argv],
        cwd=REPO,
        env={**env, "PYTHONHASHSEED": "0"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=True,
    )
    match = re.search(r"Collected : ([0-9]+)", done.stderr)
    if match is None:
        raise SystemExit(f"valgrind printed no instruction count:\n{done.stderr}")
    return int(match.group(1))


def importtime(env: dict[str, str], top: int) -> list[tuple[int, str]]:
    """The ``top`` imports of ``kvunits plan`` with the largest self time, in microseconds."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "kvunits", "plan"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    rows = []
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, _, name = line.removeprefix("import time:").split("|")
        rows.append((int(self_us), name.strip()))
    return sorted(rows, reverse=True)[:top]


def main(argv: list[str] | None = None) -> dict[str, float]:
    """Time every command in rotated rounds; print medians and ratios to the baseline.

    Returns:
        The median wall seconds of each command, by name.
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=15, help="rounds (medians over them)")
    parser.add_argument(
        "--no-bytecode-cache",
        action="store_true",
        help="keep PYTHONDONTWRITEBYTECODE (compile kvunits' sources at every start)",
    )
    parser.add_argument("--importtime", type=int, default=0, metavar="N", help="top N imports")
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="also count each process's instructions with valgrind (deterministic; slow)",
    )
    args = parser.parse_args(argv)

    env = dict(os.environ)
    if not args.no_bytecode_cache:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    timed = commands()
    for command in timed:  # warm-up: the page cache, and __pycache__ unless told not to
        run_once(command.argv, env)
    walls: dict[str, list[float]] = {c.name: [] for c in timed}
    cpus: dict[str, list[float]] = {c.name: [] for c in timed}
    for round_ in range(args.rounds):
        shift = round_ % len(timed)
        for command in timed[shift:] + timed[:shift]:
            wall, cpu = run_once(command.argv, env)
            walls[command.name].append(wall)
            cpus[command.name].append(cpu)

    cached = "not cached" if args.no_bytecode_cache else "cached"
    print(
        f"{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} "
        f"CPUs, load {os.getloadavg()[0]:.2f}; medians of {args.rounds} rotated rounds; "
        f"bytecode {cached}"
    )
    base_wall = statistics.median(walls[timed[0].name])
    base_cpu = statistics.median(cpus[timed[0].name])
    print(f"{'process':<30} {'wall ms':>8} {'÷ bare':>7} {'cpu ms':>8} {'÷ bare':>7}")
    for command in timed:
        wall = statistics.median(walls[command.name])
        cpu = statistics.median(cpus[command.name])
        print(
            f"{command.name:<30} {wall * 1e3:>8.1f} {wall / base_wall:>6.1f}x "
            f"{cpu * 1e3:>8.1f} {cpu / max(base_cpu, 1e-3):>6.1f}x"
        )
    goal = statistics.median(walls[GOAL_COMMAND])
    verdict = "meets" if goal <= GOAL_S else "misses"
    print(f"goal: {GOAL_COMMAND} <= {GOAL_S} s wall: {goal:.3f} s ({verdict} it)")
    if args.instructions:
        if shutil.which("valgrind") is None:
            raise SystemExit("--instructions needs valgrind (apt-get install valgrind)")
        counts = {c.name: instructions(c.argv, env) for c in timed}
        base = counts[timed[0].name]
        print(f"\n{'process':<30} {'instructions':>14} {'÷ bare':>7}   (valgrind, one run each)")
        for command in timed:
            count = counts[command.name]
            print(f"{command.name:<30} {count / 1e6:>13.0f}M {count / base:>6.1f}x")
    if args.importtime:
        print(f"\nlargest imports of {GOAL_COMMAND} (self time, one run):")
        for self_us, name in importtime(env, args.importtime):
            print(f"{self_us / 1e3:>8.1f} ms  {name}")
    return {name: statistics.median(values) for name, values in walls.items()}


if __name__ == "__main__":
    main()
