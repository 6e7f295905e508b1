"""An independent, plain-int model of layers and the MISSION.md formulas, with a hypothesis
strategy that draws layers of every kind (shared by the view and plan tests).

Nothing here calls the formulas of `contracts`: `RawLayer` describes a layer with plain ints
and names, builds the spec from a config-like dict (so the unit strings are parsed too), and
computes what the manager must read by arithmetic written out here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from hypothesis import strategies as st

from kvunits.contracts import LayerSpec, ModelSpec


def ceil_div(a: int, b: int) -> int:
    """Plain ceiling division, written independently of `kvunits.contracts.cdiv`."""
    return (a + b - 1) // b


Kind = Literal["full", "sliding", "chunked", "cross", "mla", "state", "encoder_only"]
ITEMSIZE = {"bf16": 2, "fp16": 2, "fp32": 4, "fp8": 1, "fp8_e5m2": 1}


@dataclass(frozen=True)
class RawLayer:
    """A layer as plain ints and names: the test's own description, built into a spec by
    config-like dicts and checked against the MISSION.md formulas computed here."""

    kind: Kind
    pool: int | None
    seq: int  # window, chunk or encoder length, in the kernel's unit
    kv_heads: int
    head_k: int
    head_v: int | None
    dtype: str
    state_bytes: int
    rope: int  # MLA only: qk_rope_head_dim (head_k is kv_lora_rank)

    def config(self) -> dict[str, object]:
        unit = "encoder_token" if self.pool is not None or self.kind == "cross" else "token"
        attention: dict[str, object] = {
            "kv_heads": self.kv_heads,
            "head_size": self.head_k,
            "dtype": self.dtype,
        }
        if self.head_v is not None:
            attention["head_size_v"] = self.head_v
        if self.pool is not None:
            attention["pool"] = self.pool
        if self.kind == "full":
            return {"kind": "full_attention", **attention}
        if self.kind == "sliding":
            return {"kind": "sliding_window", "sliding_window": f"{self.seq} {unit}", **attention}
        if self.kind == "chunked":
            return {"kind": "chunked_local", "chunk": f"{self.seq} {unit}", **attention}
        if self.kind == "cross":
            return {"kind": "cross_attention", "encoder_length": f"{self.seq} {unit}", **attention}
        if self.kind == "mla":
            return {
                "kind": "mla",
                "kv_lora_rank": self.head_k,
                "qk_rope_head_dim": self.rope,
                "dtype": self.dtype,
            }
        if self.kind == "state":
            return {"kind": "state", "state_size": f"{self.state_bytes} byte"}
        return {"kind": "encoder_only"}

    @property
    def p(self) -> int:
        return 1 if self.pool is None else self.pool

    @property
    def slot_is_pooled(self) -> bool:
        return self.kind == "cross" or (self.pool is not None and self.kind not in ("mla", "state"))

    def page_bytes(self, bs: int) -> int:
        if self.kind == "state":
            return self.state_bytes
        if self.kind == "mla":  # one latent head of kv_lora_rank + rope, K only
            return bs * (self.head_k + self.rope) * ITEMSIZE[self.dtype]
        v = self.head_k if self.head_v is None else self.head_v
        return bs * self.p * self.kv_heads * (self.head_k + v) * ITEMSIZE[self.dtype]

    def window_slots(self) -> int:
        w = self.seq
        if self.pool is None:
            return w
        return ceil_div(w - 1, self.p) + 1  # look-back rounds up, plus the current slot

    def chunk_misaligned(self, bs: int) -> bool:
        """A chunk that is not a whole number of cache blocks: its cap is not a bound."""
        return self.kind == "chunked" and (self.seq // self.p) % bs != 0

    def cap(self, bs: int, in_flight: int, max_len: int) -> int:
        if self.kind in ("full", "mla"):
            return ceil_div(max_len, bs)
        if self.kind == "sliding":
            # +1 for a window starting mid-block, but never more blocks than the whole request
            # has (issue 13: the window then covers it all and starts at slot 0).
            held = ceil_div(min(self.window_slots() - 1 + in_flight, max_len), bs) + 1
            return min(held, ceil_div(max_len, bs))
        if self.kind == "chunked":
            chunk_slots = self.seq // self.p  # P divides a pooled chunk
            return ceil_div(min(chunk_slots + in_flight, max_len), bs)
        if self.kind == "cross":
            return ceil_div(ceil_div(self.seq, self.p), bs)
        return 1  # state

    def table_width(self, bs: int, max_len: int) -> int:
        if self.kind == "state":
            return 1
        if self.kind == "cross":
            return ceil_div(ceil_div(self.seq, self.p), bs)
        return ceil_div(max_len, bs)


@st.composite
def raw_layers(draw: st.DrawFn, kinds: tuple[Kind, ...] | None = None) -> RawLayer:
    kind: Kind = draw(
        st.sampled_from(kinds or ("full", "sliding", "chunked", "cross", "mla", "state"))
    )
    pool = draw(st.none() | st.integers(1, 8))
    if kind in ("mla", "state"):
        pool = None
    if kind == "chunked":
        # A pooled chunk is whole pooled blocks (the spec refuses others); multiples of 64
        # slots are whole cache blocks of the usual sizes (capacity planning refuses others).
        slots = draw(st.integers(1, 2048) | st.integers(1, 32).map(lambda k: 64 * k))
        seq = slots * (1 if pool is None else pool)
    else:
        # Windows around the awkward spots: 1, multiples of P (+1), longer than the sequence.
        seq = draw(st.integers(1, 5000) | st.sampled_from([1, 2, 4, 5, 9, 749, 750, 751, 4096]))
    head_v = draw(st.none() | st.integers(1, 256))
    return RawLayer(
        kind=kind,
        pool=pool,
        seq=seq,
        kv_heads=draw(st.integers(1, 64)),
        head_k=draw(st.integers(1, 576)),
        head_v=None if kind == "mla" else head_v,
        dtype=draw(st.sampled_from(sorted(ITEMSIZE))),
        state_bytes=draw(st.integers(1, 1 << 24)),
        rope=draw(st.integers(1, 128)),
    )


def build(raw: RawLayer) -> LayerSpec:
    model = ModelSpec.model_validate({"name": "m", "layers": {"x": raw.config()}})
    return model.layers["x"]
