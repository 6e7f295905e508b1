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


def test_gated_delta_nets_with_prefix_caching_are_refused_with_the_reason() -> None:
    with pytest.raises(SpecError, match="gated delta net and prefix caching is on"):
        _plan("qwen3.5-35b-a3b")
    assert _plan("qwen3.5-35b-a3b", prefix_caching=False).num_blocks


def test_more_pipeline_stages_than_layers_are_refused() -> None:
    # vLLM 0.33 fails at start-up on it (get_kv_cache_configs: ZeroDivisionError).
    with pytest.raises(SpecError, match="pipeline_parallel_size 33 leaves stage 32 with no layer"):
        _plan("llama-3.1-8b", pipeline_parallel_size="33")
