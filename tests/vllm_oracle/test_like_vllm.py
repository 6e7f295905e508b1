"""`plan_like_vllm` against vLLM 0.33's own planning functions, run in ``.venv-vllm``.

The oracle (``oracle.py`` beside this file) builds vLLM's spec objects from each model's
layers and calls ``get_global_kv_cache_groups``, ``get_kv_cache_configs`` and
``get_kv_cache_capacity`` (vllm/v1/core/kv_cache_planning.py, kv_cache_utils.py): every
number compared here is computed by vLLM's code, none is written by hand. Skipped when no
vLLM interpreter is found: ``.venv-vllm`` at the repository root (the recipe in
benchmarks/vllm-nodeps.txt, ``bash scripts/vllm-oracle`` builds it) or ``KVUNITS_VLLM_PYTHON``.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kvunits._vllm import apply_skip_layers
from kvunits.contracts import KvUnitsError, SpecError
from kvunits.contracts.config import load_config
from kvunits.runtime.like_vllm import VLLM_GPUS, plan_like_vllm

ROOT = Path(__file__).resolve().parents[2]
ORACLE = Path(__file__).with_name("oracle.py")
FIXTURES = ROOT / "tests" / "config" / "hf_fixtures"


def _vllm_python() -> Path | None:
    given = os.environ.get("KVUNITS_VLLM_PYTHON")
    candidate = Path(given) if given else ROOT / ".venv-vllm" / "bin" / "python"
    return candidate if candidate.is_file() else None


def _configs() -> list[str]:
    shipped = sorted(str(p) for p in (ROOT / "examples" / "hf").glob("*/config.json"))
    extra = sorted(str(p) for p in FIXTURES.glob("*/*/config.json")) if FIXTURES.is_dir() else []
    return [str(ROOT / "examples" / "voxtral_realtime.toml"), *shipped, *extra]


#: Engine settings to plan each config under: (tp, pp, memory, batched tokens, async, length).
_SETTINGS = [
    (1, 1, "16 GiB", "8192 token", True, None),
    (2, 1, "40 GiB", "2048 token", False, "32768 token"),
    (8, 2, "20 GiB", "16384 token", True, "8192 token"),
    (1, 1, "3 GiB", "8192 token", True, "4096 token"),
]


#: Shipped gated-delta-net hybrids (Qwen3-Next, Qwen3.5; their SOURCES.md).
_GDN_EXAMPLES = ("qwen3-next-80b-a3b-instruct", "qwen3.5-35b-a3b")


def _cases() -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = []
    for config, (tp, pp, memory, batched, async_, length) in itertools.product(
        _configs(), _SETTINGS
    ):
        flags: dict[str, Any] = {
            "tensor_parallel_size": str(tp),
            "pipeline_parallel_size": str(pp),
            "memory_budget": memory,
            "max_num_batched_tokens": batched,
            "async_scheduling": async_,
        }
        if length is not None:
            flags["max_model_len"] = length
        cases.append({"config": config, "flags": flags})
    # vLLM's auto-fit (--max-model-len -1) and --num-gpu-blocks-override, on a few models.
    for name in ("llama-3.1-8b", "gemma-3-1b-it", "gpt-oss-20b", "llama-4-scout-17b-16e-instruct"):
        config = str(ROOT / "examples" / "hf" / name / "config.json")
        small: dict[str, Any] = {
            "memory_budget": "6 GiB",
            "max_num_batched_tokens": "8192 token",
            "async_scheduling": True,
        }
        cases.append({"config": config, "flags": small, "auto_fit": True})
        cases.append({"config": config, "flags": small, "override": 5000})
    # More pipeline stages than layers: vLLM does not check them, then fails at start-up (a
    # stage without layers has 0 bytes per block: get_kv_cache_configs divides by it).
    # Recurrent-state hybrids without prefix caching (vLLM's Mamba cache mode "none"; with
    # it, "align", the default cases above).
    hybrids = [
        ROOT / "examples" / "hf" / name / "config.json"
        for name in (
            "jamba-v0.1",
            "nemotron-h-56b-base-8k",
            "nvidia-nemotron-nano-9b-v2",
            "qwen3-next-80b-a3b-instruct",
            "qwen3.5-35b-a3b",
        )
    ]
    hybrids += [
        FIXTURES / group / name / "config.json"
        for group, name in (
            ("synthetic", "synthetic--olmo_hybrid"),
            ("excerpts", "LiquidAI--LFM2-1.2B"),
            ("excerpts", "ibm-granite--granite-4.0-h-350m"),
            # Kimi delta attention beside MLA (SOURCES.md); Kimi Linear with prefix caching
            # is among the default cases above, Kimi-K3's on a named GPU below.
            ("reports", "moonshotai--Kimi-Linear-48B-A3B-Instruct"),
            ("heldout", "moonshotai--Kimi-K3"),
            ("fresh", "Qwen--Qwen3.5-9B"),
            ("fresh", "LiquidAI--LFM2.5-VL-1.6B"),
        )
    ]
    for hybrid in hybrids:
        for tp, memory in ((1, "16 GiB"), (2, "40 GiB")):
            off = {"tensor_parallel_size": str(tp), "memory_budget": memory}
            cases.append({"config": str(hybrid), "flags": off, "prefix_caching": False})
    # --kv-cache-dtype-skip-layers: some layers keep the model dtype beside an fp8 cache.
    for name, skipped in (
        ("llama-3.1-8b", ["0", "31"]),
        ("gemma-3-1b-it", ["sliding_window"]),
        ("gemma-3-1b-it", ["5", "11"]),
        ("gpt-oss-20b", ["0", "sliding_window"]),
        ("mistral-7b-v0.1", ["3"]),
    ):
        for tp, memory in ((1, "8 GiB"), (2, "20 GiB")):
            fp8 = {"tensor_parallel_size": str(tp), "memory_budget": memory, "cache_dtype": "fp8"}
            path = str(ROOT / "examples" / "hf" / name / "config.json")
            cases.append({"config": path, "flags": fp8, "skip": skipped})
    # Gated delta nets with prefix caching on a named GPU (kvunits.runtime.vllm_gdn): the
    # oracle builds each layer as vLLM's own class (QwenGatedDeltaNetAttention, OLMo's) on a
    # stand-in CUDA platform of the GPU's compute capability, so vLLM's own
    # _resolve_gdn_prefill_backend, _align_hybrid_block_size and get_kv_cache_spec decide the
    # checkpoint page and the block alignment (FlashInfer on 9.0 and 10.x; Triton on 8.x).
    gdn = [ROOT / "examples" / "hf" / n / "config.json" for n in _GDN_EXAMPLES]
    gdn += sorted(FIXTURES.glob("heldout/*--Qwen3.[56]-*/config.json"))
    gdn += [FIXTURES / "synthetic" / "synthetic--olmo_hybrid" / "config.json"]
    # Kimi-K3's KimiK3DeltaAttention (kda.py): resolve_kda_prefill_backend and its
    # get_kv_cache_spec decide FlashKDA's page (H100, B200: FlashKDA; A100: Triton); without
    # gate_lower_bound, Triton everywhere.
    gdn += [FIXTURES / "heldout" / "moonshotai--Kimi-K3" / "config.json"]
    gdn += [FIXTURES / "synthetic" / "synthetic--kimi_k3-unbounded" / "config.json"]
    for gdn_path, gpu, gdn_tp in itertools.product(gdn, ("h100", "b200", "a100-80gb"), "14"):
        on_gpu = {"memory_budget": "40 GiB", "tensor_parallel_size": gdn_tp}
        capability = list(VLLM_GPUS[gpu].compute_capability)
        cases.append(
            {"config": str(gdn_path), "flags": on_gpu, "gpu": gpu, "capability": capability}
        )
    # --max-model-len auto on them (vLLM's auto-fit with the checkpoint page).
    qwen35 = str(FIXTURES / "heldout" / "Qwen--Qwen3.5-27B" / "config.json")
    for gpu in ("h100", "a100-80gb"):
        small = {"memory_budget": "2 GiB", "tensor_parallel_size": "2"}
        capability = list(VLLM_GPUS[gpu].compute_capability)
        case = {"config": qwen35, "flags": small, "gpu": gpu, "capability": capability}
        cases.append({**case, "auto_fit": True})
    llama = str(ROOT / "examples" / "hf" / "llama-3.1-8b" / "config.json")
    for stages in ("33", "64"):
        staged = {"pipeline_parallel_size": stages, "memory_budget": "16 GiB"}
        cases.append({"config": llama, "flags": staged})
    return cases


@pytest.fixture(scope="module")
def oracle() -> Iterator[list[tuple[dict[str, Any], dict[str, Any]]]]:
    python = _vllm_python()
    if python is None:
        pytest.skip("no vLLM 0.33 interpreter (.venv-vllm or KVUNITS_VLLM_PYTHON)")
    with pytest.MonkeyPatch.context() as patch:
        # The lengths planned here may pass a model's own: planning is what is compared (the
        # bound is tested in tests/config/test_vllm_compat.py).
        patch.setenv("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "1")
        cases = _cases()
        # Multimodal wrappers' vLLM configs import torchvision (scripts/vllm-model-view).
        shim = [ROOT / "tests" / "vllm_oracle" / "torchvision_shim", ROOT / ".venv-vllm-tv"]
        if shim[1].is_dir():
            patch.setenv("PYTHONPATH", os.pathsep.join(str(p) for p in shim))
        with tempfile.TemporaryDirectory() as cwd:  # no checkout directory on sys.path
            done = subprocess.run(
                [str(python), str(ORACLE)],
                input=json.dumps(cases),
                capture_output=True,
                text=True,
                cwd=cwd,
                timeout=900,
                check=False,
            )
        assert done.returncode == 0, done.stderr[-4000:]
        answers: list[dict[str, Any]] = json.loads(done.stdout)
        yield list(zip(cases, answers, strict=True))


def _kvunits(case: dict[str, Any]) -> dict[str, Any]:
    try:
        config = load_config(case["config"], flags=case["flags"])
        if case.get("skip"):
            config = apply_skip_layers(config, case["skip"])
    except KvUnitsError as err:
        return {"not_loaded": str(err)}
    try:
        planned = plan_like_vllm(
            config.model,
            config.engine,
            auto_fit=bool(case.get("auto_fit")),
            num_gpu_blocks_override=case.get("override"),
            enable_prefix_caching=case.get("prefix_caching", True),
            gpu=VLLM_GPUS[case["gpu"]] if "gpu" in case else None,
        )
    except SpecError as err:
        return {"error": str(err)}
    return {
        "num_blocks": planned.num_blocks._value,
        "max_concurrency": planned.max_concurrency,
        "kv_cache_size": planned.kv_cache_size._value,
        "max_model_len": planned.max_model_len._value,
        "groups": [
            [g.kind, g.block_size._value, g.page_size._value, len(g.layer_names)]
            for g in planned.groups
        ],
        "headline": planned.headline(),
    }


_KINDS = {
    "FullAttentionSpec": "full_attention",
    "MLAAttentionSpec": "mla",
    "SlidingWindowSpec": "sliding_window",
    "ChunkedLocalAttentionSpec": "chunked_local",
    "CrossAttentionSpec": "cross_attention",
    "MambaSpec": "mamba",
}


def test_headline_numbers_equal_vllm(oracle: list[tuple[dict[str, Any], dict[str, Any]]]) -> None:
    """Every case: the same refusal, or the same blocks, groups and both headline numbers."""
    compared = refused = 0
    mismatches = []
    for case, vllm in oracle:
        mine = _kvunits(case)
        label = f"{Path(case['config']).parent.name} {case['flags']} {case.get('auto_fit')}"
        if "skipped" in vllm:
            if vllm["skipped"].startswith("not loaded"):
                assert "not_loaded" in mine, label
            elif vllm["skipped"].startswith("gated delta net"):
                assert "gated delta net and prefix caching" in mine.get("error", ""), label
            continue
        assert "not_loaded" not in mine, label
        if "error" in vllm:
            if "error" not in mine:
                mismatches.append(f"{label}: vLLM refuses ({vllm['error'][:200]}), kvunits plans")
            refused += 1
            continue
        if "error" in mine:
            if "cannot be split over tensor_parallel_size" in mine["error"]:
                # vLLM's attention constructors assert the same (e.g. WhisperAttention:
                # total_num_heads % tp_size == 0); the oracle builds specs, not models.
                continue
            mismatches.append(f"{label}: kvunits refuses ({mine['error'][:200]}), vLLM plans")
            continue
        groups = [[_KINDS[k], b, p, n] for k, b, p, n in vllm["groups"]]
        for key in ("num_blocks", "kv_cache_size", "max_model_len"):
            if mine[key] != vllm[key]:
                mismatches.append(f"{label}: {key} {mine[key]} != vLLM {vllm[key]}")
        if mine["max_concurrency"] != vllm["max_concurrency"]:
            mismatches.append(f"{label}: concurrency {mine['max_concurrency']} != {vllm}")
        if mine["groups"] != groups:
            mismatches.append(f"{label}: groups {mine['groups']} != vLLM {groups}")
        compared += 1
    assert not mismatches, "\n".join(mismatches)
    assert compared >= len(oracle) // 2 and refused >= 1


def test_gated_delta_net_checkpoints_by_gpu(
    oracle: list[tuple[dict[str, Any], dict[str, Any]]],
) -> None:
    """The named-GPU gated-delta-net cases were planned by vLLM (none skipped), and its
    checkpoint page shows: Qwen's GDN on an H100 (FlashInfer prefill) holds 3 state pages a
    request and blocks of a multiple of 64 tokens, on an A100 (Triton) 2 and of 16; OLMo
    Hybrid's (always Triton) the same on both. Kimi-K3's KDA on an H100 (FlashKDA) holds the
    page without aligning blocks (no get_prefill_checkpoint_alignment): the same blocks as on
    an A100 (Triton), fewer tokens; without gate_lower_bound (Triton) the same on both."""
    planned = {
        (case["config"], case["flags"]["tensor_parallel_size"], case["gpu"]): vllm
        for case, vllm in oracle
        if "gpu" in case
    }
    unplanned = {key: vllm for key, vllm in planned.items() if "num_blocks" not in vllm}
    if (
        unplanned
        and not (ROOT / ".venv-vllm-tv").is_dir()
        and all("failed to be inspected" in vllm.get("skipped", "") for vllm in unplanned.values())
    ):
        # As the oracle skips without .venv-vllm: a developer's venv without the optional
        # torchvision part, whose absence vLLM's registry reports as a multimodal wrapper that
        # "failed to be inspected"; anything else vLLM did not plan still fails below.
        pytest.skip(
            f"vLLM needs torchvision to inspect {len(unplanned)} multimodal wrappers: "
            "bash scripts/vllm-model-view builds .venv-vllm-tv once"
        )
    assert planned and not unplanned, (
        "vLLM did not plan these (a multimodal wrapper's architecture needs torchvision: "
        f"bash scripts/vllm-model-view builds .venv-vllm-tv once): {unplanned}"
    )
    for (config, tp, gpu), vllm in planned.items():
        if gpu != "h100":
            continue
        a100 = planned[(config, tp, "a100-80gb")]
        if "olmo_hybrid" in config or "kimi_k3-unbounded" in config:
            assert vllm == a100, config
        elif "Kimi-K3" in config:
            assert vllm["groups"] == a100["groups"], config
            assert vllm["kv_cache_size"] < a100["kv_cache_size"], config
        else:
            assert vllm["groups"][0][1] % 64 == 0, config
            assert vllm["max_concurrency"] != a100["max_concurrency"], config
