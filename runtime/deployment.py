"""Planning per rank: which layers each pipeline stage holds, and what one rank holds.

A model served with tensor parallelism (TP), pipeline parallelism (PP) and decode context
parallelism (DCP) is planned per rank, as vLLM 0.33 plans it:

* each stack of layers (``text.0`` … ``text.31``) is split over the stages by
  `kvunits.contracts.deploy.layers_per_stage` (vLLM's ``get_pp_indices``, which ``make_layers``
  applies to every layer list: a decoder's, an audio encoder's);
* a rank's page holds its share of the heads (`kvunits.contracts.page_size_per_rank`, replicated
  when tp exceeds the heads), so a group's page differs between the model and a rank;
* a request's blocks on one rank: the group's admission cap, except that DCP shards a
  full-attention (and MLA) layer's positions: ``cdiv(cdiv(max_len, dcp), block_size)``
  (`kvunits.contracts.tokens_per_dcp_rank`; vLLM's ``FullAttentionSpec.max_memory_usage_bytes``).
  vLLM refuses DCP with sliding windows; it keeps chunked-local, cross-attention and state
  bounds undivided, and so does kvunits;
* each rank's budget is split between the groups of its stage in proportion to what one
  request needs in each, one null block per group, as on one device; a group's blocks are
  the fewest any stage buys, because one scheduler hands out block ids that name a page on
  every rank (vLLM's ``get_kv_cache_configs``: "Change the num_blocks of each rank to the
  smallest among all ranks").

The reverse questions a serving engineer asks are answered from the same numbers:
`longest_max_model_len` (vLLM's ``estimate_max_model_len``, printed when a model does not
fit), `concurrency_at` and `budget_for`.

Example:
    >>> from kvunits.contracts import (Elements, EngineSpec, FullAttentionLayer, KVHeads, Layers,
    ...                                ModelSpec, Tokens)
    >>> from kvunits.contracts.deploy import RankBytes
    >>> layer = FullAttentionLayer(kv_heads=KVHeads(8), head_size=Elements(128))
    >>> model = ModelSpec.stacked("llama", {"text": (layer, Layers(32))})
    >>> engine = EngineSpec(max_model_len=Tokens(131072), max_num_batched_tokens=Tokens(2048),
    ...                     memory_budget=RankBytes(16 << 30))
    >>> longest_max_model_len(model, engine)
    Tokens(131056)
    >>> concurrency_at(model, engine.model_copy(update={"tensor_parallel_size": 8}),
    ...                Tokens(131072))
    7
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Final, final

from kvunits.contracts import (
    AnyLayerGroup,
    EngineSpec,
    Layers,
    MLALayer,
    ModelSpec,
    SpecError,
    Tokens,
    UnitValueError,
    group_layers,
)
from kvunits.contracts.deploy import (
    KVHeads,
    Parallelism,
    RankBlocks,
    RankBytes,
    RankKVHeads,
    blocks_per_rank,
    head_replicas,
    kv_heads_of,
    kv_heads_per_rank,
    layers_per_stage,
    page_size_per_rank,
    rank_blocks_to_bytes,
    rank_bytes_to_blocks_floor,
    rank_tokens_to_blocks_ceil,
    tokens_per_dcp_rank,
)
from kvunits.contracts.internal import ManagedKind, check_quantity

#: The most bytes a budget can be: a quantity is an int64.
_MAX_BYTES: Final = 2**63 - 1


@final
@dataclass(frozen=True, slots=True)
class RankGroupPlan:
    """One layer group on the ranks of one pipeline stage, as each of them holds it.

    Attributes:
        name: the group (`kvunits.contracts.LayerGroup.name`).
        kind: its manager's kind.
        layer_names: the group's layers on this stage.
        kv_heads: the model's KV heads of each layer (None: a state layer).
        kv_heads_per_rank: what each TP rank holds of them
        (`kvunits.contracts.deploy.kv_heads_per_rank`). head_replicas: TP ranks holding each head
        (more than 1: replicated). dcp_sharded: whether DCP splits the group's positions over ranks.
        page_size: one layer's page on one rank.
        block_bytes: one block of the group on one rank: a page per layer of the stage.
        admission_cap: the pages (per layer) one request holds on one rank at most.
        bytes_per_request: ``admission_cap × block_bytes``.
        num_blocks: the pages per layer each rank holds for the group, the null block
            included: the group's pool, the same on every stage.
    """

    name: str
    kind: ManagedKind
    layer_names: tuple[str, ...]
    kv_heads: KVHeads | None
    kv_heads_per_rank: RankKVHeads | None
    head_replicas: int
    dcp_sharded: bool
    page_size: RankBytes
    block_bytes: RankBytes
    admission_cap: RankBlocks
    bytes_per_request: RankBytes
    num_blocks: RankBlocks


@final
@dataclass(frozen=True, slots=True)
class StagePlan:
    """What each rank of one pipeline stage holds.

    Attributes:
        index: the stage, 0 first.
        layer_names: every layer the stage holds, in model order (those without a cache too).
        groups: the layer groups with layers on this stage.
        null_bytes: the null blocks: one block of every group of the stage.
        bytes_per_request: one full-length request's pages on one rank of the stage.
        memory_used: the pages the plan buys on one rank of the stage, null blocks included
            (at most the budget).
    """

    index: int
    layer_names: tuple[str, ...]
    groups: tuple[RankGroupPlan, ...]
    null_bytes: RankBytes
    bytes_per_request: RankBytes
    memory_used: RankBytes


@final
@dataclass(frozen=True, slots=True)
class Shortfall:
    """A stage whose ranks' budget cannot hold its null blocks plus one request.

    Attributes:
        stage: the stage, 0 first.
        bytes_per_request: one full-length request's pages on one of its ranks.
        null_bytes: its null blocks (one block of each of its groups).
    """

    stage: int
    bytes_per_request: RankBytes
    null_bytes: RankBytes


@final
@dataclass(frozen=True, slots=True)
class _Shape:
    """What the plan of one group needs that does not depend on ``max_model_len``."""

    group: AnyLayerGroup
    kv_heads: KVHeads | None
    kv_heads_per_rank: RankKVHeads | None
    head_replicas: int
    dcp_sharded: bool
    page: int  # one layer's page on one rank, byte/rank
    layers_by_stage: tuple[tuple[str, ...], ...]


@final
class Layout:
    """A model on an engine's deployment: its groups, its stages and each group's shape per
    rank, from which the plan at any ``max_model_len`` follows (see the module doc).

    Raises:
        SpecError: the model keeps no cache; the heads cannot be split over the TP ranks;
            DCP with a sliding-window or encoder-side group, or beyond what the heads allow.
    """

    __slots__ = ("engine", "groups", "model", "parallelism", "shapes", "stages", "uncached")

    def __init__(self, model: ModelSpec, engine: EngineSpec) -> None:
        groups, uncached = group_layers(model, engine)
        if not groups:
            raise SpecError(f"model {model.name!r} has no layer with a KV cache to plan")
        self.model, self.engine, self.groups, self.uncached = model, engine, groups, uncached
        self.parallelism = engine.parallelism
        self.stages = stage_layers(model, self.parallelism)
        check_every_stage_caches(
            self.stages, {name for g in groups for name in g.layer_names}, self.parallelism
        )
        stage_of = {name: s for s, names in enumerate(self.stages) for name in names}
        _check_decode_context(model, groups, self.parallelism)
        shapes = []
        for group in groups:
            by_stage: list[list[str]] = [[] for _ in self.stages]
            for name in group.layer_names:
                by_stage[stage_of[name]].append(name)
            shapes.append(self._shape(group, tuple(tuple(names) for names in by_stage)))
        self.shapes: tuple[_Shape, ...] = tuple(shapes)

    def _shape(self, group: AnyLayerGroup, by_stage: tuple[tuple[str, ...], ...]) -> _Shape:
        p = self.parallelism
        pages = {
            name: page_size_per_rank(self.model.layers[name], group.manager, p)
            for name in group.layer_names
        }
        if len(set(pages.values())) > 1:
            # Layers share a manager view but not a rank's page (two mixers of equal state
            # size that tp splits differently): one pool cannot hold both.
            raise SpecError(
                f"the layers of group {group.name!r} have different pages per rank at "
                f"tensor_parallel_size {p.tensor_parallel_size}: "
                + ", ".join(f"{n} {b}" for n, b in list(pages.items())[:4])
            )
        heads = kv_heads_of(self.model.layers[group.layer_names[0]])
        return _Shape(
            group=group,
            kv_heads=heads,
            kv_heads_per_rank=None if heads is None else kv_heads_per_rank(heads, p),
            head_replicas=1 if heads is None else head_replicas(heads, p),
            dcp_sharded=_dcp_sharded(group, p),
            page=next(iter(pages.values())).numerical_value_in(RankBytes),
            layers_by_stage=by_stage,
        )

    # -- one max_model_len ----------------------------------------------------------------------

    def rank_caps(self, max_model_len: Tokens) -> tuple[RankBlocks, ...]:
        """Each group's admission cap on one rank at ``max_model_len`` (the groups' own limits
        otherwise: encoder-side groups count the engine's encoder limits)."""
        length = check_quantity(max_model_len, Tokens, "max_model_len")
        if length.numerical_value_in(Tokens) < 1:
            raise UnitValueError(
                "max_model_len must be >= 1 token: a request holds at least one",
                field="max_model_len",
                expected="an int >= 1 of token",
                got=str(length),
            )
        caps = []
        for shape in self.shapes:
            group = shape.group
            if group.manager.slot_unit is not Tokens or group.manager.fixed_length is not None:
                caps.append(blocks_per_rank(group.admission_cap()))
                continue
            token_group = group.expect(Tokens)
            if shape.dcp_sharded:
                rank_tokens = tokens_per_dcp_rank(length, self.parallelism)
                caps.append(rank_tokens_to_blocks_ceil(rank_tokens, token_group.manager.block_size))
                continue
            cap = token_group.manager.max_admission_blocks_per_request(
                token_group.limits.max_in_flight, length
            )
            caps.append(blocks_per_rank(cap))
        return tuple(caps)

    def stage_needs(self, caps: Sequence[RankBlocks]) -> tuple[tuple[int, int], ...]:
        """Per stage, one full-length request's bytes and the null blocks' on one rank
        (byte/rank, plain ints): ``Σ cap × page × layers`` and ``Σ page × layers``."""
        needs = []
        for s in range(len(self.stages)):
            per_request = null = 0
            for shape, cap in zip(self.shapes, caps, strict=True):
                block = shape.page * len(shape.layers_by_stage[s])
                per_request += cap.numerical_value_in(RankBlocks) * block
                null += block
            needs.append((per_request, null))
        return tuple(needs)

    def budget_for(self, requests: int, max_model_len: Tokens) -> RankBytes:
        """The budget per rank that admits ``requests`` requests of ``max_model_len`` at once:
        ``max over stages (null blocks + requests × one request)``, the least that does.

        Raises:
            SpecError: the budget passes 2**63 - 1 byte/rank (a quantity is an int64), naming
                the most requests of that length whose budget does not.
        """
        needs = self.stage_needs(self.rank_caps(max_model_len))
        budget = max(null + requests * per_request for per_request, null in needs)
        if budget <= _MAX_BYTES:
            return RankBytes(budget)
        most = min(
            ((_MAX_BYTES - null) // per_request for per_request, null in needs if per_request),
            default=0,
        )
        asked = f"{requests} request{'s' if requests != 1 else ''} of {max_model_len}"
        verb = "needs" if requests == 1 else "need"
        fits = (
            f"at most {most} requests of {max_model_len} fit"
            if most > 0
            else f"not even 1 request of {max_model_len} fits"
        )
        raise SpecError(
            f"{asked} {verb} more than {_MAX_BYTES} byte/rank, the most a budget can be "
            f"(int64): {fits}"
        )

    def split(self, caps: Sequence[RankBlocks]) -> tuple[RankBlocks, ...] | Shortfall:
        """Each group's pool on every rank, the null block included; or, when a stage's budget
        cannot hold its null blocks plus one request, the first such stage's `Shortfall`."""
        budget = self.engine.kv_cache_memory.numerical_value_in(RankBytes)
        fewest: list[int | None] = [None] * len(self.shapes)
        for s, (per_request, null) in enumerate(self.stage_needs(caps)):
            if per_request == 0 and null == 0:
                continue  # no cached layer on this stage
            usable = budget - null
            if usable < per_request:
                return Shortfall(s, RankBytes(per_request), RankBytes(null))
            for g, (shape, cap) in enumerate(zip(self.shapes, caps, strict=True)):
                if not shape.layers_by_stage[s]:
                    continue
                # The group's share of the usable bytes, in proportion to what one request
                # needs in it, then whole blocks of it: 1 + usable × cap // per_request, as
                # floor(floor(x) / block) == floor(x / block).
                block = RankBytes(shape.page * len(shape.layers_by_stage[s]))
                cap_blocks = cap.numerical_value_in(RankBlocks)
                block_bytes = block.numerical_value_in(RankBytes)
                share = RankBytes(usable * cap_blocks * block_bytes // per_request)
                bought = 1 + rank_bytes_to_blocks_floor(share, block).numerical_value_in(RankBlocks)
                current = fewest[g]
                fewest[g] = bought if current is None else min(current, bought)
        return tuple(RankBlocks(n if n is not None else 1) for n in fewest)

    def largest_budget(self, caps: Sequence[RankBlocks], max_blocks: int) -> RankBytes:
        """The largest budget per rank whose plan buys no group more than ``max_blocks``
        blocks (the null block included).

        A group's pool is the fewest any of its stages buys, ``1 + (B − null) × cap //
        per_request``; that is at most ``max_blocks`` when ``(B − null) × cap < max_blocks ×
        per_request`` on one of its stages: ``B <= null + (max_blocks × per_request − 1) //
        cap``, the most over its stages, the least over the groups.
        """
        needs = self.stage_needs(caps)
        largest = []
        for shape, cap in zip(self.shapes, caps, strict=True):
            largest.append(
                max(
                    null + (max_blocks * per_request - 1) // cap.numerical_value_in(RankBlocks)
                    for s, (per_request, null) in enumerate(needs)
                    if shape.layers_by_stage[s]
                )
            )
        return RankBytes(min(largest))

    def fits(self, max_model_len: Tokens) -> bool:
        """Whether every stage's budget holds its null blocks and one request of
        ``max_model_len``."""
        return not isinstance(self.split(self.rank_caps(max_model_len)), Shortfall)

    def concurrency(self, caps: Sequence[RankBlocks], blocks: Sequence[RankBlocks]) -> int:
        """Requests of the caps' length admitted at once: ``min over groups ((pool − 1) //
        cap)``."""
        return min(
            (n.numerical_value_in(RankBlocks) - 1) // c.numerical_value_in(RankBlocks)
            for n, c in zip(blocks, caps, strict=True)
        )

    def longest_max_model_len(self) -> Tokens:
        """The longest ``max_model_len``, up to the engine's, at which one request fits
        (binary search, as vLLM's ``estimate_max_model_len``; what a request needs grows with
        its length); ``Tokens(0)`` when even one token does not."""
        low, high = 0, self.engine.max_model_len.numerical_value_in(Tokens)
        while low < high:
            mid = (low + high + 1) // 2
            if self.fits(Tokens(mid)):
                low = mid
            else:
                high = mid - 1
        return Tokens(low)

    def stage_plans(
        self, caps: Sequence[RankBlocks], blocks: Sequence[RankBlocks]
    ) -> tuple[StagePlan, ...]:
        """The per-rank plan of every stage, given the caps and the pools of `split`."""
        plans = []
        needs = self.stage_needs(caps)
        for s, names in enumerate(self.stages):
            groups = []
            used = 0
            for shape, cap, n in zip(self.shapes, caps, blocks, strict=True):
                members = shape.layers_by_stage[s]
                if not members:
                    continue
                block = RankBytes(shape.page * len(members))
                used += rank_blocks_to_bytes(n, block).numerical_value_in(RankBytes)
                groups.append(
                    RankGroupPlan(
                        name=shape.group.name,
                        kind=shape.group.manager.kind,
                        layer_names=members,
                        kv_heads=shape.kv_heads,
                        kv_heads_per_rank=shape.kv_heads_per_rank,
                        head_replicas=shape.head_replicas,
                        dcp_sharded=shape.dcp_sharded,
                        page_size=RankBytes(shape.page),
                        block_bytes=block,
                        admission_cap=cap,
                        bytes_per_request=rank_blocks_to_bytes(cap, block),
                        num_blocks=n,
                    )
                )
            per_request, null = needs[s]
            plans.append(
                StagePlan(
                    index=s,
                    layer_names=names,
                    groups=tuple(groups),
                    null_bytes=RankBytes(null),
                    bytes_per_request=RankBytes(per_request),
                    memory_used=RankBytes(used),
                )
            )
        return tuple(plans)


def stage_layers(model: ModelSpec, parallelism: Parallelism) -> tuple[tuple[str, ...], ...]:
    """The layers of each pipeline stage, in model order.

    Each stack, the layers ``<stack>.<i>`` (and the caches inside them,
    ``<stack>.<i>.<part>``; a layer of another name is a stack of its own), is split by
    `kvunits.contracts.deploy.layers_per_stage` in order of ``i``, as vLLM's
    ``make_layers`` splits each layer list it builds (a decoder's; an audio encoder's, in
    ``whisper_causal.py``).

    Example:
        >>> from kvunits.contracts import Elements, FullAttentionLayer
        >>> layer = FullAttentionLayer(kv_heads=KVHeads(8), head_size=Elements(128))
        >>> model = ModelSpec.stacked("m", {"text": (layer, Layers(5))})
        >>> stage_layers(model, Parallelism(pipeline_parallel_size=2))
        (('text.0', 'text.1', 'text.2'), ('text.3', 'text.4'))
    """
    # A stack's i-th layer is ``<stack>.<i>``; a cache inside it (``<stack>.<i>.<part>``, a
    # sparse-attention indexer beside layer i's MLA) goes with layer i, whichever layers
    # have one: vLLM builds it inside that decoder layer.
    stacks: dict[str, dict[int, list[str]]] = {}
    for order, name in enumerate(model.layers):
        parts = name.split(".")
        at = next((i for i in range(len(parts) - 1, 0, -1) if parts[i].isdigit()), None)
        if at is None:
            stacks.setdefault(name, {})[order] = [name]
        else:
            stack = ".".join(parts[:at])
            stacks.setdefault(stack, {}).setdefault(int(parts[at]), []).append(name)
    stage_of: dict[str, int] = {}
    for members in stacks.values():
        ordered = [members[i] for i in sorted(members)]
        for stage, span in enumerate(layers_per_stage(Layers(len(ordered)), parallelism)):
            for i in span:
                for name in ordered[i]:
                    stage_of[name] = stage
    stages: list[list[str]] = [[] for _ in range(parallelism.pipeline_parallel_size)]
    for name in model.layers:
        stages[stage_of[name]].append(name)
    return tuple(tuple(names) for names in stages)


def check_every_stage_caches(
    stages: Sequence[Sequence[str]], cached: Collection[str], parallelism: Parallelism
) -> None:
    """Refuse a pipeline split that leaves a stage without a layer that keeps a KV cache.

    vLLM 0.33 does not check the pipeline size against the layers (``get_pp_indices`` gives
    the extra stages 0 layers; vLLM #6115 kept it so), and then fails at start-up:
    ``get_kv_cache_configs`` (``kv_cache_planning.py``) projects every KV cache group onto
    such a stage's worker with no layers, and reserving its null block divides by the zero
    bytes of its block (``ZeroDivisionError``). ``-pp 65536`` on a 32-layer model is such a
    split.

    Raises:
        SpecError: naming the first empty stage, the stages and the layers with a cache.
    """
    for index, names in enumerate(stages):
        if not any(name in cached for name in names):
            pp = parallelism.pipeline_parallel_size
            raise SpecError(
                f"pipeline_parallel_size {pp} leaves stage {index} with no layer that keeps a "
                f"KV cache ({len(cached)} layers keep one, split by vLLM's get_pp_indices): "
                "vLLM 0.33 fails to start on it (get_kv_cache_configs divides by the stage's "
                "0 bytes per block: ZeroDivisionError); use a pipeline_parallel_size that "
                "gives every stage a layer "
                f"with a cache (never more than the {len(cached)} layers that keep one)"
            )


def _dcp_sharded(group: AnyLayerGroup, parallelism: Parallelism) -> bool:
    """Whether DCP splits the group's positions: full attention (MLA included) over tokens."""
    return (
        parallelism.decode_context_parallel_size > 1
        and group.manager.kind == "full_attention"
        and group.manager.slot_unit is Tokens
    )


def _check_decode_context(
    model: ModelSpec, groups: Sequence[AnyLayerGroup], parallelism: Parallelism
) -> None:
    """vLLM's conditions for DCP: no sliding window (``SlidingWindowSpec`` asserts "DCP not
    support sliding window."), and for a layer of several KV heads (not MLA), ``tp > heads``
    and ``dcp <= tp // heads`` (``ModelConfig.verify_with_parallel_config``): DCP splits only
    the ranks that replicate a head. kvunits does not shard an encoder-side group.

    Raises:
        SpecError: naming the group or layer, and the sizes.
    """
    dcp, tp = parallelism.decode_context_parallel_size, parallelism.tensor_parallel_size
    if dcp == 1:
        return
    for group in groups:
        if group.manager.kind == "sliding_window":
            raise SpecError(
                f"decode_context_parallel_size {dcp}: group {group.name!r} slides a window, "
                "and vLLM does not support DCP with sliding-window layers"
            )
        if group.manager.kind == "full_attention" and group.manager.slot_unit is not Tokens:
            raise SpecError(
                f"decode_context_parallel_size {dcp}: group {group.name!r} is encoder-side "
                "(pooled); DCP splits decoder positions only"
            )
    for name, layer in model.layers.items():
        heads = kv_heads_of(layer)
        if heads is None or isinstance(layer, MLALayer):
            continue
        n_heads = heads.numerical_value_in(KVHeads)
        if tp <= n_heads or dcp > tp // n_heads:
            raise SpecError(
                f"decode_context_parallel_size {dcp} with tensor_parallel_size {tp}: layer "
                f"{name!r} has {heads}, and DCP needs tp > heads and dcp <= tp // heads "
                f"(at most {tp // n_heads if tp > n_heads else 1} here): it splits "
                "only the ranks that replicate a head"
            )


# -- the reverse questions ------------------------------------------------------------------------


def longest_max_model_len(model: ModelSpec, engine: EngineSpec) -> Tokens:
    """The longest ``max_model_len``, up to the engine's, that one request can have in each
    rank's budget (with the null blocks); ``Tokens(0)`` when not even one token fits.

    vLLM prints this estimate when a model does not fit (``estimate_max_model_len``,
    ``vllm/v1/core/kv_cache_utils.py``, a binary search on the same predicate). kvunits keeps
    one null block per group out of the budget, as vLLM's newer planner does.

    Raises:
        SpecError: as `Layout` (a deployment the model cannot have).
    """
    return Layout(model, engine).longest_max_model_len()


def concurrency_at(model: ModelSpec, engine: EngineSpec, length: Tokens) -> int:
    """Requests of ``length`` tokens admitted at once when ``max_model_len`` is ``length``
    (0 when one does not fit). vLLM logs the same question as "Maximum concurrency for L
    tokens per request: X.XXx", a ratio; kvunits counts whole requests.

    Raises:
        UnitValueError: ``length`` is 0 token.
        SpecError: as `Layout`.
    """
    layout = Layout(model, engine)
    caps = layout.rank_caps(length)
    blocks = layout.split(caps)
    if isinstance(blocks, Shortfall):
        return 0
    return layout.concurrency(caps, blocks)


def budget_for(model: ModelSpec, engine: EngineSpec, requests: int, length: Tokens) -> RankBytes:
    """The KV cache budget each rank needs to admit ``requests`` requests of ``length`` tokens
    at once (``max_model_len = length``): the least budget whose plan admits them.

    Raises:
        SpecError: ``requests`` is not an int >= 1, or as `Layout`.
    """
    if type(requests) is not int or requests < 1:
        raise SpecError(f"requests must be an int >= 1, got {requests!r}")
    return Layout(model, engine).budget_for(requests, length)
