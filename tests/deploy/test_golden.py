"""Per-rank plans of published configs against vLLM 0.33.0's formulas.

Every golden number below is derived by hand from vLLM 0.33.0 (the wheel's ``vllm/`` package,
line numbers of that release; /work/research/deploy/NOTES.md works most of them step by step):

* KV heads per rank: ``ModelConfig.get_num_kv_heads`` (config/model.py:1663-1683):
  ``max(1, total_num_kv_heads // tp)``; ``LlamaAttention.__init__`` (models/llama.py:147-156)
  asserts that tp divides the heads (partition) or the heads divide tp (replication). MLA
  returns 1 whatever tp is: its latent is replicated on every TP rank.
* page: ``AttentionSpec.page_size_bytes`` (v1/kv_cache_interface.py:593-601) from the
  per-rank ``num_kv_heads``: ``block_size × heads × (K + V) × dtype``.
* layers per stage: ``get_pp_indices`` (distributed/utils.py:198-240), the remainder to
  stages −2, −3, … .
* blocks a worker buys: its memory // (page × its layers), one block kept as the null block
  before the check (v1/core/kv_cache_planning.py:1536-1547), then "the num_blocks of each
  rank to the smallest among all ranks" (:1580-1593).
* DCP: ``FullAttentionSpec.max_memory_usage_bytes`` (kv_cache_interface.py:643-648):
  ``cdiv(cdiv(max_model_len, dcp), block_size)`` blocks per rank; allowed only for
  ``tp % dcp == 0`` (config/parallel.py:594-600) and, below MLA, ``tp > heads`` and
  ``dcp <= tp // heads`` (config/model.py:1578-1606); never with a sliding window
  (kv_cache_interface.py:946-951).
* in flight: ``VllmConfig.max_concurrent_batches`` (config/vllm.py:588-598: ``pp + 1`` with
  async scheduling on the V2 model runner, vLLM 0.33's default; ``pp`` otherwise) and
  ``max_in_flight_tokens`` (:600-609: ``batches × max_num_batched_tokens``);
  ``SlidingWindowSpec.max_admission_blocks_per_request`` (kv_cache_interface.py:918-944:
  ``cdiv(min(W − 1 + in_flight, L), bs) + 1``) and ``ChunkedLocalAttentionSpec`` (:864-881:
  ``cdiv(min(C + in_flight, L), bs)``); ``num_lookahead_tokens`` (config/vllm.py:626-651).
* memory from the GPU: ``request_memory`` (v1/worker/utils.py:724-726:
  ``ceil(total_memory × gpu_memory_utilization)``) less the non-KV memory
  (``Worker.determine_available_memory``, v1/worker/gpu_worker.py:753-757).

Where kvunits differs on purpose, the row says so:

1. concurrency: vLLM reports ``num_blocks / blocks per request`` as a ratio with the null
   block counted (``get_max_concurrency_for_kv_cache_config``, v1/core/kv_cache_utils.py:
   1061-1093); kvunits counts whole requests in the blocks less the null block.
2. speculative decoding: vLLM reserves ``num_lookahead_tokens`` per step (``allocate_slots``,
   v1/core/kv_cache_manager.py:552) but leaves them out of ``max_in_flight_tokens``, so its
   sliding-window and chunked caps do not keep them; kvunits adds them (MISSION.md: "plus
   speculative lookahead tokens"). EAGLE/MTP/draft models only; DFlash's extra slot is not
   modelled.
3. the sliding-window cap where the window covers the request (issue 13 clamps it to
   ``cdiv(L, bs)``; vLLM keeps the +1): no row here reaches it.
"""

from __future__ import annotations

from typing import Any

import pytest

from kvunits.contracts import (
    AdmissionCap,
    Bytes,
    Elements,
    EncoderTokens,
    Layers,
    PoolBlocks,
    PooledBlocks,
    SpecError,
    Tokens,
    Window,
)
from kvunits.contracts.config import ConfigError, KvUnitsConfig, load_config
from kvunits.contracts.deploy import KVHeads, RankBlocks, RankBytes, RankKVHeads
from kvunits.runtime import CapacityPlan, longest_max_model_len, plan

from ..config.conftest import EXAMPLES, SHIPPED

HF = EXAMPLES / "hf"
GiB = 1 << 30


def load(model: str, **flags: object) -> KvUnitsConfig:
    """A published config with engine flags, as the command line passes them (text)."""
    given = {k: v if isinstance(v, bool) else str(v) for k, v in flags.items()}
    return load_config(HF / model / "config.json", flags=given)


def planned(model: str, **flags: object) -> CapacityPlan:
    config = load(model, **flags)
    return plan(config.model, config.engine)


# -- tensor parallelism: a dense model with 8 KV heads ---------------------------------------------


@pytest.mark.parametrize(
    ("tp", "heads", "copies", "page", "blocks", "requests", "vllm_ratio"),
    [
        # Llama-3.1-8B: 32 layers, 8 KV heads of 128, bf16, 16-token blocks, 16 GiB a rank,
        # max_model_len 65536 (4096 blocks a request). Page 16 × heads × 256 × 2 = 8192 × heads;
        # blocks 2**34 // (page × 32 layers); requests (blocks − 1) // 4096.
        (1, 8, 1, 65536, 8192, 1, 2.0),
        (2, 4, 1, 32768, 16384, 3, 4.0),
        (8, 1, 1, 8192, 65536, 15, 16.0),
        # 16 ranks, 8 heads: max(1, 8 // 16) = 1 head a rank, each head on 16 // 8 = 2 ranks
        # (16 % 8 == 0). No saving over TP 8.
        (16, 1, 2, 8192, 65536, 15, 16.0),
    ],
)
def test_tensor_parallel_heads_pages_and_blocks(
    tp: int, heads: int, copies: int, page: int, blocks: int, requests: int, vllm_ratio: float
) -> None:
    p = planned(
        "llama-3.1-8b", tensor_parallel_size=tp, memory_budget="16 GiB", max_model_len="65536 token"
    )
    ((rank,),) = [stage.groups for stage in p.stages]
    assert rank.kv_heads == KVHeads(8)
    assert rank.kv_heads_per_rank == RankKVHeads(heads)
    assert rank.head_replicas == copies
    assert rank.page_size == RankBytes(page)
    assert rank.admission_cap == RankBlocks(4096)  # cdiv(65536, 16): TP does not shard tokens
    assert rank.num_blocks == RankBlocks(blocks)
    assert p.groups[0].num_blocks == PoolBlocks(blocks)  # the same block ids on every rank
    # The model's page is every head's, whatever the ranks: 16 × 8 × 256 × 2.
    assert p.groups[0].page_size.numerical_value_in(Bytes) == 65536
    # Difference 1: vLLM's ratio counts the null block.
    assert p.concurrent_requests == requests == int(vllm_ratio) - 1
    assert p.stages[0].memory_used.numerical_value_in(RankBytes) <= 16 * GiB


def test_one_rank_cannot_hold_a_full_length_request_with_its_null_block() -> None:
    # TP 1, 16 GiB, max_model_len 131072: a request needs 32 × 65536 × 8192 = 16 GiB, and the
    # null block 2 MiB more; vLLM 0.33 refuses it too (the null block is reserved before its
    # check, kv_cache_planning.py:1536-1547) and estimates the longest max_model_len:
    # 2**21 × cdiv(L, 16) <= 2**34 − 2**21 → cdiv(L, 16) <= 8191 → L = 8191 × 16 = 131056.
    config = load("llama-3.1-8b", memory_budget="16 GiB")
    with pytest.raises(SpecError, match=r"the longest max_model_len that fits is 131056 token"):
        plan(config.model, config.engine)
    assert longest_max_model_len(config.model, config.engine) == Tokens(131056)
    # At TP 2 the same request takes half as much of each rank: it fits, with 8 GiB to spare.
    p = planned("llama-3.1-8b", memory_budget="16 GiB", tensor_parallel_size=2)
    assert p.stages[0].bytes_per_request == RankBytes(8 * GiB)
    assert p.concurrent_requests == 1  # 16384 blocks: (16384 − 1) // 8192 (vLLM: 2.00x)


@pytest.mark.parametrize("tp", [3, 5, 12])
def test_attention_heads_that_tensor_parallelism_cannot_split_are_refused(tp: int) -> None:
    # Llama-3.1-8B's 32 attention heads over 3, 5 or 12 ranks: vLLM refuses before it builds
    # the model (vllm/config/model.py verify_with_parallel_config: "Total number of attention
    # heads (32) must be divisible by tensor parallel size").
    with pytest.raises(ConfigError, match=rf"tensor_parallel_size {tp} does not divide the "
                       r"model's 32 attention heads: vLLM refuses it"):
        load("llama-3.1-8b", tensor_parallel_size=tp)


@pytest.mark.parametrize("tp", [3, 5, 12])
def test_kv_heads_that_tensor_parallelism_cannot_split_are_refused(tp: int) -> None:
    # 8 KV heads over 3, 5 or 12 ranks: neither divides the other (llama.py:147-156 asserts);
    # a spec built in Python, past the loader's attention-head check, meets the planner's.
    config = load("llama-3.1-8b")
    engine = config.engine.model_copy(update={"tensor_parallel_size": tp})
    with pytest.raises(
        SpecError, match=rf"^8 kv_head cannot be split over tensor_parallel_size {tp}: "
    ):
        plan(config.model, engine)


def test_mla_latent_is_whole_on_every_tensor_parallel_rank() -> None:
    # DeepSeek-V3: one latent "head" of 512 + 64: TP 8 leaves every rank the whole latent
    # (get_num_kv_heads returns 1 for MLA), so the page stays 16 × 576 × 2 = 18432.
    p = planned("deepseek-v3", tensor_parallel_size=8, max_model_len="131072 token")
    ((rank,),) = [stage.groups for stage in p.stages]
    assert rank.kv_heads == KVHeads(1) and rank.kv_heads_per_rank == RankKVHeads(1)
    assert rank.head_replicas == 8
    assert (
        rank.page_size == RankBytes(18432)
        and p.groups[0].page_size.numerical_value_in(Bytes) == 18432
    )


# -- pipeline parallelism: uneven splits --------------------------------------------------------


def test_llama_over_three_stages_takes_the_fewest_blocks() -> None:
    # 32 layers over PP 3: 32 // 3 = 10 each, remainder 2 to stages −2 and −3: [11, 11, 10].
    # Blocks per stage at 16 GiB: 2**34 // (65536 × {11, 11, 10}) = {23831, 23831, 26214}; every
    # rank takes the fewest, 23831 (kv_cache_planning.py:1580-1593).
    p = planned(
        "llama-3.1-8b", pipeline_parallel_size=3, memory_budget="16 GiB", tensor_parallel_size=1
    )
    assert [len(s.layer_names) for s in p.stages] == [11, 11, 10]
    assert p.stages[0].layer_names[-1] == "text.10" and p.stages[2].layer_names[0] == "text.22"
    assert [s.groups[0].num_blocks for s in p.stages] == [RankBlocks(23831)] * 3
    assert p.groups[0].num_blocks == PoolBlocks(23831)
    # 381296 tokens; at 131072 a request (8192 blocks): (23831 − 1) // 8192 = 2 (vLLM 2.91x).
    assert p.concurrent_requests == 2
    # A stage's rank holds only its layers: a request is 11 (or 10) layers' pages.
    assert p.stages[0].bytes_per_request == RankBytes(8192 * 65536 * 11)
    assert p.stages[2].memory_used == RankBytes(23831 * 65536 * 10)


@pytest.mark.parametrize(
    ("pp", "split", "blocks", "requests"),
    [
        # DeepSeek-V3, 61 layers (the MTP layer is not among them), 64-token blocks, TP 8,
        # 16 GiB a rank, max_model_len 131072: page 64 × 576 × 2 = 73728 on every rank.
        # PP 4: 61 // 4 = 15, remainder 1 to stage −2: [15, 15, 16, 15]; blocks
        # 2**34 // (73728 × 16) = 14563 (the 16-layer stage); (14563 − 1) // 2048 = 7
        # (vLLM 7.11x).
        (4, [15, 15, 16, 15], 14563, 7),
        # PP 8: 61 // 8 = 7, remainder 5 to stages −2 … −6: [7, 7, 8, 8, 8, 8, 8, 7]; blocks
        # 2**34 // (73728 × 8) = 29127; (29127 − 1) // 2048 = 14 (vLLM 14.22x).
        (8, [7, 7, 8, 8, 8, 8, 8, 7], 29127, 14),
    ],
)
def test_deepseek_v3_over_uneven_stages(
    pp: int, split: list[int], blocks: int, requests: int
) -> None:
    p = planned(
        "deepseek-v3",
        tensor_parallel_size=8,
        pipeline_parallel_size=pp,
        block_size_slots=64,
        max_model_len="131072 token",
        memory_budget="16 GiB",
    )
    assert [len(s.layer_names) for s in p.stages] == split
    assert {s.groups[0].page_size for s in p.stages} == {RankBytes(73728)}
    assert p.groups[0].num_blocks == PoolBlocks(blocks)
    assert p.groups[0].admission_cap == AdmissionCap(2048)  # cdiv(131072, 64)
    assert p.concurrent_requests == requests
    assert max(s.memory_used.numerical_value_in(RankBytes) for s in p.stages) <= 16 * GiB


# -- decode context parallelism -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("tp", "dcp", "length", "cap", "copies", "requests"),
    [
        # DCP 2 needs tp > 8 heads and dcp <= tp // 8: TP 16. Per rank cdiv(cdiv(131072, 2), 16)
        # = 4096 blocks; 2**34 // (8192 × 32) = 65536 blocks: (65536 − 1) // 4096 = 15 (vLLM
        # 16.0x; without DCP 8.0x: the replicated head's second copy becomes capacity).
        (16, 2, 131072, 4096, 2, 15),
        # DCP 4 needs TP 32: cdiv(cdiv(131072, 4), 16) = 2048; (65536 − 1) // 2048 = 31 (32.0x).
        (32, 4, 131072, 2048, 4, 31),
        # Uneven: 131073 tokens put 65537 on rank 0: cdiv(65537, 16) = 4097.
        (16, 2, 131073, 4097, 2, 15),
    ],
)
def test_decode_context_parallel_blocks_per_rank(
    tp: int, dcp: int, length: int, cap: int, copies: int, requests: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 131073 is one past the model's length: vLLM plans it only with this switch set.
    monkeypatch.setenv("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "1")
    p = planned(
        "llama-3.1-8b",
        tensor_parallel_size=tp,
        decode_context_parallel_size=dcp,
        memory_budget="16 GiB",
        max_model_len=f"{length} token",
    )
    ((rank,),) = [stage.groups for stage in p.stages]
    assert rank.dcp_sharded and rank.head_replicas == copies
    assert rank.admission_cap == RankBlocks(cap)
    assert rank.num_blocks == RankBlocks(65536)
    assert p.concurrent_requests == requests


def test_mla_decode_context_parallel_needs_only_tp_divisible() -> None:
    # MLA has no heads to replicate: DCP 8 at TP 8 is allowed (config/model.py:1579 skips MLA).
    # DeepSeek-V3 at 163840 tokens: cdiv(cdiv(163840, 8), 16) = 1280 blocks a rank.
    p = planned("deepseek-v3", tensor_parallel_size=8, decode_context_parallel_size=8)
    assert p.stages[0].groups[0].admission_cap == RankBlocks(1280)


@pytest.mark.parametrize(
    ("model", "flags", "message"),
    [
        # 8 heads at TP 8: no replicated copy for DCP to split (config/model.py:1580-1588).
        (
            "llama-3.1-8b",
            {"tensor_parallel_size": 8, "decode_context_parallel_size": 2},
            r"layer 'text.0' has 8 kv_head, and DCP needs tp > heads and dcp <= tp // heads "
            r"\(at most 1 here\)",
        ),
        # TP 16: each head has 2 copies, so DCP 4 is one too many (:1590-1597).
        (
            "llama-3.1-8b",
            {"tensor_parallel_size": 16, "decode_context_parallel_size": 4},
            r"\(at most 2 here\)",
        ),
        # Mistral slides its window on every layer: "DCP not support sliding window."
        (
            "mistral-7b-v0.1",
            {"tensor_parallel_size": 16, "decode_context_parallel_size": 2},
            r"group 'text' slides a window, and vLLM does not support DCP",
        ),
    ],
)
def test_decode_context_parallel_refusals(
    model: str, flags: dict[str, object], message: str
) -> None:
    config = load(model, **flags)
    with pytest.raises(SpecError, match=message):
        plan(config.model, config.engine)


def test_decode_context_parallel_must_divide_tensor_parallel() -> None:
    # config/parallel.py:597-600: "tp_size must be divisible by dcp_size".
    with pytest.raises(ConfigError, match=r"--decode-context-parallel-size: 3 does not divide"):
        load("llama-3.1-8b", tensor_parallel_size=16, decode_context_parallel_size=3)


# -- work in flight: async scheduling, pipeline stages, speculative tokens ------------------------


@pytest.mark.parametrize(
    ("flags", "batches", "in_flight", "cap", "vllm_cap"),
    [
        # Mistral-7B: window 4096 on all 32 layers, L 32768, 2048 tokens a step, 16-token
        # blocks. One batch: cdiv(min(4095 + 2048, 32768), 16) + 1 = 384 + 1 = 385.
        ({}, 1, 2048, 385, 385),
        # Async scheduling (vLLM 0.33's default): 2 batches, 4096 in flight:
        # cdiv(4095 + 4096, 16) + 1 = 512 + 1 = 513.
        ({"async_scheduling": True}, 2, 4096, 513, 513),
        ({"max_concurrent_batches": 2}, 2, 4096, 513, 513),
        # PP 2 without async: 2 batches fill the pipeline; with async 3 (V2 runner: pp + 1):
        # cdiv(4095 + 6144, 16) + 1 = 640 + 1 = 641.
        ({"pipeline_parallel_size": 2}, 2, 4096, 513, 513),
        ({"pipeline_parallel_size": 2, "async_scheduling": True}, 3, 6144, 641, 641),
        # 4 speculative tokens (difference 2): kvunits keeps the 4 drafted slots,
        # cdiv(4095 + 2048 + 4, 16) + 1 = 385 + 1 = 386; vLLM's cap stays 385.
        ({"num_speculative_tokens": 4}, 1, 2052, 386, 385),
        # Both, as the example: cdiv(4095 + 4096 + 4, 16) + 1 = 513 + 1 = 514 (vLLM 513).
        ({"num_speculative_tokens": 4, "max_concurrent_batches": 2}, 2, 4100, 514, 513),
    ],
)
def test_sliding_window_cap_reserves_what_is_in_flight(
    flags: dict[str, Any], batches: int, in_flight: int, cap: int, vllm_cap: int
) -> None:
    config = load("mistral-7b-v0.1", **flags)
    assert config.engine.concurrent_batches == batches
    assert config.engine.max_in_flight == Tokens(in_flight)
    p = plan(config.model, config.engine)
    (group,) = p.groups
    assert group.group.limits.max_in_flight == Tokens(in_flight)
    assert group.admission_cap == AdmissionCap(cap)
    assert cap - vllm_cap == (1 if config.engine.num_speculative_tokens else 0)


def test_sliding_window_cap_with_two_concurrent_batches_as_vllms_test() -> None:
    # vLLM's test of the in-flight cap (the version with a max_concurrent_batches argument;
    # NOTES.md §4.3): W 1024, 1024 tokens a step, L 16384, 16-token blocks: 129 blocks, and
    # 193 with 2 concurrent batches: cdiv(min(1023 + 1024, 16384), 16) + 1 = 128 + 1;
    # cdiv(min(1023 + 2048, 16384), 16) + 1 = 192 + 1.
    from kvunits.contracts import EngineSpec, ModelSpec, SlidingWindowLayer

    layer = SlidingWindowLayer(
        sliding_window=Window(1024, Tokens), kv_heads=KVHeads(8), head_size=Elements(128)
    )
    model = ModelSpec.stacked("swa", {"text": (layer, Layers(4))})
    base = {
        "max_model_len": "16384 token",
        "max_num_batched_tokens": "1024 token",
        "memory_budget": "8 GiB",
    }
    one = plan(model, EngineSpec.model_validate(base))
    two = plan(model, EngineSpec.model_validate({**base, "max_concurrent_batches": 2}))
    assert one.groups[0].admission_cap == AdmissionCap(129)
    assert two.groups[0].admission_cap == AdmissionCap(193)
    assert two.stages[0].groups[0].admission_cap == RankBlocks(193)


def test_lookahead_leaves_full_attention_alone() -> None:
    # allocate_slots caps a request at max_model_len (kv_cache_manager.py:552): full attention
    # never needs more than cdiv(L, bs) = 8192, drafts or not.
    p = planned("llama-3.1-8b", num_speculative_tokens=4, async_scheduling=True)
    assert p.groups[0].admission_cap == AdmissionCap(8192)


@pytest.mark.parametrize(
    ("model", "kind", "sync", "async_"),
    [
        # The "async" caps of tests/config/test_hf_families.py, vLLM 0.33's default.
        ("gemma-3-1b-it", "sliding_window", 161, 289),  # cdiv(511 + 4096, 16) + 1
        ("gemma-3-4b-it", "sliding_window", 193, 321),  # cdiv(1023 + 4096, 16) + 1
        ("gpt-oss-20b", "sliding_window", 137, 265),  # cdiv(127 + 4096, 16) + 1
        ("llama-4-scout-17b-16e-instruct", "chunked_local", 640, 768),  # cdiv(8192 + 4096, 16)
    ],
)
def test_async_scheduling_caps_of_published_configs(
    model: str, kind: str, sync: int, async_: int
) -> None:
    def cap(**flags: object) -> int:
        groups = planned(model, memory_budget="1 TiB", **flags).groups
        (group,) = [g for g in groups if g.group.manager.kind == kind]
        return group.admission_cap.numerical_value_in(AdmissionCap)

    assert (cap(), cap(async_scheduling=True)) == (sync, async_)


def test_voxtral_encoder_in_flight_with_async_scheduling() -> None:
    # Two batches of 4 encoder tokens are one run of 8: pool_span(8, 4) = cdiv(7, 4) + 1 = 3
    # pooled slots in flight; the audio cap stays cdiv(188 + 3, 16) + 1 = 13.
    config = load_config(SHIPPED, flags={"async_scheduling": True})
    assert config.engine.max_encoder_in_flight == EncoderTokens(8)
    p = plan(config.model, config.engine)
    audio = p.group("audio")
    assert audio.group.limits.max_in_flight == PooledBlocks(3)
    assert audio.admission_cap == AdmissionCap(13)


# -- memory: a budget per rank, or the GPU's memory less weights and activations -----------------


@pytest.mark.parametrize(
    ("utilization", "budget"),
    [
        # ceil(80 GiB × 0.9) = 77309411328; less 16 GiB of weights and 4 GiB of activations.
        ("0.9", 77309411328 - 20 * GiB),
        # vLLM's default 0.92: ceil(85899345920 × 0.92) = ceil(79027398246.4) = 79027398247.
        (None, 79027398247 - 20 * GiB),
    ],
)
def test_budget_from_gpu_memory(utilization: str | None, budget: int) -> None:
    flags: dict[str, object] = {
        "gpu_memory": "80 GiB",
        "weights_memory": "16 GiB",
        "activation_memory": "4 GiB",
        "tensor_parallel_size": 8,
    }
    if utilization is not None:
        flags["gpu_memory_utilization"] = utilization
    config = load("llama-3.1-8b", **flags)
    assert config.engine.memory_budget is None
    assert config.engine.kv_cache_memory == RankBytes(budget)
    p = plan(config.model, config.engine)
    assert p.kv_cache_memory == RankBytes(budget)
    # 8192-byte pages, 32 layers: budget // 262144 blocks.
    assert p.groups[0].num_blocks == PoolBlocks(budget // (8192 * 32))
