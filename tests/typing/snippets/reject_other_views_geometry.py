# ruff: noqa: E501
# fmt: off
# (A mark must stay on the line mypy reports, so the formatter must not wrap these lines.)
"""One layer group's geometry (block size, pool factor, page) used for another group.

vLLM #53142 and TRT-LLM #16225 (per issue 11) sized one group's block table or page with
another group's block size or dtype. In kvunits a view owns its geometry: the blocks of a
position, of a window, of a request and the bytes of its pages are methods of that layer's
view (`ManagerSpec.block_of`, `window_blocks`, `block_table_width`, `bytes_for`,
`KernelSpec.block_of`), so nothing geometric is passed in by hand; and where a block size is
passed to a named conversion, it carries the unit of its group, so the encoder group's
pooled block size cannot size the decoder's token table (or the other way round).
"""

from kvunits.contracts import (
    Bytes,
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
    Position,
    SlidingWindowLayer,
    SpanBlocks,
    TableBlocks,
    Tokens,
    Window,
    group_layers,
    kernel_view,
    slots_to_cache_blocks_ceil,
    window_blocks,
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
audio, text = audio_any.expect(PooledBlocks), text_any.expect(Tokens)
audio_kernel = kernel_view(encoder, 16).expect(EncoderTokens)
text_kernel = kernel_view(decoder, 16).expect(Tokens)
audio_window = audio.manager.sliding_window
assert audio_window is not None

# Correct: each view answers with its own geometry.
assert audio.manager.block_table_width(audio.limits.max_len) == TableBlocks(94)  # cdiv(1500, 16)
assert text.manager.block_table_width(text.limits.max_len) == TableBlocks(512)  # cdiv(8192, 16)
assert audio.manager.window_blocks() == SpanBlocks(13)
assert audio.manager.block_of(Position(203, PooledBlocks)) == Position(12, CacheBlocks)
assert audio_kernel.block_of(Position(812, EncoderTokens)) == Position(12, CacheBlocks)  # 64 per block
assert text_kernel.block_of(Position(812, Tokens)) == Position(50, CacheBlocks)  # 16 per block
assert audio.manager.bytes_for(CacheBlocks(1)) == audio.manager.page_size == Bytes(524288)

# The encoder's table sized with the decoder's block size, and the other way round.
width = slots_to_cache_blocks_ceil(audio.limits.max_len, text.manager.block_size)  # E: Argument 2 to "slots_to_cache_blocks_ceil" has incompatible type "BlockSize[Tokens]"; expected "BlockSize[PooledBlocks]"  [arg-type]
text_width = text.manager.block_table_width(audio.limits.max_len)  # E: Argument 1 to "block_table_width" of "ManagerSpec" has incompatible type "PooledBlocks"; expected "Tokens"  [arg-type]
# A position of one group's sequence looked up in another group's table.
text_position = Position(812, Tokens)
column = audio.manager.block_of(text_position)  # E: Argument 1 to "block_of" of "ManagerSpec" has incompatible type "Position[Tokens, Any]"; expected "Position[PooledBlocks, Any]"  [arg-type]
audio_position = Position(812, EncoderTokens)
kernel_column = text_kernel.block_of(audio_position)  # E: Argument 1 to "block_of" of "KernelSpec" has incompatible type "Position[EncoderTokens, Any]"; expected "Position[Tokens, Any]"  [arg-type]
# The encoder's window counted in the decoder's blocks.
blocks = window_blocks(audio_window, text.manager.block_size)  # E: Argument 2 to "window_blocks" has incompatible type "BlockSize[Tokens]"; expected "BlockSize[PooledBlocks]"  [arg-type]
# The kernel's rows (block_size x P encoder tokens) taken for the manager's slots.
rows = slots_to_cache_blocks_ceil(audio.limits.max_len, audio_kernel.tokens_per_block)  # E: Argument 2 to "slots_to_cache_blocks_ceil" has incompatible type "BlockSize[EncoderTokens]"; expected "BlockSize[PooledBlocks]"  [arg-type]
