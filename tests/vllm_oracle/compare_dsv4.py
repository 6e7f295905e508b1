"""DeepSeek V4 read by kvunits (`DeepseekV4Model`) against vLLM 0.33's ``ModelConfig`` view.

kvunits plans DeepSeek V4 with vLLM's numbers only (``kvunits plan``,
`plan_deepseek_v4_like_vllm`, checked against vLLM's own cache classes and planner in
test_dsv4.py), not as `ModelSpec` layers, so this compares what the view states with
`DeepseekV4Model`: the decoder layers; each layer's type as its compress ratio
(``DeepseekV4Attention.__init__``: ``max(1, compress_rates[layer_types[i]])``; the view
gives ``layer_types``, the file the rates); the latent's size (``head_dim``); the window;
the default ``max_model_len``; and a cache dtype vLLM's FlashMLA layout accepts (``auto``
or fp8, stored as ``fp8_ds_mla``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kvunits.contracts import Elements, KvUnitsError, Tokens
from kvunits.contracts.compressed import DeepseekV4Model
from kvunits.contracts.compressed_v41 import DeepseekV41Model

_RATE = {
    "sliding_attention": 1,
    "compressed_sparse_attention": 4,
    "heavily_compressed_attention": 128,
}


def deepseek_v4_view(path: str) -> dict[str, Any] | None:
    """kvunits' reading of a DeepSeek V4 directory in the view's terms (``None``: not one)."""
    file = Path(path) / "config.json" if Path(path).is_dir() else Path(path)
    data = json.loads(file.read_text(encoding="utf-8"))
    architectures = data.get("architectures") or [None]
    if architectures[0] == "DeepseekV41ForCausalLM" and data.get("model_type") == "deepseek_v41":
        return _deepseek_v41_view(file, data)
    if architectures[0] != "DeepseekV4ForCausalLM" or data.get("model_type") != "deepseek_v4":
        return None
    from kvunits._dsv4 import _max_model_len

    try:
        model = DeepseekV4Model.from_config(file.parent.name, data)
    except KvUnitsError as err:
        return {"error": str(err)}
    found = _max_model_len(data, str(file), [])
    return {
        "deepseek_v4": {
            "ratios": [layer.compress_ratio for layer in model.layers],
            "head_size": {layer.head_size.numerical_value_in(Elements) for layer in model.layers},
            "windows": {layer.sliding_window.numerical_value_in(Tokens) for layer in model.layers},
            "max_model_len": None if found is None else found[0],
        }
    }


def compare_deepseek_v4(view: Mapping[str, Any], mine: Mapping[str, Any]) -> list[str]:
    """The differences between vLLM's view and kvunits' `deepseek_v4_view`."""
    ours = mine["deepseek_v4"]
    diffs = []
    types = view.get("layer_types") or []
    expected = [_RATE.get(t, 1) for t in types]
    if view["layers"] != len(ours["ratios"]) or expected != ours["ratios"]:
        diffs.append(f"compress ratios {ours['ratios']} != vLLM's layer_types {expected}")
    if not view["mla"]:
        diffs.append("vLLM: not MLA; kvunits: DeepSeek V4's latent caches")
    if ours["head_size"] != {view["head_size"]}:
        diffs.append(f"latent {sorted(ours['head_size'])} != vLLM head size {view['head_size']}")
    if ours["windows"] != {view["sliding_window"]}:
        diffs.append(f"windows {sorted(ours['windows'])} != vLLM {view['sliding_window']}")
    if ours["max_model_len"] != view["max_model_len"]:
        diffs.append(f"max_model_len {ours['max_model_len']} != vLLM {view['max_model_len']}")
    if view["kv_cache_dtype"] not in ("auto", "fp8", "fp8_e4m3", "fp8_ds_mla"):
        diffs.append(f"cache dtype {view['kv_cache_dtype']}: vLLM's FlashMLA layout refuses it")
    return diffs


def _deepseek_v41_view(file: Path, data: dict[str, Any]) -> dict[str, Any]:
    """kvunits' reading of a DeepSeek V4.1 config (``DeepseekV41Config`` flattens
    ``text_config``): its layers, latent size, window and default ``max_model_len``."""
    from kvunits._dsv4 import _max_model_len

    text = data.get("text_config")
    flat = {**(text if isinstance(text, dict) else {}), **data}
    try:
        model = DeepseekV41Model.from_config(file.parent.name, flat)
    except KvUnitsError as err:
        return {"error": str(err)}
    found = _max_model_len(flat, str(file), [])
    return {
        "deepseek_v41": {
            "layers": len(model.layers),
            "head_size": {layer.head_size.numerical_value_in(Elements) for layer in model.layers},
            "windows": {layer.sliding_window.numerical_value_in(Tokens) for layer in model.layers},
            "max_model_len": None if found is None else found[0],
        }
    }


def compare_deepseek_v41(view: Mapping[str, Any], mine: Mapping[str, Any]) -> list[str]:
    """The differences between vLLM's view and kvunits' reading of a DeepSeek V4.1 config."""
    ours = mine["deepseek_v41"]
    diffs = []
    if view["layers"] != ours["layers"]:
        diffs.append(f"layers {ours['layers']} != vLLM {view['layers']}")
    if not view["mla"]:
        diffs.append("vLLM: not MLA; kvunits: DeepSeek V4.1's latent caches")
    if ours["head_size"] != {view["head_size"]}:
        diffs.append(f"latent {sorted(ours['head_size'])} != vLLM head size {view['head_size']}")
    if ours["windows"] != {view["sliding_window"]}:
        diffs.append(f"windows {sorted(ours['windows'])} != vLLM {view['sliding_window']}")
    if ours["max_model_len"] != view["max_model_len"]:
        diffs.append(f"max_model_len {ours['max_model_len']} != vLLM {view['max_model_len']}")
    return diffs
