# ruff: noqa: E501
# fmt: off
"""Prefix caching hashes what one cache block of *one group* holds, in that group's units.

A Voxtral coordinator's audio group is pooled (P = 4): one block holds 16 pooled blocks, 64
encoder tokens, so its content is keyed per encoder token; the text group's block holds 16
tokens. Token ids given to the audio group, encoder-token content given to the text group, or
one group's block hashes given to the other (the bug class of vLLM #53142), are rejected by
mypy here and by the run time (`UnitTypeError`, `UnitValueError`).
"""

from kvunits.contracts import (
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
)
from kvunits.contracts.deploy import RankBytes
from kvunits.runtime import ContentKeys, KVCacheCoordinator
from kvunits.runtime.capacity import plan

encoder = SlidingWindowLayer(
    sliding_window=Window(750, EncoderTokens), pool=PoolFactor(4), kv_heads=KVHeads(32), head_size=Elements(64)
)
decoder = FullAttentionLayer(kv_heads=KVHeads(8), head_size=Elements(128))
wide = FullAttentionLayer(kv_heads=KVHeads(16), head_size=Elements(128))
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

frames = ContentKeys(list(range(130)), EncoderTokens)  # one key per encoder token
prompt = ContentKeys([1, 2, 3] * 11, Tokens)  # one key per token
audio_hashes = audio.block_hashes(frames)
text_hashes = text.block_hashes(prompt)
assert len(audio_hashes) == 2 and len(text_hashes) == 2  # 130 // 64, 33 // 16
hits = step.admit_with_prefix(
    "r1", EncoderTokens(40_000), Tokens(512), prefix=(audio_hashes, text_hashes)
)
assert hits == (EncoderTokens(0), Tokens(0))

audio.block_hashes(prompt)  # E: Argument 1 to "block_hashes" of "GroupHandle" has incompatible type "ContentKeys[Tokens]"; expected "ContentKeys[EncoderTokens]"  [arg-type]
text.block_hashes(frames)  # E: Argument 1 to "block_hashes" of "GroupHandle" has incompatible type "ContentKeys[EncoderTokens]"; expected "ContentKeys[Tokens]"  [arg-type]
step.admit_with_prefix("r2", EncoderTokens(40_000), Tokens(512), prefix=(text_hashes, audio_hashes))  # E: Argument "prefix" to "admit_with_prefix" of "Stepper" has incompatible type "tuple[BlockHashes[Tokens], BlockHashes[EncoderTokens]]"; expected "tuple[BlockHashes[EncoderTokens] | None, BlockHashes[Tokens] | None]"  [arg-type]
ContentKeys([1, 2, 3], PooledBlocks)  # E: Value of type variable "KernelUnit" of "ContentKeys" cannot be "PooledBlocks"  [type-var]

# The same pooled group stepped in whole pooled blocks has a handle of its own, whose hashes
# are its own: those of the encoder-token handle are refused.
whole = coord.stepper(coord.group("audio", PooledBlocks), text)
whole.admit_with_prefix("r3", PooledBlocks(100), Tokens(512), prefix=(audio_hashes, None))  # E: Argument "prefix" to "admit_with_prefix" of "Stepper" has incompatible type "tuple[BlockHashes[EncoderTokens], None]"; expected "tuple[BlockHashes[PooledBlocks] | None, BlockHashes[Tokens] | None]"  [arg-type]

# Two token groups on one shared pool: the narrow one's page is half the wide one's, so its
# blocks grow to 32 tokens while the wide one's stay 16. Both hash tokens, so mypy cannot tell
# their hashes apart; the run time refuses 16-token blocks where 32-token blocks are cut.
shared = plan(
    ModelSpec.stacked("two", {"wide": (wide, Layers(2)), "narrow": (decoder, Layers(2))}),
    engine.model_copy(update={"kv_cache_layout": "shared", "memory_budget": RankBytes(1 << 30)}),
)
pool = KVCacheCoordinator.from_plan(shared)
wide_h, narrow_h = pool.group("wide", Tokens), pool.group("narrow", Tokens)
both = pool.stepper(wide_h, narrow_h)
wide_hashes = wide_h.block_hashes(prompt)
both.admit_with_prefix("r4", Tokens(512), Tokens(512), prefix=(wide_hashes, narrow_h.block_hashes(prompt)))
both.admit_with_prefix("r5", Tokens(512), Tokens(512), prefix=(wide_hashes, wide_hashes))  # R: both groups count tokens: only their block sizes (16, 32) differ
