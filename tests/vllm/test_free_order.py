"""Which cached blocks a full pool evicts, against vLLM 0.33's own `KVCacheManager` (on the
CPU, ``.venv-vllm``; skipped without it).

vLLM 0.33's ``BlockPool.free_blocks`` puts a freed block without a hash at the front of its
free queue and a cached one at the back, so a full pool takes every block without content
before it evicts a cached prefix. kvunits puts them where vLLM does but behind the ids it never
handed out (its queue keeps those as a range): the ids differ, the prefixes kept are the same.
Here both run the same random requests (shared prompt prefixes, a few decode tokens cached as
they come, ends in between) through a pool too small to keep every prefix, and each admission
must find the prefix hit vLLM finds.
"""

from __future__ import annotations

import importlib.util
import random
from typing import Any

import pytest

from benchmarks import vs_vllm
from kvunits.contracts import (
    Elements,
    FullAttentionLayer,
    KVHeads,
    SlidingWindowLayer,
    Tokens,
    Window,
)
from kvunits.runtime import AllocationError, ContentKeys

from ..runtime.support import coordinator

if importlib.util.find_spec("vllm") is None:
    pytest.skip("vLLM 0.33 is not installed (.venv-vllm)", allow_module_level=True)

BLOCK = 4
WINDOW = 8  # tokens


class VllmSide:
    """vLLM 0.33's KVCacheManager over ``kinds`` (one layer and group each, one pool), prefix
    caching on."""

    def __init__(self, v: dict[str, Any], kinds: tuple[str, ...], num_blocks: int) -> None:
        specs = [
            v["SlidingWindowSpec"](
                block_size=BLOCK, num_kv_heads=1, head_size=1, dtype=v["torch"].float32,
                sliding_window=WINDOW,
            )
            if kind == "sliding"
            else v["FullAttentionSpec"](
                block_size=BLOCK, num_kv_heads=1, head_size=1, dtype=v["torch"].float32
            )
            for kind in kinds
        ]
        page = specs[0].page_size_bytes
        config = v["KVCacheConfig"](
            num_blocks=num_blocks,
            kv_cache_tensors=[
                v["KVCacheTensor"](
                    size=page * num_blocks, layers=[f"l{i}"], layer_stride=page * num_blocks,
                    block_stride=page,
                )
                for i in range(len(kinds))
            ],
            kv_cache_groups=[
                v["KVCacheGroupSpec"]([f"l{i}"], spec) for i, spec in enumerate(specs)
            ],
        )
        self.v = v
        self.mgr = v["KVCacheManager"](
            config, max_model_len=4096, scheduler_block_size=BLOCK, hash_block_size=BLOCK,
            enable_caching=True, max_in_flight_tokens=4096,
        )
        fn = v["get_hash_fn_by_name"]("sha256")
        v["init_none_hash"](fn)
        self.hasher = v["get_request_block_hasher"](BLOCK, fn)
        self.requests: dict[str, Any] = {}

    def admit(self, rid: str, prompt: list[int], decode: int) -> int | None:
        """The prompt's hit in tokens, its blocks taken; None where the pool is short."""
        req = self.v["Request"](
            request_id=rid, prompt_token_ids=prompt,
            sampling_params=self.v["SamplingParams"](max_tokens=decode + 1),
            pooling_params=None, block_hasher=self.hasher,
        )
        blocks, hit, *_ = self.mgr.get_computed_blocks(req)
        if self.mgr.allocate_slots(req, len(prompt) - hit, hit, blocks) is None:
            return None
        req.num_computed_tokens = len(prompt)
        self.requests[rid] = req
        return int(hit)

    def decode(self, rid: str, token: int) -> bool:
        req = self.requests[rid]
        req.append_output_token_ids(token)
        if self.mgr.allocate_slots(req, 1) is None:
            return False
        req.num_computed_tokens += 1
        return True

    def free(self, rid: str) -> None:
        self.mgr.free(self.requests.pop(rid))


class KvunitsSide:
    """kvunits' coordinator over the same groups, one shared pool of the same size (vLLM's
    ``num_blocks`` counts the null block, as kvunits' pools do)."""

    def __init__(self, kinds: tuple[str, ...], num_blocks: int) -> None:
        layers = {
            f"l{i}": SlidingWindowLayer(
                sliding_window=Window(WINDOW, Tokens), kv_heads=KVHeads(1), head_size=Elements(1)
            )
            if kind == "sliding"
            else FullAttentionLayer(kv_heads=KVHeads(1), head_size=Elements(1))
            for i, kind in enumerate(kinds)
        }
        self.coord = coordinator(
            layers, block_size=BLOCK, num_blocks=num_blocks, max_len=4096, max_in_flight=4096,
            reserve=False, shared=len(kinds) > 1,
        )
        self.handles = [self.coord.group(name, Tokens) for name in layers]
        self.step: Any = self.coord.stepper(*self.handles)  # (its arity: the kinds)

    def admit(self, rid: str, prompt: list[int], decode: int) -> int | None:
        content = ContentKeys(prompt, Tokens)
        n = len(self.handles)
        length = Tokens(len(prompt) + decode)
        hits = self.step.admit_with_prefix(
            rid, *[length] * n, prefix=tuple(h.block_hashes(content) for h in self.handles)
        )
        tokens: int = hits[0].numerical_value_in(Tokens)
        assert all(hit == hits[0] for hit in hits), hits  # (one sequence: one hit)
        try:
            self.step.allocate(rid, *[Tokens(len(prompt) - tokens)] * n)
        except AllocationError:
            self.coord.free(rid)
            return None
        return tokens

    def decode(self, rid: str, token: int) -> bool:
        self.coord.extend_content(rid, self.handles[0], ContentKeys([token], Tokens))
        try:
            self.step.allocate(rid, *[Tokens(1)] * len(self.handles))
        except AllocationError:
            return False
        return True

    def free(self, rid: str) -> None:
        self.coord.free(rid)


def _sides(kinds: tuple[str, ...], blocks: int) -> tuple[VllmSide, KvunitsSide]:
    """vLLM 0.33's manager and kvunits' coordinator over ``kinds``, ``blocks`` blocks a
    group."""
    found = vs_vllm.import_vllm()
    assert not isinstance(found, str), found
    return VllmSide(found, kinds, blocks * len(kinds)), KvunitsSide(kinds, blocks * len(kinds))


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize(
    "kinds", [("full",), ("sliding",), ("full", "sliding")], ids=["full", "sliding", "both"]
)
def test_a_full_pool_keeps_the_prefixes_vllm_keeps(kinds: tuple[str, ...], seed: int) -> None:
    # 300 requests, up to 4 running: a prompt of one of 5 prefixes (3 to 9 blocks) and a
    # suffix of 0 to 6 tokens of its own, then 0 to 9 decode tokens cached as they come;
    # 40 blocks a group in the pool, so ends leave cached prefixes that later prompts evict
    # or hit. A window of 8 tokens drops blocks as a request steps (several at its first
    # decode step after a prompt), the last first.
    rng = random.Random(seed)
    prefixes = [[100 * p + t for t in range(BLOCK * rng.randint(3, 9))] for p in range(5)]
    v, k = _sides(kinds, 40)
    running: dict[str, int] = {}  # request -> decode tokens left
    hits = 0
    for i in range(300):
        while len(running) >= 4 or (running and rng.random() < 0.3):
            rid = rng.choice(sorted(running))
            left = running[rid]
            if left and rng.random() < 0.8:
                token = rng.randrange(1000)
                ok = v.decode(rid, token)
                assert k.decode(rid, token) == ok, (seed, i, rid)
                running[rid] = left - 1 if ok else 0
                continue
            v.free(rid)
            k.free(rid)
            del running[rid]
        rid = f"r{i}"
        prompt = rng.choice(prefixes) + [rng.randrange(10**6) for _ in range(rng.randint(0, 6))]
        decode = rng.randint(0, 9)
        got = v.admit(rid, prompt, decode)
        assert k.admit(rid, prompt, decode) == got, (seed, i)
        if got is not None:
            running[rid] = decode
            hits += got > 0
    assert hits > 50, hits  # (the prefixes were hit, and evicted: else nothing is checked)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize(
    "kinds", [("full",), ("sliding",), ("full", "sliding")], ids=["full", "sliding", "both"]
)
def test_an_idle_pool_keeps_the_prefixes_vllm_keeps(kinds: tuple[str, ...], seed: int) -> None:
    # Waves of requests, every one ended before the next wave (the pool idle in between):
    # kvunits then forgets the order of the blocks without content (`PoolPlan._emit_idle`,
    # once its queue has doubled), vLLM keeps its queue. A wave of up to 40 requests: a
    # prompt of one of 5 prefixes (3 to 30 blocks) and a suffix of its own, then up to 20
    # decode tokens cached as they come, ended in random order; 300 blocks a group, so
    # later waves evict cached blocks, and each admission must find the hit vLLM finds.
    rng = random.Random(seed)
    prefixes = [[100 * p + t for t in range(BLOCK * rng.randint(3, 30))] for p in range(5)]
    v, k = _sides(kinds, 300)
    pool = k.coord._core.pools[0]
    hits = rewrites = 0
    for wave in range(10):
        running = []
        for i in range(rng.randint(10, 40)):
            rid = f"w{wave}-{i}"
            own = [rng.randrange(10**6) for _ in range(rng.randint(1, 9))]
            prompt = rng.choice(prefixes) + own
            decode = rng.randint(0, 20)
            got = v.admit(rid, prompt, decode)
            assert k.admit(rid, prompt, decode) == got, (seed, wave, i)
            if got is None:
                break
            hits += got > 0
            running.append((rid, decode))
        for rid, decode in running:
            for _ in range(decode):
                token = rng.randrange(1000)
                ok = v.decode(rid, token)
                assert k.decode(rid, token) == ok, (seed, wave, rid)
                if not ok:
                    break
        idle = pool._idle
        rng.shuffle(running)
        for rid, _ in running:
            v.free(rid)
            k.free(rid)
        rewrites += pool._idle != idle
    # (Else nothing is checked. One rewrite: it leaves most of the pool queued, cached
    # blocks at every height, and the queue cannot double past the pool after it.)
    assert hits > 50 and rewrites, (hits, rewrites)
