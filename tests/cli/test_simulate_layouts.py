"""``kvunits simulate`` under ``kv_cache_layout = "shared"``: residency is checked with the
geometry the coordinator really runs (issue 24, item 3).

In one shared pool the groups' block sizes are unified to one page, and a group with more
layers than a block spans is split into parts (`kvunits.runtime.shared_pool`). The residency
check must read each part's own blocks: the shipped Voxtral Realtime example's text group
grows from 16 to 128 tokens a block (its 64 KiB page unified with the audio group's 512 KiB:
the docstring of ``runtime/shared_pool.py``), and Gemma-3-1B's 22 sliding layers split into
``text/sliding_window[0..5]`` (4 layers a block: the 4 full-attention layers are the smallest
group; ``vllm/v1/core/kv_cache_utils.py``, ``_get_kv_cache_groups_uniform_page_size``).

Golden numbers, derived in each test from vLLM's eviction rule (a sliding-window manager frees
the blocks wholly below ``first - window + 1``: ``SlidingWindowManager.remove_skipped_blocks``
in ``vllm/v1/core/single_type_kv_cache_manager.py``), a stream being a 16-token prefill then
one token a step (positions 16, 17, … at steps 1, 2, …).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kvunits._simulate import Workload, as_configured, simulate, window_variants
from kvunits.cli import main
from kvunits.contracts import Tokens, Window
from kvunits.contracts.config import load_config

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "voxtral_realtime.toml"
GEMMA = REPO / "examples" / "hf" / "gemma-3-1b-it" / "config.json"
SHARED = {"kv_cache_layout": "shared"}


@pytest.fixture(scope="module")
def voxtral_shared() -> Any:
    return load_config(EXAMPLE, flags=SHARED)


@pytest.fixture(scope="module")
def gemma_shared() -> Any:
    return load_config(GEMMA, flags={**SHARED, "memory_budget": "2 GiB"})


def test_the_shipped_example_in_one_pool_loses_no_key(voxtral_shared: Any) -> None:
    # With the per-group block size (16 tokens) the check read the text group's position 16
    # in block-table column 1, which a 128-token block does not have yet: "freed" from the
    # stream's first decode step, although no block is ever freed before the window passes.
    work = Workload.for_config(voxtral_shared, streams=2, steps=250, duration=260)
    (run,) = simulate(voxtral_shared, work, as_configured(voxtral_shared))
    assert run.plan.layout == "shared"
    assert run.first_lost is None and run.lost_steps == 0
    # Both groups are checked, with the kernels' real windows.
    windows = {g.name: [str(w) for w in g.kernel_windows] for g in run.groups}
    assert windows == {"audio": ["750 encoder_token"], "text": ["8192 token"]}


def test_the_check_reads_the_shared_layouts_128_token_text_blocks(voxtral_shared: Any) -> None:
    # A text manager window of 200 tokens, checked against the kernel's real 8192: the first
    # key lost is position 0, when its block is freed. Blocks of 128 tokens: block 0 is freed
    # once first - 200 + 1 >= 128, first = 327, the stream's step 312 (327 - 15). With the
    # per-group geometry (16-token blocks) it is first = 215, step 200: the two layouts
    # differ, and each run is checked with its own.
    work = Workload.for_config(voxtral_shared, streams=1, steps=330, duration=340)
    (run,) = simulate(voxtral_shared, work, window_variants(voxtral_shared, ["200 token"]))
    lost = run.first_lost
    assert lost is not None
    assert (lost.group, lost.stream_step, str(lost.query), str(lost.key), lost.column) == (
        "text",
        312,
        "327 token",
        "0 token",
        0,
    )
    per_group = load_config(EXAMPLE)
    (run,) = simulate(per_group, work, window_variants(per_group, ["200 token"]))
    assert run.first_lost is not None
    assert (run.first_lost.stream_step, str(run.first_lost.query)) == (200, "215 token")


def test_the_seed_fixs_188_still_loses_its_key_in_one_pool(voxtral_shared: Any) -> None:
    # The audio group keeps its 16-slot blocks in one pool (its page is the largest), so the
    # seed's 188 loses token 63 at the stream's step 203 as in tests/cli/test_simulate.py.
    work = Workload.for_config(voxtral_shared, streams=1, steps=260, duration=270)
    seed_fix, right = simulate(
        voxtral_shared,
        work,
        window_variants(voxtral_shared, ["188 pooled_block", "189 pooled_block"]),
    )
    assert right.first_lost is None
    assert seed_fix.first_lost is not None
    assert (seed_fix.first_lost.stream_step, str(seed_fix.first_lost.query)) == (
        203,
        "812 encoder_token",
    )


def test_every_part_of_a_split_group_is_checked(gemma_shared: Any) -> None:
    work = Workload.for_config(gemma_shared, streams=2, steps=40, duration=50)
    (run,) = simulate(gemma_shared, work, as_configured(gemma_shared))
    parts = [f"text/sliding_window[{i}]" for i in range(6)]
    assert [g.name for g in run.groups] == [*parts, "text/full_attention"]
    for stats in run.groups[:6]:
        assert stats.kernel_windows == (Window(512, Tokens),), stats.name
    assert run.first_lost is None


@pytest.mark.parametrize(
    ("group", "focus"),
    [
        (None, "text/sliding_window[0]"),
        ("text/sliding_window", "text/sliding_window[0]"),
        ("text/sliding_window[3]", "text/sliding_window[3]"),
    ],
)
def test_compare_windows_over_a_split_group(
    gemma_shared: Any, group: str | None, focus: str
) -> None:
    # Gemma-3-1B's window of 512 tokens against 511: the window is the group's manager spec,
    # which its parts share, so naming one part varies them all. 511 slots free block 0
    # (positions 0-15) once first - 511 + 1 >= 16, first = 526 (step 511), while the kernel's
    # 512 still reads back to 526 - 511 = 15.
    work = Workload.for_config(gemma_shared, streams=1, steps=530, duration=540)
    variants = window_variants(gemma_shared, ["511 token", "512 token"], group)
    assert [v.group for v in variants] == [focus, focus]
    short, right = simulate(gemma_shared, work, variants)
    assert right.first_lost is None
    lost = short.first_lost
    assert lost is not None
    assert lost.group.startswith("text/sliding_window[")
    assert (lost.stream_step, str(lost.query), str(lost.key), lost.column) == (
        511,
        "526 token",
        "15 token",
        0,
    )
    # Every part lost its key at that step: each is a group with a table of its own.
    assert short.lost_steps >= 6


def test_the_command_line_takes_a_parts_name(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["simulate", str(GEMMA), "--kv-cache-layout", "shared", "--memory-budget", "2 GiB"]
    args += ["--streams", "1", "--steps", "530", "--duration", "540"]
    compare = ["--compare-windows", "511 token,512 token", "--group", "text/sliding_window[2]"]
    assert main([*args, *compare]) == 0
    out = capsys.readouterr().out
    assert "text/sliding_window[2]: held per stream" in out
    assert "511 token: step 511" in out
    assert main([*args, "--compare-windows", "512 token", "--group", "text/nope[0]"]) == 2
    err = capsys.readouterr().err
    assert "text/sliding_window[0]" in err and "--group 'text/nope[0]'" in err
