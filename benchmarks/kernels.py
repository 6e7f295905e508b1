"""Benchmark the pooled paged-cache kernels on a CUDA device: time, bytes, bandwidth, speed-up.

Shapes default to Voxtral Realtime's causal encoder: 32 heads (= KV heads) of 64, bf16, a
sliding window of 750 encoder tokens, P = 4, block size 16 pooled slots (64 encoder tokens per
cache block). Two steps are measured:

* decode: 256 streams, each adds one pooled block (4 encoder tokens) with a full window behind;
* prefill: 16 streams, each adds a chunk of 1024 encoder tokens after 1024 already cached.

The model of what each kernel must move (compulsory traffic, each byte once):

* write: the new K/V rows read once and written once into the cache (+ the slot mapping);
* attention: Q read once, O written once, and every K/V row inside the union of the step's
  windows read once (a stream's keys ``[context − W + 1, seq_len)``); block tables and
  lengths are ignored (< 0.1 %).

Bandwidth is that byte count over the median time of CUDA-event-timed launches, printed in
GB/s = 10^9 byte/s (not GiB/s), and as a fraction of the device's peak HBM bandwidth (a table
by device name, or ``--peak-gbs``). Attention also reports TFLOP/s (10^12 FLOP/s) from the
visible (query, key) pairs: 2 × (head_k + head_v) FLOP per pair and query head. The speed-up
is over the plain-torch references of `kvunits.kernels.reference` (gather, dense masked attention).

Each timed launch is preceded, outside its event pair, by a write of 256 MiB (so the L2 holds
none of its inputs: the decode write moves only a few MB) and a GPU spin of about half a
millisecond (so the host has enqueued the whole launch before the start event fires: the
launcher's Python work is not timed as GPU idle). The write is timed as a service calls it
per layer, with the step's `slot_start_loc` computed once beforehand (``slot_starts=``) and
``validate=False``; attention with ``validate=False`` and a preallocated output. Before any
timing, each kernel is checked once against its reference on the same inputs.

Memory: the attention reference materialises fp32 scores ``[streams, heads, new, new + W −
1]`` (3.7 GB a copy at the default prefill) and gathered fp32 windows ``[streams, W + new,
kv_heads, head]``; its peak is about 12 GB at the default prefill and 3.5 GB at the default
decode (measured on the CPU at 1/8 and 1/8 of the streams, scaled), within an 80 GB device.
Scale ``--prefill-streams`` and ``--streams`` with that in mind.

Without a CUDA device it says so and exits 0. Two more modes need no GPU:

* ``--interpret-smoke``: tiny shapes under Triton's interpreter on the CPU, checked against
  the references (the script's own test; its timings mean nothing);
* ``--compile-check``: compile the kernels exactly as the launchers configure them for an
  sm_90 (Hopper) target, through PTX to a cubin, without a GPU.

Usage::

    python benchmarks/kernels.py                      # on a CUDA machine
    python benchmarks/kernels.py --json results.json  # also write the figures
    python benchmarks/kernels.py --interpret-smoke
    python benchmarks/kernels.py --compile-check
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

# The repository root goes first on sys.path, so that `import kvunits` works from a checkout
# that was never installed (the device machine gets a copy of the working tree).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

#: Peak HBM bandwidth in byte/s and dense bf16 tensor throughput in FLOP/s, by a substring of
#: ``torch.cuda.get_device_name()`` (first match wins: specific names first). Vendor figures.
DEVICE_PEAKS: dict[str, tuple[float, float]] = {
    "H200": (4.8e12, 989e12),
    "H100 NVL": (3.9e12, 835e12),
    "H100 PCIe": (2.0e12, 756e12),
    "H100": (3.35e12, 989e12),
    "H800": (3.35e12, 989e12),
    "A100-SXM4-80GB": (2.039e12, 312e12),
    "A100 80GB PCIe": (1.935e12, 312e12),
    "A100": (1.555e12, 312e12),
    "L40S": (0.864e12, 362e12),
    "L40": (0.864e12, 181e12),
    "L4": (0.300e12, 121e12),
    "RTX 4090": (1.008e12, 165e12),
}


#: Largest |kernel − reference| accepted, per dtype and kernel (the write moves bits exactly;
#: attention rounds P to the input dtype before P·V, outputs are O(1)).
_TOLERANCE: dict[str, dict[str, float]] = {
    "bfloat16": {"write_kv": 0.0, "paged_attention": 3e-2},
    "float16": {"write_kv": 0.0, "paged_attention": 4e-3},
    "float32": {"write_kv": 0.0, "paged_attention": 1e-4},
}


@dataclass(frozen=True)
class Config:
    streams: int
    heads: int
    kv_heads: int
    head_size: int
    sliding_window: int
    pool: int
    block_size: int
    dtype: str


@dataclass(frozen=True)
class StepShape:
    name: str
    streams: int
    context: int  # encoder tokens cached before the step
    new: int  # encoder tokens the step adds per stream


@dataclass
class Result:
    step: str
    kernel: str
    rows: int
    bytes: int
    flops: int
    kernel_ms: float
    reference_ms: float
    max_abs_err: float

    @property
    def gbs(self) -> float:
        return self.bytes / (self.kernel_ms * 1e-3) / 1e9

    @property
    def speedup(self) -> float:
        return self.reference_ms / self.kernel_ms


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    if args.compile_check:
        return _compile_check()
    if args.interpret_smoke:
        # Before `kernels` is imported: its kernels are decorated at import.
        os.environ["TRITON_INTERPRET"] = "1"
    import torch

    if not args.interpret_smoke and not torch.cuda.is_available():
        print(
            "benchmarks/kernels.py: no CUDA device here, nothing timed. Run it on a machine "
            "with an NVIDIA GPU (or --interpret-smoke / --compile-check without one)."
        )
        return 0
    if args.interpret_smoke:
        config = Config(3, 4, 2, 16, 9, 4, 2, "bfloat16")
        shapes = [StepShape("decode", 3, 24, 4), StepShape("prefill", 2, 12, 13)]
        device = torch.device("cpu")
        iters, ref_iters, warmup = 1, 1, 0
    else:
        config = Config(args.streams, args.heads, args.kv_heads or args.heads, args.head_size,
                        args.sliding_window, args.pool, args.block_size, args.dtype)  # fmt: skip
        shapes = [
            StepShape("decode", args.streams, args.decode_context, args.pool),
            StepShape("prefill", args.prefill_streams, args.prefill_context, args.prefill_tokens),
        ]
        device = torch.device("cuda")
        iters, ref_iters, warmup = args.iters, args.ref_iters, 3

    from kvunits.kernels._checks import interpreted
    from kvunits.kernels._paged_swa import paged_swa_kernel

    if device.type == "cuda" and interpreted(paged_swa_kernel):
        print("benchmarks/kernels.py: TRITON_INTERPRET=1 is set; unset it to time the GPU")
        return 2
    peak_bw, peak_flops = _peaks(device, args.peak_gbs)
    _print_header(config, device, peak_bw, interpreted=args.interpret_smoke)
    results: list[Result] = []
    for shape in shapes:
        results.extend(_bench_step(config, shape, device, iters, ref_iters, warmup))
    tensor_peak = peak_flops if config.dtype in ("bfloat16", "float16") else None
    for result in results:
        _print_result(result, peak_bw, tensor_peak)
    wrong = [r for r in results if r.max_abs_err > _TOLERANCE[config.dtype][r.kernel]]
    for r in wrong:
        print(f"MISMATCH: {r.step} {r.kernel} differs from the torch reference by {r.max_abs_err}")
    if args.json:
        payload = {
            "device": _device_name(device),
            "config": asdict(config),
            "peak_bytes_per_s": peak_bw,
            "results": [{**asdict(r), "gb_per_s": r.gbs, "speedup": r.speedup} for r in results],
        }
        Path(args.json).write_text(json.dumps(payload, indent=2))
    return 1 if wrong else 0


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=256, help="decode streams")
    parser.add_argument("--heads", type=int, default=32, help="query heads")
    parser.add_argument("--kv-heads", type=int, default=None, help="KV heads (default: heads)")
    parser.add_argument("--head-size", type=int, default=64)
    parser.add_argument("--sliding-window", type=int, default=750, help="window, encoder tokens")
    parser.add_argument("--pool", type=int, default=4, help="P, encoder tokens per pooled slot")
    parser.add_argument("--block-size", type=int, default=16, help="pooled slots per block")
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    parser.add_argument("--decode-context", type=int, default=2048, help="encoder tokens")
    parser.add_argument("--prefill-streams", type=int, default=16)
    parser.add_argument("--prefill-context", type=int, default=1024, help="encoder tokens")
    parser.add_argument("--prefill-tokens", type=int, default=1024, help="encoder tokens")
    parser.add_argument("--iters", type=int, default=50, help="timed kernel launches")
    parser.add_argument("--ref-iters", type=int, default=5, help="timed reference runs")
    parser.add_argument("--peak-gbs", type=float, default=None, help="peak HBM, GB/s (1e9 B/s)")
    parser.add_argument("--json", default=None, help="also write the figures to this file")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--interpret-smoke", action="store_true", help="tiny run on the CPU")
    mode.add_argument("--compile-check", action="store_true", help="compile for sm_90, no GPU")
    return parser.parse_args(argv)


# -- building a step ---------------------------------------------------------------------------


def _spec(config: Config) -> Any:
    from kvunits.contracts import (
        CacheDType,
        Elements,
        EncoderTokens,
        KVHeads,
        PoolFactor,
        SlidingWindowLayer,
        Window,
        kernel_view,
    )

    layer = SlidingWindowLayer(
        sliding_window=Window(config.sliding_window, EncoderTokens), pool=PoolFactor(config.pool),
        kv_heads=KVHeads(config.kv_heads), head_size=Elements(config.head_size),
        dtype=CacheDType(config.dtype),
    )  # fmt: skip
    return kernel_view(layer, config.block_size).expect(EncoderTokens)


def _build(config: Config, shape: StepShape, device: Any) -> dict[str, Any]:
    """Caches holding each stream's window (blocks scattered at random), and the step."""
    import torch

    from kvunits.contracts import EncoderTokens, PooledBlocks
    from kvunits.kernels import BlockTable, QueryStartLoc, SeqLens, SlotMapping

    spec = _spec(config)
    gen = torch.Generator(device=device).manual_seed(0)
    dtype = getattr(torch, config.dtype)
    p, w = config.pool, config.sliding_window
    tpb = spec.tokens_per_block.numerical_value_in(EncoderTokens)
    bs = tpb // p
    r_count = shape.streams
    # Stagger the streams by whole pooled blocks, so their windows start at different rows.
    context = [shape.context + p * (r % bs) for r in range(r_count)]
    seq = [c + shape.new for c in context]
    lo_col = [max(0, c - w + 1) // tpb for c in context]
    hi_col = [(s - 1) // tpb for s in seq]
    width = max(hi_col) + 1
    total = sum(h - lo + 1 for lo, h in zip(lo_col, hi_col, strict=True))
    ids = (torch.randperm(total, generator=torch.Generator().manual_seed(0)) + 1).tolist()
    # Only the columns inside each stream's window hold blocks: the rest were evicted (0).
    table = [[0] * width for _ in range(r_count)]
    slots: list[int] = []
    for r in range(r_count):
        for col in range(lo_col[r], hi_col[r] + 1):
            table[r][col] = ids.pop()
        for ps in range(context[r] // p, -(-seq[r] // p)):
            slots.append(table[r][ps // bs] * bs + ps % bs)
    num_blocks = total + 1

    def randn(*size: int) -> torch.Tensor:
        return torch.randn(size, generator=gen, device=device, dtype=torch.float32).to(dtype)

    rows = r_count * shape.new
    heads, kv_heads, head = config.heads, config.kv_heads, config.head_size
    i32 = torch.int32
    return {
        "spec": spec,
        "k_cache": randn(num_blocks, tpb, kv_heads, head),
        "v_cache": randn(num_blocks, tpb, kv_heads, head),
        "table": BlockTable(torch.tensor(table, dtype=i32, device=device)),
        "qsl": QueryStartLoc(
            torch.arange(0, rows + 1, shape.new, dtype=i32, device=device), EncoderTokens
        ),
        "lens": SeqLens(torch.tensor(seq, dtype=i32, device=device), EncoderTokens),
        "slots": SlotMapping(torch.tensor(slots, dtype=torch.int64, device=device), PooledBlocks),
        "query": randn(rows, heads, head),
        "key": randn(rows, kv_heads, head),
        "value": randn(rows, kv_heads, head),
        "context": context,
        "seq": seq,
        "rows": rows,
    }


# -- timing ------------------------------------------------------------------------------------


#: Written before each timed launch: more than any L2 (50 MiB on H100 / H200).
_FLUSH_BYTES = 256 * 1024 * 1024
#: GPU clock cycles to spin before each timed launch (~0.5 ms at 2 GHz): longer than the
#: launcher's host work, so the start event does not wait on Python.
_SPIN_CYCLES = 1_000_000


def _time_ms(fn: Callable[[], object], device: Any, iters: int, warmup: int) -> float:
    """Median milliseconds of ``fn``: wall clock on the CPU, CUDA events on a GPU."""
    import torch

    for _ in range(warmup):
        fn()
    if device.type != "cuda":
        times = []
        for _ in range(iters):
            began = time.perf_counter()
            fn()
            times.append((time.perf_counter() - began) * 1e3)
        return statistics.median(times)
    flush = torch.empty(_FLUSH_BYTES, dtype=torch.int8, device=device)
    # torch.cuda.Event's constructor carries no annotations.
    new_event = torch.cuda.Event
    events = [
        (new_event(enable_timing=True), new_event(enable_timing=True))  # type: ignore[no-untyped-call]
        for _ in range(iters)
    ]
    torch.cuda.synchronize()
    for start, end in events:
        flush.zero_()
        torch.cuda._sleep(_SPIN_CYCLES)  # type: ignore[no-untyped-call]  # unannotated
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return float(statistics.median(start.elapsed_time(end) for start, end in events))


def _bench_step(
    config: Config, shape: StepShape, device: Any, iters: int, ref_iters: int, warmup: int
) -> list[Result]:
    import torch

    from kvunits.contracts import PooledBlocks
    from kvunits.kernels import (
        paged_attention,
        reference_paged_attention,
        reference_write_kv,
        slot_start_loc,
        write_kv,
    )

    case = _build(config, shape, device)
    spec, kc, vc = case["spec"], case["k_cache"], case["v_cache"]
    itemsize = torch.empty(0, dtype=getattr(torch, config.dtype)).element_size()
    hk = hv = config.head_size

    # Write: check once against the reference (on copies), then time.
    write_args = (case["key"], case["value"])
    meta = (case["slots"], case["qsl"], case["lens"], spec)
    kc_ref, vc_ref = kc.clone(), vc.clone()
    write_kv(*write_args, kc, vc, *meta)
    reference_write_kv(*write_args, kc_ref, vc_ref, *meta)
    write_err = max(
        float((kc.float() - kc_ref.float()).abs().max()),
        float((vc.float() - vc_ref.float()).abs().max()),
    )
    # Once per step in a service, shared by every layer's write.
    starts = slot_start_loc(case["qsl"], case["lens"], spec)
    write_ms = _time_ms(
        lambda: write_kv(*write_args, kc, vc, *meta, slot_starts=starts, validate=False),
        device, iters, warmup,
    )  # fmt: skip
    write_ref_ms = _time_ms(lambda: reference_write_kv(*write_args, kc_ref, vc_ref, *meta),
                            device, ref_iters, 1 if warmup else 0)  # fmt: skip
    rows = case["rows"]
    num_entries = case["slots"].tensor_in(PooledBlocks).shape[0]
    # New K/V rows read once and written once; the int64 slot mapping read once.
    write_bytes = 2 * rows * config.kv_heads * (hk + hv) * itemsize + 8 * num_entries

    # Attention: check once, then time.
    attn_args = (case["query"], kc, vc, case["table"], case["qsl"], case["lens"], spec)
    out = paged_attention(*attn_args, check_residency=True)
    expected = reference_paged_attention(*attn_args)
    attn_err = float((out.float() - expected.float()).abs().max())
    attn_ms = _time_ms(lambda: paged_attention(*attn_args, validate=False, out=out),
                       device, iters, warmup)  # fmt: skip
    attn_ref_ms = _time_ms(lambda: reference_paged_attention(*attn_args),
                           device, ref_iters, 1 if warmup else 0)  # fmt: skip
    w = config.sliding_window
    spans = list(zip(case["context"], case["seq"], strict=True))
    keys_read = sum(s - max(0, c - w + 1) for c, s in spans)
    attn_bytes = (
        rows * config.heads * (hk + hv) * itemsize  # Q read, O written
        + keys_read * config.kv_heads * (hk + hv) * itemsize  # K/V of the windows, once
    )
    pairs = sum(min(w, pos + 1) for c, s in spans for pos in range(c, s))
    attn_flops = 2 * (hk + hv) * config.heads * pairs
    return [
        Result(shape.name, "write_kv", rows, write_bytes, 0, write_ms, write_ref_ms, write_err),
        Result(shape.name, "paged_attention", rows, attn_bytes, attn_flops, attn_ms,
               attn_ref_ms, attn_err),
    ]  # fmt: skip


# -- printing ----------------------------------------------------------------------------------


def _device_name(device: Any) -> str:
    import torch

    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu (interpreter)"


def _peaks(device: Any, peak_gbs: float | None) -> tuple[float | None, float | None]:
    name = _device_name(device)
    bw, flops = next((peaks for key, peaks in DEVICE_PEAKS.items() if key in name), (None, None))
    if peak_gbs is not None:
        bw = peak_gbs * 1e9
    return bw, flops


def _bytes(n: int) -> str:
    from kvunits.contracts import ureg

    unit = "GB" if n >= 1e9 else "MB" if n >= 1e6 else "kB"
    return f"{ureg.Quantity(n, 'byte').to(unit):.2f~P}"


def _print_header(config: Config, device: Any, peak_bw: float | None, *, interpreted: bool) -> None:
    print(f"device: {_device_name(device)}")
    if peak_bw is None:
        print("peak HBM bandwidth: unknown for this device; pass --peak-gbs to get fractions")
    else:
        print(f"peak HBM bandwidth: {peak_bw / 1e9:.0f} GB/s (GB = 10^9 byte)")
    print(
        f"layer: {config.heads} heads / {config.kv_heads} KV heads × {config.head_size}, "
        f"{config.dtype}, window {config.sliding_window} encoder_token, P = {config.pool}, "
        f"{config.block_size} pooled_block/cache_block"
    )
    if interpreted:
        print("Triton interpreter on the CPU: checks the script, the timings mean nothing")
    print(
        "one line per case: step, kernel, rows; bytes moved (compulsory traffic) in the "
        "median time; bandwidth and its fraction of peak; speed-up over the torch reference"
    )


def _print_result(r: Result, peak_bw: float | None, peak_flops: float | None) -> None:
    """One line: what moved, how fast, against the device's peak and against torch."""
    of_peak = f", {r.bytes / (r.kernel_ms * 1e-3) / peak_bw:.1%} of peak" if peak_bw else ""
    compute = ""
    if r.flops:
        flops_per_s = r.flops / (r.kernel_ms * 1e-3)
        compute = f"; {flops_per_s / 1e12:.1f} TFLOP/s"
        if peak_flops:
            compute += f" ({flops_per_s / peak_flops:.1%} of dense peak)"
    print(
        f"{r.step:8} {r.kernel:16} {r.rows:6d} rows: {_bytes(r.bytes):>10} in "
        f"{r.kernel_ms:.4f} ms = {r.gbs:7.1f} GB/s{of_peak}{compute}; "
        f"{r.speedup:.1f}× the torch reference ({r.reference_ms:.3f} ms); "
        f"max |err| {r.max_abs_err:.1e}"
    )


# -- compile check -----------------------------------------------------------------------------


def _compile_check() -> int:
    """Compile each kernel as its launcher configures it, for sm_90, down to a cubin."""
    os.environ.pop("TRITON_INTERPRET", None)
    import torch
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from kvunits.kernels._paged_swa import paged_swa_kernel
    from kvunits.kernels._paged_write import paged_write_kernel
    from kvunits.kernels.attention import attention_meta
    from kvunits.kernels.cache_write import write_meta

    target = GPUTarget("cuda", 90, 32)
    short = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32"}
    # Triton turns an int argument equal to 1 into a constant (its "1" specialisation): one
    # request, one KV head, one-slot blocks, a one-column table, a window of 1.
    attention_ones = {"num_requests": 1, "table_width_col": 1, "tokens_per_block": 1,
                      "sliding_window_tok": 1}  # fmt: skip
    write_ones = {"num_requests": 1, "kv_heads": 1, "block_size_slots": 1}
    cases: list[tuple[str, Any, dict[str, str], dict[str, Any]]] = []
    for label, rows, group, head, dtype, ones, index in [
        ("decode bf16, 32 heads of 64", 1024, 1, 64, torch.bfloat16, {}, "*i32"),
        ("prefill bf16, 32 heads of 64", 16384, 1, 64, torch.bfloat16, {}, "*i32"),
        ("prefill fp32 (ieee dots)", 16384, 1, 64, torch.float32, {}, "*i32"),
        ("decode fp16, GQA group 4, head 80", 1024, 4, 80, torch.float16, {}, "*i32"),
        ("bf16, arguments equal to 1 specialised", 4, 1, 64, torch.bfloat16, attention_ones,
         "*i32"),
        ("bf16, int64 lengths, offsets and table", 1024, 1, 64, torch.bfloat16, {}, "*i64"),
    ]:  # fmt: skip
        meta = attention_meta(num_rows=rows, num_requests=256, group=group, head_k=head,
                              head_v=head, dtype=dtype, interpreted=False)  # fmt: skip
        ptr = "*" + short[dtype]
        types = {"q_ptr": ptr, "k_cache_ptr": ptr, "v_cache_ptr": ptr, "out_ptr": ptr,
                 "block_table_ptr": index, "query_start_loc_ptr": index,
                 "seq_lens_ptr": index, "scale_log2": "fp32"}  # fmt: skip
        cases.append((f"paged_swa_kernel: {label}", paged_swa_kernel, types, {**meta, **ones}))
    for label, pool, ones, index in [
        ("P = 4, 32 KV heads of 64", 4, {}, "*i32"),
        ("P = 1", 1, {}, "*i32"),
        ("P = 4, arguments equal to 1 specialised", 4, write_ones, "*i32"),
        ("P = 4, int64 lengths and offsets", 4, {}, "*i64"),
    ]:
        meta_w: dict[str, Any] = dict(write_meta(pool=pool, kv_heads=32, head_k=64, head_v=64))
        types = {"key_ptr": "*bf16", "value_ptr": "*bf16", "k_cache_ptr": "*bf16",
                 "v_cache_ptr": "*bf16", "slot_mapping_ptr": "*i64",
                 "slot_start_loc_ptr": "*i32", "query_start_loc_ptr": index,
                 "seq_lens_ptr": index}  # fmt: skip
        cases.append((f"paged_write_kernel: {label}", paged_write_kernel, types,
                      {**meta_w, **ones}))  # fmt: skip
    for label, fn, types, meta in cases:
        signature = {
            name: "constexpr" if name in meta else types.get(name, "i32") for name in fn.arg_names
        }
        start = time.perf_counter()
        compiled = triton.compile(
            ASTSource(fn=fn, signature=signature, constexprs=meta),
            target=target,
            options={"num_warps": 4},
        )
        stages = ", ".join(k for k in compiled.asm if k != "source")
        print(
            f"sm_90 {label}: {stages}; {compiled.metadata.shared} byte shared memory "
            f"({time.perf_counter() - start:.1f} s)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
