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

from .models import BUILT, DEFAULTS

RECORDED = Path(__file__).resolve().parent / "recorded"
DEFAULTS_DIR = Path(__file__).resolve().parent / "defaults"


@pytest.mark.parametrize(
    "path",
    [RECORDED / f"{name}.json" for name in sorted(BUILT)]
    + [DEFAULTS_DIR / f"{model_type}.json" for model_type in sorted(DEFAULTS)],
    ids=lambda path: path.stem,
)
def test_recorded_example_is_clean(path: Path) -> None:
    # The shipped examples, then transformers' default configs of the model types
    # (`models.DEFAULTS`) whose layouts no shipped example builds here.
    dump = json.loads(path.read_text())
    report = audit(read_dump(dump))
    assert report.ok, "\n".join(report.lines())
    layers = sum(len(worker) for worker in dump["workers"])
    assert report.layers == layers > 0
    # What the audit compares: every layer, the recurrent states' pages (MambaSpec) too; of
    # the plan, the blocks the budget buys where kvunits plans one pool.
    skipped = {n for note in report.notes if note.check == "not_audited" for n in note.layers}
    assert skipped <= {""}, sorted(skipped)


def test_recorded_files_are_the_examples_built() -> None:
    assert sorted(p.stem for p in RECORDED.glob("*.json")) == sorted(BUILT)
    assert sorted(p.stem for p in DEFAULTS_DIR.glob("*.json")) == sorted(DEFAULTS)


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


def test_a_recorded_state_of_another_dtype_is_found() -> None:
    # Jamba's Mamba-1 state as vLLM's CPU platform builds it on a host with AVX512-BF16 (its
    # SSM state in float32, vllm/platforms/cpu.py): on a GPU, and in the model's config, both
    # states are bfloat16 (conv 3 x 8192 + SSM 8192 x 16 elements: 311,296 byte, not 573,440).
    dump = json.loads((RECORDED / "jamba-v0.1.json").read_text())
    mixer = "model.layers.0.mixer"
    spec = dump["workers"][0][mixer]
    assert spec["class"] == "MambaSpec" and spec["page_size_bytes"] == 2 * (3 + 16) * 8192
    spec["fields"]["dtypes"] = ["bfloat16", "float32"]
    spec["page_size_bytes"] = 2 * 3 * 8192 + 4 * 16 * 8192
    report = audit(read_dump(dump))
    assert [(f.check, f.layers) for f in report.findings] == [("page", (mixer,))]
    assert "vLLM's state page is 573440 byte/rank" in report.findings[0].message
    assert "mamba1 state on one rank is 311296 byte/rank" in report.findings[0].message
