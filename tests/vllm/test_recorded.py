"""The audit of what vLLM 0.33 itself built for the shipped examples (no vLLM needed).

``recorded/<name>.json`` is the plugin's dump of vLLM's own per-layer specs, built by its
model code (``record.py``: every attention layer's ``get_kv_cache_spec``, as
``GPUModelRunner.get_kv_cache_spec`` collects them) and of the KV-cache configuration its
engine step built from 128 GiB; ``test_in_vllm.py`` checks the files are what vLLM builds.
Every example is clean: kvunits' independent plan agrees with vLLM's on every layer and group,
up to vLLM's documented choices (notes).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvunits.vllm import audit, read_dump

from .models import BUILT

RECORDED = Path(__file__).resolve().parent / "recorded"


@pytest.mark.parametrize("name", sorted(BUILT))
def test_recorded_example_is_clean(name: str) -> None:
    dump = json.loads((RECORDED / f"{name}.json").read_text())
    report = audit(read_dump(dump))
    assert report.ok, "\n".join(report.lines())
    layers = sum(len(worker) for worker in dump["workers"])
    assert report.layers == layers > 0
    # What the audit compares: every layer kvunits models, and the blocks the budget buys.
    skipped = {n for note in report.notes if note.check == "not_audited" for n in note.layers}
    assert all("MambaSpec" in dump["workers"][0][n]["class"] for n in skipped if n)


def test_recorded_files_are_the_examples_built() -> None:
    assert sorted(p.stem for p in RECORDED.glob("*.json")) == sorted(BUILT)


def test_a_recorded_plan_with_a_wrong_window_is_found() -> None:
    # Gemma 3's sliding layers as vLLM built them, with the window of 512 read as 1024.
    dump = json.loads((RECORDED / "gemma-3-1b-it.json").read_text())
    first = next(n for n, s in dump["workers"][0].items() if s["class"] == "SlidingWindowSpec")
    dump["workers"][0][first]["fields"]["sliding_window"] *= 2
    report = audit(read_dump(dump))
    # The layer's window, and its group's spec (still vLLM's 512) disagreeing with it.
    assert [(f.check, f.layers) for f in report.findings] == [
        ("window", (first,)),
        ("group", (first,)),
    ]
    assert "1024 token is wider than the 512 token" in report.findings[0].message
