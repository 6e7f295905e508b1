"""``on_demand`` admission against vLLM 0.33's own scheduler, on the same trace (issue 23).

kvunits' side is ``kvunits simulate --admission on_demand`` (`kvunits._simulate.Simulation`,
through the real coordinator). vLLM's side is ``vllm.v1.core.sched.scheduler.Scheduler``
itself, built on the CPU from the same model config (``examples/hf/llama-3.1-8b``, read by
vLLM's ``ModelConfig``) and a ``KVCacheConfig`` of the plan's block count; each step is
``schedule()``, then ``update_from_output()`` with one sampled token for every request whose
scheduled tokens reached its end (what a model runner returns). Both replay the same streams:
``--streams`` clients, each opening a stream of ``--prompt`` tokens and ``--steps`` decode
steps (vLLM: ``max_tokens = steps + 1``, ``ignore_eos``) after its last one ended. Prefix
caching is off on both sides (a resumed request would otherwise hit its own freed blocks in
vLLM and not in the simulation), the watermark is 0 (vLLM's default), and the token budget is
large enough never to bind (the simulation's budget is per stream, vLLM's per step).

Compared per scheduler step: requests running after the step, and requests preempted in it.

Run it in the vLLM venv (``benchmarks/vllm-nodeps.txt``)::

    .venv-vllm/bin/python benchmarks/vs_vllm_scheduler.py
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "examples" / "hf" / "llama-3.1-8b"


def kvunits_series(args: argparse.Namespace) -> tuple[list[int], list[int], Any]:
    """Running and preempted per step, from kvunits' simulation under on_demand."""
    from kvunits._simulate import Simulation, Workload, _real_kernels, admission_variants
    from kvunits.contracts import Tokens
    from kvunits.contracts.config import load_config

    config = load_config(
        MODEL / "config.json",
        flags={
            "memory_budget": args.memory,
            "max_model_len": f"{args.max_model_len} token",
            "max_num_batched_tokens": f"{args.budget} token",
        },
    )
    work = Workload.for_config(
        config,
        streams=args.streams,
        steps=args.steps,
        duration=args.duration,
        prompt=Tokens(args.prompt),
    )
    (variant,) = admission_variants(config, ["on_demand"])
    sim = Simulation(config, work, variant, _real_kernels(config))
    for _ in range(work.duration):
        sim.step()
    return sim.run.series["running"], sim.run.series["preempted"], sim


def vllm_series(args: argparse.Namespace, num_blocks: int) -> tuple[list[int], list[int]]:
    """Running and preempted per step, from vLLM 0.33's Scheduler on the same streams."""
    import os

    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")  # no accelerator: vLLM's CPU platform
    from importlib import import_module

    import torch

    def vllm(module: str, *names: str) -> list[Any]:
        # Imported by name: vLLM lives in its own venv, which mypy does not see.
        found = import_module(f"vllm.{module}")
        return [getattr(found, name) for name in names]

    CacheConfig, ModelConfig, SchedulerConfig, VllmConfig = vllm(
        "config", "CacheConfig", "ModelConfig", "SchedulerConfig", "VllmConfig"
    )
    (SamplingParams,) = vllm("sampling_params", "SamplingParams")
    (Scheduler,) = vllm("v1.core.sched.scheduler", "Scheduler")
    FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec, KVCacheTensor = vllm(
        "v1.kv_cache_interface",
        "FullAttentionSpec",
        "KVCacheConfig",
        "KVCacheGroupSpec",
        "KVCacheTensor",
    )
    (ModelRunnerOutput,) = vllm("v1.outputs", "ModelRunnerOutput")
    (Request,) = vllm("v1.request", "Request")
    (StructuredOutputManager,) = vllm("v1.structured_output", "StructuredOutputManager")

    model = ModelConfig(
        model=str(MODEL),
        skip_tokenizer_init=True,
        max_model_len=args.max_model_len,
        dtype="bfloat16",
    )
    vllm_config = VllmConfig(
        model_config=model,
        cache_config=CacheConfig(block_size=16, enable_prefix_caching=False),
        scheduler_config=SchedulerConfig(
            max_num_seqs=4096,
            max_num_batched_tokens=args.budget,
            max_model_len=args.max_model_len,
            is_encoder_decoder=False,
        ),
    )
    vllm_config.cache_config.num_gpu_blocks = num_blocks  # what profiling would have set
    spec = FullAttentionSpec(block_size=16, num_kv_heads=8, head_size=128, dtype=torch.bfloat16)
    layers = [f"model.layers.{i}.self_attn.attn" for i in range(32)]
    kv = KVCacheConfig(
        num_blocks=num_blocks,
        kv_cache_tensors=[
            KVCacheTensor(
                size=spec.page_size_bytes * num_blocks,
                layers=[name],
                layer_stride=spec.page_size_bytes * num_blocks,
                block_stride=spec.page_size_bytes,
            )
            for name in layers
        ],
        kv_cache_groups=[KVCacheGroupSpec(layers, spec)],
    )
    scheduler = Scheduler(vllm_config, kv, StructuredOutputManager(vllm_config), block_size=16)
    life = args.steps + 1
    arrivals: dict[int, list[int]] = {}
    for client in range(args.streams):
        arrivals.setdefault(client * life // args.streams, []).append(client)
    client_of: dict[str, int] = {}
    started = 0
    running: list[int] = []
    preempted: list[int] = []
    for t in range(args.duration):
        for client in arrivals.pop(t, ()):
            rid = f"s{started}"
            started += 1
            client_of[rid] = client
            scheduler.add_request(
                Request(
                    rid,
                    prompt_token_ids=[1] * args.prompt,
                    sampling_params=SamplingParams(max_tokens=life, ignore_eos=True),
                    pooling_params=None,
                    arrival_time=float(t),
                )
            )
        out = scheduler.schedule()
        ids = list(out.num_scheduled_tokens)
        sampled = []
        for rid in ids:
            req = scheduler.requests[rid]
            sampled.append([1] if req.num_computed_tokens >= req.num_tokens else [])
        result = ModelRunnerOutput(
            req_ids=ids,
            req_id_to_index={rid: i for i, rid in enumerate(ids)},
            sampled_token_ids=sampled,
        )
        outputs = scheduler.update_from_output(out, result)
        for engine_outputs in outputs.values():
            for output in engine_outputs.outputs:
                if output.finish_reason is not None:
                    arrivals.setdefault(t + 1, []).append(client_of[output.request_id])
        running.append(len(scheduler.running))
        preempted.append(len(out.preempted_req_ids or ()))
    return running, preempted


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=20)
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--prompt", type=int, default=512)
    parser.add_argument("--duration", type=int, default=4000)
    parser.add_argument("--memory", default="2 GiB")
    parser.add_argument("--max-model-len", type=int, default=8192)
    parser.add_argument("--budget", type=int, default=65536)
    args = parser.parse_args(argv)
    ours, ours_pre, sim = kvunits_series(args)
    blocks = sim.run.plan.groups[0].num_blocks
    num_blocks = blocks.numerical_value_in(type(blocks))
    print(
        f"Llama-3.1-8B, {args.memory}: {num_blocks} blocks of 16 tokens; {args.streams} streams "
        f"of {args.prompt} + {args.steps} tokens; {args.duration} steps",
        flush=True,
    )
    try:
        theirs, theirs_pre = vllm_series(args, num_blocks)
    except ImportError as exc:
        print(
            f"vLLM not importable ({exc}): kvunits only: peak running {max(ours)}, "
            f"{sum(ours_pre)} preemptions"
        )
        return 0
    mismatches = [
        t for t in range(args.duration) if (ours[t], ours_pre[t]) != (theirs[t], theirs_pre[t])
    ]
    print(f"kvunits: peak running {max(ours)}, {sum(ours_pre)} preemptions")
    print(f"vLLM:    peak running {max(theirs)}, {sum(theirs_pre)} preemptions")
    print(f"steps where running or preemptions differ: {len(mismatches)} of {args.duration}")
    for t in mismatches[:10]:
        print(
            f"  step {t}: running {ours[t]} vs {theirs[t]}, preempted {ours_pre[t]} vs "
            f"{theirs_pre[t]}"
        )
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
