"""vLLM's own per-layer KV-cache specs for a model directory, built by vLLM's model code.

As the GPU model runner does (``GPUModelRunner.get_kv_cache_spec``, vllm/v1/worker/
gpu_model_runner.py): instantiate the model (here on the ``meta`` device: no weights, no
memory), then ask every attention layer of the static forward context for its spec, skipping
layers that share another's cache. vLLM's CPU platform (``VLLM_TARGET_DEVICE=cpu``) picks the
attention backends; one process, tensor parallel size 1 (gloo).

Needs vLLM 0.33 (``.venv-vllm``); imported by its tests only.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")


def engine_config(model_dir: str, **engine_args: Any) -> Any:
    """The ``VllmConfig`` ``vllm serve MODEL_DIR`` builds (``EngineArgs.create_engine_config``,
    vllm/engine/arg_utils.py: it also sets ``CacheConfig.sliding_window`` for a model whose
    layers all slide), on the CPU platform; ``engine_args`` are ``EngineArgs`` fields.

    As a GPU builds it, whatever this host's CPU: vLLM's CPU platform
    (``CpuPlatform.check_and_update_config``, vllm/platforms/cpu.py) resets the Mamba SSM
    state's dtype to float32 for its accelerated CPU kernels where the host has AVX512-BF16
    (Jamba's state, in the model dtype on a GPU, then recorded twice its size). The check is
    read as false while the config is made, so the dumps do not depend on the host."""
    from unittest import mock

    from vllm.engine.arg_utils import EngineArgs

    args: dict[str, Any] = {
        "model": model_dir,
        "skip_tokenizer_init": True,
        "dtype": "bfloat16",
        "block_size": 16,
        **engine_args,
    }
    with mock.patch("torch.cpu._is_avx512_bf16_supported", return_value=False):
        return EngineArgs(**args).create_engine_config()


_DISTRIBUTED: list[bool] = []


def built_specs(vllm_config: Any) -> dict[str, Any]:
    """Every layer's spec as vLLM's model code states it (the model on the meta device)."""
    import torch
    from vllm.config import get_layers_from_vllm_config, set_current_vllm_config
    from vllm.distributed import (
        destroy_model_parallel,
        init_distributed_environment,
        initialize_model_parallel,
    )
    from vllm.model_executor.layers.attention_layer_base import AttentionLayerBase
    from vllm.model_executor.model_loader.utils import initialize_model

    with set_current_vllm_config(vllm_config):
        if not _DISTRIBUTED:
            init_distributed_environment(
                world_size=1,
                rank=0,
                local_rank=0,
                distributed_init_method=f"file://{tempfile.mktemp(prefix='kvunits-gloo-')}",
                backend="gloo",
            )
            _DISTRIBUTED.append(True)
        else:
            destroy_model_parallel()
        # Per model: the expert-parallel group exists only for a MoE model's config.
        initialize_model_parallel(1, 1)
        with torch.device("meta"):
            initialize_model(vllm_config=vllm_config)
        specs: dict[str, Any] = {}
        layers = get_layers_from_vllm_config(vllm_config, AttentionLayerBase)
        for name, layer in layers.items():
            if getattr(layer, "kv_sharing_target_layer_name", None):
                continue
            spec = layer.get_kv_cache_spec(vllm_config)
            if spec is not None:
                specs[name] = spec
    return specs
