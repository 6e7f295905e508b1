"""The audit: vLLM's KV-cache plan against kvunits' independent plan from the same inputs.

kvunits reads the model's config (as vLLM read it) with its own Hugging Face readers, takes
vLLM's engine settings, and derives what each layer's cache must be on one rank: kind,
pooling, window and chunk (in the kernel's unit and in slots), heads per rank, head sizes,
dtype, page, the blocks a request may hold; and per group, the block size after page
unification and the blocks the budget buys. Every disagreement with what vLLM built is one
`Finding` naming its units and its consequence; layers with the same disagreement share one.

**Not findings: vLLM's documented choices** (each becomes a note, with its source):

* a pooled window of ``cdiv(W, P) + 1`` slots (``whisper_causal.py``'s eviction margin),
  one slot more than the tight ``cdiv(W − 1, P) + 1`` when ``(W − 1) % P == 0``;
* a sliding cap of ``cdiv(…) + 1`` even when the window covers the whole request (kvunits caps
  at the request's own blocks);
* heads widened × P with ``tokens_per_state = 1`` (the seed's era's way of pooling): the same
  page, read as pooled slots;
* a sliding or chunked layer kept as a ``FullAttentionSpec`` that records its window (the
  hybrid manager disabled: every token held, by design);
* a sliding layer's block size chosen by its backend (``Attention.get_kv_cache_spec``), a
  page padded (``page_size_padded``), a group's block size grown to unify pages;
* a cross-attention cache sized by ``max_num_encoder_input_tokens`` when that is more than
  the model's encoder length;
* speculative lookahead: vLLM's ``max_in_flight_tokens`` leaves it out, and so does the
  audit's in-flight count (kvunits' own plan adds it; README, Deployment).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final, Literal, TypeAlias, final

from kvunits.contracts import (
    AdmissionCap,
    BlockSize,
    Bytes,
    CacheDType,
    ChunkedLocalLayer,
    CrossAttentionLayer,
    Elements,
    EncoderOnlyLayer,
    EncoderTokens,
    EngineSpec,
    IndexerLayer,
    KVSharedLayer,
    LayerSpec,
    MLALayer,
    ModelSpec,
    PoolBlocks,
    PooledBlocks,
    SlidingWindowLayer,
    SpecError,
    StateLayer,
    Tokens,
    Window,
    manager_view,
    pool_chunk,
    pool_length,
    pool_window,
)
from kvunits.contracts.deploy import (
    KVHeads,
    Parallelism,
    RankBytes,
    RankKVHeads,
    kv_heads_of,
    kv_heads_per_rank,
    page_size_per_rank,
)
from kvunits.contracts.errors import ConfigError
from kvunits.contracts.internal import cdiv
from kvunits.contracts.state import StateMixerLayer

from ._dump import AuditInputs, VllmEngine
from ._specs import VllmSpec
from ._specs import count_in_own_unit as _n

#: The checks, in the order a report lists them.
Check: TypeAlias = Literal[
    "coverage",
    "kind",
    "pool",
    "window",
    "chunk",
    "heads",
    "head_size",
    "dtype",
    "page",
    "block_size",
    "cap",
    "group",
    "blocks",
    "not_audited",
    "choice",
]

#: The vLLM minor versions whose specs and engine step kvunits knows.
KNOWN_VLLM: Final = ("0.33",)


@final
@dataclass(frozen=True, slots=True)
class Finding:
    """One disagreement (or, in `AuditReport.notes`, one documented choice or a part not
    audited), with the layers it concerns.

    Attributes:
        check: what was compared (``"window"``, ``"heads"``, …).
        layers: vLLM's names of the layers (or a group's layers) it concerns.
        message: the disagreement with its units and its consequence.
    """

    check: Check
    layers: tuple[str, ...]
    message: str

    def __str__(self) -> str:
        return f"{_where(self.layers)}: {self.message}"


@final
@dataclass(frozen=True, slots=True)
class AuditReport:
    """What the audit found.

    Attributes:
        model: the model's name.
        vllm_version: the vLLM whose plan was audited.
        findings: disagreements, each with its units and consequence.
        notes: vLLM's documented choices seen, and what was not audited (and why).
        layers: layers audited.
    """

    model: str
    vllm_version: str
    findings: tuple[Finding, ...]
    notes: tuple[Finding, ...]
    layers: int

    @property
    def ok(self) -> bool:
        """No finding."""
        return not self.findings

    def lines(self) -> list[str]:
        """The report for people: a headline, then each finding and note on its line."""
        verdict = "clean" if self.ok else f"{len(self.findings)} finding(s)"
        out = [
            f"kvunits audit of vLLM {self.vllm_version}'s KV-cache plan for {self.model}: "
            f"{self.layers} layers, {verdict}"
        ]
        out += [f"  finding [{f.check}] {f}" for f in self.findings]
        out += [f"  note [{n.check}] {n}" for n in self.notes]
        return out

    def to_dict(self) -> dict[str, Any]:
        """The report for programs."""

        def row(f: Finding) -> dict[str, Any]:
            return {"check": f.check, "layers": list(f.layers), "message": f.message}

        return {
            "model": self.model,
            "vllm_version": self.vllm_version,
            "ok": self.ok,
            "layers": self.layers,
            "findings": [row(f) for f in self.findings],
            "notes": [row(n) for n in self.notes],
        }


def known_version(version: str) -> bool:
    """Whether kvunits knows this vLLM version's specs and KV-cache step (`KNOWN_VLLM`)."""
    return any(version == v or version.startswith(v + ".") for v in KNOWN_VLLM)


def audit(inputs: AuditInputs) -> AuditReport:
    """Compare vLLM's specs (and configuration) with kvunits' plan from the same inputs."""
    return _Audit(inputs).run()


# -- layer names ----------------------------------------------------------------------------

_INDEX = re.compile(r"(?:^|\.)(\d+)(?=\.|$)")


def kvunits_layer_name(vllm_name: str) -> str | None:
    """The kvunits layer a vLLM layer name is (the Hugging Face readers' names): the layer's
    index (vLLM's ``extract_layer_index``: the one integer in the name) in its stack:
    ``cross`` (``encoder_attn``, ``cross_attn``), ``audio`` (an encoder's), else ``text``.

    Example:
        >>> kvunits_layer_name("whisper_encoder.whisper_encoder.layers.3.self_attn.attn")
        'audio.3'
        >>> kvunits_layer_name("model.decoder.layers.0.encoder_attn.attn")
        'cross.0'
    """
    indices = _INDEX.findall(vllm_name)
    if len(indices) != 1:
        return None
    lowered = vllm_name.lower()
    if "encoder_attn" in lowered or "cross_attn" in lowered:
        stack = "cross"
    elif ("encoder" in lowered or "audio" in lowered) and "decoder" not in lowered:
        stack = "audio"
    else:
        stack = "text"
    return f"{stack}.{int(indices[0])}"


def renumbered(hf_config: Mapping[str, Any]) -> dict[tuple[bool, str], str]:
    """The layers whose vLLM name carries another index than the Hugging Face layer's (each
    name's index must be unique to its cache: ``extract_layer_index``), keyed by whether the
    name is a Mamba mixer's (``….mixer``) and the name as `kvunits_layer_name` reads it ->
    the kvunits layer it is:

    * ``falcon_h1`` (falcon_h1.py): layer ``i``'s Mamba-2 mixer is ``model.{n + i}.mixer``
      (``n`` = ``num_hidden_layers``) -> ``text.{i}.mamba``;
    * ``zamba2`` (zamba2.py): layer ``i``'s mixer is ``{H + i}.mixer`` (``H`` hybrid layers)
      -> ``text.{i}.mamba`` on a hybrid layer, else ``text.{i}``; the attention of the
      ``k``-th hybrid layer is ``model.attn.{j}``, ``j`` counted per shared block ``b = k %
      M`` from ``b × (H + M − 1) // M`` (``M`` = ``num_mem_blocks``; past ``H`` where ``M``
      does not divide it) -> ``text.{hybrid layer k}``.

    Empty for every other model (and for a config these fields do not describe)."""
    kind = hf_config.get("model_type")
    n = hf_config.get("num_hidden_layers")
    if kind == "falcon_h1" and type(n) is int and 0 < n <= 1 << 16:
        return {(True, f"text.{n + i}"): f"text.{i}.mamba" for i in range(n)}
    types = hf_config.get("layers_block_type", hf_config.get("layer_types"))
    if kind != "zamba2" or not isinstance(types, list) or len(types) > 1 << 16:
        return {}
    hybrid = [i for i, t in enumerate(types) if t == "hybrid"]
    h, m = len(hybrid), hf_config.get("num_mem_blocks", 1)
    if type(m) is not int or not 0 < m <= 1 << 16:
        return {}
    names = {
        (True, f"text.{h + i}"): f"text.{i}.mamba" if t == "hybrid" else f"text.{i}"
        for i, t in enumerate(types)
    }
    for k, layer in enumerate(hybrid):
        b = k % m
        names[False, f"text.{b * (h + m - 1) // m + k // m}"] = f"text.{layer}"
    return names


# -- the audit ------------------------------------------------------------------------------


class _Audit:
    """One audit's state: the inputs, kvunits' reading of the model, the findings."""

    def __init__(self, inputs: AuditInputs) -> None:
        self.inputs = inputs
        self.engine: VllmEngine = inputs.engine
        self.findings: list[tuple[Check, str, str]] = []  # (check, vLLM layer, message)
        self.notes: list[tuple[Check, str, str]] = []
        self.parallelism = Parallelism(
            tensor_parallel_size=self.engine.tensor_parallel_size,
            pipeline_parallel_size=self.engine.pipeline_parallel_size,
            decode_context_parallel_size=self.engine.decode_context_parallel_size,
        )
        self.cache_dtype = _expected_dtype(self.engine)
        self.flagged: set[str] = set()  # vLLM layers with a finding that explains a cap

    def finding(self, check: Check, layer: str, message: str) -> None:
        self.findings.append((check, layer, message))
        self.flagged.add(layer)

    def note(self, check: Check, layer: str, message: str) -> None:
        self.notes.append((check, layer, message))

    def run(self) -> AuditReport:
        engine = self.engine
        if not known_version(engine.vllm_version):
            self.note(
                "not_audited",
                "",
                f"vLLM {engine.vllm_version} is not a version kvunits knows "
                f"({', '.join(v + '.x' for v in KNOWN_VLLM)}): its specs were read by 0.33's "
                "fields and rules, which this version may not keep",
            )
        model = self._model()
        specs = self._merged_specs()
        if model is None:
            return self._report(len(specs))
        if self.cache_dtype is None:
            self.note(
                "not_audited",
                "",
                f"cache dtype {engine.cache_dtype!r} (model dtype {engine.dtype!r}) is not one "
                "kvunits sizes: dtypes and pages compared by each spec's own dtype",
            )
        seen: set[str] = set()
        renames = renumbered(self.inputs.hf_config)
        for name, spec in specs.items():
            if spec.fields.get("is_draft"):
                self.note("not_audited", name, "a draft model's layer (speculative decoding)")
                continue
            ours = kvunits_layer_name(name)
            if ours is not None:
                ours = renames.get((name.endswith(".mixer"), ours), ours)
            layer = model.layers.get(ours) if ours is not None else None
            if layer is None:
                self.finding(
                    "coverage",
                    name,
                    f"vLLM keeps a {spec.spec_type} for this layer, but the model's config "
                    f"declares no cached layer {ours or '(no layer index in the name)'}: "
                    f"{spec.page_size} of cache per block nobody reads",
                )
                continue
            assert ours is not None
            seen.add(ours)
            self._layer(name, ours, layer, spec)
        self._uncovered(model, seen, specs)
        self._groups(model, specs)
        return self._report(len(specs))

    def _report(self, layers: int) -> AuditReport:
        return AuditReport(
            model=self.engine.model,
            vllm_version=self.engine.vllm_version,
            findings=_merge(self.findings),
            notes=_merge(self.notes),
            layers=layers,
        )

    def _model(self) -> ModelSpec | None:
        from kvunits.contracts.config import read_hf_config

        try:
            return read_hf_config(
                self.inputs.hf_config, where="the model's config (vLLM's hf_config)"
            ).model
        except ConfigError as exc:
            first = str(exc.issues[0]) if exc.issues else str(exc)
            self.note("not_audited", "", f"kvunits does not read this model: {first}")
            return None

    def _merged_specs(self) -> dict[str, VllmSpec]:
        merged: dict[str, VllmSpec] = {}
        for worker in self.inputs.workers:
            for name, spec in worker.items():
                known = merged.setdefault(name, spec)
                if known != spec:
                    self.finding(
                        "coverage",
                        name,
                        f"the workers state different specs for this layer ({known} and "
                        f"{spec}): one scheduler hands out one block id for both",
                    )
        return merged

    # -- one layer ---------------------------------------------------------------------------

    def _layer(self, name: str, ours: str, layer: LayerSpec, spec: VllmSpec) -> None:
        # A compressed or packed cache states positions per state other than 1; a state's
        # spec (vLLM 0.33's MambaSpec: tokens_per_state -1, one state whatever the block)
        # is compared as a state below.
        if spec.kind in ("unknown", "sliding_window_mla") or (
            spec.kind != "state"
            and spec.fields.get("tokens_per_state") not in (None, 1, "1")
            and spec.pool.tokens_per_block == 1
        ):
            self.note(
                "not_audited",
                name,
                f"vLLM's {spec.spec_type} is not a spec kvunits models (compressed or "
                "packed caches): only its presence is checked",
            )
            return
        if isinstance(layer, (StateMixerLayer, StateLayer)):
            self._state(name, layer, spec)
            return
        if isinstance(layer, (EncoderOnlyLayer, KVSharedLayer)):
            self.finding(
                "kind",
                name,
                f"vLLM keeps a {spec.spec_type} for this layer, but the model's layer {ours} is "
                f"{layer.kind} (no cache of its own): {spec.page_size} per block nobody reads",
            )
            return
        if not self._kind(name, layer, spec):
            return
        read = self._pooling(name, layer, spec)
        if read is None:
            return
        spec = read
        self._window(name, layer, spec)
        self._chunk(name, layer, spec)
        explained = self._heads(name, layer, spec)
        explained |= self._dtype(name, layer, spec)
        self._page(name, layer, spec, explained)
        self._block_size(name, layer, spec)
        self._cap(name, layer, spec)

    def _kind(self, name: str, layer: LayerSpec, spec: VllmSpec) -> bool:
        """Whether the kinds agree (or differ by vLLM's choice); a finding when not."""
        expected = _kind_of(layer)
        if spec.kind == expected:
            return True
        if spec.kind == "full_attention" and expected in ("sliding_window", "chunked_local"):
            recorded = spec.fields.get("sliding_window") or spec.fields.get("attention_chunk_size")
            if recorded is not None:
                self.note(
                    "choice",
                    name,
                    f"vLLM keeps this {expected} layer as full attention recording its "
                    f"{'window' if expected == 'sliding_window' else 'chunk'} {recorded} (the "
                    "hybrid KV-cache manager disabled: every token held, by design)",
                )
                return False
            _, max_len = self._limits(spec)
            reach = _reach_slots(layer)
            if reach is not None and reach >= max_len:
                self.note(
                    "choice",
                    name,
                    f"vLLM runs this {expected} layer as full attention: its "
                    f"{_layer_size(layer)} covers every request (max_model_len {max_len}), so "
                    "no key ever leaves it and the two are the same cache",
                )
                return False
            cap_v = spec.vllm_admission_cap(*self._limits(spec))
            cap_k = self._kvunits_cap(layer, spec)
            self.finding(
                "kind",
                name,
                f"vLLM manages this layer as full attention (no window: its kernel attends to "
                f"every position), but the model's layer is "
                f"{expected} ({_layer_size(layer)}): the manager holds {cap_v} per request "
                f"where {cap_k} keep every key the kernel reads",
            )
            return False
        if expected == "full_attention" and spec.kind in ("sliding_window", "chunked_local"):
            self.finding(
                "kind",
                name,
                f"vLLM manages this layer as {spec.kind} ({spec.sliding_window or spec.chunk}), "
                "but the model's layer attends to every position: the manager frees keys the "
                "kernel still reads (wrong attention; another request's keys once a block is "
                "reused)",
            )
            return False
        self.finding(
            "kind",
            name,
            f"vLLM manages this layer as {spec.kind} ({spec.spec_type}), but the model's layer "
            f"is {expected}: its cache is sized and freed by another rule than the kernel reads",
        )
        return False

    def _pooling(self, name: str, layer: LayerSpec, spec: VllmSpec) -> VllmSpec | None:
        """The spec read in the model's slots: widened heads read as pooled slots (a note);
        another pooling a finding (None: nothing more is compared)."""
        p = _pool_of(layer)
        if spec.pool.tokens_per_block == p:
            return spec
        heads = self._heads_per_rank(layer)
        got = spec.kv_heads.numerical_value_in(RankKVHeads) if spec.kv_heads is not None else None
        if spec.pool.tokens_per_block == 1 and heads is not None and got == heads * p:
            self.note(
                "choice",
                name,
                f"vLLM widens each slot's heads × {p} ({heads} × {p} = {got} kv_head/rank) with "
                f"tokens_per_state 1, where 0.33 states tokens_per_state 1/{p}: the same page; "
                f"its block size and window read as pooled slots",
            )
            slots = spec.block_size_slots
            window = spec.window_slots
            return replace(
                spec,
                slot_unit=PooledBlocks,
                pool=_pool_factor(p),
                block_size=BlockSize(slots, PooledBlocks),
                kv_heads=RankKVHeads(heads),
                sliding_window=None if window is None else Window(window, PooledBlocks),
            )
        self.finding(
            "pool",
            name,
            f"vLLM stores {_slot_text(spec)} per slot, but the model's layer pools {p} "
            f"encoder_token per slot: its window, block size and page count another unit than "
            "the kernel reads",
        )
        return None

    def _window(self, name: str, layer: LayerSpec, spec: VllmSpec) -> None:
        if not isinstance(layer, SlidingWindowLayer) or spec.sliding_window is None:
            return
        unit = spec.slot_unit
        got = _n(spec.sliding_window)
        w = _n(layer.sliding_window)
        if layer.pool is None:
            tight, margin = w, w
        else:
            p = layer.pool.tokens_per_block
            tight = pool_window(Window(w, EncoderTokens), layer.pool).numerical_value_in(
                PooledBlocks
            )
            margin = cdiv(w, p) + 1
        if got == tight:
            return
        model_text = f"{w} {'encoder_token' if layer.pool else 'token'}"
        if got == margin and got > tight:
            self.note(
                "choice",
                name,
                f"vLLM's window cdiv(W, P) + 1 = {got} pooled_block for W = {model_text} is one "
                f"slot more than the {tight} that keep every key ((W − 1) % P == 0): "
                "whisper_causal.py's documented eviction margin",
            )
            return
        cap_v = spec.vllm_admission_cap(*self._limits(spec))
        cap_k = self._kvunits_cap(layer, spec)
        if got < tight:
            if layer.pool is None:
                self.finding(
                    "window",
                    name,
                    f"vLLM's sliding window {got} token is narrower than the model's "
                    f"{model_text}: the manager frees keys the kernel still reads (wrong "
                    "attention; another request's keys once a block is reused)",
                )
                return
            p = layer.pool.tokens_per_block
            self.finding(
                "window",
                name,
                f"vLLM's sliding window {got} pooled_block keeps {got - 1} slots "
                f"({(got - 1) * p} encoder_token) behind the current one, but the model's "
                f"window of {model_text} looks back {w - 1}: it needs {tight} pooled_block "
                f"(cdiv(W − 1, P) + 1); whenever eviction falls on a block boundary the block "
                "holding the oldest key the kernel reads is freed (a key lost: wrong "
                "attention, another request's key once the block is reused)",
            )
            return
        if layer.pool is not None and got == w:
            what = f"counts pooled slots ({_slot_text(spec)})"
            self.finding(
                "window",
                name,
                f"vLLM's sliding window {got} {what} but the model's window is {model_text}: "
                f"the manager holds {cap_v} per request where {cap_k} keep every key the "
                "kernel reads",
            )
            return
        self.finding(
            "window",
            name,
            f"vLLM's sliding window {got} {unit.unit} is wider than the {tight} {unit.unit} "
            f"the model's window of {model_text} needs: the manager holds {cap_v} per request "
            f"where {cap_k} keep every key the kernel reads",
        )

    def _chunk(self, name: str, layer: LayerSpec, spec: VllmSpec) -> None:
        if not isinstance(layer, ChunkedLocalLayer) or spec.chunk is None:
            return
        got = _n(spec.chunk)
        if layer.pool is None:
            want = _n(layer.chunk)
        else:
            want = pool_chunk(layer.chunk, layer.pool).numerical_value_in(PooledBlocks)  # type: ignore[arg-type]
        if got == want:
            return
        unit = spec.slot_unit.unit
        effect = (
            "the manager frees keys of the current chunk the kernel still reads"
            if got < want
            else f"the manager holds {spec.vllm_admission_cap(*self._limits(spec))} per request "
            f"where {self._kvunits_cap(layer, spec)} keep every key the kernel reads"
        )
        self.finding(
            "chunk",
            name,
            f"vLLM's attention chunk {got} {unit} is not the model's {layer.chunk} "
            f"({want} {unit}): {effect}",
        )

    def _heads_per_rank(self, layer: LayerSpec) -> int | None:
        heads = kv_heads_of(layer)
        if heads is None:
            return None
        try:
            return kv_heads_per_rank(heads, self.parallelism).numerical_value_in(RankKVHeads)
        except SpecError:
            return None

    def _heads(self, name: str, layer: LayerSpec, spec: VllmSpec) -> bool:
        """Heads and head sizes; True when a finding explains a page difference."""
        flagged = False
        heads = kv_heads_of(layer)
        per_rank = self._heads_per_rank(layer)
        got = spec.kv_heads.numerical_value_in(RankKVHeads) if spec.kv_heads is not None else None
        if heads is not None and per_rank is not None and got is not None and got != per_rank:
            tp = self.parallelism.tensor_parallel_size
            model_heads = heads.numerical_value_in(KVHeads)
            effect = (
                "pages too small for the heads the kernel writes (it writes past its page)"
                if got < per_rank
                else "each page holds heads the rank does not have: memory reserved for nothing"
            )
            self.finding(
                "heads",
                name,
                f"vLLM gives each rank {got} kv_head/rank, but the model's {model_heads} kv_head "
                f"over tensor_parallel_size {tp} are {per_rank} kv_head/rank "
                f"(max(1, H // tp)): {effect}",
            )
            flagged = True
        k, v = _head_sizes(layer)
        got_k, got_v = spec.head_size_k, spec.head_size_v
        if got_k is not None and (got_k, got_v if got_v is not None else got_k) != (k, v):
            self.finding(
                "head_size",
                name,
                f"vLLM's head sizes K {got_k}, V {got_v} are not the model's K {k}, "
                f"V {v}: the page is sized for another shape than the kernel writes",
            )
            flagged = True
        return flagged

    def _dtype(self, name: str, layer: LayerSpec, spec: VllmSpec) -> bool:
        want = self.cache_dtype
        if want is None or spec.dtype is None:
            return False
        got = spec.cache_dtype
        if got == want or (got is not None and got.itemsize_bytes == want.itemsize_bytes == 1):
            return False
        size = spec.dtype_bytes
        self.finding(
            "dtype",
            name,
            f"vLLM stores {spec.dtype} ({size} byte per element), but the engine's cache dtype "
            f"is {want.value} ({want.itemsize_bytes} byte): pages of "
            f"{spec.unpadded_page_size} where {want.value} needs "
            f"{self._page_of(layer, spec)}",
        )
        return True

    def _page_of(self, layer: LayerSpec, spec: VllmSpec) -> RankBytes:
        block = spec.block_size_slots
        manager = manager_view(layer, block, cache_dtype=self.cache_dtype or spec.cache_dtype)
        return page_size_per_rank(layer, manager, self.parallelism)

    def _page(self, name: str, layer: LayerSpec, spec: VllmSpec, explained: bool) -> None:
        if spec.page_size != spec.unpadded_page_size:
            self.note(
                "choice",
                name,
                f"vLLM pads the page from {spec.unpadded_page_size} to {spec.page_size} "
                "(page_size_padded)",
            )
        if explained:
            return
        try:
            want = self._page_of(layer, spec)
        except SpecError as exc:
            self.note("not_audited", name, f"page not compared: {exc.message}")
            return
        if want != spec.unpadded_page_size:
            self.finding(
                "page",
                name,
                f"vLLM's page is {spec.unpadded_page_size} but {_slot_text(spec)} × "
                f"{spec.block_size} of this layer is {want}: the pool's memory per block is "
                "wrong by the ratio",
            )

    def _block_size(self, name: str, layer: LayerSpec, spec: VllmSpec) -> None:
        engine_block = self.engine.block_size
        if engine_block is None:
            return
        got = spec.block_size_slots
        if got == engine_block:
            return
        p = _pool_of(layer)
        if isinstance(layer, SlidingWindowLayer) and got != engine_block * p:
            self.note(
                "choice",
                name,
                f"a sliding-window layer's block size is vLLM's choice (its backend's, or grown "
                f"to the pool's largest page): {spec.block_size} where --block-size is "
                f"{engine_block}",
            )
            return
        if p > 1 and got == engine_block * p:
            self.finding(
                "block_size",
                name,
                f"vLLM's block size {got} counts encoder tokens (the kernel's block, "
                f"{engine_block} × P = {p}), but the manager counts {engine_block} pooled_block "
                f"per cache_block: pages {p}× too large, a request's blocks {p}× too few",
            )
            return
        self.finding(
            "block_size",
            name,
            f"vLLM's block size {spec.block_size} is not the engine's {engine_block} "
            f"{spec.slot_unit.unit}/cache_block: taken from another group or setting, its pages "
            "and block tables disagree with the rest of the pool",
        )

    def _cap(self, name: str, layer: LayerSpec, spec: VllmSpec) -> None:
        if name in self.flagged:
            return
        in_flight, max_len = self._limits(spec)
        got = spec.vllm_admission_cap(in_flight, max_len)
        if isinstance(layer, CrossAttentionLayer):
            want_len = pool_length(layer.encoder_length, layer.pool_factor).numerical_value_in(
                PooledBlocks
            )
            block = spec.block_size_slots
            budget = self.engine.max_num_encoder_input_tokens
            vllm_len = budget if budget is not None else want_len
            got = AdmissionCap(cdiv(vllm_len, block))
            want = AdmissionCap(cdiv(want_len, block))
            if got.numerical_value_in(AdmissionCap) > want.numerical_value_in(AdmissionCap):
                self.note(
                    "choice",
                    name,
                    f"vLLM sizes cross-attention by max_num_encoder_input_tokens ({vllm_len} "
                    f"encoder_token: {got}) where the model's encoder length needs {want}",
                )
            elif got != want:
                self.finding(
                    "cap",
                    name,
                    f"vLLM sizes cross-attention for {vllm_len} encoder_token ({got}) but the "
                    f"model's encoder writes {want_len} slots ({want}): encoder keys lost",
                )
            return
        want = self._kvunits_cap(layer, spec)
        if got == want:
            return
        expected = self._vllm_rule_cap(layer, spec)
        if expected is not None and got == expected:
            if got.numerical_value_in(AdmissionCap) > want.numerical_value_in(AdmissionCap):
                self.note(
                    "choice",
                    name,
                    f"vLLM lets a request hold {got} where kvunits' cap is {want} (vLLM's "
                    "sliding cap adds a block even when the window covers the request)",
                )
            return
        self.finding(
            "cap",
            name,
            f"vLLM lets a request hold {got}, but {want} keep every key the kernel reads "
            f"(in flight {in_flight}, max_len {max_len} {spec.slot_unit.unit})",
        )

    def _vllm_rule_cap(self, layer: LayerSpec, spec: VllmSpec) -> AdmissionCap | None:
        """The cap vLLM's own formula gives a spec with the model's numbers (vLLM's window
        rule) at this spec's block size: equal caps mean the difference is vLLM's choice."""
        if not isinstance(layer, SlidingWindowLayer):
            return spec.vllm_admission_cap(*self._limits(spec))
        window = _n(layer.sliding_window)
        if layer.pool is not None:
            window = cdiv(window, layer.pool.tokens_per_block) + 1
        if spec.sliding_window is None:
            return None
        model_rule = replace(spec, sliding_window=Window(window, spec.slot_unit))  # type: ignore[type-var,arg-type]
        return model_rule.vllm_admission_cap(*self._limits(spec))

    def _limits(self, spec: VllmSpec) -> tuple[int, int]:
        """In flight and the longest request, in the spec's slots (vLLM schedules every group
        in the request's positions: a pooled slot is one position); a DCP-sharded full
        attention layer holds ``cdiv(max_len, dcp)`` of them."""
        in_flight = self.engine.max_in_flight.numerical_value_in(Tokens)
        max_len = self.engine.max_model_len.numerical_value_in(Tokens)
        dcp = self.engine.decode_context_parallel_size
        if dcp > 1 and spec.kind in ("full_attention", "mla") and spec.fields.get("dcp_sharded"):
            max_len = cdiv(max_len, dcp)
        return in_flight, max_len

    def _kvunits_cap(self, layer: LayerSpec, spec: VllmSpec) -> AdmissionCap:
        """kvunits' admission cap of the model's layer at this spec's block size, with the same
        in-flight and length (kvunits' formula: `ManagerSpec.max_admission_blocks_per_request`)."""
        block = spec.block_size_slots
        manager = manager_view(layer, block)
        in_flight, max_len = self._limits(spec)
        unit = manager.slot_unit
        return manager.max_admission_blocks_per_request(unit(in_flight), unit(max_len))  # type: ignore[arg-type]

    def _state(self, name: str, layer: LayerSpec, spec: VllmSpec) -> None:
        if spec.kind != "state":
            self.finding(
                "kind",
                name,
                f"vLLM keeps a {spec.spec_type} for this layer, but the model's layer is a "
                f"{layer.kind} state: one page per request, whatever its length",
            )
            return
        try:
            want = page_size_per_rank(layer, manager_view(layer, 1), self.parallelism)
        except SpecError as exc:
            self.note("not_audited", name, f"state not compared: {exc.message}")
            return
        if spec.page_size != spec.unpadded_page_size:
            self.note(
                "choice",
                name,
                f"vLLM pads the state page from {spec.unpadded_page_size} to {spec.page_size} "
                "(page_size_padded: one page size for the hybrid pool)",
            )
        if want != spec.unpadded_page_size:
            self.finding(
                "page",
                name,
                f"vLLM's state page is {spec.unpadded_page_size} but the model's {layer.kind} "
                f"state on one rank is {want}: the state does not fit its page, or memory is "
                "reserved for nothing",
            )

    def _uncovered(self, model: ModelSpec, seen: set[str], specs: Mapping[str, VllmSpec]) -> None:
        """The model's cached layers vLLM keeps no spec for, on any worker."""
        if not specs:
            return
        missing = [
            n
            for n, layer in model.layers.items()
            if n not in seen and not isinstance(layer, (EncoderOnlyLayer, KVSharedLayer))
        ]
        for name in missing:
            self.finding(
                "coverage",
                name,
                f"the model's layer {name} keeps a {model.layers[name].kind} cache, but no "
                "worker of vLLM states a spec for it: its keys have nowhere to live",
            )

    # -- groups ------------------------------------------------------------------------------

    def _groups(self, model: ModelSpec, specs: Mapping[str, VllmSpec]) -> None:
        configs = self.inputs.kv_cache_configs
        if not configs:
            return
        groups = configs[0].groups
        # vLLM unifies pages by growing the smaller ones to the largest layer page
        # (unify_kv_cache_spec_page_size: "the largest page stays"); no group grows past it.
        largest = max(
            (
                specs[n].unpadded_page_size.numerical_value_in(RankBytes)
                for g in groups
                for n in g.layer_names
                if n in specs
            ),
            default=0,
        )
        for index, group in enumerate(groups):
            members = dict(group.layer_specs) or {
                n: group.spec for n in group.layer_names if group.spec is not None
            }
            for layer_name, group_spec in members.items():
                own = specs.get(layer_name)
                if own is None:
                    continue
                self._group_member(index, layer_name, group_spec, own, groups, largest)
        self._budget(model, specs)

    def _group_member(
        self,
        index: int,
        name: str,
        group: VllmSpec,
        own: VllmSpec,
        groups: Sequence[Any],
        largest: int,
    ) -> None:
        """A group's spec must be its layers' spec, but for a block size grown to unify
        pages (vLLM's ``unify_kv_cache_spec_page_size``: bytes per slot unchanged)."""
        fields: list[tuple[str, Callable[[VllmSpec], object]]] = [
            ("kind", lambda s: s.kind),
            ("tokens_per_state", lambda s: s.pool),
            ("num_kv_heads", lambda s: s.kv_heads),
            ("head_size", lambda s: (s.head_size_k, s.head_size_v)),
            ("dtype", lambda s: s.dtype),
            ("sliding_window", lambda s: s.sliding_window),
            ("attention_chunk_size", lambda s: s.chunk),
        ]
        if (
            group.kind == "full_attention"
            and own.kind in ("sliding_window", "chunked_local")
            and (group.sliding_window, group.chunk) == (own.sliding_window, own.chunk)
        ):
            # unify_hybrid_kv_cache_specs (the hybrid manager disabled): the layer's spec is
            # promoted to full attention recording its window; every token held, by design.
            self.note(
                "choice",
                name,
                f"KV-cache group {index} keeps this {own.kind} layer as full attention "
                "recording its window (hybrid KV-cache manager disabled)",
            )
            fields = fields[1:]
        for field_name, get in fields:
            mine, theirs = get(own), get(group)
            if mine == theirs:
                continue
            donor = _donor(groups, index, field_name, get)
            origin = f" (group {donor}'s)" if donor is not None else ""
            self.finding(
                "group",
                name,
                f"KV-cache group {index}'s spec states {field_name} {theirs}{origin}, but this "
                f"layer's is {mine}: the group's pages and block table follow another layer's "
                "cache than the one the kernel writes",
            )
            return
        g_block = group.block_size_slots
        o_block = own.block_size_slots
        if g_block == o_block:
            return
        per_slot_own = own.unpadded_page_size.numerical_value_in(RankBytes) * g_block
        per_slot_group = group.unpadded_page_size.numerical_value_in(RankBytes) * o_block
        donor = _donor(groups, index, "block_size", lambda s: s.block_size_slots)
        grown = group.unpadded_page_size.numerical_value_in(RankBytes)
        if g_block % o_block == 0 and per_slot_own == per_slot_group and grown <= largest:
            self.note(
                "choice",
                name,
                f"KV-cache group {index} grows the block size from {own.block_size} to "
                f"{group.block_size} to unify pages (same bytes per slot)",
            )
            return
        origin = f" (group {donor}'s)" if donor is not None else ""
        self.finding(
            "group",
            name,
            f"KV-cache group {index}'s block size is {group.block_size}{origin} where this "
            f"layer's spec states {own.block_size}: its pages grow to {group.unpadded_page_size}, "
            f"past the pool's largest page ({largest} byte/rank), so a block id costs more "
            "than the pool counts per block",
        )

    def _budget(self, model: ModelSpec, specs: Mapping[str, VllmSpec]) -> None:
        """The blocks the budget buys: vLLM's ``num_blocks`` against kvunits' plan of one pool
        from the same memory (one device, or one group)."""
        configs, memory = self.inputs.kv_cache_configs, self.inputs.available_memory
        if not configs or not memory or self.engine.num_gpu_blocks_override is not None:
            return
        groups = configs[0].groups
        if self.parallelism.world_size > 1 and len(groups) > 1:
            self.note(
                "not_audited",
                "",
                "blocks the budget buys: kvunits plans one shared pool on one device only",
            )
            return
        # kvunits unifies pages from one block size: the one of vLLM's largest layer page
        # (vLLM's unification keeps the largest page; a sliding layer's backend picks its own),
        # the smallest of those where layers of several block sizes reach that page (vLLM grew
        # the others' to it: Gemma 4's sliding layers, 32 tokens beside its 512-wide full
        # layers' 16).
        attention = [s for s in specs.values() if s.kind not in ("state", "unknown")]
        largest = max(
            (s.unpadded_page_size.numerical_value_in(RankBytes) for s in attention), default=0
        )
        block = (
            min(
                s.block_size_slots
                for s in attention
                if s.unpadded_page_size.numerical_value_in(RankBytes) == largest
            )
            if attention
            else self.engine.block_size
        )
        # One scheduler hands out block ids valid on every rank: the fewest memory decides.
        budget = min(memory, key=lambda m: m.numerical_value_in(RankBytes))
        engine = self._kvunits_engine(model, budget, len(groups), block)
        if engine is None:
            return
        from kvunits.runtime import plan

        try:
            planned = plan(model, engine)
        except SpecError as exc:
            self.note("not_audited", "", f"blocks the budget buys: kvunits' plan: {exc.message}")
            return
        ours = min(g.num_blocks.numerical_value_in(PoolBlocks) for g in planned.groups)
        theirs = min(c.num_blocks for c in configs)
        if ours != theirs:
            self.finding(
                "blocks",
                "",
                f"vLLM buys {theirs} cache_block from {budget}, "
                f"where kvunits' plan of the same pool buys {ours} cache_block: every request "
                "admitted on that count is "
                + ("short of memory" if theirs > ours else "refused for memory that is free"),
            )

    def _kvunits_engine(
        self, model: ModelSpec, memory: RankBytes, groups: int, block: int | None
    ) -> EngineSpec | None:
        engine = self.engine
        pools = [
            layer.pool.tokens_per_block
            for layer in model.layers.values()
            if not isinstance(layer, (MLALayer, IndexerLayer, StateMixerLayer, StateLayer))
            and not isinstance(layer, (EncoderOnlyLayer, KVSharedLayer))
            and layer.pool is not None
        ]
        p = max(pools, default=1)
        settings: dict[str, Any] = {
            "block_size_slots": block or engine.block_size or 16,
            "max_model_len": engine.max_model_len,
            "max_num_batched_tokens": engine.max_num_batched_tokens,
            "tensor_parallel_size": engine.tensor_parallel_size,
            "pipeline_parallel_size": engine.pipeline_parallel_size,
            "decode_context_parallel_size": engine.decode_context_parallel_size,
            "max_concurrent_batches": engine.max_concurrent_batches,
            "memory_budget": memory,
            "cache_dtype": self.cache_dtype,
            "kv_cache_layout": "shared" if groups > 1 else "per_group",
        }
        if pools or any(isinstance(x, CrossAttentionLayer) for x in model.layers.values()):
            length = engine.max_model_len.numerical_value_in(Tokens)
            step = engine.max_num_batched_tokens.numerical_value_in(Tokens)
            settings["max_encoder_len"] = EncoderTokens(length * p)
            settings["max_encoder_tokens_per_step"] = EncoderTokens(step * p)
        try:
            return EngineSpec(**settings)
        except SpecError as exc:
            self.note("not_audited", "", f"blocks the budget buys: {exc}")
            return None


# -- helpers --------------------------------------------------------------------------------


def _expected_dtype(engine: VllmEngine) -> CacheDType | None:
    name = engine.dtype if engine.cache_dtype == "auto" else engine.cache_dtype
    try:
        return CacheDType.parse(name)
    except SpecError:
        return None


def _kind_of(layer: LayerSpec) -> str:
    if isinstance(layer, MLALayer):
        return "mla"
    return layer.kind


def _pool_of(layer: LayerSpec) -> int:
    if isinstance(layer, CrossAttentionLayer):
        return layer.pool_factor.tokens_per_block
    pool = getattr(layer, "pool", None)
    return 1 if pool is None else int(pool.tokens_per_block)


def _pool_factor(p: int) -> Any:
    from kvunits.contracts import PoolFactor

    return PoolFactor(p)


def _head_sizes(layer: LayerSpec) -> tuple[Elements, Elements]:
    if isinstance(layer, MLALayer):
        return layer.kv_lora_rank + layer.qk_rope_head_dim, Elements(0)
    if isinstance(layer, IndexerLayer):
        # vLLM's DeepseekV32IndexerCache: one head of its packed bytes, as uint8 elements.
        return Elements(layer.slot_size.numerical_value_in(Bytes)), Elements(0)
    assert not isinstance(layer, (StateMixerLayer, StateLayer, EncoderOnlyLayer, KVSharedLayer))
    return layer.head_size_k, layer.head_size_v_or_k


def _reach_slots(layer: LayerSpec) -> int | None:
    """How far back a sliding or chunked layer can read, in its manager's slots (None: it
    reads everything)."""
    if isinstance(layer, SlidingWindowLayer):
        if layer.pool is None:
            return _n(layer.sliding_window)
        return _n(pool_window(layer.sliding_window, layer.pool))  # type: ignore[arg-type]
    if isinstance(layer, ChunkedLocalLayer):
        return _n(layer.chunk) // _pool_of(layer)
    return None


def _layer_size(layer: LayerSpec) -> str:
    if isinstance(layer, SlidingWindowLayer):
        return f"window {layer.sliding_window}"
    if isinstance(layer, ChunkedLocalLayer):
        return f"chunk {layer.chunk}"
    return layer.kind


def _slot_text(spec: VllmSpec) -> str:
    p = spec.pool.tokens_per_block
    return "one token" if p == 1 else f"tokens_per_state 1/{p}: {p} encoder_token"


def _donor(
    groups: Sequence[Any], index: int, field: str, get: Callable[[VllmSpec], object]
) -> int | None:
    """Another group whose spec states the value this group's spec wrongly has."""
    mine = groups[index]
    specs = list(mine.layer_specs.values()) or ([mine.spec] if mine.spec else [])
    if not specs:
        return None
    value = get(specs[0])
    for other_index, other in enumerate(groups):
        if other_index == index:
            continue
        own_layers = list(other.layer_specs.values()) or ([other.spec] if other.spec else [])
        if own_layers and get(own_layers[0]) == value:
            return other_index
    return None


def _where(layers: tuple[str, ...]) -> str:
    if not layers or layers == ("",):
        return "plan"
    if len(layers) == 1:
        return f"layer {layers[0]}"
    return f"layers {layers[0]} … {layers[-1]} ({len(layers)} layers)"


def _merge(rows: list[tuple[Check, str, str]]) -> tuple[Finding, ...]:
    """One finding per (check, message), with every layer it concerns, in first-seen order."""
    merged: dict[tuple[Check, str], list[str]] = {}
    for check, layer, message in rows:
        layers = merged.setdefault((check, message), [])
        if layer and layer not in layers:
            layers.append(layer)
    return tuple(
        Finding(check, tuple(layers), message) for (check, message), layers in merged.items()
    )
