"""``vllm serve``'s command line on kvunits' commands: its flags, its values, its presets.

Everything ``vllm serve`` 0.33 takes that sizes the KV cache is accepted as vLLM writes it:

* **names**: ``--kv-cache-dtype``, ``--block-size``, ``--kv-cache-memory-bytes``,
  ``--max-num-seqs``, ``--enable-prefix-caching``, ``--num-gpu-blocks-override``,
  ``--mamba-cache-dtype``, ``--mamba-ssm-cache-dtype``, ``--dtype``, ``--hf-overrides``,
  ``--revision``, ``--model``, and ``--config FILE.yaml`` (a ``vllm serve`` config: its keys
  become flags, the command line's own flags win); ``--max_model_len`` (underscores) and
  ``--flag=value`` too (vLLM's ``FlexibleArgumentParser``);
* **values**: vLLM's ``human_readable_int`` where vLLM takes it (``32768``, ``32k`` = 32000,
  ``32K`` = 32768, ``16G`` = 16 GiB, ``16g`` = 16 × 10⁹; ``--max-model-len``,
  ``--max-num-batched-tokens``, ``--kv-cache-memory-bytes``) and ``-1``/``auto`` for
  ``--max-model-len`` (vLLM's auto-fit: the longest length whose request fits); kvunits'
  own text (``"32768 token"``, ``"16 GiB"``) is read as before;
* **a preset**, ``--like-vllm GPU``: what ``vllm serve`` 0.33 defaults to on that GPU (async
  scheduling, its batched-token default by GPU class, one pool for all groups with unified
  pages) and the GPU's memory as ``--gpu-memory``; flags given win over the preset.

Every plan prints vLLM's two start-up numbers for the same settings
(`kvunits.runtime.like_vllm`), whatever kvunits' own defaults are.
"""

from __future__ import annotations

import argparse
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from kvunits.contracts.config import KvUnitsConfig
    from kvunits.runtime.like_vllm import VllmPlan


def add_vllm_flags(parser: argparse.ArgumentParser) -> None:
    """vLLM's flags that kvunits reads beside its own (the module docstring)."""
    group = parser.add_argument_group(
        "vllm serve flags (vLLM 0.33's names and values; the plan prints vLLM's numbers)"
    )
    group.add_argument(
        "--like-vllm",
        metavar="GPU",
        help="plan as `vllm serve` 0.33 runs on GPU by default: async scheduling, its "
        "max_num_batched_tokens for the GPU class, one pool for all groups, the GPU's memory "
        f"as --gpu-memory ({', '.join(_gpu_names())})",
    )
    group.add_argument("--model", dest="vllm_model", metavar="MODEL", help="= CONFIG")
    group.add_argument("--revision", metavar="REV", help="revision of a cached model id")
    group.add_argument(
        "--kv-cache-dtype", metavar="DTYPE", help="= --cache-dtype (auto, fp8, fp8_e5m2, …)"
    )
    group.add_argument("--block-size", metavar="N", help="= --block-size-slots")
    group.add_argument(
        "--kv-cache-memory-bytes", metavar="BYTES", help="= --memory-budget (16G, 17179869184)"
    )
    group.add_argument(
        "--num-gpu-blocks-override", metavar="N", type=int, help="vLLM's blocks, whatever fits"
    )
    group.add_argument(
        "--max-num-seqs", metavar="N", type=int, help="vLLM's cap on requests at once"
    )
    group.add_argument(
        "--enable-prefix-caching",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="vLLM's prefix caching (default on): a recurrent state then holds 2 pages (3 "
        "with a gated-delta-net prefill checkpoint on the --like-vllm GPU)",
    )
    group.add_argument(
        "--kv-cache-dtype-skip-layers",
        nargs="+",
        metavar="LAYER",
        help="decoder layer indices (or sliding_window) whose KV cache keeps the model dtype",
    )
    group.add_argument("--dtype", dest="model_dtype", metavar="DTYPE", help="the model dtype")
    group.add_argument("--mamba-cache-dtype", metavar="DTYPE", help="both Mamba states' dtype")
    group.add_argument("--mamba-ssm-cache-dtype", metavar="DTYPE", help="the SSM state's dtype")
    group.add_argument(
        "--hf-overrides", metavar="JSON", help="merged into config.json before it is read"
    )


def _gpu_names() -> list[str]:
    from kvunits.runtime.like_vllm import VLLM_GPUS

    return sorted(VLLM_GPUS)


# -- the argument list -----------------------------------------------------------------------


def normalize_argv(argv: Sequence[str]) -> list[str]:
    """vLLM's spellings as kvunits parses them: ``--config FILE.yaml`` expanded after the
    command (and its config argument), underscores in flag names as dashes.

    Raises:
        kvunits.contracts.errors.ConfigError: the YAML file is not a ``vllm serve`` config.
    """
    args = [_dashes(arg) for arg in argv]
    if "--config" not in args and not any(a.startswith("--config=") for a in args):
        return args
    for index, arg in enumerate(args):
        if arg == "--config" and index + 1 < len(args):
            path, rest = args[index + 1], args[:index] + args[index + 2 :]
            break
        if arg.startswith("--config="):
            path, rest = arg.split("=", 1)[1], args[:index] + args[index + 1 :]
            break
    else:
        return args
    inserted = [_dashes(a) for a in _yaml_args(path)]
    # vLLM: the file's flags go right after the command, so those on the command line win.
    at = 1 if rest else 0
    if len(rest) > 1 and not rest[1].startswith("-"):
        at = 2
    return rest[:at] + inserted + rest[at:]


def _dashes(arg: str) -> str:
    if not arg.startswith("--"):
        return arg
    name, eq, value = arg.partition("=")
    return name.replace("_", "-") + eq + value


def _yaml_args(path: str) -> list[str]:
    """A ``vllm serve`` YAML file as flags (vLLM's ``FlexibleArgumentParser.load_config_file``:
    ``key: value`` → ``--key value``; true → ``--key``, false → ``--no-key``; a mapping →
    its JSON), read as kvunits reads any config (bounded, one YAML reading)."""
    from kvunits.contracts.config._issues import config_error
    from kvunits.contracts.config._read import read_config_file

    if not path.lower().endswith((".yaml", ".yml")):
        raise config_error(path, "--config takes a vllm serve YAML file (.yaml or .yml)")
    from pathlib import Path

    data = read_config_file(Path(path))
    out: list[str] = []
    for key, value in data.items():
        flag = f"--{key}"
        if isinstance(value, bool):
            out.append(flag if value else f"--no-{key}")
        elif isinstance(value, list):
            out.extend([flag, *map(str, value)])
        elif isinstance(value, Mapping):
            out.extend([flag, json.dumps(value)])
        else:
            out.extend([flag, str(value)])
    return out


# -- values ------------------------------------------------------------------------------------

_HUMAN: Final = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")
_DECIMAL: Final = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY: Final = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def human_readable_int(text: str) -> int | None:
    """vLLM's ``human_readable_int`` (vllm/utils/argparse_utils.py): ``1k`` 1000, ``1K``
    1024, ``25.6k`` 25600, a plain integer; no decimals with a binary suffix. ``None`` when
    ``text`` is none of these (it may be kvunits' own ``"<int> <unit>"``).

    Example:
        >>> [human_readable_int(t) for t in ("32768", "32k", "32K", "16G", "1.5k", "1.5K")]
        [32768, 32000, 32768, 17179869184, 1500, None]
    """
    text = text.strip()
    match = _HUMAN.fullmatch(text)
    if match:
        number, suffix = match.groups()
        if suffix in _DECIMAL:
            return int(float(number) * _DECIMAL[suffix])
        return int(number) * _BINARY[suffix] if number.isdigit() else None
    return int(text) if re.fullmatch(r"-?\d{1,19}", text) else None


@dataclass
class VllmArgs:
    """What the vLLM flags ask beyond kvunits' engine settings.

    Attributes:
        gpu: the ``--like-vllm`` GPU.
        auto_fit: ``--max-model-len -1`` / ``auto``.
        num_gpu_blocks_override: ``--num-gpu-blocks-override``.
        max_num_seqs: ``--max-num-seqs``.
        hf_overrides: ``--hf-overrides`` (and ``--dtype``), merged into config.json.
        revision: ``--revision``.
        mamba_cache_dtype, mamba_ssm_cache_dtype: the state dtypes asked for.
        kv_cache_dtype_skip_layers: ``--kv-cache-dtype-skip-layers``: decoder layer indices
            (and ``sliding_window``) whose KV cache keeps the model's dtype.
        enable_prefix_caching: ``--[no-]enable-prefix-caching`` (vLLM's default: on); a
            recurrent state holds 2 pages a request with it (Mamba "align" mode), 1 without.
        preset_shared_pool: the preset, not the user, chose kvunits' one shared pool (it
            falls back to a pool per group where the model's pages cannot share one).
        notes: what was accepted and sizes nothing (said in the plan).
    """

    gpu: str | None = None
    auto_fit: bool = False
    num_gpu_blocks_override: int | None = None
    max_num_seqs: int | None = None
    hf_overrides: dict[str, Any] = field(default_factory=dict)
    revision: str | None = None
    mamba_cache_dtype: str | None = None
    mamba_ssm_cache_dtype: str | None = None
    enable_prefix_caching: bool = True
    kv_cache_dtype_skip_layers: tuple[str, ...] = ()
    preset_shared_pool: bool = False
    notes: list[str] = field(default_factory=list)


#: Engine settings whose flags read vLLM's plain values, and the unit a plain value is in.
_PLAIN_UNITS: Final = {
    "max_model_len": "token",
    "max_num_batched_tokens": "token",
    "memory_budget": "byte",
    "gpu_memory": "byte",
    "weights_memory": "byte",
    "activation_memory": "byte",
}


def engine_flags(args: argparse.Namespace, flags: dict[str, object]) -> VllmArgs:
    """Fold the vLLM flags of ``args`` into kvunits' engine ``flags`` (in place); return what
    is left for the vLLM plan.

    Raises:
        kvunits.contracts.errors.ConfigError: a vLLM flag given twice (under both names), an
            unknown GPU, a malformed ``--hf-overrides``.
    """
    from kvunits.contracts.errors import ConfigError, ConfigIssue

    issues: list[ConfigIssue] = []
    extra = VllmArgs(
        num_gpu_blocks_override=getattr(args, "num_gpu_blocks_override", None),
        max_num_seqs=getattr(args, "max_num_seqs", None),
        revision=getattr(args, "revision", None),
        mamba_cache_dtype=getattr(args, "mamba_cache_dtype", None),
        mamba_ssm_cache_dtype=getattr(args, "mamba_ssm_cache_dtype", None),
    )
    for vllm_name, field_name in (
        ("kv_cache_dtype", "cache_dtype"),
        ("block_size", "block_size_slots"),
        ("kv_cache_memory_bytes", "memory_budget"),
    ):
        value = getattr(args, vllm_name, None)
        if value is None:
            continue
        if flags.get(field_name) is not None:
            issues.append(
                ConfigIssue(
                    "command line",
                    f"--{vllm_name.replace('_', '-')}",
                    f"given with --{field_name.replace('_', '-')}, which is the same "
                    "setting; give one",
                )
            )
        flags[field_name] = value
    for field_name, unit in _PLAIN_UNITS.items():
        value = flags.get(field_name)
        if not isinstance(value, str):
            continue
        if field_name == "max_model_len" and value.strip().lower() in ("-1", "auto"):
            extra.auto_fit = True
            flags[field_name] = None  # the model's own length, then fitted
            continue
        number = human_readable_int(value)
        if number is not None:
            flags[field_name] = f"{number} {unit}"
    overrides = getattr(args, "hf_overrides", None)
    if overrides:
        try:
            parsed = json.loads(overrides)
        except ValueError as err:
            parsed = None
            issues.append(ConfigIssue("command line", "--hf-overrides", f"not JSON: {err}"))
        if parsed is not None and not isinstance(parsed, dict):
            issues.append(ConfigIssue("command line", "--hf-overrides", "expected a JSON object"))
        elif parsed is not None:
            extra.hf_overrides.update(parsed)
    dtype = getattr(args, "model_dtype", None)
    if dtype is not None and dtype.strip().lower() != "auto":
        name = {"half": "float16", "float": "float32"}.get(dtype.strip().lower(), dtype)
        extra.hf_overrides.update({"dtype": name, "torch_dtype": name})
    if getattr(args, "enable_prefix_caching", None) is not None:
        extra.enable_prefix_caching = bool(args.enable_prefix_caching)
    skipped = getattr(args, "kv_cache_dtype_skip_layers", None)
    if skipped:
        extra.kv_cache_dtype_skip_layers = tuple(
            part.strip() for item in skipped for part in item.split(",") if part.strip()
        )
    gpu = getattr(args, "like_vllm", None)
    if gpu is not None:
        _preset(gpu, flags, extra, issues)
    if issues:
        raise ConfigError(issues)
    return extra


def _preset(name: str, flags: dict[str, object], extra: VllmArgs, issues: list[Any]) -> None:
    """``--like-vllm GPU``: vLLM's defaults on GPU where no flag or variable sets them."""
    from kvunits.contracts import Tokens
    from kvunits.contracts.deploy import RankBytes
    from kvunits.contracts.errors import ConfigIssue
    from kvunits.runtime.like_vllm import VLLM_GPUS

    gpu = VLLM_GPUS.get(name.strip().lower())
    if gpu is None:
        issues.append(
            ConfigIssue(
                "command line",
                "--like-vllm",
                f"unknown GPU {name[:40]!r}; kvunits knows {', '.join(sorted(VLLM_GPUS))} "
                "(or give --gpu-memory and --max-num-batched-tokens yourself)",
            )
        )
        return
    extra.gpu = gpu.name
    preset: dict[str, object] = {
        "async_scheduling": True,
        "max_num_batched_tokens": f"{gpu.max_num_batched_tokens.numerical_value_in(Tokens)} token",
    }
    tp = _int(flags.get("tensor_parallel_size"), os.environ.get("KVUNITS_TENSOR_PARALLEL_SIZE"))
    pp = _int(flags.get("pipeline_parallel_size"), os.environ.get("KVUNITS_PIPELINE_PARALLEL_SIZE"))
    if tp * pp == 1:
        preset["kv_cache_layout"] = "shared"  # kvunits plans one pool on one device only
        extra.preset_shared_pool = (
            flags.get("kv_cache_layout") is None and "KVUNITS_KV_CACHE_LAYOUT" not in os.environ
        )
    if flags.get("memory_budget") is None and "KVUNITS_MEMORY_BUDGET" not in os.environ:
        preset["gpu_memory"] = f"{gpu.memory.numerical_value_in(RankBytes)} byte"
    for key, value in preset.items():
        if flags.get(key) is None and f"KVUNITS_{key.upper()}" not in os.environ:
            flags[key] = value


def _int(*values: object) -> int:
    for value in values:
        if isinstance(value, str) and value.strip().isdigit():
            return int(value)
    return 1


# -- the model and vLLM's numbers --------------------------------------------------------------


def apply_state_dtypes(config: KvUnitsConfig, extra: VllmArgs) -> KvUnitsConfig:
    """``--mamba-cache-dtype`` (both states) and ``--mamba-ssm-cache-dtype`` (the SSM state,
    winning) on every recurrent layer, as vLLM's ``MambaStateDtypeCalculator`` takes them."""
    conv, ssm = extra.mamba_cache_dtype, extra.mamba_ssm_cache_dtype
    conv = None if conv is None or conv.strip().lower() == "auto" else conv
    ssm = None if ssm is None or ssm.strip().lower() == "auto" else ssm
    if conv is None and ssm is None:
        return config
    from kvunits.contracts import CacheDType, ModelSpec
    from kvunits.contracts.state import StateMixerLayer

    update: dict[str, CacheDType] = {}
    if conv is not None:
        update = {"conv_dtype": CacheDType.parse(conv), "ssm_dtype": CacheDType.parse(conv)}
    if ssm is not None:
        update["ssm_dtype"] = CacheDType.parse(ssm)
    layers = {
        name: layer.model_validate({**layer.model_dump(), **_state_update(layer, update, ssm)})
        if isinstance(layer, StateMixerLayer)
        else layer
        for name, layer in config.model.layers.items()
    }
    model = ModelSpec(name=config.model.name, layers=layers)
    return config.model_copy(update={"model": model})


def _state_update(layer: Any, update: dict[str, Any], ssm: str | None) -> dict[str, Any]:
    """The dtype fields for one state layer: a KDA layer takes them by its own rule."""
    from kvunits.contracts import CacheDType
    from kvunits.contracts.config._hf_kimi import kda_state_dtypes
    from kvunits.contracts.errors import ConfigError, ConfigIssue

    mixer = getattr(layer, "mixer", "gdn")
    if mixer == "gdn":
        return update
    conv = update.get("conv_dtype")
    kda, why = kda_state_dtypes(mixer, conv, None if ssm is None else CacheDType.parse(ssm))
    if why is not None:
        raise ConfigError([ConfigIssue("command line", "--mamba-ssm-cache-dtype", why)])
    return kda


def apply_skip_layers(config: KvUnitsConfig, skipped: Sequence[str]) -> KvUnitsConfig:
    """``--kv-cache-dtype-skip-layers``: the decoder layers named by index (``"0"``), and
    with ``"sliding_window"`` every sliding-window layer, keep the model's dtype while the
    others take the cache dtype (vLLM 0.33 ``Attention.__init__`` and ``MLAAttention``: a
    skipped layer's ``kv_cache_dtype`` is ``"auto"``; only the layer index counts, as
    ``extract_layer_index`` reads it). The engine's ``cache_dtype`` is applied per layer
    here and then cleared, so that it no longer overrides the skipped layers.

    Raises:
        ConfigError: an entry is neither a layer index nor ``sliding_window``, or the model's
            dtype cannot be read from its config.json.
    """
    from kvunits.contracts import (
        ChunkedLocalLayer,
        FullAttentionLayer,
        MLALayer,
        ModelSpec,
        SlidingWindowLayer,
    )
    from kvunits.contracts.config._hf_fields import Reader
    from kvunits.contracts.config._hf_layers import resolve_dtypes
    from kvunits.contracts.errors import ConfigError, ConfigIssue

    bad = [s for s in skipped if not s.isdigit() and s != "sliding_window"]
    raw: object = None
    try:
        raw = json.loads(Path(config.source).read_text(encoding="utf-8")[: 1 << 20])
    except (OSError, ValueError):
        raw = None
    dtypes = None
    if isinstance(raw, dict):
        text = raw.get("text_config")
        kind = (text if isinstance(text, dict) else raw).get("model_type")
        dtypes = resolve_dtypes(Reader(config.source), raw, str(kind))
    if bad or dtypes is None:
        why = (
            f"{bad[0][:40]!r} is neither a layer index nor sliding_window"
            if bad
            else "the model's dtype is read from a Hugging Face config.json, which this is not"
        )
        raise ConfigError([ConfigIssue("command line", "--kv-cache-dtype-skip-layers", why)])
    indices = {int(s) for s in skipped if s.isdigit()}
    attention = (FullAttentionLayer, SlidingWindowLayer, ChunkedLocalLayer, MLALayer)
    engine_dtype = config.engine.cache_dtype
    layers = {}
    for name, layer in config.model.layers.items():
        parts = name.split(".")
        if isinstance(layer, attention) and parts[0] == "text" and len(parts) == 2:
            skip = int(parts[1]) in indices or (
                "sliding_window" in skipped and isinstance(layer, SlidingWindowLayer)
            )
            dtype = dtypes.model if skip else (engine_dtype or layer.dtype)
            layer = layer.model_copy(update={"dtype": dtype})
        layers[name] = layer
    model = ModelSpec(name=config.model.name, layers=layers)
    engine = config.engine.model_copy(update={"cache_dtype": None})
    sources = {
        **config.engine_sources,
        "cache_dtype": "per layer: --kv-cache-dtype-skip-layers " + " ".join(skipped),
    }
    return config.model_copy(update={"model": model, "engine": engine, "engine_sources": sources})


def vllm_numbers(config: KvUnitsConfig, extra: VllmArgs) -> VllmPlan | str:
    """vLLM's plan of the config's model and engine, or why it is not given."""
    from kvunits.contracts import KvUnitsError
    from kvunits.runtime.like_vllm import VLLM_GPUS, plan_like_vllm

    try:
        return plan_like_vllm(
            config.model,
            config.engine,
            auto_fit=extra.auto_fit,
            num_gpu_blocks_override=extra.num_gpu_blocks_override,
            enable_prefix_caching=extra.enable_prefix_caching,
            gpu=VLLM_GPUS.get(extra.gpu or ""),
        )
    except KvUnitsError as err:
        return str(err)


def vllm_lines(config: KvUnitsConfig, extra: VllmArgs, numbers: VllmPlan | str) -> list[str]:
    """The plan's vLLM section, for people: the settings, vLLM's line, the notes."""
    from kvunits.contracts import MLALayer, Tokens
    from kvunits.contracts.deploy import RankBlocks

    engine = config.engine
    how = f"--like-vllm {extra.gpu}" if extra.gpu else "these settings"
    head = (
        f"vllm serve 0.33 with {how} (block size {engine.block_size_slots}, "
        f"{engine.max_num_batched_tokens} per step, async scheduling "
        f"{'on' if engine.async_scheduling else 'off'}, one pool, a null block):"
    )
    lines = [head]
    if isinstance(numbers, str):
        lines.append(f"  not computed: {numbers}")
    else:
        lines.append(f"  {numbers.headline()}")
        if numbers.auto_fit:
            lines.append(f"  max_model_len auto-fitted to {numbers.max_model_len}")
        grown = {g.block_size for g in numbers.groups if g.kind != "mamba"}
        if grown and grown != {Tokens(engine.block_size_slots)}:
            ordered = sorted(grown, key=lambda b: b.numerical_value_in(Tokens))
            sizes = ", ".join(str(b) for b in ordered)
            lines.append(
                f"  attention block size {sizes}: vLLM grows it until an attention page holds "
                "a recurrent state, and pads the state pages to it"
                if any(g.kind == "mamba" for g in numbers.groups)
                else f"  block size {sizes} after vLLM unified the groups' pages"
            )
        checkpointed = RankBlocks(3)  # 2 + num_prefill_checkpoint_blocks (MambaSpec)
        if any(g.kind == "mamba" and g.blocks_per_request == checkpointed for g in numbers.groups):
            lines.append(
                "  a gated-delta-net state holds 3 pages a request: 2 and a prefill checkpoint "
                "(this GPU's FlashInfer GDN prefill; blocks on its 64-token grid)"
            )
    mla = any(isinstance(layer, MLALayer) for layer in config.model.layers.values())
    # Beside recurrent states vLLM aligns MLA blocks to 128 tokens whatever the backend's
    # kernel block (_align_hybrid_block_size), so the backend's choice changes nothing there.
    hybrid = not isinstance(numbers, str) and any(g.kind == "mamba" for g in numbers.groups)
    if mla and not hybrid and config.engine_sources.get("block_size_slots") == "default":
        lines.append(
            "  note: vLLM's MLA backend chooses the block size (FlashMLA: 64 on H100 and H200); "
            "kvunits planned 16: pass --block-size to match the backend vLLM picks"
        )
    if extra.max_num_seqs is not None:
        lines.append(f"  vLLM runs at most {extra.max_num_seqs} requests at once (--max-num-seqs)")
    lines.extend(f"  note: {note}" for note in extra.notes)
    return lines


def vllm_to_dict(numbers: VllmPlan | str, notes: Sequence[str] = ()) -> dict[str, Any]:
    """The vLLM section of ``--format json`` (with the notes the text form prints, if any)."""
    from ._render import quantity

    said = {"notes": list(notes)} if notes else {}
    if isinstance(numbers, str):
        return {"refused": numbers, **said}
    return {
        **said,
        "kv_cache_size": quantity(numbers.kv_cache_size),
        "max_concurrency": numbers.max_concurrency,
        "max_model_len": quantity(numbers.max_model_len),
        "num_blocks": quantity(numbers.num_blocks),
        "bytes_per_block": quantity(numbers.bytes_per_block),
        "auto_fit": numbers.auto_fit,
        "headline": numbers.headline(),
        "groups": [
            {
                "kind": g.kind,
                "layers": len(g.layer_names),
                "block_size": quantity(g.block_size),
                "page_size": quantity(g.page_size),
                "blocks_per_request": quantity(g.blocks_per_request),
            }
            for g in numbers.groups
        ],
    }


def preset_pool_layout(config: KvUnitsConfig, extra: VllmArgs) -> KvUnitsConfig:
    """``--like-vllm``'s one shared pool for kvunits' own plan, or a pool per group where the
    model's pages cannot share one pool in kvunits (a recurrent state beside attention: vLLM
    pads the state's page to a grown attention page, `kvunits.runtime.like_vllm` plans that;
    kvunits' own pools do not pad). Only where the preset chose the layout: a layout the user
    gave is kept, and its error reported."""
    if not extra.preset_shared_pool or config.engine.kv_cache_layout != "shared":
        return config
    from kvunits.contracts import SpecError
    from kvunits.runtime.shared_pool import shared_layout

    try:
        shared_layout(config.model, config.engine)
    except SpecError:
        engine = config.engine.model_copy(update={"kv_cache_layout": "per_group"})
        sources = {
            **config.engine_sources,
            "kv_cache_layout": "flag --like-vllm (a pool per group: no shared pool for this model)",
        }
        extra.notes.append(
            "kvunits' own plan above uses a pool per group: its one shared pool would need "
            "pages of one size, which vLLM gets by padding a state's page and kvunits does not "
            "(the refusal is in the plan); vLLM's line plans vLLM's own hybrid pool"
        )
        return config.model_copy(update={"engine": engine, "engine_sources": sources})
    return config


def fit_auto_length(config: KvUnitsConfig, extra: VllmArgs) -> KvUnitsConfig:
    """``--max-model-len auto``: the model's length lowered to the longest that fits, by
    vLLM's rule (its auto-fit, the null block held back) where vLLM's plan is modelled, else
    by kvunits' own (`kvunits.runtime.longest_max_model_len`)."""
    if not extra.auto_fit:
        return config
    from kvunits.contracts import KvUnitsError, Tokens
    from kvunits.runtime import longest_max_model_len
    from kvunits.runtime.like_vllm import VLLM_GPUS, plan_like_vllm

    try:
        fitted = plan_like_vllm(
            config.model,
            config.engine,
            auto_fit=True,
            enable_prefix_caching=extra.enable_prefix_caching,
            gpu=VLLM_GPUS.get(extra.gpu or ""),
        ).max_model_len
        how = "vLLM's auto-fit"
    except KvUnitsError:
        fitted = longest_max_model_len(config.model, config.engine)
        how = "kvunits fit"
    if not fitted.numerical_value_in(Tokens):
        return config  # nothing fits: the plan says so with its own numbers
    engine = config.engine.model_copy(update={"max_model_len": fitted})
    sources = {**config.engine_sources, "max_model_len": f"flag --max-model-len auto ({how})"}
    return config.model_copy(update={"engine": engine, "engine_sources": sources})


def activations_from_config(path: str | None, flags: dict[str, object], extra: VllmArgs) -> None:
    """``--activation-memory estimate``: kvunits' estimate of what vLLM's profiling keeps
    (`kvunits.contracts.config._activations`), from the model's ``config.json``, said to be
    an estimate in the plan. Anything else given is left as it is."""
    given = flags.get("activation_memory")
    if not isinstance(given, str) or given.strip().lower() != "estimate":
        return
    from pathlib import Path

    from kvunits.contracts.config._activations import estimate_activation_memory
    from kvunits.contracts.config._hf_cache import locate_config
    from kvunits.contracts.deploy import RankBytes
    from kvunits.contracts.errors import ConfigError, ConfigIssue, KvUnitsError
    from kvunits.runtime.like_vllm import VLLM_GPUS

    raw: object = None
    if path is not None:
        try:
            file, _ = locate_config(path, extra.revision)
            raw = json.loads(Path(file).read_text(encoding="utf-8")[: 1 << 20])
        except (KvUnitsError, OSError, ValueError):
            raw = None
    batched = human_readable_int(str(flags.get("max_num_batched_tokens") or "2048").split()[0])
    gpu = VLLM_GPUS.get((extra.gpu or "").strip().lower())
    # vLLM's default max_num_seqs (EngineArgs.get_batch_defaults): 1024 from 70 GiB, else 256.
    seqs = extra.max_num_seqs or (
        1024 if gpu is not None and gpu.memory.numerical_value_in(RankBytes) >= 70 << 30 else 256
    )
    found = None
    if isinstance(raw, dict) and batched:
        found = estimate_activation_memory(
            raw,
            batched_tokens=batched,
            max_num_seqs=seqs,
            tp=_int(flags.get("tensor_parallel_size")),
        )
    if found is None:
        raise ConfigError(
            [
                ConfigIssue(
                    "command line",
                    "--activation-memory",
                    "estimate needs the model's config.json with hidden_size, "
                    "num_attention_heads and vocab_size; give the memory instead, e.g. "
                    '"4 GiB" (what vLLM logs as PyTorch activation peak plus non-torch memory)',
                )
            ]
        )
    flags["activation_memory"] = f"{found.per_rank.numerical_value_in(RankBytes)} byte"
    extra.notes.append(found.describe())


def weights_from_directory(path: str | None, flags: dict[str, object], extra: VllmArgs) -> None:
    """With ``gpu_memory`` and no ``weights_memory``, take the weights from the model
    directory's safetensors sizes (`kvunits.contracts.config._weights`), per rank; the
    flag's source says it is that rule's estimate."""
    if path is None or flags.get("gpu_memory") is None or flags.get("weights_memory"):
        return
    if "KVUNITS_WEIGHTS_MEMORY" in os.environ:
        return
    from pathlib import Path

    from kvunits.contracts.config._hf_cache import locate_config
    from kvunits.contracts.config._weights import weights_memory
    from kvunits.contracts.deploy import Parallelism, RankBytes
    from kvunits.contracts.errors import KvUnitsError

    try:
        file, _ = locate_config(path, extra.revision)
        raw = json.loads(Path(file).read_text(encoding="utf-8")[: 1 << 20])
    except (KvUnitsError, OSError, ValueError):
        return
    if not isinstance(raw, dict):
        return
    text = raw.get("text_config") if isinstance(raw.get("text_config"), dict) else raw
    layers = text.get("num_hidden_layers") if isinstance(text, dict) else None
    if type(layers) is not int or layers < 1:
        return
    parallelism = Parallelism(
        tensor_parallel_size=_int(flags.get("tensor_parallel_size")),
        pipeline_parallel_size=_int(flags.get("pipeline_parallel_size")),
    )
    found = weights_memory(Path(file).parent, layers, parallelism)
    if found is not None:
        flags["weights_memory"] = f"{found.per_rank.numerical_value_in(RankBytes)} byte"
        extra.notes.append(
            f"weights_memory {found.per_rank} from the model directory ({found.how})"
        )
