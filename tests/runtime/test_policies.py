"""Admission policies, the answers without exceptions, preemption and the metrics (issue 23).

Narrated toy cases first (block size 2, as vLLM's manager tests), then the issue's done-when
on real plans: Llama-3.1-8B at 40 GiB (``examples/hf/llama-3.1-8b/config.json``, its published
config: 32 layers, 8 KV heads of 128, bfloat16, ``max_position_embeddings`` 131072) admits 2
requests when each reserves its cap at the engine's limit, and as many streams of 1,000–4,000
tokens as their blocks fill the pool on demand.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from kvunits.contracts import CacheBlocks, Elements, FullAttentionLayer, KVHeads, SpecError, Tokens
from kvunits.contracts.config import load_config
from kvunits.runtime import (
    AdmissionError,
    AdmissionPolicy,
    AllocationError,
    ConcurrentUseError,
    Fits,
    KVCacheCoordinator,
    Never,
    RequestError,
    Wait,
    plan,
)

from .support import Interference, check_pools, coordinator, snapshot

LLAMA = "examples/hf/llama-3.1-8b/config.json"


def toy(kind: str, order: str = "fcfs", *, num_blocks: int = 5, watermark: float = 0.0) -> Any:
    """One full-attention group, block size 2, ``num_blocks`` with the null block, requests
    of at most 8 tokens, steps of at most 4."""
    coord = coordinator(
        {"text": FullAttentionLayer(kv_heads=KVHeads(1), head_size=Elements(8))},
        block_size=2,
        num_blocks=num_blocks,
        max_len=8,
        max_in_flight=4,
        admission=AdmissionPolicy(kind=kind, scheduling_policy=order, watermark=watermark),  # type: ignore[arg-type]
    )
    text = coord.group("text", Tokens)
    return coord, text, coord.stepper(text)


def test_on_demand_preempts_the_latest_admitted_as_vllm() -> None:
    """4 usable blocks. Under reserve a request of 8 tokens reserves all 4: one at a time.
    On demand, three are admitted; each takes blocks as its steps need them."""
    coord, _, step = toy("reserve")
    step.admit("a", Tokens(8))
    with pytest.raises(AllocationError, match="cap is 4"):
        step.admit("b", Tokens(8))

    coord, text, step = toy("on_demand")
    for rid in ("a", "b", "c"):
        step.admit(rid, Tokens(8))
    assert step.allocate("a", Tokens(4)) == [[2, 3, 4, 5]]  # blocks 1, 2
    assert step.allocate("b", Tokens(2)) == [[6, 7]]  # block 3
    assert step.allocate("c", Tokens(2)) == [[8, 9]]  # block 4: the pool is empty
    # a needs a third block: c, admitted last, is preempted (vLLM: self.running.pop()).
    outcome = step.allocate_preempting("a", Tokens(1))
    assert outcome.ran and outcome.slot_mappings == [[8]]  # slot 0 of block 4, c's old one
    (record,) = outcome.preempted
    assert (record.request_id, record.for_request) == ("c", "a")
    assert record.lost == {"text": Tokens(2)}  # c recomputes its 2 tokens when it resumes
    assert "needed 1 cache_block and 0 cache_block were free" in record.reason
    assert "c" not in coord and coord.metrics().num_preemptions == 1
    # b needs a block; the latest admitted still running is b itself: it is preempted, and
    # its step is not taken (vLLM: "No more request to preempt").
    outcome = step.allocate_preempting("b", Tokens(2))
    assert not outcome.ran and [r.request_id for r in outcome.preempted] == ["b"]
    assert coord.block_table("a", text) == [1, 2, 4]
    check_pools(coord)


def test_priority_preempts_the_lowest_priority_then_the_latest_arrival() -> None:
    """vLLM's priority policy: the victim is max(priority, arrival) among the running."""
    coord, _, step = toy("on_demand", "priority", num_blocks=5)
    step.admit("urgent", Tokens(8), priority=0)
    step.admit("low", Tokens(8), priority=5)
    step.admit("late", Tokens(8), priority=0)
    step.allocate("urgent", Tokens(2))
    step.allocate("low", Tokens(2))
    step.allocate("late", Tokens(4))  # the pool is empty
    outcome = step.allocate_preempting("urgent", Tokens(2))
    assert [r.request_id for r in outcome.preempted] == ["low"]
    assert outcome.preempted[0].priority == 5
    # "low" comes back later; it keeps its first arrival (vLLM keeps Request.arrival_time),
    # so among equal priorities "late" (a later arrival) is preempted before it.
    outcome = step.allocate_preempting("urgent", Tokens(2))
    assert [r.request_id for r in outcome.preempted] == ["late"]
    step.admit("low", Tokens(8), priority=0)
    step.allocate("low", Tokens(2))  # the last free block
    step.admit("later", Tokens(8), priority=0)
    step.allocate("later", Tokens(0))
    # "later" holds nothing: preempting it frees nothing, so "low" goes too.
    outcome = step.allocate_preempting("urgent", Tokens(2))
    assert [r.request_id for r in outcome.preempted] == ["later", "low"]
    assert coord.metrics().num_preemptions == 4


def test_reserve_and_declared_never_preempt() -> None:
    coord, _, step = toy("reserve")
    step.admit("a", Tokens(8))
    assert step.allocate_preempting("a", Tokens(4)).preempted == ()
    coord, _, step = toy("declared")
    with pytest.raises(RequestError, match="declares its length"):
        coord.admit("a")
    step.admit("a", Tokens(3))  # reserves exactly cdiv(3, 2) = 2 blocks
    step.admit("b", Tokens(4))  # 2 more: the 4 usable blocks are reserved
    assert coord.usage_by_group()["text"].reserved == CacheBlocks(4)
    assert isinstance(step.can_admit("c", Tokens(1)), Wait)
    with pytest.raises(RequestError, match="beyond the request's max_len of 3 token"):
        step.allocate("a", Tokens(4))


def test_answers_without_exceptions() -> None:
    """can_admit and try_allocate: fits, wait (with the shortfall per group), never."""
    coord, _, step = toy("on_demand")
    assert step.can_admit("a", Tokens(8)) == Fits(None)
    never = step.can_admit("a", Tokens(9))
    assert isinstance(never, Never) and never.group == "text"
    assert "beyond the group's limit of 8 token" in never.reason
    step.admit("z", Tokens(8))
    step.allocate("z", Tokens(2))  # block 1
    step.admit("a", Tokens(8))
    assert step.try_allocate("a", Tokens(4)) == Fits([[4, 5, 6, 7]])  # blocks 2, 3
    before = snapshot(coord)
    answer = step.try_allocate("a", Tokens(4))  # two blocks more, one free
    assert isinstance(answer, Wait) and answer.shortfall == {"text": CacheBlocks(1)}
    assert "1 cache_block in group 'text'" in answer.reason
    assert isinstance(step.try_allocate("a", Tokens(5)), Never)  # beyond max_in_flight
    assert snapshot(coord) == before
    with pytest.raises(RequestError, match="not admitted"):
        step.try_allocate("nobody", Tokens(1))  # a caller's mistake still raises
    with pytest.raises(AdmissionError):
        step.admit("b", Tokens(9))


def test_on_demand_watermark_and_first_step() -> None:
    """vLLM 0.33's admission check: the first step's blocks plus the watermark
    (``int(0.4 × 5)`` = 2 blocks) while another request runs."""
    _, _, step = toy("on_demand", watermark=0.4)
    assert AdmissionPolicy(kind="on_demand", watermark=0.4).watermark_blocks(5) == 2
    step.admit("a", Tokens(8), prompt=(Tokens(4),))  # alone: no watermark; 2 of 4 blocks
    step.allocate("a", Tokens(4))
    answer = step.can_admit("b", Tokens(8), prompt=(Tokens(2),))  # 1 + 2 > 2 free
    assert isinstance(answer, Wait) and answer.shortfall == {"text": CacheBlocks(1)}
    with pytest.raises(AllocationError, match="watermark"):
        step.admit("b", Tokens(8), prompt=(Tokens(2),))
    step.admit("b", Tokens(8))  # no first step given: the watermark alone, 2 <= 2 free


def test_a_reentrant_admission_is_refused_before_the_policy_is_asked() -> None:
    """A call into the coordinator from inside a running call (a callback, a finaliser) is a
    `ConcurrentUseError` whatever the policy would answer: the policy's own check (here the
    watermark, which would refuse ``b`` with an `AllocationError`) runs with the core held,
    so it never reads a pool the running step is changing. Found by the stateful test
    (tests/runtime/test_stateful.py, step_entered_twice, on_demand with a watermark of 0.25:
    the admission check ran before the core took its guard and answered AllocationError)."""
    coord, text, step = toy("on_demand", watermark=0.4)
    step.admit("a", Tokens(8), prompt=(Tokens(4),))
    step.allocate("a", Tokens(2))  # 1 of 4 blocks held
    before = snapshot(coord)

    def admit_b() -> None:
        step.admit("b", Tokens(8), prompt=(Tokens(4),))  # 2 + the watermark's 2 > 3 free

    with Interference(coord._core.pools[0], "allocate_n", "reenter", admit_b) as inside:
        step.allocate("a", Tokens(4))  # 2 blocks more: taken while b's admission re-enters
    assert inside.hits == 1 and len(inside.refused) == 1
    (error,) = inside.refused
    assert isinstance(error, ConcurrentUseError), error
    assert "changed nothing" in str(error)
    assert "b" not in coord and coord.seq_len("a", text) == Tokens(6)
    assert snapshot(coord) != before  # the outer step completed
    check_pools(coord)
    with pytest.raises(AllocationError, match="watermark"):  # outside a call: the policy answers
        admit_b()


def test_policy_is_checked() -> None:
    with pytest.raises(SpecError, match="admission is one of"):
        AdmissionPolicy(kind="optimistic")  # type: ignore[arg-type]
    with pytest.raises(SpecError, match=r"watermark is a fraction .* \[0, 1\)"):
        AdmissionPolicy(watermark=1.0)
    config = load_config(LLAMA)
    with pytest.raises(SpecError, match="give one of admission"):
        KVCacheCoordinator.from_plan(
            plan(config.model, config.engine), admission=AdmissionPolicy(), reserve=True
        )


def test_engine_setting_chooses_the_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KVUNITS_ADMISSION", "on_demand")
    monkeypatch.setenv("KVUNITS_WATERMARK", "0.01")
    config = load_config(LLAMA)
    assert config.engine_sources["admission"] == "env KVUNITS_ADMISSION"
    coord = KVCacheCoordinator.from_plan(plan(config.model, config.engine))
    assert coord.admission == AdmissionPolicy(kind="on_demand", watermark=0.01)
    monkeypatch.setenv("KVUNITS_ADMISSION", "optimistic")
    with pytest.raises(Exception, match="KVUNITS_ADMISSION: Input should be 'reserve'"):
        load_config(LLAMA)


def _admit_streams(kind: str, lengths: list[int]) -> tuple[KVCacheCoordinator, int]:
    """Admit streams of ``lengths`` tokens first come first served, each stepping its whole
    length at once, until one must wait; return how many run at once."""
    config = load_config(LLAMA)
    engine = config.engine.model_copy(update={"max_num_batched_tokens": Tokens(4096)})
    coord = KVCacheCoordinator.from_plan(
        plan(config.model, engine),
        admission=AdmissionPolicy(kind=kind),  # type: ignore[arg-type]
    )
    text = coord.group("text", Tokens)
    step = coord.stepper(text)
    limit = Tokens(131072)
    for i, n in enumerate(lengths):
        rid = f"s{i}"
        if not isinstance(step.can_admit(rid, limit, prompt=(Tokens(n),)), Fits):
            return coord, i
        step.admit(rid, limit, prompt=(Tokens(n),))
        step.allocate(rid, Tokens(n))
    return coord, len(lengths)


def test_llama_on_demand_runs_what_the_blocks_hold() -> None:
    """Done-when: at 40 GiB, reserve runs the 2 requests its caps allow (8192 blocks each of
    20479); on demand runs streams of 1,000-4,000 tokens until their blocks fill the pool,
    within one stream."""
    rng = random.Random(23)
    lengths = [rng.randint(1000, 4000) for _ in range(200)]
    _, reserved = _admit_streams("reserve", lengths)
    assert reserved == 2
    coord, running = _admit_streams("on_demand", lengths)
    held = [-(-n // 16) for n in lengths[:running]]
    usable = 20480 - 1
    assert sum(held) <= usable < sum(held) + -(-lengths[running] // 16)
    assert running > 20 * reserved
    assert coord.metrics().kv_cache_usage_perc == pytest.approx(sum(held) / usable)


def test_metrics_under_vllm_names() -> None:
    coord, _, step = toy("on_demand")
    for rid in ("a", "b"):
        step.admit(rid, Tokens(8))
        step.allocate(rid, Tokens(4))
    step.admit("c", Tokens(8))
    step.allocate_preempting("c", Tokens(2))  # c itself is the latest: preempted
    metrics = coord.metrics()
    assert metrics.num_preemptions == 1 and metrics.num_requests_running == 2
    group = metrics.group("text")
    assert group.kv_cache_usage_perc == 1.0 and group.preempted == Tokens(0)
    data = metrics.to_dict()
    assert data["groups"]["text"]["blocks"] == {
        "capacity": 4,
        "used": 4,
        "free": 0,
        "reserved": 0,
        "cached": 0,
        "unit": "cache_block",
    }
    assert data["kv_cache_usage_perc"] == 1.0


def test_prometheus_collector() -> None:
    prometheus_client = pytest.importorskip("prometheus_client")
    from kvunits.runtime.prometheus import PrometheusMetrics

    coord, _, step = toy("on_demand")
    registry = prometheus_client.CollectorRegistry()
    exported = PrometheusMetrics(registry, labels={"model_name": "toy"})
    assert b"vllm:" not in prometheus_client.generate_latest(registry)  # nothing recorded
    step.admit("a", Tokens(8))
    step.allocate("a", Tokens(4))
    step.allocate("a", Tokens(4))
    step.admit("b", Tokens(8))
    step.allocate_preempting("b", Tokens(2))
    exported.record(coord.metrics())
    text = prometheus_client.generate_latest(registry).decode()
    assert 'vllm:num_preemptions_total{model_name="toy"} 1.0' in text
    assert 'vllm:kv_cache_usage_perc{model_name="toy"} 1.0' in text
    assert 'vllm:prefix_cache_queries_total{group="text",model_name="toy",unit="token"} 0.0' in text
    assert 'vllm:kv_cache_group_blocks{group="text",model_name="toy",state="used"} 4.0' in text
    with pytest.raises(TypeError, match=r"coordinator\.metrics"):
        exported.record(coord.usage_by_group())
