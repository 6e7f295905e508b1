# ruff: noqa: E501
# fmt: off
"""A step and the content its positions hold, in one call, in each sequence's own unit.

`Stepper.advance_with_content` takes the step's counts (one per bound group, in its handle's
unit) and, per sequence, a group reading it with its content: encoder-token keys for the
pooled audio group, token ids for the text group. Content of the other unit, a bare list, or
a bare count is rejected by mypy here and by the run time (`UnitTypeError`).
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
from kvunits.runtime import ContentBatch, ContentKeys, KVCacheCoordinator
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
audio = coord.group("audio", EncoderTokens)
text = coord.group("text", Tokens)
step = coord.stepper(audio, text)

empty = (audio.block_hashes(ContentKeys([], EncoderTokens)), text.block_hashes(ContentKeys([], Tokens)))
step.admit_with_prefix("r1", EncoderTokens(40_000), Tokens(512), prefix=empty)
step.advance_with_content("r1", EncoderTokens(4), Tokens(1), content=[(audio, ContentKeys([5] * 4, EncoderTokens)), (text, ContentKeys([5], Tokens))])

step.advance_with_content("r1", EncoderTokens(4), Tokens(1), content=[(text, ContentKeys([5], EncoderTokens))])  # E: List item 0 has incompatible type "tuple[GroupHandle[Tokens, Any], ContentKeys[EncoderTokens]]"; expected "tuple[GroupHandle[Tokens, Any], ContentKeys[Tokens]] | tuple[GroupHandle[EncoderTokens, Any] | GroupHandle[PooledBlocks, Any], ContentKeys[EncoderTokens]]"  [list-item]
step.advance_with_content("r1", EncoderTokens(4), Tokens(1), content=[(audio, ContentKeys([5] * 4, Tokens))])  # E: List item 0 has incompatible type "tuple[GroupHandle[EncoderTokens, Any], ContentKeys[Tokens]]"; expected "tuple[GroupHandle[Tokens, Any], ContentKeys[Tokens]] | tuple[GroupHandle[EncoderTokens, Any] | GroupHandle[PooledBlocks, Any], ContentKeys[EncoderTokens]]"  [list-item]
step.advance_with_content("r1", EncoderTokens(4), Tokens(1), content=[(text, [5])])  # E: List item 0 has incompatible type "tuple[GroupHandle[Tokens, Any], list[int]]"; expected "tuple[GroupHandle[Tokens, Any], ContentKeys[Tokens]] | tuple[GroupHandle[EncoderTokens, Any] | GroupHandle[PooledBlocks, Any], ContentKeys[EncoderTokens]]"  [list-item]
step.advance_with_content("r1", EncoderTokens(4), 1, content=[(text, ContentKeys([5], Tokens))])  # E: Argument 3 to "advance_with_content" of "Stepper" has incompatible type "int"; expected "Tokens"  [arg-type]

# An engine step's batch in one call: per sequence, one ContentKeys of the whole batch's keys in
# request order (the sampled tokens; their audio), each in that sequence's own unit.
step.admit_with_prefix("r2", EncoderTokens(128), Tokens(32), prefix=empty)
step.advance_with_content("r2", EncoderTokens(4), Tokens(1), content=[(audio, ContentKeys([6] * 4, EncoderTokens)), (text, ContentKeys([6], Tokens))])
step.advance_with_content_all(["r1", "r2"], EncoderTokens(4), Tokens(1), content=[(audio, ContentKeys([5] * 4 + [6] * 4, EncoderTokens)), (text, ContentKeys([5, 6], Tokens))])

step.advance_with_content_all(["r1", "r2"], EncoderTokens(4), Tokens(1), content=[(text, ContentKeys([5, 6], EncoderTokens))])  # E: List item 0 has incompatible type "tuple[GroupHandle[Tokens, Any], ContentKeys[EncoderTokens]]"; expected "tuple[GroupHandle[Tokens, Any], ContentKeys[Tokens]] | tuple[GroupHandle[EncoderTokens, Any] | GroupHandle[PooledBlocks, Any], ContentKeys[EncoderTokens]]"  [list-item]
step.advance_with_content_all(["r1", "r2"], EncoderTokens(4), Tokens(1), content=[(audio, ContentKeys([5] * 8, Tokens))])  # E: List item 0 has incompatible type "tuple[GroupHandle[EncoderTokens, Any], ContentKeys[Tokens]]"; expected "tuple[GroupHandle[Tokens, Any], ContentKeys[Tokens]] | tuple[GroupHandle[EncoderTokens, Any] | GroupHandle[PooledBlocks, Any], ContentKeys[EncoderTokens]]"  [list-item]
step.advance_with_content_all(["r1", "r2"], EncoderTokens(4), Tokens(1), content=[(text, [5, 6])])  # E: List item 0 has incompatible type "tuple[GroupHandle[Tokens, Any], list[int]]"; expected "tuple[GroupHandle[Tokens, Any], ContentKeys[Tokens]] | tuple[GroupHandle[EncoderTokens, Any] | GroupHandle[PooledBlocks, Any], ContentKeys[EncoderTokens]]"  [list-item]
step.advance_with_content_all(["r1", "r2"], EncoderTokens(4), 1, content=[(text, ContentKeys([5, 6], Tokens))])  # E: Argument 3 to "advance_with_content_all" of "Stepper" has incompatible type "int"; expected "Tokens"  [arg-type]

# A drafting step with what the latest step produced, in one call: the step's counts, its
# lookahead and the latest step's rejected drafts per bound group, the content per sequence,
# each in its own unit.
step.advance_speculative_with_content("r2", EncoderTokens(4), Tokens(1), lookahead=(EncoderTokens(0), Tokens(2)), rejected=(EncoderTokens(0), Tokens(0)), content=[(audio, ContentKeys([7] * 4, EncoderTokens)), (text, ContentKeys([7], Tokens))])

step.advance_speculative_with_content("r2", EncoderTokens(4), Tokens(1), lookahead=(EncoderTokens(0), Tokens(2)), rejected=(EncoderTokens(0), Tokens(2)), content=[(text, ContentKeys([7], EncoderTokens))])  # E: List item 0 has incompatible type "tuple[GroupHandle[Tokens, Any], ContentKeys[EncoderTokens]]"; expected "tuple[GroupHandle[Tokens, Any], ContentKeys[Tokens]] | tuple[GroupHandle[EncoderTokens, Any] | GroupHandle[PooledBlocks, Any], ContentKeys[EncoderTokens]]"  [list-item]
step.advance_speculative_with_content("r2", EncoderTokens(4), Tokens(1), lookahead=(EncoderTokens(0), Tokens(2)), rejected=(EncoderTokens(0), 2), content=[(text, ContentKeys([7], Tokens))])  # E: Argument "rejected" to "advance_speculative_with_content" of "Stepper" has incompatible type "tuple[EncoderTokens, int]"; expected "tuple[EncoderTokens, Tokens]"  [arg-type]
step.advance_speculative_with_content("r2", EncoderTokens(4), Tokens(1), lookahead=(Tokens(0), Tokens(2)), rejected=(EncoderTokens(0), Tokens(2)), content=[(text, ContentKeys([7], Tokens))])  # E: Argument "lookahead" to "advance_speculative_with_content" of "Stepper" has incompatible type "tuple[Tokens, Tokens]"; expected "tuple[EncoderTokens, Tokens]"  [arg-type]

# The same for an engine step's batch in one call: each request's rejected drafts, and per
# sequence one ContentKeys per request (what its latest step produced), in its own unit.
step.advance_speculative_all_with_content(["r1", "r2"], EncoderTokens(4), Tokens(1), lookahead=(EncoderTokens(0), Tokens(2)), rejected=[(EncoderTokens(0), Tokens(0)), (EncoderTokens(0), Tokens(0))], content=[(audio, [ContentKeys([8] * 4, EncoderTokens), ContentKeys([9] * 4, EncoderTokens)]), (text, [ContentKeys([8], Tokens), ContentKeys([9], Tokens)])])

step.advance_speculative_all_with_content(["r1", "r2"], EncoderTokens(4), Tokens(1), lookahead=(EncoderTokens(0), Tokens(2)), rejected=[(EncoderTokens(0), Tokens(2))] * 2, content=[(text, [ContentKeys([8], EncoderTokens), ContentKeys([9], EncoderTokens)])])  # E: List item 0 has incompatible type "tuple[GroupHandle[Tokens, Any], list[ContentKeys[EncoderTokens]]]"; expected "tuple[GroupHandle[Tokens, Any], ContentBatch[Tokens] | Sequence[ContentKeys[Tokens]]] | tuple[GroupHandle[EncoderTokens, Any] | GroupHandle[PooledBlocks, Any], ContentBatch[EncoderTokens] | Sequence[ContentKeys[EncoderTokens]]]"  [list-item]
step.advance_speculative_all_with_content(["r1", "r2"], EncoderTokens(4), Tokens(1), lookahead=(EncoderTokens(0), Tokens(2)), rejected=[(EncoderTokens(0), 2)] * 2, content=[(text, [ContentKeys([8], Tokens)] * 2)])  # E: List item 0 has incompatible type "tuple[EncoderTokens, int]"; expected "tuple[EncoderTokens, Tokens]"  [list-item]
step.advance_speculative_all_with_content(["r1", "r2"], EncoderTokens(4), Tokens(1), lookahead=(EncoderTokens(0), Tokens(2)), rejected=[(EncoderTokens(0), Tokens(2))] * 2, content=[(text, ContentKeys([8, 9], Tokens))])  # E: List item 0 has incompatible type "tuple[GroupHandle[Tokens, Any], ContentKeys[Tokens]]"; expected "tuple[GroupHandle[Tokens, Any], ContentBatch[Tokens] | Sequence[ContentKeys[Tokens]]] | tuple[GroupHandle[EncoderTokens, Any] | GroupHandle[PooledBlocks, Any], ContentBatch[EncoderTokens] | Sequence[ContentKeys[EncoderTokens]]]"  [list-item]

# Or one ContentBatch per sequence (each request's keys, checked in passes over the batch).
step.advance_speculative_all_with_content(["r1", "r2"], EncoderTokens(4), Tokens(1), lookahead=(EncoderTokens(0), Tokens(2)), rejected=[(EncoderTokens(0), Tokens(0))] * 2, content=[(audio, ContentBatch([[8] * 4, [9] * 4], EncoderTokens)), (text, ContentBatch([[8], [9]], Tokens))])

step.advance_speculative_all_with_content(["r1", "r2"], EncoderTokens(4), Tokens(1), lookahead=(EncoderTokens(0), Tokens(2)), rejected=[(EncoderTokens(0), Tokens(2))] * 2, content=[(text, ContentBatch([[8], [9]], EncoderTokens))])  # E: List item 0 has incompatible type "tuple[GroupHandle[Tokens, Any], ContentBatch[EncoderTokens]]"; expected "tuple[GroupHandle[Tokens, Any], ContentBatch[Tokens] | Sequence[ContentKeys[Tokens]]] | tuple[GroupHandle[EncoderTokens, Any] | GroupHandle[PooledBlocks, Any], ContentBatch[EncoderTokens] | Sequence[ContentKeys[EncoderTokens]]]"  [list-item]
