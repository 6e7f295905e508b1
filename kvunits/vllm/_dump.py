"""What the audit reads, as JSON: vLLM's engine settings, the model's config, every worker's
per-layer specs, each worker's KV memory and, when vLLM has built it, its KV-cache
configuration (groups, blocks).

The plugin writes it from the live objects (`dump_from_vllm`, duck-typed: nothing of vLLM is
imported here); ``kvunits audit`` and `read_dump` read it back without vLLM, so a plan can be
checked in CI without a GPU. The specs keep vLLM's own field names and plain ints (the
adapter, `kvunits.vllm.from_vllm_dict`, attaches the units); the engine's settings are vLLM's
names too, each listed in `ENGINE_UNITS` with the unit it counts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, final

from kvunits.contracts import SpecError, Tokens
from kvunits.contracts.deploy import RankBytes

from ._specs import VllmSpec, from_vllm_dict, spec_to_dict

#: The dump's format name and version (a reader refuses others).
FORMAT: Final = "kvunits.vllm-kv-cache"
VERSION: Final = 1

#: Each engine setting of the dump, with the unit its plain int counts.
ENGINE_UNITS: Final[dict[str, str]] = {
    "block_size": "token/cache_block (vLLM's --block-size, at the KV-cache step)",
    "max_model_len": "token",
    "max_num_batched_tokens": "token",
    "max_in_flight_tokens": "token (max_concurrent_batches × max_num_batched_tokens)",
    "max_concurrent_batches": "batch",
    "num_speculative_tokens": "token",
    "max_num_encoder_input_tokens": "encoder_token",
    "tensor_parallel_size": "rank",
    "pipeline_parallel_size": "stage",
    "decode_context_parallel_size": "rank",
    "available_memory": "byte/rank (one entry per worker)",
}


@final
@dataclass(frozen=True, slots=True)
class VllmEngine:
    """vLLM's engine settings that size the KV cache, typed.

    Attributes:
        vllm_version: the vLLM that wrote them.
        model: the model's name or path.
        block_size: ``cache_config.block_size`` when the KV-cache step ran (tokens per block
            of an ordinary full-attention layer; None when unset).
        max_model_len: the longest request.
        max_num_batched_tokens: positions scheduled per step (every group's).
        max_in_flight: vLLM's ``max_in_flight_tokens``: positions scheduled and not settled.
        max_concurrent_batches: batches in flight (pipeline stages, async scheduling).
        num_speculative_tokens: drafted tokens per step.
        tensor_parallel_size, pipeline_parallel_size, decode_context_parallel_size: ranks.
        dtype: the model's dtype (torch name), what ``cache_dtype = "auto"`` stores.
        cache_dtype: vLLM's ``--kv-cache-dtype`` (``"auto"``, ``"fp8"``, …).
        max_num_encoder_input_tokens: what vLLM sizes a cross-attention cache by.
        disable_hybrid_kv_cache_manager: vLLM's setting (None: not recorded).
        num_gpu_blocks_override: vLLM's setting, when set.
    """

    vllm_version: str
    model: str
    block_size: int | None
    max_model_len: Tokens
    max_num_batched_tokens: Tokens
    max_in_flight: Tokens
    max_concurrent_batches: int
    num_speculative_tokens: int = 0
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    decode_context_parallel_size: int = 1
    dtype: str = "bfloat16"
    cache_dtype: str = "auto"
    max_num_encoder_input_tokens: int | None = None
    disable_hybrid_kv_cache_manager: bool | None = None
    num_gpu_blocks_override: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """The settings as JSON, by vLLM's names (plain ints: `ENGINE_UNITS` gives units)."""
        return {
            "vllm_version": self.vllm_version,
            "model": self.model,
            "block_size": self.block_size,
            "max_model_len": self.max_model_len.numerical_value_in(Tokens),
            "max_num_batched_tokens": self.max_num_batched_tokens.numerical_value_in(Tokens),
            "max_in_flight_tokens": self.max_in_flight.numerical_value_in(Tokens),
            "max_concurrent_batches": self.max_concurrent_batches,
            "num_speculative_tokens": self.num_speculative_tokens,
            "tensor_parallel_size": self.tensor_parallel_size,
            "pipeline_parallel_size": self.pipeline_parallel_size,
            "decode_context_parallel_size": self.decode_context_parallel_size,
            "dtype": self.dtype,
            "cache_dtype": self.cache_dtype,
            "max_num_encoder_input_tokens": self.max_num_encoder_input_tokens,
            "disable_hybrid_kv_cache_manager": self.disable_hybrid_kv_cache_manager,
            "num_gpu_blocks_override": self.num_gpu_blocks_override,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> VllmEngine:
        """Read the settings back (`to_dict`'s form).

        Raises:
            SpecError: a setting missing or not an int where one is needed.
        """

        def count(name: str, default: int | None = None) -> int:
            value = data.get(name, default)
            if type(value) is not int or value < 0:
                raise SpecError(f"engine.{name} must be an int >= 0 ({ENGINE_UNITS[name]})")
            return value

        batches = count("max_concurrent_batches", 1)
        batched = count("max_num_batched_tokens")
        in_flight = data.get("max_in_flight_tokens")
        block = data.get("block_size")
        return cls(
            vllm_version=str(data.get("vllm_version", "unknown")),
            model=str(data.get("model", "model")),
            block_size=block if type(block) is int else None,
            max_model_len=Tokens(count("max_model_len")),
            max_num_batched_tokens=Tokens(batched),
            max_in_flight=Tokens(in_flight if type(in_flight) is int else batches * batched),
            max_concurrent_batches=batches,
            num_speculative_tokens=count("num_speculative_tokens", 0),
            tensor_parallel_size=count("tensor_parallel_size", 1),
            pipeline_parallel_size=count("pipeline_parallel_size", 1),
            decode_context_parallel_size=count("decode_context_parallel_size", 1),
            dtype=str(data.get("dtype", "bfloat16")),
            cache_dtype=str(data.get("cache_dtype", "auto")),
            max_num_encoder_input_tokens=(
                count("max_num_encoder_input_tokens")
                if data.get("max_num_encoder_input_tokens") is not None
                else None
            ),
            disable_hybrid_kv_cache_manager=data.get("disable_hybrid_kv_cache_manager"),
            num_gpu_blocks_override=data.get("num_gpu_blocks_override"),
        )


@final
@dataclass(frozen=True, slots=True)
class VllmGroup:
    """One KV-cache group of vLLM's configuration: its layers and its (merged) spec.

    Attributes:
        layer_names: vLLM's layer names.
        spec: the group's spec (None for a ``UniformTypeKVCacheSpecs``: see ``layer_specs``).
        layer_specs: per layer, when the group keeps one spec per layer.
        block_size: the group's block size, in its spec's slots.
    """

    layer_names: tuple[str, ...]
    spec: VllmSpec | None
    layer_specs: Mapping[str, VllmSpec]
    block_size: int


@final
@dataclass(frozen=True, slots=True)
class VllmKVCacheConfig:
    """One worker's KV-cache configuration: the block ids and the groups that share them."""

    num_blocks: int
    groups: tuple[VllmGroup, ...]


@final
@dataclass(frozen=True, slots=True)
class AuditInputs:
    """Everything the audit compares: vLLM's engine settings, the model's config (a Hugging
    Face ``config.json`` as a mapping), each worker's specs, memory and configuration.

    Attributes:
        engine: the engine settings.
        hf_config: the model's config, as vLLM read it.
        workers: per worker, each layer's spec by vLLM's layer name.
        available_memory: per worker, the KV-cache memory (None: not given).
        kv_cache_configs: per worker, what vLLM built (None: not given).
    """

    engine: VllmEngine
    hf_config: Mapping[str, Any]
    workers: tuple[Mapping[str, VllmSpec], ...]
    available_memory: tuple[RankBytes, ...] | None = None
    kv_cache_configs: tuple[VllmKVCacheConfig, ...] | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)


def read_dump(data: Mapping[str, Any]) -> AuditInputs:
    """Read a dump (`dump_from_vllm`'s JSON, parsed).

    Raises:
        SpecError: another format or version, or a malformed part (named).
    """
    if data.get("format") != FORMAT:
        raise SpecError(f"not a kvunits dump of vLLM's KV-cache specs (format {FORMAT!r})")
    if data.get("version") != VERSION:
        raise SpecError(f"dump version {data.get('version')!r}; this kvunits reads {VERSION}")
    engine = data.get("engine")
    hf = data.get("hf_config")
    workers = data.get("workers")
    if not isinstance(engine, Mapping) or not isinstance(hf, Mapping):
        raise SpecError("a dump needs 'engine' and 'hf_config' mappings")
    if not isinstance(workers, list) or not all(isinstance(w, Mapping) for w in workers):
        raise SpecError("a dump needs 'workers': a list of {layer name: spec}")
    specs = tuple(
        {str(name): _spec(name, spec) for name, spec in worker.items()} for worker in workers
    )
    memory = data.get("available_memory")
    configs = data.get("kv_cache_configs")
    return AuditInputs(
        engine=VllmEngine.from_dict(engine),
        hf_config=dict(hf),
        workers=specs,
        available_memory=(
            tuple(RankBytes(int(m)) for m in memory) if isinstance(memory, list) else None
        ),
        kv_cache_configs=(
            tuple(_config(c) for c in configs) if isinstance(configs, list) else None
        ),
        raw=data,
    )


def load_dump(path: str | Path) -> AuditInputs:
    """Read a dump file (JSON).

    Raises:
        SpecError: the file cannot be read or parsed, or `read_dump` refuses it.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
        data = json.loads(text)
    except (OSError, ValueError) as exc:
        raise SpecError(f"{path}: cannot read a vLLM spec dump: {exc}") from None
    if not isinstance(data, Mapping):
        raise SpecError(f"{path}: a dump is a JSON object")
    try:
        return read_dump(data)
    except SpecError as exc:
        raise SpecError(f"{path}: {exc.message}") from None


def _spec(name: object, data: object) -> VllmSpec:
    if not isinstance(data, Mapping):
        raise SpecError(f"layer {name!r}: a spec is a mapping")
    try:
        return from_vllm_dict(data)
    except SpecError as exc:
        raise SpecError(f"layer {name!r}: {exc.message}") from None


def _config(data: object) -> VllmKVCacheConfig:
    if not isinstance(data, Mapping) or not isinstance(data.get("groups"), list):
        raise SpecError("a KV-cache config is {'num_blocks': N, 'groups': [...]}")
    groups = []
    for group in data["groups"]:
        names = tuple(str(n) for n in group.get("layer_names", ()))
        spec = group.get("spec") or {}
        inner = (spec.get("fields") or {}).get("kv_cache_specs")
        if isinstance(inner, Mapping):
            layer_specs = {str(n): _spec(n, s) for n, s in inner.items()}
            block = int((spec.get("fields") or {}).get("block_size", 0))
            groups.append(VllmGroup(names, None, layer_specs, block))
        else:
            read = _spec(f"group of {names[:1]}", spec)
            groups.append(VllmGroup(names, read, {}, int(read.fields.get("block_size", 0))))
    return VllmKVCacheConfig(int(data.get("num_blocks", 0)), tuple(groups))


# -- writing, from the live objects (duck-typed) ------------------------------------------------


def engine_from_vllm(vllm_config: Any) -> VllmEngine:
    """vLLM's engine settings from a live ``VllmConfig`` (read, never changed)."""
    model = vllm_config.model_config
    cache = vllm_config.cache_config
    scheduler = vllm_config.scheduler_config
    parallel = vllm_config.parallel_config
    try:
        import vllm

        version = str(vllm.__version__)
    except Exception:
        version = "unknown"
    batched = int(scheduler.max_num_batched_tokens)
    batches = int(getattr(vllm_config, "max_concurrent_batches", 1))
    return VllmEngine(
        vllm_version=version,
        model=str(getattr(model, "model", "model")),
        block_size=cache.block_size if isinstance(cache.block_size, int) else None,
        max_model_len=Tokens(int(model.max_model_len)),
        max_num_batched_tokens=Tokens(batched),
        max_in_flight=Tokens(int(getattr(vllm_config, "max_in_flight_tokens", batches * batched))),
        max_concurrent_batches=batches,
        num_speculative_tokens=int(getattr(vllm_config, "num_speculative_tokens", 0) or 0),
        tensor_parallel_size=int(parallel.tensor_parallel_size),
        pipeline_parallel_size=int(parallel.pipeline_parallel_size),
        decode_context_parallel_size=int(getattr(parallel, "decode_context_parallel_size", 1)),
        dtype=str(model.dtype).removeprefix("torch."),
        cache_dtype=str(cache.cache_dtype),
        max_num_encoder_input_tokens=getattr(scheduler, "max_num_encoder_input_tokens", None),
        disable_hybrid_kv_cache_manager=getattr(scheduler, "disable_hybrid_kv_cache_manager", None),
        num_gpu_blocks_override=getattr(cache, "num_gpu_blocks_override", None),
    )


def hf_config_from_vllm(vllm_config: Any) -> dict[str, Any]:
    """The model's config as vLLM read it (``hf_config.to_dict()``), as JSON values."""
    hf = vllm_config.model_config.hf_config
    data = hf.to_dict() if hasattr(hf, "to_dict") else dict(vars(hf))
    parsed: dict[str, Any] = json.loads(json.dumps(data, default=str))
    return parsed


def dump_from_vllm(
    vllm_config: Any,
    kv_cache_specs: Sequence[Mapping[str, Any]],
    available_memory: Sequence[int] | None = None,
    kv_cache_configs: Sequence[Any] | None = None,
) -> dict[str, Any]:
    """The dump of what the engine core's KV-cache step takes and returns (the arguments of
    ``get_kv_cache_configs`` and its result), as JSON values."""
    dump: dict[str, Any] = {
        "format": FORMAT,
        "version": VERSION,
        "units": ENGINE_UNITS,
        "engine": engine_from_vllm(vllm_config).to_dict(),
        "hf_config": hf_config_from_vllm(vllm_config),
        "workers": [
            {str(name): spec_to_dict(spec) for name, spec in worker.items()}
            for worker in kv_cache_specs
        ],
    }
    if available_memory is not None:
        dump["available_memory"] = [int(m) for m in available_memory]
    if kv_cache_configs is not None:
        dump["kv_cache_configs"] = [
            {
                "num_blocks": int(config.num_blocks),
                "groups": [
                    {"layer_names": list(g.layer_names), "spec": spec_to_dict(g.kv_cache_spec)}
                    for g in config.kv_cache_groups
                ],
            }
            for config in kv_cache_configs
        ]
    return dump
