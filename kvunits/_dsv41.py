"""``kvunits plan`` on a DeepSeek V4.1 checkpoint: vLLM 0.33's numbers on Hopper, or its reason.

As for DeepSeek V4 (`kvunits._dsv4`), kvunits' own planner does not model these caches
(several tokens per state, caches shared between layers, rings); vLLM's plan of them is
exact on Hopper (`kvunits.contracts.compressed_v41`,
`kvunits.runtime.like_vllm_packed_v41`). The GPU decides the cache record and the block
size, so ``--like-vllm`` must name one: ``h100`` or ``h200`` are planned; ``b200`` (SM100:
mega attention where built, NVFP4 and MXFP8 records, block-stride alignments) is refused by
name, and GPUs below compute capability 9 as vLLM cannot serve them.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Final

from kvunits.contracts.errors import ConfigIssue

ARCHITECTURE: Final = "DeepseekV41ForCausalLM"
_MODEL_TYPE: Final = "deepseek_v41"
_HOPPER: Final = frozenset({"h100", "h200"})
OWN_PLAN_REFUSED: Final = (
    "kvunits' own plan is not given: it plans one block size for every layer and one "
    "state per token, while DeepSeek V4.1 keeps caches of 1 and 2 tokens per state shared "
    "between layers, windows of 32-token blocks and compressor rings "
    "(kvunits.contracts.compressed_v41); vLLM's numbers follow"
)


def deepseek_v41_plan(args: argparse.Namespace, path: str, file: Path, data: dict[str, Any]) -> int:
    """Plan a DeepSeek V4.1 checkpoint as ``kvunits plan`` does.

    Raises:
        ConfigError: the checkpoint or a flag vLLM would refuse, a GPU not modelled, or
            vLLM's start-up error (with its longest length that fits).
    """
    from kvunits.contracts import KvUnitsError
    from kvunits.contracts.compressed_v41 import DeepseekV41Model
    from kvunits.contracts.config._vllm_checks import with_model_directory
    from kvunits.contracts.errors import ConfigError
    from kvunits.runtime.like_vllm_packed_v41 import plan_deepseek_v41_like_vllm

    from ._dsv4 import Route, plan_and_print
    from ._vllm import activations_from_config, engine_flags, weights_from_directory
    from .cli import _ENGINE_FLAGS

    where = str(file)
    flags: dict[str, object] = {field: getattr(args, field) for field, _, _, _ in _ENGINE_FLAGS}
    flags["async_scheduling"] = args.async_scheduling
    args.vllm = extra = engine_flags(args, flags)
    data = with_model_directory(data, file, extra.hf_overrides or None)
    if data.get("model_type") != _MODEL_TYPE:
        raise ConfigError(
            [
                ConfigIssue(
                    where,
                    "model_type",
                    f"{str(data.get('model_type'))[:60]!r} is not {_MODEL_TYPE!r}, the config "
                    f"class vLLM 0.33 registers for {ARCHITECTURE} (DeepseekV41Config)",
                )
            ]
        )
    # DeepseekV41Config: text_config flattened onto the top, top-level keys winning.
    text = data.get("text_config")
    flat = {**(text if isinstance(text, dict) else {}), **data}
    try:
        model = DeepseekV41Model.from_config(file.parent.name or _MODEL_TYPE, flat)
    except KvUnitsError as err:
        raise ConfigError([ConfigIssue(where, "config.json", str(err))]) from None
    weights_from_directory(path, flags, extra)
    activations_from_config(path, flags, extra)
    issues: list[ConfigIssue] = []
    gpu = (extra.gpu or "").strip().lower()
    if gpu not in _HOPPER:
        issues.append(ConfigIssue("command line", "--like-vllm", _gpu_refusal(gpu)))
    route = Route(plan_deepseek_v41_like_vllm, "DeepSeek V4.1", OWN_PLAN_REFUSED, _MODEL_TYPE)
    return plan_and_print(args, flags, route, model, flat, where, issues)


def _gpu_refusal(gpu: str) -> str:
    if not gpu:
        return (
            "DeepSeek V4.1's caches depend on the GPU (blocks of 64 tokens on Hopper, 128 "
            "otherwise; DeepseekV4FlashMLABackend.get_supported_kernel_block_sizes): name it "
            "with --like-vllm h100 or h200"
        )
    if gpu == "b200":
        return (
            "b200: on SM100 vLLM 0.33 serves DeepSeek V4.1 with mega attention where its kernel "
            "is built and the TP suits it (_select_dsv4_attn_cls), NVFP4 compressed records of "
            "288 bytes, MXFP8 window records of 528 with block-stride alignments "
            "(_use_v41_mxfp8_kv_record) and blocks of 128 tokens: not modelled; plan it on "
            "h100 or h200"
        )
    return (
        f"{gpu}: vLLM 0.33's DeepSeek V4.1 attention (FlashMLA) needs compute capability 9 "
        "or 10: plan it on h100 or h200"
    )
