"""The vLLM plugin: the audit runs inside vLLM's engine core, on the plan it really built.

Registered as ``kvunits = "kvunits.vllm.plugin:register"`` under ``vllm.general_plugins``
(installed with ``pip install 'kvunits[vllm]'``). vLLM calls `register` in every process it
starts; `register` wraps ``get_kv_cache_configs``, the engine core's KV-cache step (vLLM 0.33:
``vllm/v1/core/kv_cache_planning.py``, which ``EngineCore._initialize_kv_caches`` in
``vllm/v1/engine/core.py`` calls by the name it imported), in both places the name lives, so
the step runs exactly as before and then the audit reads its inputs and its result.

Settings (environment, read at each step):

* ``KVUNITS_VLLM_AUDIT``: ``off`` (the step is not wrapped), ``warn`` (the default: findings
  logged as warnings), ``error`` (findings refuse to start: `KVCacheAuditError`);
* ``KVUNITS_VLLM_AUDIT_DUMP``: a path; the step's inputs and result are written there as JSON
  (``kvunits audit FILE`` reads it, without vLLM or a GPU).

The wrapper never changes vLLM's behaviour otherwise: its arguments are read, never changed;
the result is returned as vLLM built it; an audit that cannot run (a model kvunits does not
read, an unknown vLLM version, a bug in kvunits) is logged and vLLM goes on. Registering twice
wraps once (a marker on the wrapper).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import sys
from collections.abc import Callable
from typing import Any, Final

logger = logging.getLogger("kvunits.vllm")

#: The setting's variable and its values.
MODE_VARIABLE: Final = "KVUNITS_VLLM_AUDIT"
DUMP_VARIABLE: Final = "KVUNITS_VLLM_AUDIT_DUMP"
MODES: Final = ("off", "warn", "error")

#: Where vLLM 0.33 defines the step, and the module that calls it by its imported name.
STEP_MODULE: Final = "vllm.v1.core.kv_cache_planning"
CALLER_MODULE: Final = "vllm.v1.engine.core"
STEP_NAME: Final = "get_kv_cache_configs"
_MARK: Final = "__kvunits_audit__"
#: The vLLM minor versions whose step kvunits knows (as `kvunits.vllm.known_version`; kept
#: here so that registering imports nothing of the audit).
KNOWN_VLLM: Final = ("0.33",)


class KVCacheAuditError(RuntimeError):
    """vLLM's KV-cache plan disagrees with kvunits' (``KVUNITS_VLLM_AUDIT=error``): the engine
    does not start. The message lists every finding."""


def mode() -> str:
    """The audit's mode from ``KVUNITS_VLLM_AUDIT`` (``warn`` when unset).

    Raises:
        ValueError: another value (naming the three).
    """
    value = os.environ.get(MODE_VARIABLE, "warn").strip().lower() or "warn"
    if value not in MODES:
        raise ValueError(f"{MODE_VARIABLE}={value!r}: use one of {', '.join(MODES)}")
    return value


def register() -> None:
    """vLLM's ``general_plugins`` entry point: wrap the KV-cache step (once per process).

    With ``KVUNITS_VLLM_AUDIT=off`` nothing is wrapped. An unknown vLLM version is said once,
    and the step wrapped if it is where 0.33 has it; if it is not, vLLM runs unaudited.
    """
    try:
        chosen = mode()
    except ValueError as exc:
        logger.warning("kvunits: %s; the KV-cache audit is off", exc)
        return
    if chosen == "off":
        return
    try:
        import vllm

        version = str(getattr(vllm, "__version__", "unknown"))
        from importlib import import_module

        step_module = import_module(STEP_MODULE)
    except Exception as exc:  # an install without this module: say so, change nothing
        logger.warning(
            "kvunits: vLLM's KV-cache step %s.%s cannot be found (%s): the KV-cache audit is "
            "off. kvunits knows vLLM 0.33.",
            STEP_MODULE,
            STEP_NAME,
            exc,
        )
        return
    if not any(version == v or version.startswith(v + ".") for v in KNOWN_VLLM):
        logger.warning(
            "kvunits: vLLM %s is not a version kvunits knows (0.33.x): the KV-cache audit "
            "reads its specs by 0.33's fields and may misread them",
            version,
        )
    original = getattr(step_module, STEP_NAME, None)
    if not callable(original):
        logger.warning("kvunits: vLLM %s has no %s: the KV-cache audit is off", version, STEP_NAME)
        return
    wrapped = wrap(original)
    setattr(step_module, STEP_NAME, wrapped)
    caller = sys.modules.get(CALLER_MODULE)
    if caller is not None and getattr(caller, STEP_NAME, None) is original:
        # The engine core imported the name before plugins were loaded (EngineCore.__init__
        # loads them): its module-level name is the one it calls.
        setattr(caller, STEP_NAME, wrapped)


def wrap(step: Callable[..., Any]) -> Callable[..., Any]:
    """The KV-cache step, audited after it runs (a step already wrapped is returned as is)."""
    if getattr(step, _MARK, False):
        return step

    @functools.wraps(step)
    def audited_step(
        vllm_config: Any,
        kv_cache_specs: Any,
        available_memory: Any,
        *args: Any,
        **kwargs: Any,
    ) -> Any:
        configs = step(vllm_config, kv_cache_specs, available_memory, *args, **kwargs)
        run_audit(vllm_config, kv_cache_specs, available_memory, configs)
        return configs

    setattr(audited_step, _MARK, True)
    return audited_step


def run_audit(vllm_config: Any, kv_cache_specs: Any, available_memory: Any, configs: Any) -> None:
    """Audit one KV-cache step: write the dump if asked, log the findings, and raise
    `KVCacheAuditError` in ``error`` mode when there is one.

    Raises:
        KVCacheAuditError: a finding, in ``error`` mode.
    """
    try:
        chosen = mode()
    except ValueError as exc:
        logger.warning("kvunits: %s; the KV-cache audit is off", exc)
        return
    if chosen == "off":
        return
    try:
        from ._audit import audit
        from ._dump import dump_from_vllm, read_dump

        dump = dump_from_vllm(vllm_config, kv_cache_specs, available_memory, configs)
        path = os.environ.get(DUMP_VARIABLE)
        if path:
            with open(path, "w", encoding="utf-8") as out:
                json.dump(dump, out, indent=1)
        report = audit(read_dump(dump))
    except Exception as exc:  # the audit must never stop vLLM for a reason of its own
        logger.warning("kvunits: the KV-cache audit could not run: %s: %s", type(exc).__name__, exc)
        return
    lines = report.lines()
    if report.ok:
        logger.info("\n".join(lines))
        return
    if chosen == "error":
        raise KVCacheAuditError(
            "\n".join(lines)
            + f"\n(set {MODE_VARIABLE}=warn to start anyway, {MODE_VARIABLE}=off to skip)"
        )
    logger.warning("\n".join(lines))
