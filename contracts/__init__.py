"""kvunits contracts: typed unit quantities, conversions that name their rounding, specs, views.

The core every other part of kvunits stands on:

* quantities: `EncoderTokens`, `PooledBlocks`, `Tokens`, `CacheBlocks`, `Bytes` (one final
  class per unit; each is a *length*), and the counts of cache blocks that mean something
  else: a request's `AdmissionCap`, a pool's `PoolBlocks`, a window's `SpanBlocks`, a
  table's `TableBlocks`, the other kinds over a sequence unit, `Window`,
  `Position` and `Chunk`, and the per-layer factors `PoolFactor` (P) and `BlockSize`;
* the counts a spec declares: `Heads`, `KVHeads`, `Elements` (a head size), `Layers` and a
  stage's `StageLayers`; the allocator's integer sequences `BlockIds` (a block table) and
  `SlotIds` (a slot mapping), which refuse each other;
* conversions between them, each taking the kind it is correct for and naming its rounding
  (`CONVERSIONS` lists them);
* the frozen layer, model and engine specs, and the two views of a layer that the cache
  manager (`ManagerSpec`) and the attention kernel (`KernelSpec`) read;
* layer groups (`group_layers`), and the error tree (`kvunits.contracts.errors`).

Sub-modules: `kvunits.contracts.deploy` says whose count it is (a rank's heads, bytes, blocks and
tokens against the model's) and converts between them for a deployment's shape (tensor,
pipeline, decode-context parallelism); `kvunits.contracts.state` holds the recurrent mixers' layer
specs (Mamba-1, Mamba-2, gated delta net), which keep their state's shapes;
`kvunits.contracts.config` loads config files (TOML/YAML/JSON, Hugging Face);
`kvunits.contracts.crossing` is the one crossing from manager slots to kernel rows;
`kvunits.contracts.internal` holds what runtime and kernels share with this package.

Importing this package does not import pint, torch or triton, and neither does reading text
quantities (config parsing, `parse_quantity`: the unit table of ``units.txt``); pint loads on
first use of `ureg` or of a pint quantity handed in.
"""

from __future__ import annotations

if __name__ != "kvunits.contracts":
    # A checkout's root on sys.path exposes this directory as `contracts`: a second copy of every
    # class, and a name other distributions use. kvunits._names says where, and the fix.
    from kvunits._names import bare_name_error

    raise bare_name_error(__name__, __file__, "kvunits.contracts")

from typing import TYPE_CHECKING

from ._backends import exclusive_window_bound as exclusive_window_bound
from ._backends import flash_attn_window_size as flash_attn_window_size
from ._backends import flashinfer_window_left as flashinfer_window_left
from ._backends import last_position as last_position
from ._backends import length_through as length_through
from ._convert import CONVERSIONS as _LENGTH_CONVERSIONS
from ._convert import block_of as block_of
from ._convert import bytes_to_cache_blocks_floor as bytes_to_cache_blocks_floor
from ._convert import cache_blocks_to_bytes as cache_blocks_to_bytes
from ._convert import expand_block_size as expand_block_size
from ._convert import pool_chunk as pool_chunk
from ._convert import pool_length as pool_length
from ._convert import pool_position as pool_position
from ._convert import pool_span as pool_span
from ._convert import pool_window as pool_window
from ._convert import slots_to_cache_blocks_ceil as slots_to_cache_blocks_ceil
from ._convert import unpool_length as unpool_length
from ._convert import unpool_window as unpool_window
from ._convert import window_blocks as window_blocks
from ._counts import Elements as Elements
from ._counts import Heads as Heads
from ._counts import KVHeads as KVHeads
from ._counts import Layers as Layers
from ._counts import StageLayers as StageLayers
from ._dtype import CacheDType as CacheDType
from ._engine import EngineSpec as EngineSpec
from ._factors import BlockSize as BlockSize
from ._factors import PoolFactor as PoolFactor
from ._group_marker import GroupMarker as GroupMarker
from ._groups import AnyLayerGroup as AnyLayerGroup
from ._groups import LayerGroup as LayerGroup
from ._groups import group_layers as group_layers
from ._ids import BlockIds as BlockIds
from ._ids import SlotIds as SlotIds
from ._kinds import Chunk as Chunk
from ._kinds import Position as Position
from ._kinds import PosUnit as PosUnit
from ._kinds import Window as Window
from ._layers import ChunkedLocalLayer as ChunkedLocalLayer
from ._layers import CrossAttentionLayer as CrossAttentionLayer
from ._layers import EncoderOnlyLayer as EncoderOnlyLayer
from ._layers import FullAttentionLayer as FullAttentionLayer
from ._layers import IndexerLayer as IndexerLayer
from ._layers import KVSharedLayer as KVSharedLayer
from ._layers import LayerSpec as LayerSpec
from ._layers import MLALayer as MLALayer
from ._layers import ModelSpec as ModelSpec
from ._layers import SlidingWindowLayer as SlidingWindowLayer
from ._layers import StateLayer as StateLayer
from ._parse import parse_quantity as parse_quantity
from ._quantity import AdmissionCap as AdmissionCap
from ._quantity import Bytes as Bytes
from ._quantity import CacheBlocks as CacheBlocks
from ._quantity import EncoderTokens as EncoderTokens
from ._quantity import IntQuantity as IntQuantity
from ._quantity import PoolBlocks as PoolBlocks
from ._quantity import PooledBlocks as PooledBlocks
from ._quantity import SeqUnit as SeqUnit
from ._quantity import SlotUnit as SlotUnit
from ._quantity import SpanBlocks as SpanBlocks
from ._quantity import TableBlocks as TableBlocks
from ._quantity import Tokens as Tokens
from ._views import KernelSpec as KernelSpec
from ._views import KernelUnit as KernelUnit
from ._views import ManagerSpec as ManagerSpec
from ._views import kernel_view as kernel_view
from ._views import manager_view as manager_view
from .deploy import DEPLOY_CONVERSIONS as _DEPLOY_CONVERSIONS
from .errors import KvUnitsError as KvUnitsError
from .errors import SpecError as SpecError
from .errors import SpecValidationError as SpecValidationError
from .errors import UnitAttributeError as UnitAttributeError
from .errors import UnitError as UnitError
from .errors import UnitTypeError as UnitTypeError
from .errors import UnitValueError as UnitValueError

if TYPE_CHECKING:
    from ._registry import ureg as ureg

#: Every named conversion, with its rounding: between lengths, slots, blocks and bytes
#: (``_convert``), and between the model's counts and one rank's (``_deploy``).
CONVERSIONS = _LENGTH_CONVERSIONS + _DEPLOY_CONVERSIONS


def __getattr__(name: str) -> object:
    # The pint registry is the one lazy name: building it imports pint (about 170 ms), which
    # the allocator, the kernels and most of the command line never need.
    if name == "ureg":
        from ._registry import ureg

        globals()["ureg"] = ureg
        return ureg
    raise AttributeError(f"module 'contracts' has no attribute {name!r}")


__all__ = [
    "CONVERSIONS",
    "AdmissionCap",
    "AnyLayerGroup",
    "BlockIds",
    "BlockSize",
    "Bytes",
    "CacheBlocks",
    "CacheDType",
    "Chunk",
    "ChunkedLocalLayer",
    "CrossAttentionLayer",
    "Elements",
    "EncoderOnlyLayer",
    "EncoderTokens",
    "EngineSpec",
    "FullAttentionLayer",
    "GroupMarker",
    "Heads",
    "IndexerLayer",
    "IntQuantity",
    "KVHeads",
    "KVSharedLayer",
    "KernelSpec",
    "KernelUnit",
    "KvUnitsError",
    "LayerGroup",
    "LayerSpec",
    "Layers",
    "MLALayer",
    "ManagerSpec",
    "ModelSpec",
    "PoolBlocks",
    "PoolFactor",
    "PooledBlocks",
    "PosUnit",
    "Position",
    "SeqUnit",
    "SlidingWindowLayer",
    "SlotIds",
    "SlotUnit",
    "SpanBlocks",
    "SpecError",
    "SpecValidationError",
    "StageLayers",
    "StateLayer",
    "TableBlocks",
    "Tokens",
    "UnitAttributeError",
    "UnitError",
    "UnitTypeError",
    "UnitValueError",
    "Window",
    "block_of",
    "bytes_to_cache_blocks_floor",
    "cache_blocks_to_bytes",
    "exclusive_window_bound",
    "expand_block_size",
    "flash_attn_window_size",
    "flashinfer_window_left",
    "group_layers",
    "kernel_view",
    "last_position",
    "length_through",
    "manager_view",
    "parse_quantity",
    "pool_chunk",
    "pool_length",
    "pool_position",
    "pool_span",
    "pool_window",
    "slots_to_cache_blocks_ceil",
    "unpool_length",
    "unpool_window",
    "ureg",
    "window_blocks",
]
