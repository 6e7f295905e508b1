"""Micro-benchmark: what reading one quantity field of a config costs, against a plain int.

Model: a config field holds text such as ``"750 encoder_token"``; validating it means
splitting the number from the unit, resolving the unit's name, checking its dimension against
the field's, converting (``"40 GiB"`` to bytes) and building the typed quantity. Each figure is
microseconds per quantity field, after the first use of each unit name (its look-up is then
cached per field type); the baseline, measured in the same run, is what a config reader
without units pays: ``int(text.split()[0])``. The cases:

* ``validator``: the field validator alone (``coerce_quantity``), text to `EncoderTokens`;
* ``16 length fields``: one pydantic model of 16 `EncoderTokens` fields, per field (beside
  it, the same model with 16 plain int fields, fed the ints: pydantic's own cost per field);
* ``16 window fields``: 16 ``Window[EncoderTokens] | Window[Tokens]`` fields (a layer's
  kind of field), per field;
* ``16 GiB -> byte/rank``: 16 memory settings (`RankBytes`) of ``"40 GiB"``, converted;
* ``[engine] section``: the config file's engine section (5 quantity fields and the rest),
  divided by its 5 quantity fields;
* ``a layer group``: one ``[model.groups.<g>]`` entry (kind, count, a sliding window, pool,
  heads, head size), its model validated whole, per field (6; for reference);
* ``first use of a unit name``: the validator with its cache emptied before each call;
* ``pint's parser``: ``ureg.Quantity(text)`` and ``.to()``, for reference (``--no-pint``
  leaves it out).

Each case runs ``--number`` calls per timing; the cases run in ``--rounds`` rounds, one
timing of each case per round in a rotated order, and each figure is the median over the
rounds (on a shared machine a burst of load lands on one round of every case).

Goal (issue 14): at most 5 µs per quantity field after the first use of a unit name.

Run:
    .venv/bin/python -m benchmarks.validation
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from pydantic import create_model

from kvunits.contracts import EncoderTokens
from kvunits.contracts._layers import SeqWindow
from kvunits.contracts._model import SpecModel
from kvunits.contracts._quantity import _RESOLVED, coerce_quantity
from kvunits.contracts.config import EngineConfig
from kvunits.contracts.config._models import SlidingWindowGroup
from kvunits.contracts.deploy import RankBytes

#: The goal, in microseconds per quantity field.
GOAL_US = 5.0

FIELDS = 16
_Lengths = create_model(  # type: ignore[call-overload]
    "_Lengths", __base__=SpecModel, **{f"f{i}": (EncoderTokens, ...) for i in range(FIELDS)}
)
_Ints = create_model(  # type: ignore[call-overload]
    "_Ints", __base__=SpecModel, **{f"f{i}": (int, ...) for i in range(FIELDS)}
)
_Windows = create_model(  # type: ignore[call-overload]
    "_Windows", __base__=SpecModel, **{f"f{i}": (SeqWindow, ...) for i in range(FIELDS)}
)
_Memories = create_model(  # type: ignore[call-overload]
    "_Memories", __base__=SpecModel, **{f"f{i}": (RankBytes, ...) for i in range(FIELDS)}
)

LENGTHS = {f"f{i}": "750 encoder_token" for i in range(FIELDS)}
INTS = {f"f{i}": 750 for i in range(FIELDS)}
WINDOWS = {f"f{i}": "750 encoder_token" for i in range(FIELDS)}
MEMORIES = {f"f{i}": "40 GiB" for i in range(FIELDS)}
ENGINE = {
    "block_size_slots": 16,
    "max_model_len": "131072 token",
    "max_num_batched_tokens": "2048 token",
    "max_encoder_len": "524288 encoder_token",
    "max_encoder_tokens_per_step": "4 encoder_token",
    "memory_budget": "40 GiB",
    "cache_dtype": "auto",
}
GROUP = {
    "kind": "sliding_window",
    "count": 32,
    "sliding_window": "750 encoder_token",
    "pool": 4,
    "kv_heads": 32,
    "head_size": 64,
}


@dataclass(frozen=True)
class Case:
    """One thing to time: ``call`` validates ``fields`` quantity fields."""

    name: str
    call: Callable[[], object]
    fields: int


def _first_use() -> object:
    _RESOLVED.clear()  # the cache of every field type: each call resolves its unit anew
    return coerce_quantity("750 encoder_token", (EncoderTokens,))


def cases(with_pint: bool) -> list[Case]:
    """The cases, the baseline first."""
    text = "750 encoder_token"
    found: list[Case] = [
        Case("baseline: int(text.split()[0])", lambda: int(text.split()[0]), 1),
        Case("validator", lambda: coerce_quantity(text, (EncoderTokens,)), 1),
        Case(f"{FIELDS} length fields (model)", lambda: _Lengths.model_validate(LENGTHS), FIELDS),
        Case(f"{FIELDS} int fields (model)", lambda: _Ints.model_validate(INTS), FIELDS),
        Case(f"{FIELDS} window fields (model)", lambda: _Windows.model_validate(WINDOWS), FIELDS),
        Case(
            f"{FIELDS} GiB -> byte/rank (model)",
            lambda: _Memories.model_validate(MEMORIES),
            FIELDS,
        ),
        Case("[engine] section", lambda: EngineConfig.model_validate(ENGINE), 5),
        Case("a layer group, per field", lambda: SlidingWindowGroup.model_validate(GROUP), 6),
        Case("first use of a unit name", _first_use, 1),
    ]
    if with_pint:
        from kvunits.contracts import ureg

        found.append(
            Case(
                "pint's parser, for reference",
                lambda: ureg.Quantity(text).to("encoder_token").magnitude,
                1,
            )
        )
    return found


def us_per_field(case: Case, number: int) -> float:
    """Microseconds per quantity field of one timing of ``number`` calls."""
    call = case.call
    start = time.perf_counter()
    for _ in range(number):
        call()
    return (time.perf_counter() - start) / number / case.fields * 1e6


def main(argv: list[str] | None = None) -> dict[str, float]:
    """Time every case; print µs per field and the ratio to the baseline. Returns the medians."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--number", type=int, default=2000, help="calls per timing")
    parser.add_argument("--rounds", type=int, default=9, help="rounds (medians over them)")
    parser.add_argument("--no-pint", action="store_true", help="leave pint's parser out")
    args = parser.parse_args(argv)

    timed = cases(with_pint=not args.no_pint)
    for case in timed:  # warm-up: every unit name is used once, every validator built
        case.call()
    samples: dict[str, list[float]] = {c.name: [] for c in timed}
    for round_ in range(args.rounds):
        shift = round_ % len(timed)
        for case in timed[shift:] + timed[:shift]:
            samples[case.name].append(us_per_field(case, args.number))
    medians = {name: statistics.median(values) for name, values in samples.items()}

    print(
        f"{platform.python_implementation()} {platform.python_version()}; medians of "
        f"{args.rounds} rotated rounds of {args.number:,} calls"
    )
    base = medians[timed[0].name]
    print(f"{'case':<34} {'µs/field':>9} {'÷ baseline':>11}")
    for case in timed:
        value = medians[case.name]
        print(f"{case.name:<34} {value:>9.2f} {value / base:>10.1f}x")
    worst = max(
        medians[c.name]
        for c in timed
        if c.name.startswith(("validator", f"{FIELDS} length", f"{FIELDS} window", f"{FIELDS} GiB"))
        or c.name == "[engine] section"
    )
    verdict = "meets" if worst <= GOAL_US else "misses"
    print(
        f"goal: <= {GOAL_US} µs per quantity field after a unit's first use: {worst:.2f} µs at "
        f"most ({verdict} it)"
    )
    return medians


if __name__ == "__main__":
    main()
