"""``kvunits plan`` on a DeepSeek V4 checkpoint: vLLM 0.33's numbers, kvunits' own plan refused.

kvunits' own planner (admission by exact caps, one block size for every layer) does not
model DeepSeek V4's caches of several tokens per state, windows of 4- and 8-token blocks
beside 256-token ones; vLLM's plan of them is exact
(`kvunits.contracts.compressed`, `kvunits.runtime.like_vllm_packed`). So ``kvunits plan``
reads such a checkpoint here, takes vLLM's flags as for any model (``--like-vllm``,
``--kv-cache-memory-bytes``, ``--max-model-len``, ``-pp``, ``--num-gpu-blocks-override``),
and prints vLLM's section alone, saying why kvunits' own plan is not given.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, cast, final

from kvunits.contracts.errors import ConfigIssue

if TYPE_CHECKING:
    from collections.abc import Callable

    from kvunits.contracts import EngineSpec
    from kvunits.contracts.config._hf import HfParts
    from kvunits.runtime.like_vllm import VllmPlan

_ARCHITECTURE: Final = "DeepseekV4ForCausalLM"
#: vLLM's vision variant (vllm/models/deepseek_v4/common/vl_model.py): a vision tower that
#: keeps no cache (MMEncoderAttention) beside the same ``DeepseekV4ForCausalLM`` backbone.
_ARCHITECTURES: Final = frozenset({_ARCHITECTURE, "DeepseekV4ForConditionalGeneration"})
_MODEL_TYPE: Final = "deepseek_v4"
#: The ``--like-vllm`` GPUs of compute capability 9 (Hopper) or 10 (Blackwell SM100).
_FLASHMLA_GPUS: Final = frozenset({"h100", "h200", "b200"})
OWN_PLAN_REFUSED: Final = (
    "kvunits' own plan is not given: it plans one block size for every layer and one "
    "state per token, while DeepSeek V4 keeps caches of 4 and 128 tokens per state in "
    "blocks of 256, 64, 8 and 4 tokens (kvunits.contracts.compressed); vLLM's numbers follow"
)


def deepseek_v4_plan(args: argparse.Namespace) -> int | None:
    """Plan a DeepSeek V4 checkpoint as ``kvunits plan`` does (``None``: not one).

    Raises:
        ConfigError: the checkpoint or a flag vLLM would refuse (a ``model_type``
            transformers does not know, TP not dividing the heads, a length above the
            model's without ``VLLM_ALLOW_LONG_MAX_MODEL_LEN``, a malformed field).
    """
    path = args.config if args.config is not None else getattr(args, "vllm_model", None)
    if path is None:
        return None
    from kvunits.contracts import KvUnitsError
    from kvunits.contracts.config._hf_cache import locate_config
    from kvunits.contracts.config._read import read_config_file

    try:
        file, _ = locate_config(path, getattr(args, "revision", None))
        data = read_config_file(file)
    except KvUnitsError:
        return None  # the ordinary path reports it
    architectures = data.get("architectures")
    if not isinstance(architectures, list) or not architectures:
        return None
    if architectures[0] == "DeepseekV41ForCausalLM":  # kvunits/_dsv41.py
        from ._dsv41 import deepseek_v41_plan

        return deepseek_v41_plan(args, path, file, data)
    if architectures[0] not in _ARCHITECTURES:
        return None
    return _plan(args, path, file, data)


def _plan(args: argparse.Namespace, path: str, file: Path, data: dict[str, Any]) -> int:
    from kvunits.contracts import KvUnitsError
    from kvunits.contracts.compressed import DeepseekV4Model
    from kvunits.contracts.config._vllm_checks import with_model_directory
    from kvunits.contracts.errors import ConfigError
    from kvunits.runtime.like_vllm_packed import plan_deepseek_v4_like_vllm

    from ._vllm import activations_from_config, engine_flags, weights_from_directory
    from .cli import _ENGINE_FLAGS

    where = str(file)
    flags: dict[str, object] = {field: getattr(args, field) for field, _, _, _ in _ENGINE_FLAGS}
    flags["async_scheduling"] = args.async_scheduling
    args.vllm = extra = engine_flags(args, flags)
    data = with_model_directory(data, file, extra.hf_overrides or None)
    model_type = data.get("model_type")
    if model_type != _MODEL_TYPE:
        raise ConfigError(
            [
                ConfigIssue(
                    where,
                    "model_type",
                    f"{str(model_type)[:60]!r} is not a config class transformers knows for "
                    f"{_ARCHITECTURE} (it knows {_MODEL_TYPE!r}): vLLM 0.33 cannot load this "
                    "config without the checkpoint's own code (ModelConfig refuses it)",
                )
            ]
        )
    try:
        model = DeepseekV4Model.from_config(file.parent.name or "deepseek_v4", data)
    except KvUnitsError as err:
        raise ConfigError([ConfigIssue(where, "config.json", str(err))]) from None
    weights_from_directory(path, flags, extra)
    activations_from_config(path, flags, extra)
    issues: list[ConfigIssue] = []
    gpu = (extra.gpu or "").strip().lower()
    if gpu and gpu not in _FLASHMLA_GPUS:
        issues.append(
            ConfigIssue(
                "command line",
                "--like-vllm",
                f"{gpu}: vLLM 0.33's DeepSeek V4 attention needs compute capability 9 or 10 "
                "(DeepseekV4SparseMLABackend.supports_compute_capability; FlashMLA): plan it "
                f"on one of {', '.join(sorted(_FLASHMLA_GPUS))}",
            )
        )
    return plan_and_print(
        args,
        flags,
        Route(plan_deepseek_v4_like_vllm, "DeepSeek V4", OWN_PLAN_REFUSED, _MODEL_TYPE),
        model,
        data,
        where,
        issues,
    )


@final
@dataclass(frozen=True, slots=True)
class Route:
    """How one DeepSeek generation is planned: vLLM's planner, its name in the output, why
    kvunits' own plan is not given, and the ``model_type`` whose length rules apply."""

    planner: Callable[..., VllmPlan]
    title: str
    own_plan: str
    family: str


def plan_and_print(
    args: argparse.Namespace,
    flags: dict[str, object],
    route: Route,
    model: Any,
    data: dict[str, Any],
    where: str,
    issues: list[ConfigIssue],
) -> int:
    """vLLM's engine settings and checks on a read DeepSeek model, its plan, and the output
    (``--format json`` or text); shared by DeepSeek V4 and V4.1 (`kvunits._dsv41`).

    Raises:
        ConfigError: the issues found so far, a setting vLLM refuses, or vLLM's start-up
            error (with kvunits' own plan not given either, the command refuses).
    """
    from kvunits.contracts import KvUnitsError, Tokens
    from kvunits.contracts.config._load import resolve_engine
    from kvunits.contracts.config._vllm_checks import check_like_vllm
    from kvunits.contracts.errors import ConfigError

    from ._vllm import vllm_to_dict

    extra = args.vllm
    found = _max_model_len(data, where, issues)
    engine, sources = resolve_engine(
        {"max_model_len": Tokens(found[0])} if found is not None else {},
        {"max_model_len": f"hf {found[1]}"} if found is not None else {},
        where=where,
        flags=flags,
        issues=issues,
    )
    if engine is not None and found is not None:
        heads = data.get("num_attention_heads")
        parts = _Checked(heads if isinstance(heads, int) else None, found[2], family=route.family)
        check_like_vllm(cast("HfParts", parts), engine, sources, where, issues)
    if issues or engine is None:
        raise ConfigError(issues)
    try:
        numbers = route.planner(
            model,
            engine,
            auto_fit=extra.auto_fit,
            num_gpu_blocks_override=extra.num_gpu_blocks_override,
        )
    except KvUnitsError as err:
        raise ConfigError([ConfigIssue(where, "vllm serve", str(err))]) from None
    if args.format == "json":
        json.dump(
            {"model": model.name, "own_plan": route.own_plan, "vllm": vllm_to_dict(numbers)},
            sys.stdout,
            indent=2,
        )
        sys.stdout.write("\n")
    else:
        from ._render import clean

        title = f"{model.name}: {len(model.layers)} {route.title} layers"
        lines = [title, route.own_plan, ""]
        lines.extend(_lines(engine, extra.gpu, numbers))
        lines.extend(f"  note: {note}" for note in extra.notes)
        sys.stdout.write("\n".join(clean(line) for line in lines) + "\n")
    sys.stdout.flush()
    return 0


def _lines(engine: EngineSpec, gpu: str | None, numbers: VllmPlan) -> list[str]:
    """vLLM's section: its settings, its two numbers, its groups."""
    how = f"--like-vllm {gpu}" if gpu else "these settings"
    lines = [
        f"vllm serve 0.33 with {how} (FlashMLA, fp8_ds_mla, layout BLHNC, "
        f"{engine.max_num_batched_tokens} per step, async scheduling "
        f"{'on' if engine.async_scheduling else 'off'}, one pool, a null block):"
    ]
    lines.append(f"  {numbers.headline()}")
    if numbers.auto_fit:
        lines.append(f"  max_model_len auto-fitted to {numbers.max_model_len}")
    lines.append(f"  {numbers.num_blocks} of {numbers.bytes_per_block} (pages side by side):")
    lines.extend(
        f"    {g.kind} group: {len(g.layer_names)} caches, blocks of {g.block_size}, "
        f"{g.blocks_per_request} a request"
        for g in numbers.groups
    )
    return lines


@final
@dataclass(frozen=True, slots=True)
class _Checked:
    """What `check_like_vllm` reads of a Hugging Face model (its ``HfParts``)."""

    attention_heads: int | None
    max_len_bound: tuple[int, str]
    kv_heads: int | None = None
    family: str = _MODEL_TYPE


def _max_model_len(
    data: dict[str, Any], where: str, issues: list[ConfigIssue]
) -> tuple[int, str, tuple[int, str]] | None:
    """vLLM's derived ``max_model_len`` (``_get_and_verify_max_len``, as
    `kvunits.contracts.config._hf_layers.max_model_len` restates it for every family), its
    source, and the longest vLLM accepts."""
    from kvunits.contracts.config._hf_fields import Reader, Section
    from kvunits.contracts.config._hf_layers import max_model_len

    reader = Reader(where)
    found = max_model_len(Section(reader, data, "", _MODEL_TYPE, {}))
    issues.extend(reader.issues)
    return found
