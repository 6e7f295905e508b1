# ruff: noqa: E501
# fmt: off
"""The allocator takes each group's counts in that group's own unit.

A Voxtral coordinator has a pooled audio group (its manager counts `PooledBlocks`) and a text
group (`Tokens`). Encoder tokens where the audio group expects pooled blocks, or a bare int,
are rejected by mypy here and by the coordinator at run time (`UnitTypeError`).
"""

from kvunits.contracts import (
    CacheBlocks,
    Elements,
    EncoderTokens,
    EngineSpec,
    FullAttentionLayer,
    KVHeads,
    Layers,
    ModelSpec,
    PooledBlocks,
    PoolFactor,
    SlidingWindowLayer,
    Tokens,
    Window,
    pool_length,
)
from kvunits.contracts.deploy import RankBytes
from kvunits.runtime import KVCacheCoordinator
from kvunits.runtime.capacity import plan

encoder = SlidingWindowLayer(
    sliding_window=Window(750, EncoderTokens), pool=PoolFactor(4), kv_heads=KVHeads(32), head_size=Elements(64)
)
decoder = FullAttentionLayer(kv_heads=KVHeads(8), head_size=Elements(128))
model = ModelSpec.stacked("voxtral", {"audio": (encoder, Layers(2)), "text": (decoder, Layers(2))})
engine = EngineSpec(
    block_size_slots=16,
    max_model_len=Tokens(4096),
    max_num_batched_tokens=Tokens(512),
    max_encoder_len=EncoderTokens(40_000),
    max_encoder_tokens_per_step=EncoderTokens(4),
    memory_budget=RankBytes(64 << 20),
)
coord = KVCacheCoordinator.from_plan(plan(model, engine))
audio = coord.group("audio", PooledBlocks)
text = coord.group("text", Tokens)
step = coord.stepper(audio, text)
step.admit("r1", PooledBlocks(10_000), Tokens(512))

# Four encoder tokens are one pooled block: convert with the named function, then step.
step.allocate("r1", pool_length(EncoderTokens(4), PoolFactor(4)), Tokens(1))

step.allocate("r1", EncoderTokens(4), Tokens(1))  # E: Argument 2 to "__call__" of "AllocateFn" has incompatible type "EncoderTokens"; expected "PooledBlocks"  [arg-type]
step.allocate("r1", 1, Tokens(1))  # E: Argument 2 to "__call__" of "AllocateFn" has incompatible type "int"; expected "PooledBlocks"  [arg-type]
step.allocate("r1", PooledBlocks(1), 1)  # E: Argument 3 to "__call__" of "AllocateFn" has incompatible type "int"; expected "Tokens"  [arg-type]
step.admit("r2", EncoderTokens(40_000), Tokens(512))  # E: Argument 2 to "admit" of "Stepper" has incompatible type "EncoderTokens"; expected "PooledBlocks"  [arg-type]
coord.group("audio", CacheBlocks)  # E: Value of type variable "StepUnit" of "group" of "KVCacheCoordinator" cannot be "CacheBlocks"  [type-var]

# The same pooled group stepped in encoder tokens, as an audio stream arrives: its handle's
# steps count EncoderTokens, and whole pooled blocks are refused there.
coord.free("r1")
stream = coord.stepper(coord.group("audio", EncoderTokens), text)
stream.admit("r2", EncoderTokens(40_000), Tokens(512))
stream.allocate("r2", EncoderTokens(6), Tokens(1))
stream.allocate("r2", PooledBlocks(1), Tokens(1))  # E: Argument 2 to "__call__" of "AllocateFn" has incompatible type "PooledBlocks"; expected "EncoderTokens"  [arg-type]

# An engine step of each request's own counts (a prefill chunk beside a decode): a tuple per
# request, in the stepper's units, as each request's own step takes them.
stream.admit("r3", EncoderTokens(256), Tokens(64))
stream.advance_each(["r2", "r3"], [(EncoderTokens(2), Tokens(1)), (EncoderTokens(8), Tokens(16))])
stream.advance_each(["r2", "r3"], [(EncoderTokens(2), Tokens(1)), (PooledBlocks(16), Tokens(16))])  # E: List item 1 has incompatible type "tuple[PooledBlocks, Tokens]"; expected "tuple[EncoderTokens, Tokens]"  [list-item]
stream.advance_each(["r2", "r3"], [(EncoderTokens(2), 1)])  # E: List item 0 has incompatible type "tuple[EncoderTokens, int]"; expected "tuple[EncoderTokens, Tokens]"  [list-item]

# A drafting engine step of each request's own counts (a prompt chunk beside a drafting step):
# a tuple per request of its counts, of its drafts and of its rejected drafts, in the
# stepper's units.
none = (EncoderTokens(0), Tokens(0))
stream.advance_speculative_each(["r2", "r3"], [(EncoderTokens(2), Tokens(1)), (EncoderTokens(8), Tokens(16))], lookahead=[(EncoderTokens(4), Tokens(2)), none], rejected=[none, none])
stream.advance_speculative_each(["r2", "r3"], [(EncoderTokens(2), Tokens(1)), (EncoderTokens(8), Tokens(16))], lookahead=[(PooledBlocks(1), Tokens(2)), none], rejected=[none, none])  # E: List item 0 has incompatible type "tuple[PooledBlocks, Tokens]"; expected "tuple[EncoderTokens, Tokens]"  [list-item]
stream.advance_speculative_each(["r2", "r3"], [(EncoderTokens(2), Tokens(1)), none], lookahead=[none, none], rejected=[(EncoderTokens(2), 1), none])  # E: List item 0 has incompatible type "tuple[EncoderTokens, int]"; expected "tuple[EncoderTokens, Tokens]"  [list-item]
