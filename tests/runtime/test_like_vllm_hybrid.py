"""`plan_like_vllm` on recurrent-state hybrids and odd pipeline splits, without vLLM.

Golden numbers: vLLM 0.33's ``Platform._align_hybrid_block_size`` (vllm/platforms/
interface.py) run on the same configs by tests/vllm_oracle/oracle.py (``_Hybrid``), written out
here with their arithmetic; tests/vllm_oracle/test_like_vllm.py compares every headline number
with vLLM's own ``get_kv_cache_configs`` whenever .venv-vllm exists.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kvunits.contracts import SpecError, Tokens
from kvunits.contracts.config import load_config
from kvunits.contracts.deploy import RankBlocks, RankBytes
from kvunits.runtime import plan_like_vllm
from kvunits.runtime.like_vllm import VllmPlan

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "hf"


def _plan(name: str, *, prefix_caching: bool = True, **flags: str) -> VllmPlan:
    config = load_config(
        EXAMPLES / name / "config.json", flags={"memory_budget": "20 GiB", **flags}
    )
    return plan_like_vllm(config.model, config.engine, enable_prefix_caching=prefix_caching)


def test_nemotron_h_attention_blocks_grow_to_hold_a_mamba_state() -> None:
    # Nemotron-H 56B at TP 8: one KV head of 128 per rank, bf16 K + V: 512 byte a token.
    # A Mamba-2 state per rank: conv (3, 2560) bf16 = 15,360 + SSM (32, 64, 256) float32 =
    # 2,097,152 -> 2,112,512 byte. Block: 16 × cdiv(2,112,512, 16 × 512) = 16 × 258 = 4128
    # tokens; its page 4128 × 512 = 2,113,536 byte, to which each state page is padded.
    plan = _plan("nemotron-h-56b-base-8k", tensor_parallel_size="8")
    kinds = {g.kind: g for g in plan.groups}
    assert kinds["full_attention"].block_size == Tokens(4128)
    assert {g.page_size for g in plan.groups} == {RankBytes(2113536)}
    # With prefix caching (vLLM's default, Mamba "align" mode) a state holds 2 pages.
    assert kinds["mamba"].blocks_per_request == RankBlocks(2)
    assert kinds["mamba"].block_size == Tokens(4128)


def test_without_prefix_caching_a_state_holds_one_page_in_blocks_of_max_model_len() -> None:
    plan = _plan("nemotron-h-56b-base-8k", prefix_caching=False, tensor_parallel_size="8")
    mamba = [g for g in plan.groups if g.kind == "mamba"]
    assert {g.blocks_per_request for g in mamba} == {RankBlocks(1)}
    assert {g.block_size for g in mamba} == {Tokens(8192)}  # the model's max_model_len


def test_gated_delta_nets_with_prefix_caching_need_the_gpu() -> None:
    with pytest.raises(SpecError, match="gated delta net and prefix caching is on"):
        _plan("qwen3.5-35b-a3b")
    assert _plan("qwen3.5-35b-a3b", prefix_caching=False).num_blocks


@pytest.mark.parametrize(("gpu", "block", "pages"), [("h100", 1088, 3), ("a100-80gb", 1056, 2)])
def test_gated_delta_net_checkpoints_by_gpu(gpu: str, block: int, pages: int) -> None:
    # Qwen3.5-35B-A3B's QwenGatedDeltaNetAttention state: conv (3, 2·16·128 + 32·128) bf16 =
    # 49,152 + recurrent (32, 128, 128) float32 = 2,097,152 -> 2,146,304 byte (vLLM's
    # mamba_ssm_cache_dtype for Qwen3.5, as kvunits reads it); attention 2 KV
    # heads of 256, bf16 K + V: 2,048 byte a token. On an H100 (compute capability 9.0) the
    # GDN prefill is FlashInfer's (qwen_gdn_linear_attn.py _resolve_gdn_prefill_backend): the
    # kernel block is lcm(16, 64) (FLASHINFER_GDN_CHECKPOINT_ALIGNMENT, in
    # Platform._align_hybrid_block_size), 64 × cdiv(2,146,304, 64 × 2,048) = 1,088 tokens, and
    # a request's state holds 2 + 1 checkpoint page (MambaSpec.max_memory_usage_bytes). On
    # an A100 (8.0, Triton) 16 × cdiv(2,146,304, 16 × 2,048) = 1,056 tokens and 2 pages.
    from kvunits.runtime.like_vllm import VLLM_GPUS

    config = load_config(
        EXAMPLES / "qwen3.5-35b-a3b" / "config.json", flags={"memory_budget": "20 GiB"}
    )
    plan = plan_like_vllm(config.model, config.engine, gpu=VLLM_GPUS[gpu])
    states = [g for g in plan.groups if g.kind == "mamba"]
    assert {g.block_size for g in plan.groups} == {Tokens(block)}
    assert {g.page_size for g in plan.groups} == {RankBytes(block * 2048)}
    assert states and {g.blocks_per_request for g in states} == {RankBlocks(pages)}


def test_more_pipeline_stages_than_layers_are_refused() -> None:
    # vLLM 0.33 fails at start-up on it (get_kv_cache_configs: ZeroDivisionError).
    with pytest.raises(SpecError, match="pipeline_parallel_size 33 leaves stage 32 with no layer"):
        _plan("llama-3.1-8b", pipeline_parallel_size="33")


def _skipped(name: str, skipped: list[str]) -> VllmPlan:
    from kvunits._vllm import apply_skip_layers

    flags = {"memory_budget": "20 GiB", "cache_dtype": "fp8"}
    config = apply_skip_layers(load_config(EXAMPLES / name / "config.json", flags=flags), skipped)
    return plan_like_vllm(config.model, config.engine)


def test_layers_kept_unquantised_grow_the_block_to_cover_their_page() -> None:
    # Llama 3.1 8B, fp8 cache, layers 0 and 31 kept in bf16: a token is 8 × 256 × 1 = 2048
    # byte in fp8, 4096 in bf16; the block grows to 16 × cdiv(16 × 4096, 16 × 2048) = 32
    # tokens (vLLM's _align_heterogeneous_kv_block_size), one group of both dtypes.
    plan = _skipped("llama-3.1-8b", ["0", "31"])
    (group,) = plan.groups
    assert group.block_size == Tokens(32)
    assert plan.bytes_per_block == RankBytes(30 * 32 * 2048 + 2 * 32 * 4096)


def test_unquantised_full_layers_beside_quantised_windows_fail_as_vllm_fails() -> None:
    # Gemma 3 1B, fp8, full-attention layers 5 and 11 in bf16: the sliding layers' pages are
    # padded to the shared 32-token fp8 page, then must double to unify with the bf16 pages;
    # vLLM 0.33 asserts (AttentionSpec.page_size_bytes), kvunits refuses with the reason.
    with pytest.raises(SpecError, match=r"vLLM 0\.33 fails at start-up here"):
        _skipped("gemma-3-1b-it", ["5", "11"])


def test_a_skip_entry_that_is_no_layer_is_refused() -> None:
    from kvunits._vllm import apply_skip_layers
    from kvunits.contracts.config import ConfigError

    config = load_config(
        EXAMPLES / "llama-3.1-8b" / "config.json", flags={"memory_budget": "20 GiB"}
    )
    with pytest.raises(
        ConfigError, match="'attention' is neither a layer index nor sliding_window"
    ):
        apply_skip_layers(config, ["attention"])
