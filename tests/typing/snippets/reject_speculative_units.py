# ruff: noqa: E501
# fmt: off
"""Speculative steps and their rollback count each group in its handle's unit, like a step.

The lookahead of a step (a drafter's proposals) and the positions a rollback rejects are
quantities of the group they are for: encoder tokens for an audio group stepped in encoder
tokens, tokens for the text group. The wrong unit, or a bare int, is rejected by mypy here and
by the run time (`UnitTypeError`).
"""

from kvunits.contracts import (
    Elements,
    EncoderTokens,
    EngineSpec,
    FullAttentionLayer,
    KVHeads,
    Layers,
    ModelSpec,
    PoolFactor,
    SlidingWindowLayer,
    Tokens,
    Window,
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
    max_encoder_tokens_per_step=EncoderTokens(16),
    memory_budget=RankBytes(64 << 20),
)
coord = KVCacheCoordinator.from_plan(plan(model, engine))
step = coord.stepper(coord.group("audio", EncoderTokens), coord.group("text", Tokens))
step.admit("r1", EncoderTokens(40_000), Tokens(512))

# One text token for sure, three drafted after it; no audio lookahead.
step.allocate_speculative("r1", EncoderTokens(4), Tokens(1), lookahead=(EncoderTokens(0), Tokens(3)))
step.rollback("r1", EncoderTokens(0), Tokens(2))  # two of the three drafts rejected

step.allocate_speculative("r1", EncoderTokens(4), Tokens(1), lookahead=(Tokens(0), Tokens(3)))  # E: Argument "lookahead" to "allocate_speculative" of "Stepper" has incompatible type "tuple[Tokens, Tokens]"; expected "tuple[EncoderTokens, Tokens]"  [arg-type]
step.allocate_speculative("r1", EncoderTokens(4), Tokens(1), lookahead=(0, 3))  # E: Argument "lookahead" to "allocate_speculative" of "Stepper" has incompatible type "tuple[int, int]"; expected "tuple[EncoderTokens, Tokens]"  [arg-type]
step.rollback("r1", Tokens(0), Tokens(1))  # E: Argument 2 to "rollback" of "Stepper" has incompatible type "Tokens"; expected "EncoderTokens"  [arg-type]
step.rollback("r1", EncoderTokens(0), 1)  # E: Argument 3 to "rollback" of "Stepper" has incompatible type "int"; expected "Tokens"  [arg-type]

# A drafting scheduler's step in one call: the latest step's rejected drafts, then a new step.
step.advance_speculative("r1", EncoderTokens(4), Tokens(1), lookahead=(EncoderTokens(0), Tokens(3)), rejected=(EncoderTokens(0), Tokens(1)))
step.advance_speculative_all(["r1"], EncoderTokens(4), Tokens(1), lookahead=(EncoderTokens(0), Tokens(3)), rejected=[(EncoderTokens(0), Tokens(2))])

step.advance_speculative("r1", EncoderTokens(4), Tokens(1), lookahead=(EncoderTokens(0), Tokens(3)), rejected=(Tokens(0), Tokens(1)))  # E: Argument "rejected" to "advance_speculative" of "Stepper" has incompatible type "tuple[Tokens, Tokens]"; expected "tuple[EncoderTokens, Tokens]"  [arg-type]
step.advance_speculative("r1", EncoderTokens(4), Tokens(1), lookahead=(EncoderTokens(0), Tokens(3)), rejected=(0, 1))  # E: Argument "rejected" to "advance_speculative" of "Stepper" has incompatible type "tuple[int, int]"; expected "tuple[EncoderTokens, Tokens]"  [arg-type]
step.advance_speculative_all(["r1"], EncoderTokens(4), Tokens(1), lookahead=(EncoderTokens(0), Tokens(3)), rejected=[(EncoderTokens(0), 1)])  # E: List item 0 has incompatible type "tuple[EncoderTokens, int]"; expected "tuple[EncoderTokens, Tokens]"  [list-item]
step.advance_speculative_all(["r1"], EncoderTokens(4), 1, lookahead=(EncoderTokens(0), Tokens(3)), rejected=[(EncoderTokens(0), Tokens(0))])  # E: Argument 3 to "advance_speculative_all" of "Stepper" has incompatible type "int"; expected "Tokens"  [arg-type]
