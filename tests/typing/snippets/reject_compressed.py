# ruff: noqa: E501
# fmt: off
# (A mark must stay on the line mypy reports, so the formatter must not wrap these lines.)
"""DeepSeek V4's cache sizes take typed values (`kvunits.contracts.compressed`): a bare int for
a head size or a window is rejected by mypy and, with a `UnitError` naming the field, at run
time; the conversions take a block in tokens and bytes to round."""

from kvunits.contracts import Bytes, Elements, Tokens
from kvunits.contracts.compressed import DeepseekV4Layer, aligned_page_size, states_per_block

layer = DeepseekV4Layer(4, Elements(512), Elements(128), Tokens(128))
assert states_per_block(Tokens(256), 4) == 64
assert aligned_page_size(Bytes(1168), Bytes(576)) == Bytes(1728)

bare_head = DeepseekV4Layer(4, 512, Elements(128), Tokens(128))  # E: Argument 2 to "DeepseekV4Layer" has incompatible type "int"; expected "Elements"  [arg-type]
bare_window = DeepseekV4Layer(4, Elements(512), Elements(128), 128)  # E: Argument 4 to "DeepseekV4Layer" has incompatible type "int"; expected "Tokens"  [arg-type]
window_in_bytes = DeepseekV4Layer(4, Elements(512), Elements(128), Bytes(128))  # E: Argument 4 to "DeepseekV4Layer" has incompatible type "Bytes"; expected "Tokens"  [arg-type]
bare_block = states_per_block(256, 4)  # E: Argument 1 to "states_per_block" has incompatible type "int"; expected "Tokens"  [arg-type]
page_in_tokens = aligned_page_size(Tokens(1168), Bytes(576))  # E: Argument 1 to "aligned_page_size" has incompatible type "Tokens"; expected "Bytes"  [arg-type]
