"""kvunits config loading: TOML, YAML or JSON files, Hugging Face ``config.json``, engine settings.

A config file declares the model (its layers, every size with its unit) and the engine (block
size, limits, memory budget); `load_config` reads it, applies the environment (``KVUNITS_*``)
and flags, and resolves it to the frozen `kvunits.contracts.ModelSpec` and
`kvunits.contracts.EngineSpec`. Every problem is a `ConfigError` listing each issue with its file,
field and expected unit.

Rooms: ``_files`` (how every file a user or a cache names is opened: regular files only,
bounded, never echoed; `read_regular_file` for every reader), ``_read`` (untrusted text to a
checked tree), ``_models`` (the file's schema),
``_schema`` (its JSON Schema, as strict as the loader),
``_issues`` (validation errors as located issues), ``_load`` (precedence and resolution),
and the Hugging Face reader: ``_hf`` (its entry), ``_hf_families`` (the family table),
``_hf_decoders``, ``_hf_hybrids`` and ``_hf_speech`` (the family readers), ``_hf_layers``
(what they share), ``_hf_fields`` (the field reader), ``_hf_cache`` (where a config comes
from: a file, a model directory, a model id in the local Hugging Face cache). The Hugging Face
readers and the JSON Schema load on first use: loading a kvunits config file needs neither.
"""

from typing import TYPE_CHECKING

from ..errors import ConfigError as ConfigError
from ..errors import ConfigIssue as ConfigIssue
from ..errors import ConfigWarning as ConfigWarning
from ._files import check_path as check_path
from ._files import file_kind as file_kind
from ._files import open_regular_file as open_regular_file
from ._files import read_regular_file as read_regular_file
from ._hf_cache import hub_cache as hub_cache
from ._hf_cache import locate_config as locate_config
from ._load import load_config as load_config
from ._load import load_config_data as load_config_data
from ._models import ENGINE_DEFAULTS as ENGINE_DEFAULTS
from ._models import ConfigFile as ConfigFile
from ._models import EngineConfig as EngineConfig
from ._models import KvUnitsConfig as KvUnitsConfig
from ._models import ModelConfig as ModelConfig
from ._read import read_config_file as read_config_file

if TYPE_CHECKING:
    from ._hf import HF_FIELDS as HF_FIELDS
    from ._hf import HfConfig as HfConfig
    from ._hf import read_hf_config as read_hf_config
    from ._hf_families import FAMILIES as HF_FAMILIES
    from ._hf_families import WRAPPERS as HF_WRAPPERS
    from ._schema import config_json_schema as config_json_schema

#: The names loaded on first use (module, name there): the Hugging Face readers (a kvunits
#: config file never needs them) and the JSON Schema (``kvunits schema`` only).
_LAZY = {
    "HF_FIELDS": ("._hf", "HF_FIELDS"),
    "HfConfig": ("._hf", "HfConfig"),
    "read_hf_config": ("._hf", "read_hf_config"),
    "HF_FAMILIES": ("._hf_families", "FAMILIES"),
    "HF_WRAPPERS": ("._hf_families", "WRAPPERS"),
    "config_json_schema": ("._schema", "config_json_schema"),
}


def __getattr__(name: str) -> object:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    module, attribute = _LAZY[name]
    value = getattr(import_module(module, __name__), attribute)
    globals()[name] = value
    return value


__all__ = [
    "ENGINE_DEFAULTS",
    "HF_FAMILIES",
    "HF_FIELDS",
    "HF_WRAPPERS",
    "ConfigError",
    "ConfigFile",
    "ConfigIssue",
    "ConfigWarning",
    "EngineConfig",
    "HfConfig",
    "KvUnitsConfig",
    "ModelConfig",
    "check_path",
    "config_json_schema",
    "file_kind",
    "hub_cache",
    "load_config",
    "load_config_data",
    "locate_config",
    "open_regular_file",
    "read_config_file",
    "read_hf_config",
    "read_regular_file",
]
