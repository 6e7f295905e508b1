"""What vLLM 0.33 reads beside a ``config.json``, and what it refuses before it plans.

* **The model directory.** A checkpoint quantised with ModelOpt 0.29 or older keeps its
  quantization config in ``hf_quant_config.json`` beside ``config.json``; vLLM takes it when
  ``config.json`` has no ``quantization_config`` (vllm/transformers_utils/config.py
  ``get_config``), so an FP8 KV cache declared there (``kv_cache_quant_algo: FP8``) halves
  the pages. ``--hf-overrides`` merges into the config before it is read.
* **Tensor parallelism.** vLLM requires TP to divide the attention heads, not only the KV
  heads (vllm/config/model.py ``verify_with_parallel_config``: "Total number of attention
  heads (28) must be divisible by tensor parallel size (8)").
* **The longest length.** A ``max_model_len`` above the derived one (or the file's
  ``model_max_length``) is refused unless ``VLLM_ALLOW_LONG_MAX_MODEL_LEN`` is set
  (vllm/config/model.py ``_get_and_verify_max_len``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from .._quantity import Tokens
from ..errors import ConfigIssue

if TYPE_CHECKING:
    from .._engine import EngineSpec
    from ._hf import HfParts

#: vLLM's switch to accept a ``max_model_len`` above the derived one (vllm/envs.py).
ALLOW_LONG: Final = "VLLM_ALLOW_LONG_MAX_MODEL_LEN"
_QUANT_FILE: Final = "hf_quant_config.json"


def with_model_directory(
    data: Mapping[str, Any], file: Path, overrides: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The config as vLLM reads it: ``hf_quant_config.json`` beside it when ``config.json``
    has no ``quantization_config``, then ``overrides`` merged in (vLLM's ``--hf-overrides``:
    a mapping value merges into the mapping it names, anything else replaces).

    Raises:
        ConfigError: ``hf_quant_config.json`` is not a valid, bounded JSON file.
    """
    merged = dict(data)
    quant = file.parent / _QUANT_FILE
    if merged.get("quantization_config") is None and quant.is_file():
        from ._read import read_config_file

        merged["quantization_config"] = read_config_file(quant)
    if overrides:
        merged = _merge(merged, overrides)
    return merged


def _merge(base: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in overrides.items():
        current = out.get(key)
        if isinstance(value, Mapping) and isinstance(current, Mapping):
            out[key] = _merge(current, value)
        else:
            out[key] = value
    return out


def check_like_vllm(
    hf: HfParts,
    engine: EngineSpec,
    sources: Mapping[str, str],
    where: str,
    issues: list[ConfigIssue],
) -> None:
    """Refuse what vLLM refuses at start-up for a Hugging Face model (module docstring)."""
    tp = engine.tensor_parallel_size
    if hf.attention_heads is not None and hf.attention_heads % tp:
        issues.append(
            ConfigIssue(
                *_place(sources.get("tensor_parallel_size", "default"), where),
                f"tensor_parallel_size {tp} does not divide the model's {hf.attention_heads} "
                "attention heads: vLLM refuses it (ModelConfig.verify_with_parallel_config: "
                "attention heads must be divisible by the tensor parallel size); use a TP "
                f"size that divides {hf.attention_heads}",
            )
        )
    if hf.kv_heads is not None and hf.kv_heads % tp:
        issues.append(
            ConfigIssue(
                *_place(sources.get("tensor_parallel_size", "default"), where),
                f"tensor_parallel_size {tp} does not divide the model's {hf.kv_heads} KV heads: "
                f"vLLM's {hf.family} attention asserts it (it does not replicate KV heads); "
                f"use a TP size that divides {hf.kv_heads}",
            )
        )
    source = sources.get("max_model_len", "")
    if hf.max_len_bound is None or source.startswith("hf "):
        return
    bound, bound_source = hf.max_len_bound
    asked = engine.max_model_len.numerical_value_in(Tokens)
    if asked > bound and not _allowed():
        issues.append(
            ConfigIssue(
                *_place(source, where),
                f"max_model_len {asked} token is above the model's {bound} token "
                f"({bound_source}): vLLM refuses it unless {ALLOW_LONG}=1 is set (RoPE "
                "positions beyond it give NaN, absolute positions index out of bounds); "
                f"lower max_model_len, or set {ALLOW_LONG}=1 to plan it anyway",
            )
        )


def _allowed() -> bool:
    # vllm/envs.py: the variable is read as a boolean "1"/"true" (case-insensitive).
    return os.environ.get(ALLOW_LONG, "0").strip().lower() in ("1", "true")


def _place(source: str, where: str) -> tuple[str, str]:
    kind, _, detail = source.partition(" ")
    if kind == "flag":
        return "command line", detail
    if kind == "env":
        return "environment", detail
    if kind == "default":
        return "built-in defaults", "tensor_parallel_size"
    return where, "engine"
