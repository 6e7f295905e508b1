"""Dumps of vLLM 0.33 KV-cache specs, written as `kvunits.vllm.spec_to_dict` writes vLLM's own
objects (the field names and defaults of ``vllm/v1/kv_cache_interface.py`` at 0.33.0), so the
audit is tested without vLLM; ``test_in_vllm.py`` checks the same dumps against vLLM's classes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
VOXTRAL = ROOT / "examples" / "hf" / "voxtral-mini-4b-realtime-2602" / "config.json"
AUDIO = "whisper_encoder.whisper_encoder.layers.{}.self_attn.attn"
TEXT = "language_model.model.layers.{}.self_attn.attn"


def spec(
    cls: str,
    *,
    block_size: int = 16,
    heads: int,
    head_size: int,
    dtype: str = "bfloat16",
    tokens_per_state: str = "1",
    **extra: Any,
) -> dict[str, Any]:
    """An attention spec in `spec_to_dict`'s form; the page by vLLM's formula
    (``AttentionSpec.unpadded_page_size_bytes``: heads × block_size / tokens_per_state ×
    (K + V) × dtype bytes)."""
    from fractions import Fraction

    size = {"bfloat16": 2, "float16": 2, "float32": 4, "uint8": 1}[dtype]
    states = int(block_size / Fraction(tokens_per_state))
    head_v = extra.pop("head_size_v", head_size)
    fields = {
        "block_size": block_size,
        "num_kv_heads": heads,
        "head_size": head_size,
        "head_size_v": head_v,
        "dtype": dtype,
        "tokens_per_state": tokens_per_state,
        "dcp_sharded": True,
        "page_size_padded": None,
        **extra,
    }
    return {
        "class": cls,
        "spec_type": cls,
        "fields": fields,
        "page_size_bytes": heads * states * (head_size + head_v) * size,
        "tokens_per_state": tokens_per_state,
    }


def voxtral_specs(window: int, *, heads: int = 32, tps: str = "1/4") -> dict[str, Any]:
    """Voxtral Realtime's layers as vLLM 0.33 builds them: the causal Whisper encoder's
    ``WhisperCausalAttentionWithBlockPooling.get_kv_cache_spec``
    (``vllm/model_executor/models/whisper_causal.py``: ``tokens_per_state = Fraction(1, 4)``,
    32 real KV heads of 64, ``sliding_window = cdiv(750, 4) + 1 = 189`` in 0.33; ``window``
    replaces it) and the Ministral-3 text decoder's ``Attention.get_kv_cache_spec``
    (``vllm/model_executor/layers/attention/attention.py``: a ``SlidingWindowSpec`` of 8192)."""
    specs = {
        AUDIO.format(i): spec(
            "SlidingWindowSpec",
            heads=heads,
            head_size=64,
            tokens_per_state=tps,
            sliding_window=window,
        )
        for i in range(32)
    }
    specs.update(
        {
            TEXT.format(i): spec("SlidingWindowSpec", heads=8, head_size=128, sliding_window=8192)
            for i in range(26)
        }
    )
    return specs


def seed_engine(**changes: Any) -> dict[str, Any]:
    """The seed's test: block size 16 and one token per step
    (``max_admission_blocks_per_request(max_num_batched_tokens=1, ...) == 13``), one batch."""
    engine = {
        "vllm_version": "0.33.0",
        "model": "mistralai/Voxtral-Mini-4B-Realtime-2602",
        "block_size": 16,
        "max_model_len": 131072,
        "max_num_batched_tokens": 1,
        "max_in_flight_tokens": 1,
        "max_concurrent_batches": 1,
        "dtype": "bfloat16",
        "cache_dtype": "auto",
    }
    engine.update(changes)
    return engine


def dump(
    workers: list[dict[str, Any]],
    *,
    hf: dict[str, Any] | None = None,
    engine: dict[str, Any] | None = None,
    **rest: Any,
) -> dict[str, Any]:
    """A whole dump (`kvunits.vllm.dump_from_vllm`'s form)."""
    return {
        "format": "kvunits.vllm-kv-cache",
        "version": 1,
        "engine": engine or seed_engine(),
        "hf_config": hf if hf is not None else json.loads(VOXTRAL.read_text()),
        "workers": workers,
        **rest,
    }
