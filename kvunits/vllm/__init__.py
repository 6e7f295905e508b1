"""kvunits and vLLM: typed adapters both ways, the audit of vLLM's KV-cache plan, its plugin.

* `from_vllm`, `from_vllm_dict`: vLLM 0.33's per-layer spec (a live object or its JSON
  form) as a `VllmSpec`, each number with its unit (``tokens_per_state = 1/P``: the block size
  and the window count pooled slots); its `VllmSpec.manager_view` and
  `VllmSpec.kernel_view` are kvunits' views of the same numbers;
* `to_vllm_dict`, `to_vllm`: a kvunits layer as vLLM states it on one rank;
* `audit`: vLLM's specs, engine settings and KV-cache configuration against kvunits'
  independent plan from the same inputs (`AuditReport`, one `Finding` per disagreement);
* `load_dump`, `read_dump`, `dump_from_vllm`: the JSON the plugin writes and
  ``kvunits audit`` reads;
* ``kvunits.vllm.plugin``: the ``vllm.general_plugins`` entry point.

Importing this package (or kvunits) never imports vLLM or torch; only `to_vllm` and
`build_vllm_spec` do, when called. See ``docs/vllm-plugin.md``.
"""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._audit import AuditReport as AuditReport
    from ._audit import Finding as Finding
    from ._audit import audit as audit
    from ._audit import known_version as known_version
    from ._audit import kvunits_layer_name as kvunits_layer_name
    from ._dump import AuditInputs as AuditInputs
    from ._dump import VllmEngine as VllmEngine
    from ._dump import dump_from_vllm as dump_from_vllm
    from ._dump import load_dump as load_dump
    from ._dump import read_dump as read_dump
    from ._specs import SPEC_KINDS as SPEC_KINDS
    from ._specs import VllmSpec as VllmSpec
    from ._specs import build_vllm_spec as build_vllm_spec
    from ._specs import from_vllm as from_vllm
    from ._specs import from_vllm_dict as from_vllm_dict
    from ._specs import spec_to_dict as spec_to_dict
    from ._specs import to_vllm as to_vllm
    from ._specs import to_vllm_dict as to_vllm_dict

#: Each public name by the module that defines it, imported on first use: vLLM loads the
#: plugin (``kvunits.vllm.plugin``) in every process it starts, and registering it must not
#: import the audit (kvunits' contracts, pydantic models) where no KV-cache step runs.
_EXPORTS = {
    "AuditReport": "_audit",
    "Finding": "_audit",
    "audit": "_audit",
    "known_version": "_audit",
    "kvunits_layer_name": "_audit",
    "AuditInputs": "_dump",
    "VllmEngine": "_dump",
    "dump_from_vllm": "_dump",
    "load_dump": "_dump",
    "read_dump": "_dump",
    "SPEC_KINDS": "_specs",
    "VllmSpec": "_specs",
    "build_vllm_spec": "_specs",
    "from_vllm": "_specs",
    "from_vllm_dict": "_specs",
    "spec_to_dict": "_specs",
    "to_vllm": "_specs",
    "to_vllm_dict": "_specs",
}


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = [
    "SPEC_KINDS",
    "AuditInputs",
    "AuditReport",
    "Finding",
    "VllmEngine",
    "VllmSpec",
    "audit",
    "build_vllm_spec",
    "dump_from_vllm",
    "from_vllm",
    "from_vllm_dict",
    "known_version",
    "kvunits_layer_name",
    "load_dump",
    "read_dump",
    "spec_to_dict",
    "to_vllm",
    "to_vllm_dict",
]
