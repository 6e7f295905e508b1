# ruff: noqa: E501
# fmt: off
# (A mark must stay on the line mypy reports, so the formatter must not wrap these lines.)
"""Python construction takes typed values, as mypy checks them; a config's numbers and text go
through the loaders (``model_validate``), which read them.

A spec's constructor types each field (the pydantic plugin's ``init_typed``): mypy rejects
``kv_heads=32``, ``pool=4``, ``sliding_window="750 encoder_token"``, ``dtype="fp8"``. The run
time refuses the same lines with a `SpecValidationError` whose every entry is a unit error that
names the field and the typed value to write (``kv_heads=32 has no unit: write KVHeads(32)``).
A config file keeps writing ``kv_heads = 32``: its field names the unit, and the loader reads
it (the last lines: the same dict through ``model_validate``).
"""

from kvunits.contracts import (
    CacheDType,
    Elements,
    EncoderTokens,
    EngineSpec,
    FullAttentionLayer,
    KVHeads,
    PoolFactor,
    SlidingWindowLayer,
    StateLayer,
    Tokens,
    Window,
)
from kvunits.contracts.deploy import RankBytes

heads = FullAttentionLayer(kv_heads=32, head_size=Elements(64))  # E: Argument "kv_heads" to "FullAttentionLayer" has incompatible type "int"; expected "KVHeads"  [arg-type]
size = FullAttentionLayer(kv_heads=KVHeads(32), head_size=64)  # E: Argument "head_size" to "FullAttentionLayer" has incompatible type "int"; expected "Elements"  [arg-type]
pooled = SlidingWindowLayer(sliding_window=Window(750, EncoderTokens), pool=4, kv_heads=KVHeads(32), head_size=Elements(64))  # E: Argument "pool" to "SlidingWindowLayer" has incompatible type "int"; expected "PoolFactor | None"  [arg-type]
text = SlidingWindowLayer(sliding_window="750 encoder_token", pool=PoolFactor(4), kv_heads=KVHeads(32), head_size=Elements(64))  # E: Argument "sliding_window" to "SlidingWindowLayer" has incompatible type "str"; expected "Window[EncoderTokens] | Window[Tokens]"  [arg-type]
named = FullAttentionLayer(kv_heads=KVHeads(8), head_size=Elements(128), dtype="fp8")  # E: Argument "dtype" to "FullAttentionLayer" has incompatible type "str"; expected "CacheDType"  [arg-type]
state = StateLayer(state_size="1 MiB")  # E: Argument "state_size" to "StateLayer" has incompatible type "str"; expected "Bytes"  [arg-type]
budget = EngineSpec(max_model_len=Tokens(4096), max_num_batched_tokens=Tokens(512), memory_budget="40 GiB")  # E: Argument "memory_budget" to "EngineSpec" has incompatible type "str"; expected "RankBytes | None"  [arg-type]

# What each error says to write type-checks and runs.
layer = SlidingWindowLayer(sliding_window=Window(750, EncoderTokens), pool=PoolFactor(4), kv_heads=KVHeads(32), head_size=Elements(64), dtype=CacheDType.fp8_e4m3)
engine = EngineSpec(max_model_len=Tokens(4096), max_num_batched_tokens=Tokens(512), memory_budget=RankBytes(40 << 30))
# A config's numbers: the loader path reads them, and builds the same spec.
read = SlidingWindowLayer.model_validate({"sliding_window": "750 encoder_token", "pool": 4, "kv_heads": 32, "head_size": 64, "dtype": "fp8"})
assert read == layer
