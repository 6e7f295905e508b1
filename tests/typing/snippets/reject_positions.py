# ruff: noqa: E501
# fmt: off
# (A mark must stay on the line mypy reports, so the formatter must not wrap these lines.)
"""Positions and lengths: a position is a point, a length a count.

``position - position`` is a length, ``position ± length`` a position, and positions compare
with positions; adding two positions, comparing a position with a length, converting a
position as a length (it rounds *down*: the slot of encoder token 812 at P = 4 is 203, the
slots holding 812 tokens are 203 too but 813 tokens need 204) or a length as a position are
all mistakes. The residency check's first query sits at a position (`ResidencyError`
names it), its first key is `Window.first_position`, its block-table column `block_of`.
"""

from kvunits.contracts import (
    BlockSize,
    CacheBlocks,
    Chunk,
    EncoderTokens,
    PooledBlocks,
    PoolFactor,
    Position,
    Tokens,
    Window,
    block_of,
    pool_length,
    pool_position,
)

pool = PoolFactor(4)
query = Position(812, EncoderTokens)
context = Position(808, EncoderTokens)
window = Window(750, EncoderTokens)

# Correct: points and counts, each where it belongs.
assert query - context == EncoderTokens(4)
assert context + EncoderTokens(4) == query and query - EncoderTokens(4) == context
assert pool_position(query, pool) == Position(203, PooledBlocks)
assert block_of(window.first_position(query), BlockSize(64, EncoderTokens)) == Position(0, CacheBlocks)
assert Chunk(8192, Tokens).start_of(Position(9000, Tokens)) == Position(8192, Tokens)

both = query + context  # E: Unsupported operand types for + ("Position[EncoderTokens, Any]" and "Position[EncoderTokens, Any]")  [operator]
backwards = EncoderTokens(4) - query  # E: Unsupported operand types for - ("EncoderTokens" and "Position[EncoderTokens, Any]")  [operator]
other_unit = query + PooledBlocks(1)  # E: Unsupported operand types for + ("Position[EncoderTokens, Any]" and "PooledBlocks")  [operator]
before = query < EncoderTokens(900)  # E: Unsupported operand types for < ("Position[EncoderTokens, Any]" and "EncoderTokens")  [operator]
same = query == EncoderTokens(812)  # E: Non-overlapping equality check (left operand type: "Position[EncoderTokens, Any]", right operand type: "EncoderTokens")  [comparison-overlap]
# A position converted as a length rounds the wrong way; a length is no position.
slots = pool_length(query, pool)  # E: Argument 1 to "pool_length" has incompatible type "Position[EncoderTokens, Any]"; expected "EncoderTokens"  [arg-type]
slot_of_length = pool_position(EncoderTokens(812), pool)  # E: Argument 1 to "pool_position" has incompatible type "EncoderTokens"; expected "Position[EncoderTokens, Any]"  [arg-type]
# The window's first key is a position of the window's own unit.
slot = Position(203, PooledBlocks)
first = window.first_position(slot)  # E: Argument 1 to "first_position" of "Window" has incompatible type "Position[PooledBlocks, Any]"; expected "Position[EncoderTokens, Any]"  [arg-type]
# A position is no index: the number leaves it naming its unit.
table = [5, 6, 7]
entry = table[block_of(query, BlockSize(64, EncoderTokens))]  # E: No overload variant of "__getitem__" of "list" matches argument type "Position[CacheBlocks, Any]"  [call-overload]
assert table[block_of(query, BlockSize(512, EncoderTokens)).numerical_value_in(CacheBlocks)] == 6
