"""vLLM 0.33's own KV cache planning, run on a config: the oracle of `plan_like_vllm`.

Run with the interpreter of ``.venv-vllm`` (benchmarks/vllm-nodeps.txt), never kvunits' own:
it reads cases as JSON on stdin and writes, per case, what vLLM computes. Each case names a
config and engine settings; kvunits loads the model (its layers), and this script builds
vLLM's own spec objects from the layers, as each vLLM model's ``Attention.get_kv_cache_spec``
builds them, then calls vLLM's ``get_global_kv_cache_groups``, ``get_kv_cache_configs``,
``generate_scheduler_kv_cache_config`` and ``get_kv_cache_capacity``
(``vllm/v1/core/kv_cache_planning.py``, ``kv_cache_utils.py``) on a config object whose
derived properties (``max_concurrent_batches``, ``max_in_flight_tokens``) are vLLM's own.

Input: ``[{"config": PATH, "flags": {...}, "auto_fit": bool, "override": int | null}]``.
Output: ``[{"num_blocks", "max_concurrency", "kv_cache_size", "max_model_len",
"groups": [[kind, block_size, page_size, n_layers]]} | {"error": str}]``.
"""

from __future__ import annotations

import json
import os
import sys
from fractions import Fraction
from types import SimpleNamespace
from typing import Any

os.environ.setdefault("VLLM_USE_V2_MODEL_RUNNER", "1")  # vLLM 0.33's default runner on CUDA


def _vllm_specs(
    model: Any,
    engine: Any,
    layer_names: list[str],
    hybrid: _Hybrid | None = None,
    skip: _Skip | None = None,
) -> dict[str, Any]:
    import torch
    from vllm.v1.kv_cache_interface import (
        ChunkedLocalAttentionSpec,
        CrossAttentionSpec,
        FullAttentionSpec,
        MambaSpec,
        SlidingWindowSpec,
    )

    from kvunits.contracts import (
        ChunkedLocalLayer,
        CrossAttentionLayer,
        Elements,
        EncoderOnlyLayer,
        FullAttentionLayer,
        IndexerLayer,
        KVSharedLayer,
        MLALayer,
        SlidingWindowLayer,
    )
    from kvunits.contracts.deploy import KVHeads
    from kvunits.contracts.state import StateMixerLayer

    dtypes = {
        "bfloat16": torch.bfloat16,
        "float16": torch.float16,
        "float32": torch.float32,
        "fp8_e4m3": torch.float8_e4m3fn,
        "fp8_e5m2": torch.float8_e5m2,
    }
    tp = engine.tensor_parallel_size
    bs = engine.block_size_slots if hybrid is None else hybrid.block_size
    specs: dict[str, Any] = {}
    for name in layer_names:
        layer = model.layers[name]
        if isinstance(layer, (EncoderOnlyLayer, KVSharedLayer)):
            continue
        if isinstance(layer, StateMixerLayer):
            # The state's shapes and dtypes from vLLM's own model class, not kvunits' layer.
            assert hybrid is not None
            if name in hybrid.layers:  # a GDN layer's own get_kv_cache_spec (checkpoints)
                specs[name] = hybrid.layers[name].get_kv_cache_spec(hybrid.config)
                continue
            specs[name] = MambaSpec(
                shapes=hybrid.shapes,
                dtypes=hybrid.dtypes,
                block_size=hybrid.mamba_block_size,
                page_size_padded=hybrid.page_size_padded,
                mamba_cache_mode=hybrid.mamba_cache_mode,
            )
            continue
        dtype = dtypes[str(engine.cache_dtype or layer.dtype)]
        if isinstance(layer, MLALayer):
            head = (layer.kv_lora_rank + layer.qk_rope_head_dim).numerical_value_in(Elements)
            specs[name] = _mla_spec(layer.sparse, head, str(engine.cache_dtype or layer.dtype), bs)
            continue
        if isinstance(layer, IndexerLayer):
            specs[name] = _indexer_spec(layer.head_size.numerical_value_in(Elements), bs)
            continue
        # vLLM's ModelConfig.get_num_kv_heads: max(1, total // tp).
        common: dict[str, Any] = {
            "block_size": bs,
            "num_kv_heads": max(1, layer.kv_heads.numerical_value_in(KVHeads) // tp),
            "head_size": layer.head_size_k.numerical_value_in(Elements),
            "head_size_v": layer.head_size_v_or_k.numerical_value_in(Elements),
            "dtype": dtype,
        }
        if skip is not None and isinstance(layer, (SlidingWindowLayer, FullAttentionLayer)):
            window = layer.sliding_window._n if isinstance(layer, SlidingWindowLayer) else None
            index = int(name.split(".")[1])
            specs[name] = skip.spec(
                index, common["num_kv_heads"], common["head_size"], common["head_size_v"], window
            )
            continue
        pool = None
        if isinstance(layer, CrossAttentionLayer):
            specs[name] = CrossAttentionSpec(**common)
            continue
        if layer.pool is not None:
            pool = layer.pool.tokens_per_block
            common["tokens_per_state"] = Fraction(1, pool)
        if isinstance(layer, SlidingWindowLayer):
            window = layer.sliding_window._n  # the layer's own unit (encoder_token if pooled)
            if pool:
                window = -(-window // pool) + 1  # whisper_causal.py get_kv_cache_spec
            specs[name] = SlidingWindowSpec(sliding_window=window, **common)
        elif isinstance(layer, ChunkedLocalLayer):
            chunk = layer.chunk._n
            specs[name] = ChunkedLocalAttentionSpec(attention_chunk_size=chunk, **common)
        else:
            specs[name] = FullAttentionSpec(**common)
    return specs


class _Hybrid:
    """What vLLM 0.33 decides at start-up for a model with recurrent states, by its own code:
    ``HybridAttentionMambaModelConfig`` and the model's ``verify_and_update_config``
    (vllm/model_executor/models/config.py: the Mamba cache mode and dtypes),
    ``Platform._align_hybrid_block_size`` (vllm/platforms/interface.py) with FlashAttention's
    backend class, and the model class's ``get_mamba_state_shape_from_config`` /
    ``get_mamba_state_dtype_from_config``. The model's layers are not built (no GPU); with a
    GPU's compute capability given, each gated-delta-net layer is a stand-in of vLLM's own
    class (`_gdn_stand_ins`) registered where ``_align_hybrid_block_size`` finds it, whose
    ``get_kv_cache_spec`` is vLLM's."""

    def __init__(
        self,
        directory: str,
        engine: Any,
        prefix_caching: bool,
        dtype: str,
        gdn: tuple[list[str], tuple[int, int]] | None = None,
    ) -> None:
        from vllm.config import CacheConfig, ModelConfig, ParallelConfig
        from vllm.model_executor.models import ModelRegistry
        from vllm.model_executor.models.config import (
            MODELS_CONFIG_MAP,
            HybridAttentionMambaModelConfig,
        )
        from vllm.platforms.interface import Platform
        from vllm.v1.attention.backends.flash_attn import FlashAttentionBackend

        model = _MODEL_CONFIGS.get(directory)
        if model is None:
            model = _MODEL_CONFIGS[directory] = ModelConfig(
                model=directory, skip_tokenizer_init=True
            )
        model.max_model_len = engine.max_model_len._value
        # vLLM resolves --kv-cache-dtype auto against the checkpoint before this point
        # (EngineArgs.create_engine_config: resolve_kv_cache_dtype_string).
        cache = CacheConfig(
            block_size=engine.block_size_slots, cache_dtype=_VLLM_CACHE_DTYPE.get(dtype, "auto")
        )
        cache.enable_prefix_caching = prefix_caching
        config = SimpleNamespace(
            model_config=model,
            cache_config=cache,
            parallel_config=ParallelConfig(tensor_parallel_size=engine.tensor_parallel_size),
            compilation_config=SimpleNamespace(static_forward_context={}),
            speculative_config=None,
            num_speculative_tokens=0,
            scheduler_config=SimpleNamespace(
                enable_chunked_prefill=True,
                max_num_batched_tokens=engine.max_num_batched_tokens._value,
            ),
            additional_config={},
        )
        # VllmConfig.with_hf_config: a wrapper's state hooks (KimiK3ForConditionalGeneration)
        # ask for the same config around its text config.
        config.with_hf_config = lambda hf_config: _with_hf_config(config, hf_config)
        # VllmConfig.try_verify_and_update_config's order: the architecture's hook, then the
        # hybrid one (attention-free models such as Mamba get only their own).
        specific = MODELS_CONFIG_MAP.get(model.architecture)
        if specific is not None:
            specific.verify_and_update_config(config)
        if model.is_hybrid:
            HybridAttentionMambaModelConfig.verify_and_update_config(config)

        class _FlashAttentionOnly(Platform):  # type: ignore[misc]
            @classmethod
            def _find_non_ssm_backends(cls, vllm_config: Any) -> list[Any]:
                return [FlashAttentionBackend]

        model_cls, _ = ModelRegistry.resolve_model_cls(model.architecture, model_config=model)
        self.shapes = tuple(model_cls.get_mamba_state_shape_from_config(config))
        self.dtypes = tuple(model_cls.get_mamba_state_dtype_from_config(config))
        self.config = config
        self.layers: dict[str, Any] = {}
        if gdn is not None:
            # The layers exist before vLLM aligns the block (load_model, then
            # update_block_size_for_backend: vllm/v1/executor/multiproc_executor.py).
            self.layers = _gdn_stand_ins(config, model_cls, gdn[0], gdn[1], self)
            config.compilation_config.static_forward_context.update(self.layers)
        if model.is_hybrid:  # Platform.check_and_update_config aligns hybrids only
            _FlashAttentionOnly._align_hybrid_block_size(config, FlashAttentionBackend)
        self.block_size: int = cache.block_size
        self.mamba_block_size: int = cache.mamba_block_size
        self.page_size_padded: int | None = cache.mamba_page_size_padded
        self.mamba_cache_mode: str = cache.mamba_cache_mode


def _gdn_stand_ins(
    config: Any, model_cls: Any, names: list[str], capability: tuple[int, int], hybrid: _Hybrid
) -> dict[str, Any]:
    """Each gated-delta-net layer as an instance of the vLLM class its model file builds
    (``QwenGatedDeltaNetAttention`` in qwen3_next.py / qwen3_5.py,
    ``OlmoHybridGatedDeltaNetAttention`` in olmo_hybrid.py), not run through ``__init__``
    (no GPU): it carries what ``__init__`` sets for the checkpoints. The prefill backend is
    vLLM's ``_resolve_gdn_prefill_backend`` on a stand-in CUDA platform of ``capability``
    with vLLM's main CUDA runtime (``envs.VLLM_MAIN_CUDA_VERSION``); the alignment is
    ``QwenGatedDeltaNetAttention.__init__``'s rule (align mode and FlashInfer: 64)."""
    import torch
    import vllm.envs as envs
    from vllm.model_executor.layers.mamba.gdn import qwen_gdn_linear_attn as qwen
    from vllm.model_executor.layers.mamba.gdn.olmo_gdn_linear_attn import (
        OlmoHybridGatedDeltaNetAttention,
    )
    from vllm.models.kimi_k3.nvidia import kda
    from vllm.platforms.interface import DeviceCapability, Platform, PlatformEnum

    module = sys.modules[model_cls.__module__]
    classes = [
        candidate
        for candidate in (
            qwen.QwenGatedDeltaNetAttention,
            OlmoHybridGatedDeltaNetAttention,
            kda.KimiK3DeltaAttention,
        )
        if getattr(module, candidate.__name__, None) is candidate
    ]
    if len(classes) != 1:
        raise RuntimeError(f"{model_cls.__name__}: not one GDN class ({classes})")
    layer_cls: Any = classes[0]

    class _Cuda(Platform):  # type: ignore[misc]
        _enum = PlatformEnum.CUDA

        @classmethod
        def get_device_capability(cls, device_id: int = 0) -> Any:
            return DeviceCapability(*capability)

        @classmethod
        def get_cuda_runtime_major(cls) -> int:
            return int(envs.VLLM_MAIN_CUDA_VERSION.split(".")[0])

    saved, saved_kda = qwen.current_platform, kda.current_platform
    qwen.current_platform = kda.current_platform = _Cuda()
    try:
        _, backend = qwen._resolve_gdn_prefill_backend(config)
        if layer_cls is kda.KimiK3DeltaAttention:  # KimiK3DeltaAttention.__init__'s call
            lac = config.model_config.hf_text_config.linear_attn_config
            backend = kda.resolve_kda_prefill_backend(
                config.additional_config.get("kda_prefill_backend", "auto"),
                lac["head_dim"],
                config.model_config.dtype,
                hybrid.dtypes[1],
                lac.get("gate_lower_bound", None),
            )
    finally:
        qwen.current_platform, kda.current_platform = saved, saved_kda
    layers: dict[str, Any] = {}
    for name in names:
        layer = layer_cls.__new__(layer_cls)
        torch.nn.Module.__init__(layer)
        layer.get_state_shape = lambda: hybrid.shapes
        layer.get_state_dtype = lambda: hybrid.dtypes
        layer.vllm_config = config
        if layer_cls is kda.KimiK3DeltaAttention:
            layer.kda_prefill_backend = backend
        if layer_cls is qwen.QwenGatedDeltaNetAttention:
            layer.gdn_prefill_backend = backend
            layer._checkpoint_alignment = (
                qwen.FLASHINFER_GDN_CHECKPOINT_ALIGNMENT
                if config.cache_config.mamba_cache_mode == "align" and backend == "flashinfer"
                else None
            )
        layers[name] = layer
    return layers


class _Skip:
    """``--kv-cache-dtype-skip-layers`` as vLLM 0.33 applies it, by its own code where it can
    be called without a GPU: ``Platform._align_heterogeneous_kv_block_size`` (the block size
    and the shared page) and ``Attention.get_kv_cache_spec`` on a stand-in for each layer;
    which layers keep the model dtype is ``Attention.__init__``'s rule (a layer index in the
    list, or any sliding-window layer with ``sliding_window``), restated here."""

    def __init__(self, directory: str, engine: Any, skipped: list[str], cache_dtype: str) -> None:
        from vllm.config import CacheConfig, ModelConfig, ParallelConfig
        from vllm.platforms.interface import Platform
        from vllm.v1.attention.backends.flash_attn import FlashAttentionBackend

        model = _MODEL_CONFIGS.get(directory)
        if model is None:
            model = _MODEL_CONFIGS[directory] = ModelConfig(
                model=directory, skip_tokenizer_init=True
            )
        cache = CacheConfig(
            block_size=engine.block_size_slots,
            cache_dtype=cache_dtype,
            kv_cache_dtype_skip_layers=skipped,
        )
        self.config = SimpleNamespace(
            model_config=model,
            cache_config=cache,
            parallel_config=ParallelConfig(tensor_parallel_size=engine.tensor_parallel_size),
        )
        Platform._align_heterogeneous_kv_block_size(self.config, FlashAttentionBackend)
        self.backend = FlashAttentionBackend
        self.skipped = skipped
        self.cache_dtype = cache_dtype

    def spec(self, index: int, heads: int, k: int, v: int, window: int | None) -> Any:
        from vllm.model_executor.layers.attention.attention import Attention
        from vllm.utils.torch_utils import kv_cache_dtype_str_to_dtype
        from vllm.v1.attention.backend import AttentionType

        skip = str(index) in self.skipped or (
            window is not None and "sliding_window" in self.skipped
        )
        dtype = "auto" if skip else self.cache_dtype
        layer = SimpleNamespace(
            attn_type=AttentionType.DECODER,
            kv_cache_dtype=dtype,
            kv_cache_torch_dtype=kv_cache_dtype_str_to_dtype(dtype, self.config.model_config),
            sliding_window=window,
            attn_backend=self.backend,
            num_kv_heads=heads,
            head_size=k,
            head_size_v=v,
        )
        return Attention.get_kv_cache_spec(layer, self.config)


_MODEL_CONFIGS: dict[str, Any] = {}

#: kvunits' cache dtype names as vLLM's --kv-cache-dtype spells them.
_VLLM_CACHE_DTYPE = {"fp8_e4m3": "fp8_e4m3", "fp8_e5m2": "fp8_e5m2"}


def _with_hf_config(config: Any, hf_config: Any) -> Any:
    """``VllmConfig.with_hf_config`` on the oracle's stand-in: a copy of the model config
    holding ``hf_config``."""
    import copy

    model = copy.copy(config.model_config)
    model.hf_config = hf_config
    return SimpleNamespace(**{**vars(config), "model_config": model})


def _mla_spec(sparse: bool, head_size: int, dtype: str, block_size: int) -> Any:
    """vLLM's own ``MLAAttention.get_kv_cache_spec`` (mla_attention.py), on a stand-in for
    the layer: a sparse layer's quantised cache dtype first goes through
    ``_canonicalize_sparse_mla_kv_cache_dtype`` for FlashMLA's sparse backend (fp8 is stored
    as ``fp8_ds_mla``)."""
    import torch
    from vllm.model_executor.layers.attention.mla_attention import (
        MLAAttention,
        _canonicalize_sparse_mla_kv_cache_dtype,
    )

    kv_cache_dtype = _VLLM_CACHE_DTYPE.get(dtype, "auto")
    if sparse:
        backend = SimpleNamespace(get_name=lambda: "FLASHMLA_SPARSE")
        kv_cache_dtype = _canonicalize_sparse_mla_kv_cache_dtype(backend, kv_cache_dtype)
    model_dtype = {"float16": torch.float16, "float32": torch.float32}.get(dtype, torch.bfloat16)
    layer = SimpleNamespace(
        kv_cache_dtype=kv_cache_dtype,
        head_size=head_size,
        sliding_window=None,
        topk_buffer_width=None,
        indexer=None,
        non_causal_multi_token_decode=False,
    )
    config = SimpleNamespace(
        cache_config=SimpleNamespace(block_size=block_size),
        model_config=SimpleNamespace(dtype=model_dtype),
    )
    return MLAAttention.get_kv_cache_spec(layer, config)


def _indexer_spec(head_size: int, block_size: int) -> Any:
    """vLLM's own ``DeepseekV32IndexerCache.get_kv_cache_spec`` (deepseek_v2.py), on a
    stand-in built as ``Indexer.__init__`` builds it (vllm/models/deepseek_v32/attention.py:
    ``head_dim + head_dim // quant_block_size * 4`` uint8, ``quant_block_size = 128``)."""
    import torch
    from vllm.model_executor.models.deepseek_v2 import DeepseekV32IndexerCache

    cache = SimpleNamespace(
        cache_config=SimpleNamespace(block_size=block_size),
        head_dim=head_size + head_size // 128 * 4,
        dtype=torch.uint8,
    )
    return DeepseekV32IndexerCache.get_kv_cache_spec(cache, None)


class _Config:
    """What the planning functions read of a VllmConfig; its derived properties are vLLM's."""

    def __init__(self, engine: Any, max_model_len: int, auto_fit: bool, override: Any) -> None:
        from vllm.config import CacheConfig

        self.cache_config = CacheConfig(block_size=engine.block_size_slots)
        self.cache_config.num_gpu_blocks_override = override
        self.cache_config.kv_cache_layout = "LBNHC"  # FlashAttention: vLLM's default preference
        self.scheduler_config = SimpleNamespace(
            max_num_batched_tokens=engine.max_num_batched_tokens._value,
            # SchedulerConfig.__post_init__: the encoder budget is the batched-token budget.
            max_num_encoder_input_tokens=engine.max_num_batched_tokens._value,
            async_scheduling=engine.async_scheduling,
            disable_hybrid_kv_cache_manager=False,
        )
        self.parallel_config = SimpleNamespace(
            tensor_parallel_size=engine.tensor_parallel_size,
            pipeline_parallel_size=engine.pipeline_parallel_size,
            decode_context_parallel_size=engine.decode_context_parallel_size,
        )
        self.model_config = SimpleNamespace(
            max_model_len=max_model_len,
            original_max_model_len=-1 if auto_fit else max_model_len,
            supports_kv_cache_grouping=False,
        )
        self.attention_config = SimpleNamespace(hisparse_config=None)
        self.speculative_config = None
        self.diffusion_config = None
        self.watermark_config = None
        self.device_config = SimpleNamespace(device_type="cuda")


def _bind_properties() -> None:
    from vllm.config import VllmConfig

    for name in (
        "max_concurrent_batches",
        "max_in_flight_tokens",
        "num_prefill_lookahead_tokens",
        "use_v2_model_runner",
        "_get_v2_model_runner_unsupported_features",
    ):
        setattr(_Config, name, getattr(VllmConfig, name))


#: Compute capabilities vLLM 0.33's prefill-backend choices tell apart (Ampere, Hopper,
#: Blackwell SM100 and SM12x).
_CAPABILITIES = ((8, 0), (9, 0), (10, 0), (12, 0))


def run_case(case: dict[str, Any]) -> dict[str, Any]:
    from vllm.v1.core.kv_cache_planning import get_global_kv_cache_groups, get_kv_cache_configs
    from vllm.v1.core.kv_cache_utils import (
        generate_scheduler_kv_cache_config,
        get_kv_cache_capacity,
    )
    from vllm.v1.kv_cache_interface import UniformTypeKVCacheSpecs

    from kvunits.contracts import FullAttentionLayer, KvUnitsError, SlidingWindowLayer
    from kvunits.contracts.config import load_config
    from kvunits.contracts.deploy import RankBytes
    from kvunits.runtime.deployment import stage_layers

    try:
        config = load_config(case["config"], flags=case.get("flags") or {})
    except KvUnitsError as err:  # kvunits refuses the config itself: nothing to plan
        return {"skipped": f"not loaded: {str(err)[:200]}"}
    model, engine = config.model, config.engine
    skip = None
    if case.get("skip"):
        # The unquantised layers' dtype is vLLM's own resolution of "auto" (ModelConfig).
        directory = os.path.dirname(case["config"])
        skip = _Skip(directory, engine, case["skip"], str(engine.cache_dtype))
    from kvunits.contracts.state import GatedDeltaNetLayer, StateMixerLayer

    hybrid = None
    mixers = [layer for layer in model.layers.values() if isinstance(layer, StateMixerLayer)]
    prefix_caching = case.get("prefix_caching", True)
    if mixers:
        gdn_names = [
            name
            for name, m in model.layers.items()
            if isinstance(m, GatedDeltaNetLayer)
            and m.mixer in ("gdn", "olmo_gdn", "kda_full_rank_gate")
        ]
        gdn = (gdn_names, tuple(case["capability"])) if case.get("capability") else None
        # Checkpoints that depend on the GPU, none given: Qwen's GDN, Kimi-K3's KDA.
        by_gpu = {m.mixer for m in mixers if isinstance(m, GatedDeltaNetLayer)}
        if prefix_caching and not gdn and by_gpu & {"gdn", "kda_full_rank_gate"}:
            # No GPU named: vLLM's answer where every GPU class gives the same one.
            answers = [run_case({**case, "capability": c}) for c in _CAPABILITIES]
            if all(answer == answers[0] for answer in answers):
                return answers[0]
            return {"skipped": "gated delta net with prefix caching: layer-level checkpoints"}
        directory = case["config"]
        if directory.endswith(".json"):
            directory = os.path.dirname(directory)
        try:
            dtypes = {
                str(engine.cache_dtype or layer.dtype)
                for layer in model.layers.values()
                if isinstance(layer, (FullAttentionLayer, SlidingWindowLayer))
            }
            hybrid = _Hybrid(
                directory, engine, prefix_caching, min(dtypes, default="auto"), gdn
            )
        except Exception as exc:  # vLLM cannot build the model's config here
            return {"skipped": f"no vLLM ModelConfig: {type(exc).__name__}: {str(exc)[:160]}"}
    stages = stage_layers(model, engine.parallelism)
    # One worker per pipeline stage (the TP ranks of a stage hold the same specs).
    specs = [_vllm_specs(model, engine, list(names), hybrid, skip) for names in stages]
    encoder = case.get("max_num_encoder_input_tokens")
    cfg = _Config(
        engine, engine.max_model_len._value, bool(case.get("auto_fit")), case.get("override")
    )
    if skip is not None:
        cfg.cache_config.block_size = skip.config.cache_config.block_size
    if hybrid is not None:
        cfg.cache_config.block_size = hybrid.block_size
        cfg.cache_config.mamba_cache_mode = hybrid.mamba_cache_mode
    if encoder is not None:
        cfg.scheduler_config.max_num_encoder_input_tokens = encoder
    memory = engine.kv_cache_memory.numerical_value_in(RankBytes)
    try:
        groups = get_global_kv_cache_groups(cfg, specs)
        configs = get_kv_cache_configs(cfg, specs, [memory] * len(specs), groups)
    except (ValueError, NotImplementedError, AssertionError, ZeroDivisionError) as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
    scheduler = generate_scheduler_kv_cache_config(configs)
    tokens, concurrency = get_kv_cache_capacity(cfg, scheduler)
    described = []
    for group in groups:  # the whole model's groups (a stage's hold its own layers of each)
        spec = group.kv_cache_spec
        first = (
            next(iter(spec.kv_cache_specs.values()))
            if isinstance(spec, UniformTypeKVCacheSpecs)
            else spec
        )
        described.append(
            [type(first).__name__, first.block_size, first.page_size_bytes, len(group.layer_names)]
        )
    return {
        "num_blocks": scheduler.num_blocks,
        "max_concurrency": concurrency,
        "kv_cache_size": tokens,
        "max_model_len": cfg.model_config.max_model_len,
        "groups": described,
    }


def main() -> None:
    import logging

    logging.disable(logging.WARNING)
    _bind_properties()
    cases = json.load(sys.stdin)
    json.dump([run_case(case) for case in cases], sys.stdout)


if __name__ == "__main__":
    main()
