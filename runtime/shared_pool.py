"""One block pool for every layer group: one page size, and what a budget buys in it.

kvunits' default layout gives each layer group a pool of its own and splits the budget between
them at plan time. vLLM's hybrid allocator instead draws every group's blocks from one pool,
so memory goes to whichever group needs it now (``vllm/v1/core/kv_cache_utils.py``:
``unify_kv_cache_spec_page_size``, ``_get_kv_cache_groups_uniform_page_size``,
``get_kv_cache_config_from_groups``). A block id then addresses one page in each of a set of
KV tensors, which works only if every group's page (bytes per block per layer) is the same:

1. **Unify the page sizes** (`unify_page_sizes`). The largest page stays; a group whose page
   divides it grows its block size by the ratio (so its page grows, never its bytes per
   slot); a page that does not divide it is refused, naming the groups (vLLM pads such pages
   only for attention backends that index pages by block stride; kvunits does not pad). A
   state group's page is its state, whatever the block size: it cannot grow.
2. **Split the groups into groups of equally many layers** (`split_by_layers`): the layers
   per block are the smallest group's count, or the largest's when it is under 1.5 times the
   smallest; a group with more layers splits into that many, strided (``layers[i::n]``), each
   with its own block table. A block spans that many pages (one per KV tensor); a group with
   fewer layers leaves the rest unused (vLLM's "padding layers" warning).
3. **Count the blocks**: ``kv_cache_memory // page // layers_per_block`` (the budget of the
   one device), the null block among them; a request at full length holds the sum of every
   group's admission cap.

The groups' block sizes after unification count each group's own unit: Voxtral Realtime's text
group grows to 128 tokens a block while its audio group keeps 16 pooled blocks (64 encoder
tokens). A prefix hash cut at one group's boundaries never serves the other
(`kvunits.runtime.prefix_cache`).

Example:
    The Voxtral Realtime example: the text page (64 KiB) divides the audio page (512 KiB) 8
    times, so text blocks grow from 16 to 128 tokens; 32 layers per block (26 < 32 < 39), so
    a block is 16 MiB and 40 GiB buys 2560 of them.

    >>> from kvunits.contracts import (EncoderTokens, EngineSpec, PoolFactor, SlidingWindowLayer,
    ...                        Tokens, Window, Elements, KVHeads, Layers)
    >>> from kvunits.contracts.deploy import RankBytes
    >>> audio = SlidingWindowLayer(sliding_window=Window(750, EncoderTokens), pool=PoolFactor(4),
    ...                            kv_heads=KVHeads(32), head_size=Elements(64))
    >>> text = SlidingWindowLayer(sliding_window=Window(8192, Tokens), kv_heads=KVHeads(8),
    ...                           head_size=Elements(128))
    >>> model = ModelSpec.stacked("voxtral", {"audio": (audio, Layers(32)),
    ...                                       "text": (text, Layers(26))})
    >>> engine = EngineSpec(max_model_len=Tokens(131072), max_num_batched_tokens=Tokens(2048),
    ...                     max_encoder_len=EncoderTokens(524288),
    ...                     max_encoder_tokens_per_step=EncoderTokens(4),
    ...                     memory_budget=RankBytes(40 << 30))
    >>> layout = shared_layout(model, engine)
    >>> [(g.name, str(g.manager.block_size)) for g in layout.groups]
    [('audio', '16 pooled_block/cache_block'), ('text', '128 token/cache_block')]
    >>> str(layout.page_size), layout.layers_per_block, str(layout.num_blocks)
    ('524288 byte', 32, '2560 cache_block')
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, final

from kvunits.contracts import (
    AnyLayerGroup,
    Bytes,
    EngineSpec,
    KernelSpec,
    LayerGroup,
    Layers,
    ManagerSpec,
    ModelSpec,
    PoolBlocks,
    PooledBlocks,
    SpecError,
    Tokens,
    group_layers,
    kernel_view,
    manager_view,
)
from kvunits.contracts.deploy import RankBytes
from kvunits.contracts.internal import bind_group, cdiv, group_limits, manager_ints


@final
@dataclass(frozen=True, slots=True)
class SharedLayout:
    """The groups of a model on one pool, and the pool.

    Attributes:
        groups: the layer groups, block sizes unified and split to equal layer counts.
        page_size: bytes of one page, the same in every group (one block of one layer).
        layers_per_block: pages one block of the pool spans (one per KV tensor).
        num_blocks: blocks the budget buys, the null block included.
        grown: per original group whose block size grew, the factor it grew by.
    """

    groups: tuple[AnyLayerGroup, ...]
    page_size: Bytes
    layers_per_block: int
    num_blocks: PoolBlocks
    grown: dict[str, int]


def shared_layout(model: ModelSpec, engine: EngineSpec) -> SharedLayout:
    """Lay a model's groups out on one pool (the steps of the module docstring).

    Raises:
        SpecError: the pages cannot be unified (the reason names the groups and pages).
        SpecError: the model keeps no cache.
    """
    groups, _ = group_layers(model, engine)
    if not groups:
        raise SpecError(f"model {model.name!r} has no layer with a KV cache to plan")
    unified, grown = unify_page_sizes(groups, model, engine)
    split, per_block = split_by_layers(unified)
    page = manager_ints(unified[0].manager).page_size_bytes
    budget = engine.kv_cache_memory.numerical_value_in(RankBytes)  # one device: its budget
    return SharedLayout(
        groups=split,
        page_size=Bytes(page),
        layers_per_block=per_block,
        num_blocks=PoolBlocks(budget // page // per_block),
        grown=grown,
    )


def unify_page_sizes(
    groups: Sequence[AnyLayerGroup], model: ModelSpec, engine: EngineSpec
) -> tuple[list[AnyLayerGroup], dict[str, int]]:
    """Give every group the largest page by scaling the block size of the smaller ones (vLLM's
    ``unify_kv_cache_spec_page_size``).

    Returns:
        The groups (re-derived where the block size grew) and, per grown group, its factor.

    Raises:
        SpecError: a page does not divide the largest, or a state group's page is
            smaller (a state does not grow with the block size), or a grown block no longer
            divides a chunk.
    """
    pages = [manager_ints(g.manager).page_size_bytes for g in groups]
    largest = max(pages)
    top = groups[pages.index(largest)]
    out: list[AnyLayerGroup] = []
    grown: dict[str, int] = {}
    for group, page in zip(groups, pages, strict=True):
        if page == largest:
            out.append(group)
            continue
        what = (
            f"group {group.name!r} ({group.manager.kind}, page {page} byte) and group "
            f"{top.name!r} (page {largest} byte)"
        )
        if group.manager.kind == "state":
            raise SpecError(
                f"one pool needs one page size, but {what} differ and a state's page does not "
                "grow with the block size (vLLM pads state pages; kvunits does not): use "
                "kv_cache_layout = 'per_group'"
            )
        if largest % page:
            raise SpecError(
                f"one pool needs one page size, but the page of {what} does not divide the "
                f"largest ({largest} / {page} is not an integer), so no block size makes them "
                "equal (vLLM pads such a page only for attention backends that index pages by "
                "block stride; kvunits does not pad): use kv_cache_layout = 'per_group'"
            )
        factor = largest // page
        try:
            out.append(_with_block_size(group, model, engine, factor))
        except SpecError as err:
            raise SpecError(
                f"one pool needs one page size: group {group.name!r} would grow its block "
                f"size {factor} times to match group {top.name!r}, but {err}"
            ) from None
        grown[group.name] = factor
    return out, grown


def split_by_layers(
    groups: Sequence[AnyLayerGroup],
) -> tuple[tuple[AnyLayerGroup, ...], int]:
    """Split groups into groups of at most one layer count, the pages one block spans
    (vLLM's ``_get_kv_cache_groups_uniform_page_size``).

    Returns:
        The groups (a group split in n is named ``name[0]`` .. ``name[n-1]``, layers
        ``layers[i::n]``), and the layers per block.
    """
    counts = [g.num_layers.numerical_value_in(Layers) for g in groups]
    smallest, largest = min(counts), max(counts)
    per_block = largest if largest < smallest * 1.5 else smallest
    out: list[AnyLayerGroup] = []
    for group in groups:
        parts = cdiv(group.num_layers.numerical_value_in(Layers), per_block)
        if parts == 1:
            out.append(group)
            continue
        for i in range(parts):
            names = group.layer_names[i::parts]
            out.append(_subgroup(group, f"{group.name}[{i}]", names))
    return tuple(out), per_block


def _with_block_size(
    group: AnyLayerGroup, model: ModelSpec, engine: EngineSpec, factor: int
) -> AnyLayerGroup:
    """The group derived again with its block size ``factor`` times larger."""
    block_size = manager_ints(group.manager).block_size_slots * factor
    layers = {name: model.layers[name] for name in group.layer_names}
    first = layers[group.layer_names[0]]
    # The views are the group's (bind_group): the columns they compute keep its name.
    manager = bind_group(
        manager_view(first, block_size, cache_dtype=engine.cache_dtype), group.name
    )
    kernels: dict[str, KernelSpec[Any]] = {
        name: bind_group(kernel_view(layer, block_size, cache_dtype=engine.cache_dtype), group.name)
        for name, layer in layers.items()
        if name in group.kernels
    }
    if manager.slot_unit is PooledBlocks:
        pooled = manager.expect(PooledBlocks)
        return LayerGroup(
            group.name, pooled, group.layer_names, kernels, group_limits(pooled, engine)
        )
    tokens = manager.expect(Tokens)
    return LayerGroup(group.name, tokens, group.layer_names, kernels, group_limits(tokens, engine))


def _subgroup(group: AnyLayerGroup, name: str, layer_names: tuple[str, ...]) -> AnyLayerGroup:
    kernels = {n: bind_group(k, name) for n, k in group.kernels.items() if n in layer_names}
    manager: ManagerSpec[Any] = bind_group(group.manager, name)
    return LayerGroup(name, manager, layer_names, kernels, group.limits)
