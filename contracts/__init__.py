"""kvunits contracts: typed unit quantities, conversions that name their rounding, specs.

Importing this package does not import pint, torch or triton; pint loads on the first call
that crosses the text/pint boundary (`ureg`, `parse_quantity`, ``to_pint``/``from_pint``).
The config layer (`load_config`, `KvUnitsConfig`, the Hugging Face adapter …) loads on first
use of one of its names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._convert import CONVERSIONS as CONVERSIONS
from ._convert import Conversion as Conversion
from ._convert import Rounding as Rounding
from ._convert import bytes_to_cache_blocks_floor as bytes_to_cache_blocks_floor
from ._convert import cache_blocks_to_bytes as cache_blocks_to_bytes
from ._convert import cdiv as cdiv
from ._convert import ceil_ratio as ceil_ratio
from ._convert import expand_block_size as expand_block_size
from ._convert import floor_ratio as floor_ratio
from ._convert import pool_length as pool_length
from ._convert import pool_position as pool_position
from ._convert import pool_window as pool_window
from ._convert import pooled_slot_rows as pooled_slot_rows
from ._convert import slots_to_cache_blocks_ceil as slots_to_cache_blocks_ceil
from ._convert import unpool_length as unpool_length
from ._dtype import CacheDType as CacheDType
from ._engine import EngineSpec as EngineSpec
from ._errors import KvUnitsError as KvUnitsError
from ._errors import SpecError as SpecError
from ._errors import UnitError as UnitError
from ._errors import UnitTypeError as UnitTypeError
from ._errors import UnitValueError as UnitValueError
from ._factors import BlockSize as BlockSize
from ._factors import PoolFactor as PoolFactor
from ._factors import check_pool as check_pool
from ._groups import AnyLayerGroup as AnyLayerGroup
from ._groups import GroupLimits as GroupLimits
from ._groups import LayerGroup as LayerGroup
from ._groups import group_layers as group_layers
from ._groups import group_limits as group_limits
from ._layers import ChunkedLocalLayer as ChunkedLocalLayer
from ._layers import CrossAttentionLayer as CrossAttentionLayer
from ._layers import EncoderOnlyLayer as EncoderOnlyLayer
from ._layers import FullAttentionLayer as FullAttentionLayer
from ._layers import LayerSpec as LayerSpec
from ._layers import MLALayer as MLALayer
from ._layers import ModelSpec as ModelSpec
from ._layers import SlidingWindowLayer as SlidingWindowLayer
from ._layers import StateLayer as StateLayer
from ._parse import parse_any_quantity as parse_any_quantity
from ._parse import parse_quantity as parse_quantity
from ._quantity import QUANTITY_CLASSES as QUANTITY_CLASSES
from ._quantity import Bytes as Bytes
from ._quantity import CacheBlocks as CacheBlocks
from ._quantity import EncoderTokens as EncoderTokens
from ._quantity import IntQuantity as IntQuantity
from ._quantity import PooledBlocks as PooledBlocks
from ._quantity import Q as Q
from ._quantity import SeqUnit as SeqUnit
from ._quantity import SlotUnit as SlotUnit
from ._quantity import Tokens as Tokens
from ._quantity import check_quantity as check_quantity
from ._quantity import describe as describe
from ._quantity import quantity_class_for_unit as quantity_class_for_unit
from ._views import KernelSpec as KernelSpec
from ._views import KernelUnit as KernelUnit
from ._views import ManagedKind as ManagedKind
from ._views import ManagerSpec as ManagerSpec
from ._views import admission_blocks as admission_blocks
from ._views import kernel_view as kernel_view
from ._views import manager_view as manager_view

if TYPE_CHECKING:
    from ._config import ENGINE_DEFAULTS as ENGINE_DEFAULTS
    from ._config import ConfigError as ConfigError
    from ._config import ConfigFile as ConfigFile
    from ._config import ConfigIssue as ConfigIssue
    from ._config import EngineConfig as EngineConfig
    from ._config import KvUnitsConfig as KvUnitsConfig
    from ._config import ModelConfig as ModelConfig
    from ._hf import HF_FIELDS as HF_FIELDS
    from ._hf import HfConfig as HfConfig
    from ._hf import read_hf_config as read_hf_config
    from ._load import load_config as load_config
    from ._load import load_config_data as load_config_data
    from ._read import read_config_file as read_config_file
    from ._registry import ureg as ureg

#: Names whose module is imported on first use (module, attribute).
_LAZY = {
    "ENGINE_DEFAULTS": "_config",
    "ConfigError": "_config",
    "ConfigFile": "_config",
    "ConfigIssue": "_config",
    "EngineConfig": "_config",
    "KvUnitsConfig": "_config",
    "ModelConfig": "_config",
    "HF_FIELDS": "_hf",
    "HfConfig": "_hf",
    "read_hf_config": "_hf",
    "load_config": "_load",
    "load_config_data": "_load",
    "read_config_file": "_read",
    "ureg": "_registry",
}


def __getattr__(name: str) -> object:
    # The registry is built on first use, so that importing contracts does not import pint;
    # the config layer likewise, so that the runtime and the kernels do not pay for it.
    module = _LAZY.get(name)
    if module is not None:
        from importlib import import_module

        value = getattr(import_module(f"{__name__}.{module}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'contracts' has no attribute {name!r}")


__all__ = [
    "CONVERSIONS",
    "ENGINE_DEFAULTS",
    "HF_FIELDS",
    "QUANTITY_CLASSES",
    "AnyLayerGroup",
    "BlockSize",
    "Bytes",
    "CacheBlocks",
    "CacheDType",
    "ChunkedLocalLayer",
    "ConfigError",
    "ConfigFile",
    "ConfigIssue",
    "Conversion",
    "CrossAttentionLayer",
    "EncoderOnlyLayer",
    "EncoderTokens",
    "EngineConfig",
    "EngineSpec",
    "FullAttentionLayer",
    "GroupLimits",
    "HfConfig",
    "IntQuantity",
    "KernelSpec",
    "KernelUnit",
    "KvUnitsConfig",
    "KvUnitsError",
    "LayerGroup",
    "LayerSpec",
    "MLALayer",
    "ManagedKind",
    "ManagerSpec",
    "ModelConfig",
    "ModelSpec",
    "PoolFactor",
    "PooledBlocks",
    "Q",
    "Rounding",
    "SeqUnit",
    "SlidingWindowLayer",
    "SlotUnit",
    "SpecError",
    "StateLayer",
    "Tokens",
    "UnitError",
    "UnitTypeError",
    "UnitValueError",
    "admission_blocks",
    "bytes_to_cache_blocks_floor",
    "cache_blocks_to_bytes",
    "cdiv",
    "ceil_ratio",
    "check_pool",
    "check_quantity",
    "describe",
    "expand_block_size",
    "floor_ratio",
    "group_layers",
    "group_limits",
    "kernel_view",
    "load_config",
    "load_config_data",
    "manager_view",
    "parse_any_quantity",
    "parse_quantity",
    "pool_length",
    "pool_position",
    "pool_window",
    "pooled_slot_rows",
    "quantity_class_for_unit",
    "read_config_file",
    "read_hf_config",
    "slots_to_cache_blocks_ceil",
    "unpool_length",
    "ureg",
]
