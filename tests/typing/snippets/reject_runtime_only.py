# fmt: off
# (A mark must stay on the line it marks, so the formatter must not wrap these lines.)
"""Known static gaps: mistakes that mypy accepts and only the run-time checks reject.

Each ``# R:`` line type-checks cleanly (the runner asserts mypy says nothing there) and raises
`kvunits.contracts.UnitError` when run.
"""

from kvunits.contracts import EncoderTokens, PooledBlocks, Tokens

window = EncoderTokens(750)

from_bool = EncoderTokens(True)  # R: bool is a subtype of int, so mypy accepts it as a magnitude
doubled = window * True  # R: the same for the scaling factor
# A list of two units joins to their base class, whose comparisons take any IntQuantity:
ordered = sorted([window, PooledBlocks(188)])  # R: the join IntQuantity hides the two units
largest = max(Tokens(1), PooledBlocks(188))  # R: the same join, through max()
