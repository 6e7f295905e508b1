"""``kvunits audit``: vLLM's KV-cache plan, from a dump of its specs, against kvunits' plan.

The dump is what the vLLM plugin writes (``KVUNITS_VLLM_AUDIT_DUMP=FILE``; `kvunits.vllm`):
vLLM's engine settings, the model's config and each worker's per-layer specs, with the
KV-cache configuration vLLM built. ``--engine`` reads a ``vllm serve --config`` YAML file whose
settings replace the dump's (the same specs checked at another length, batch or block size).
No vLLM, torch or GPU is needed.

Exit status: 0 clean, 3 findings, 2 a file that cannot be read.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Final

EXIT_FINDINGS: Final = 3

#: ``vllm serve`` settings ``--engine`` reads, by their YAML names (dashes or underscores),
#: and the dump's engine field each replaces.
_SERVE_KEYS: Final = {
    "block-size": "block_size",
    "max-model-len": "max_model_len",
    "max-num-batched-tokens": "max_num_batched_tokens",
    "tensor-parallel-size": "tensor_parallel_size",
    "pipeline-parallel-size": "pipeline_parallel_size",
    "decode-context-parallel-size": "decode_context_parallel_size",
    "kv-cache-dtype": "cache_dtype",
    "dtype": "dtype",
}


def add_audit_command(commands: Any, formatter: type[argparse.HelpFormatter]) -> None:
    """Register ``kvunits audit``."""
    audit = commands.add_parser(
        "audit",
        formatter_class=formatter,
        help="audit vLLM's KV-cache plan (a dump of its specs) against kvunits' plan",
        description=(
            "Compare vLLM's per-layer KV-cache specs, engine settings and KV-cache groups\n"
            "with kvunits' independent plan from the same inputs: layer kinds, windows and\n"
            "chunks in both units, block sizes, pages, dtypes, heads per rank, the blocks a\n"
            "request may hold and the blocks the budget buys. One finding per disagreement,\n"
            "with its units and consequence; vLLM's documented choices are notes.\n"
            "Exit status: 0 clean, 3 findings, 2 an unreadable input."
        ),
        epilog="examples:\n"
        "  KVUNITS_VLLM_AUDIT_DUMP=kv-specs.json vllm serve ...   the plugin writes the dump\n"
        "  kvunits audit kv-specs.json\n"
        "  kvunits audit kv-specs.json --engine serve.yaml --format json\n",
    )
    audit.add_argument("dump", metavar="DUMP", help="the JSON dump the vLLM plugin wrote")
    audit.add_argument(
        "--engine",
        metavar="YAML",
        help="a `vllm serve --config` file: its block-size, max-model-len, "
        "max-num-batched-tokens, parallel sizes, kv-cache-dtype and dtype replace the dump's",
    )
    audit.add_argument("--format", choices=("table", "json"), default="table")
    audit.set_defaults(command=run_audit_command)


def run_audit_command(args: argparse.Namespace) -> int:
    """Read the dump (and the engine file), audit, print; the exit status says the verdict."""
    from kvunits.contracts import SpecError
    from kvunits.vllm import audit, read_dump

    try:
        with open(args.dump, encoding="utf-8") as handle:
            data = json.load(handle)
        if not isinstance(data, dict):
            raise SpecError("a dump is a JSON object")
        if args.engine:
            settings = _serve_settings(args.engine)
            engine = {**data.get("engine", {}), **settings}
            if "max_num_batched_tokens" in settings:
                # vLLM's in-flight count follows the batch: recomputed from the new one.
                engine.pop("max_in_flight_tokens", None)
            data = {**data, "engine": engine}
        inputs = read_dump(data)
    except (OSError, ValueError) as exc:
        raise SpecError(f"{args.dump}: cannot read a vLLM spec dump: {exc}") from None
    report = audit(inputs)
    if args.format == "json":
        json.dump(report.to_dict(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        from ._render import clean

        for line in report.lines():
            print(clean(line))
    return 0 if report.ok else EXIT_FINDINGS


def _serve_settings(path: str) -> dict[str, Any]:
    """The settings of a ``vllm serve --config`` YAML file that size the KV cache."""
    import yaml

    from kvunits.contracts import SpecError

    with open(path, encoding="utf-8") as handle:
        data = yaml.safe_load(handle)
    if not isinstance(data, dict):
        raise SpecError(f"{path}: a vllm serve config is a mapping of flag names to values")
    out: dict[str, Any] = {}
    for key, value in data.items():
        field = _SERVE_KEYS.get(str(key).replace("_", "-"))
        if field is None:
            continue
        out[field] = value
    return out
