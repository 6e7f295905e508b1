"""A shared plan's KV-cache tensors against vLLM 0.33's own allocation, view by view (issue 23).

kvunits' side is ``allocate_kv_caches(plan, physical_layout=...)`` on a plan with
``kv_cache_layout = "shared"``. vLLM's side is its own code, run on the CPU: the model's
layers as vLLM specs (``SlidingWindowSpec`` / ``FullAttentionSpec``, block pooling as
``tokens_per_state = Fraction(1, P)`` as ``whisper_causal.py`` sets it), grouped by
``vllm.v1.core.kv_cache_planning.get_kv_cache_groups``, placed for the plan's block count by
``DefaultKVCacheConfigBuilder.get_kv_cache_config_from_groups`` and viewed by
``vllm.v1.worker.utils.allocate_kv_cache`` (on the meta device: geometry, no memory).

For every layout vLLM names (``KVCacheLayout``) and every case, either kvunits' views equal
vLLM's (the same groups and block sizes; per layer, K and V equal to vLLM's
``kv_cache.transpose(1, 2).split(head_size, -1)`` in shape, strides, byte offset and dtype),
or kvunits refuses the layout, and then the reason must show in vLLM's own layout: vLLM
refuses it too, or lays out other groups (it packs unequal pages in block-outermost layouts
instead of unifying them), or overlays other blocks of another group (checked by writing one
block of one group through vLLM's views of a 3-block buffer and reading which blocks of the
others changed).

Cases: the shipped Voxtral Realtime example (pooled audio beside text, pages 512 KiB and
64 KiB), Gemma-3-1B (sliding and full attention with one page, split to 7 groups of 4 layers)
and Gemma-4-26B-A4B (sliding 8 heads × 256 beside full 2 heads × 512: pages 128 and 64 KiB).

Run it in the vLLM venv (``benchmarks/vllm-nodeps.txt``; the worker's allocation also needs
``einops``)::

    .venv-vllm/bin/python benchmarks/vs_vllm_layout.py
"""

from __future__ import annotations

import argparse
import os
import sys
from fractions import Fraction
from importlib import import_module
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

#: name -> (config path, flags for load_config)
CASES: dict[str, tuple[str, dict[str, str]]] = {
    "voxtral-realtime": ("examples/voxtral_realtime.toml", {}),
    "gemma-3-1b": ("examples/hf/gemma-3-1b-it/config.json", {"memory_budget": "4 GiB"}),
    "gemma-4-26b-a4b": ("examples/hf/gemma-4-26b-a4b/config.json", {"memory_budget": "64 GiB"}),
}
LAYOUTS = ("LBNHC", "LBHNC", "LHBNC", "BLNHC", "BLHNC", "BHLNC")


def _vllm(module: str, *names: str) -> list[Any]:
    # Imported by name: vLLM lives in its own venv, which mypy does not see.
    found = import_module(f"vllm.{module}")
    return [getattr(found, name) for name in names]


def _kvunits_plan(path: str, flags: dict[str, str]) -> Any:
    from kvunits.contracts.config import load_config
    from kvunits.runtime import plan

    config = load_config(ROOT / path, flags={**flags, "kv_cache_layout": "shared"})
    return plan(config.model, config.engine)


def vllm_specs(plan: Any) -> dict[str, Any]:
    """The plan's model as vLLM specs per layer, at the engine's block size."""
    import torch

    from kvunits.contracts import (
        Elements,
        FullAttentionLayer,
        KVHeads,
        SlidingWindowLayer,
        manager_view,
    )
    from kvunits.contracts.internal import manager_ints

    SlidingWindowSpec, FullAttentionSpec = _vllm(
        "v1.kv_cache_interface", "SlidingWindowSpec", "FullAttentionSpec"
    )
    block = plan.engine.block_size_slots
    specs: dict[str, Any] = {}
    for name, layer in plan.model.layers.items():
        head_size = layer.head_size.numerical_value_in(Elements)
        common: dict[str, Any] = {
            "block_size": block,
            "num_kv_heads": layer.kv_heads.numerical_value_in(KVHeads),
            "head_size": head_size,
            "head_size_v": (
                head_size
                if layer.head_size_v is None
                else layer.head_size_v.numerical_value_in(Elements)
            ),
            "dtype": getattr(torch, (plan.engine.cache_dtype or layer.dtype).value),
        }
        if layer.pool is not None:
            common["tokens_per_state"] = Fraction(1, layer.pool.tokens_per_block)
        if isinstance(layer, SlidingWindowLayer):
            # The manager's window in slots (pooled blocks for a pooled layer, as vLLM's
            # whisper_causal.get_kv_cache_spec scales it); it only decides the grouping here.
            window = manager_ints(manager_view(layer, block)).sliding_window_slots
            specs[name] = SlidingWindowSpec(sliding_window=window, **common)
        elif isinstance(layer, FullAttentionLayer):
            specs[name] = FullAttentionSpec(**common)
        else:
            raise SystemExit(f"layer {name!r}: {type(layer).__name__} is not compared here")
    return specs


def vllm_layout(plan: Any, layout: str, num_blocks: int, device: str) -> tuple[Any, Any]:
    """vLLM's KV-cache config and per-layer views for the plan's model."""
    import torch

    (KVCacheLayout,) = _vllm("v1.kv_cache_layout", "KVCacheLayout")
    get_kv_cache_groups, Builder = _vllm(
        "v1.core.kv_cache_planning", "get_kv_cache_groups", "DefaultKVCacheConfigBuilder"
    )
    (allocate_kv_cache,) = _vllm("v1.worker.utils", "allocate_kv_cache")
    resolved = KVCacheLayout[layout]
    # What these functions read of a VllmConfig (one device, no HiSparse, no override).
    config = SimpleNamespace(
        scheduler_config=SimpleNamespace(disable_hybrid_kv_cache_manager=False),
        attention_config=SimpleNamespace(hisparse_config=None),
        cache_config=SimpleNamespace(
            get_resolved_kv_cache_layout=lambda: resolved,
            num_gpu_blocks_override=None,
            prefix_cache_retention_interval=None,
        ),
        model_config=SimpleNamespace(supports_kv_cache_grouping=False),
    )
    groups = get_kv_cache_groups(config, vllm_specs(plan))
    kv = Builder().get_kv_cache_config_from_groups(config, groups, num_blocks)
    return kv, allocate_kv_cache(kv, torch.device(device), resolved)


def _geometry(t: Any) -> tuple[Any, ...]:
    size = t.element_size()
    return (
        tuple(t.shape),
        tuple(s * size for s in t.stride()),
        t.storage_offset() * size,
        t.dtype,
    )


def compare(plan: Any, layout: str) -> tuple[bool, str]:
    """(agrees, what was found) for one plan and layout."""
    from kvunits.contracts import Elements, SpecError
    from kvunits.kernels import allocate_kv_caches

    blocks = plan.groups[0].num_blocks
    num_blocks = blocks.numerical_value_in(type(blocks))
    try:
        ours = allocate_kv_caches(plan, device="meta", physical_layout=layout)  # type: ignore[arg-type]
    except SpecError as err:
        return _refusal_shows_in_vllm(plan, layout, str(err))
    kv, theirs = vllm_layout(plan, layout, num_blocks, "meta")
    mine = sorted((list(p.group.layer_names), _block(p.group)) for p in plan.groups)
    vllm_groups = sorted(
        (list(g.layer_names), g.kv_cache_spec.block_size) for g in kv.kv_cache_groups
    )
    if mine != vllm_groups:
        return False, f"groups differ: kvunits {mine}, vLLM {vllm_groups}"
    if kv.num_blocks != num_blocks:
        return False, f"blocks differ: kvunits {num_blocks}, vLLM {kv.num_blocks}"
    bad = []
    for name, cache in ours.items():
        head_size = plan.model.layers[name].head_size.numerical_value_in(Elements)
        k, v = theirs[name].transpose(1, 2).split(head_size, dim=-1)
        if _geometry(cache.k_cache) != _geometry(k) or _geometry(cache.v_cache) != _geometry(v):
            bad.append(f"{name}: kvunits {_geometry(cache.k_cache)}, vLLM {_geometry(k)}")
    if bad or set(ours) != set(theirs):
        return False, f"{len(bad)} views differ: " + "; ".join(bad[:3])
    return True, f"{len(ours)} layers' K and V views equal vLLM's"


def _block(group: Any) -> int:
    from kvunits.contracts.internal import manager_ints

    return manager_ints(group.manager).block_size_slots


def _refusal_shows_in_vllm(plan: Any, layout: str, reason: str) -> tuple[bool, str]:
    """kvunits refused: does vLLM lay the model out otherwise, or overlay other blocks?"""
    import torch

    try:
        kv, views = vllm_layout(plan, layout, 3, "cpu")
    except (ValueError, NotImplementedError) as err:
        return True, f"refused; vLLM refuses too: {str(err).split(';')[0]}"
    mine = sorted(list(p.group.layer_names) for p in plan.groups)
    if sorted(list(g.layer_names) for g in kv.kv_cache_groups) != mine:
        sizes = sorted({g.kv_cache_spec.block_size for g in kv.kv_cache_groups})
        return True, (
            f"refused; vLLM packs instead: {len(kv.kv_cache_groups)} groups (kvunits "
            f"{len(mine)}), block sizes {sizes}"
        )
    first = [g.layer_names[0] for g in kv.kv_cache_groups]  # layer position 0 of each group
    for writer in first:
        for reader in first:
            if reader == writer:
                continue
            for view in views.values():
                view.view(torch.int8).zero_()
            views[writer][1].view(torch.int8).fill_(1)  # block 1 of the writer's group
            touched = views[reader].view(torch.int8).flatten(1).ne(0).any(1).nonzero()
            others = [b for b in touched.flatten().tolist() if b != 1]
            if others:
                return True, (
                    f"refused; in vLLM's layout block 1 of {writer} overlays blocks "
                    f"{touched.flatten().tolist()} of {reader}"
                )
    return False, f"refused ({reason}), but vLLM lays it out the same, blocks apart"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", choices=list(CASES), action="append")
    parser.add_argument("--layout", choices=LAYOUTS, action="append")
    args = parser.parse_args(argv)
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")  # no accelerator: vLLM's CPU platform
    try:
        import_module("vllm.v1.worker.utils")
    except ImportError as exc:
        print(f"vLLM's worker allocation is not importable ({exc}): nothing compared")
        return 0
    failures = 0
    for case in args.case or list(CASES):
        plan = _kvunits_plan(*CASES[case])
        blocks = plan.groups[0].num_blocks
        print(f"{case}: {len(plan.groups)} groups, {blocks}", flush=True)
        for layout in args.layout or LAYOUTS:
            agrees, what = compare(plan, layout)
            failures += not agrees
            print(f"  {layout}: {'ok  ' if agrees else 'FAIL'} {what}", flush=True)
    print(f"{failures} disagreements")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
