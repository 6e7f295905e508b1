# ruff: noqa: E501
# fmt: off
# (A mark must stay on the line mypy reports, so the formatter must not wrap these lines.)
"""Arithmetic and comparisons across units: mypy rejects each marked line, and so does Python.

A line ending in ``# E: <message>  [code]`` is one mypy must report, exactly; the runner also
executes it alone and expects a `kvunits.contracts.UnitError`. Every other line must pass and run.
"""

from kvunits.contracts import Bytes, CacheBlocks, EncoderTokens, PooledBlocks, Tokens

window = EncoderTokens(750)
slots = PooledBlocks(189)

total = window + slots  # E: Unsupported operand types for + ("EncoderTokens" and "PooledBlocks")  [operator]
left = window - slots  # E: Unsupported operand types for - ("EncoderTokens" and "PooledBlocks")  [operator]
fits = window < slots  # E: Unsupported operand types for < ("EncoderTokens" and "PooledBlocks")  [operator]
fits_or_equal = slots >= window  # E: Unsupported operand types for >= ("PooledBlocks" and "EncoderTokens")  [operator]
same = window == slots  # E: Non-overlapping equality check (left operand type: "EncoderTokens", right operand type: "PooledBlocks")  [comparison-overlap]
differs = window != slots  # E: Non-overlapping equality check (left operand type: "EncoderTokens", right operand type: "PooledBlocks")  [comparison-overlap]
known = window in [slots]  # E: Non-overlapping container check (element type: "EncoderTokens", container item type: "PooledBlocks")  [comparison-overlap]

# A bare int has no unit, on either side.
plus_one = window + 1  # E: Unsupported operand types for + ("EncoderTokens" and "int")  [operator]
one_plus = 1 + window  # E: Unsupported operand types for + ("int" and "EncoderTokens")  [operator]
scaled = window * 1.5  # E: Unsupported operand types for * ("EncoderTokens" and "float")  [operator]

# A quantity is not an index: a block table is indexed by the plain int numerical_value_in names.
block_table = [7, 8, 9]
physical = block_table[CacheBlocks(1)]  # E: No overload variant of "__getitem__" of "list" matches argument type "CacheBlocks"  [call-overload]
positions = range(Tokens(3))  # E: No overload variant of "range" matches argument type "Tokens"  [call-overload]

# Dividing changes the unit and rounds: it is a named conversion, not an operator.
per_block = slots // 16  # E: Unsupported operand types for // ("PooledBlocks" and "int")  [operator]

# Memory and blocks are different things too.
budget = Bytes(1 << 30) - CacheBlocks(13)  # E: Unsupported operand types for - ("Bytes" and "CacheBlocks")  [operator]

# The same operations in one unit are fine.
assert window + EncoderTokens(2) == EncoderTokens(752)
assert slots < PooledBlocks(190)
assert block_table[CacheBlocks(1).numerical_value_in(CacheBlocks)] == 8
assert window * 2 == EncoderTokens(1500)
