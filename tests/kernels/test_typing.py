"""mypy (strict, the repo's mypy.ini) rejects wrong units at the kernel wrappers.

Each line marked ``# E: <code>`` must be reported with that error code, and nothing else may
be reported: the correct calls in the snippet type-check cleanly.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

api = pytest.importorskip("mypy.api")

ROOT = Path(__file__).resolve().parents[2]

SNIPPET = """\
import torch

from kvunits.contracts import EncoderTokens, KernelSpec, PooledBlocks, PoolFactor, Tokens, Window
from kvunits.kernels import (
    BlockTable, QueryStartLoc, SeqLens, SlotMapping, paged_attention, unpool_seq_lens, write_kv,
)


def step(
    spec: KernelSpec[EncoderTokens],
    q: torch.Tensor,
    table: BlockTable,
    qsl: QueryStartLoc[EncoderTokens],
    lens: SeqLens[EncoderTokens],
    slots: SlotMapping[PooledBlocks],
) -> None:
    paged_attention(q, q, q, table, qsl, lens, spec)
    paged_attention(q, q, q, table, qsl, lens, spec, sliding_window=Window(750, EncoderTokens))
    write_kv(q, q, q, q, slots, qsl, lens, spec)

    pooled = SeqLens(torch.tensor([188]), PooledBlocks)
    paged_attention(q, q, q, table, qsl, pooled, spec)  # E: arg-type
    in_slots = PooledBlocks(189)
    paged_attention(q, q, q, table, qsl, lens, spec, sliding_window=in_slots)  # E: call-overload
    paged_attention(q, q, q, table, qsl, torch.tensor([750]), spec)  # E: call-overload
    token_slots = SlotMapping(torch.tensor([3]), Tokens)
    write_kv(q, q, q, q, token_slots, qsl, lens, spec)  # E: arg-type
    unpool_seq_lens(lens, PoolFactor(4))  # E: arg-type
    exact: SeqLens[EncoderTokens] = unpool_seq_lens(pooled, PoolFactor(4))
    paged_attention(q, q, q, table, qsl, exact, spec)
"""


@pytest.mark.slow
def test_mypy_rejects_wrong_units(tmp_path: Path) -> None:
    path = tmp_path / "snippet_kernels.py"
    path.write_text(SNIPPET)
    expected = {
        (number, code)
        for number, line in enumerate(SNIPPET.splitlines(), start=1)
        for code in re.findall(r"# E: ([\w-]+)", line)
    }
    stdout, stderr, _ = api.run(
        [
            "--config-file", str(ROOT / "mypy.ini"),
            "--cache-dir", str(ROOT / ".mypy_cache"),
            "--no-error-summary", "--show-error-codes",
            str(path),
        ]
    )  # fmt: skip
    reported = {
        (int(m.group(1)), m.group(2))
        for m in re.finditer(r"^.*?:(\d+): error: .*\[([\w-]+)\]$", stdout, re.MULTILINE)
    }
    assert reported == expected, stdout + stderr
