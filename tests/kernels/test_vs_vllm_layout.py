"""A shared plan's KV-cache views equal vLLM 0.33's own allocation (issue 23), for Voxtral
Realtime, Gemma-3-1B and Gemma-4-26B-A4B in every ``KVCacheLayout``, or kvunits refuses the
layout where vLLM refuses it, lays the model out otherwise, or overlays other blocks
(``benchmarks/vs_vllm_layout.py``). Runs where vLLM's worker allocation imports (its own venv,
``benchmarks/vllm-nodeps.txt``)."""

from __future__ import annotations

import pytest


def test_shared_views_equal_vllms() -> None:
    pytest.importorskip("vllm.v1.worker.utils")
    from benchmarks.vs_vllm_layout import main

    assert main([]) == 0
