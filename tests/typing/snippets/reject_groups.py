# ruff: noqa: E501
# fmt: off
"""Layer groups are typed by the unit their manager counts, all along the planning path.

`group_layers` returns groups of either unit; `expect` narrows one, after which its limits and
its manager agree on the unit statically, and the decoder's limits cannot size the encoder.
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
    group_layers,
)
from kvunits.contracts.deploy import RankBytes

encoder = SlidingWindowLayer(sliding_window=Window(750, EncoderTokens), pool=PoolFactor(4), kv_heads=KVHeads(32), head_size=Elements(64))
decoder = FullAttentionLayer(kv_heads=KVHeads(8), head_size=Elements(128))
model = ModelSpec.stacked("voxtral", {"audio": (encoder, Layers(2)), "text": (decoder, Layers(2))})
engine = EngineSpec(
    max_model_len=Tokens(8192),
    max_num_batched_tokens=Tokens(2048),
    max_encoder_len=EncoderTokens(6000),
    max_encoder_tokens_per_step=EncoderTokens(4),
    memory_budget=RankBytes(1 << 30),
)
(audio_any, text_any), _ = group_layers(model, engine)
audio = audio_any.expect(PooledBlocks)
text = text_any.expect(Tokens)

# Correct: one group's own limits, in its own unit.
assert audio.limits.max_len == PooledBlocks(1500) and str(audio.admission_cap()) == "13 cache_block"
assert audio.manager.max_admission_blocks_per_request(audio.limits.max_in_flight, audio.limits.max_len) == audio.admission_cap()

# The decoder's limits (tokens) used to size the encoder's group (pooled blocks).
cap = audio.manager.max_admission_blocks_per_request(text.limits.max_in_flight, audio.limits.max_len)  # E: Argument 1 to "max_admission_blocks_per_request" of "ManagerSpec" has incompatible type "Tokens"; expected "PooledBlocks"  [arg-type]
longest = audio.limits.max_len < text.limits.max_len  # E: Unsupported operand types for < ("PooledBlocks" and "Tokens")  [operator]
wrong = text_any.expect(PooledBlocks)  # R: mypy cannot know which unit a group of either unit counts; the run time can
