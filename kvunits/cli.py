"""The ``kvunits`` command line: ``plan``, ``fit``, ``check``, ``models``, ``schema``,
``convert``, ``simulate``, ``audit``.

Exit status: 0 on success, and when the reader of stdout went away (``kvunits plan | head``:
it took what it wanted; nothing more is written, no traceback); 2 for an invalid config, flag
or quantity (every problem printed to stderr, one per line, no traceback); 1 for a bug (with
its traceback). Output that the terminal's encoding cannot hold (``PYTHONIOENCODING=ascii``)
is written in ASCII: ``->`` for ``→``, ASCII table boxes, other characters escaped.

The module imports only the standard library at import time (``--help`` stays instant);
contracts loads when a command needs it, rich only for ``simulate``'s progress bar and a table
wider than the terminal (`kvunits._table` draws the rest); pint, torch
and triton never do: text quantities are read with the unit table of kvunits.contracts._units. Only
the arguments of the command being run are built, and pydantic's plugins are not looked for
(``PYDANTIC_DISABLE_PLUGINS``, unless set; ``_startup``): ``benchmarks/startup.py`` times the
cold start.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import textwrap
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Final, NoReturn

if TYPE_CHECKING:
    from kvunits.contracts.config import KvUnitsConfig
    from kvunits.runtime.capacity import CapacityPlan

EXIT_OK: Final = 0
EXIT_INVALID: Final = 2

#: The shipped example (package data), planned by ``kvunits plan`` without an argument.
DEFAULT_EXAMPLE: Final = "voxtral_realtime.toml"

#: Engine flags of ``plan``, ``check``, ``fit`` and ``simulate``, by EngineSpec field (highest
#: precedence): (field, metavar, help, short alias). vLLM's names where vLLM has the setting.
_ENGINE_FLAGS: Final = (
    ("block_size_slots", "N", "slots per cache block (a plain integer), e.g. 16", None),
    ("max_model_len", "QTY", 'longest decoder sequence, e.g. "8192 token"', None),
    ("max_num_batched_tokens", "QTY", 'decoder tokens per step, e.g. "2048 token"', None),
    ("max_encoder_len", "QTY", 'longest encoder sequence, e.g. "6000 encoder_token"', None),
    (
        "max_encoder_tokens_per_step",
        "QTY",
        'encoder tokens per step, e.g. "4 encoder_token"',
        None,
    ),
    ("tensor_parallel_size", "N", "ranks that split each layer's KV heads (TP), e.g. 8", "-tp"),
    ("pipeline_parallel_size", "N", "pipeline stages that split the layers (PP)", "-pp"),
    (
        "decode_context_parallel_size",
        "N",
        "TP ranks that split a sequence's positions (DCP); divides -tp",
        "-dcp",
    ),
    (
        "max_concurrent_batches",
        "N",
        "batches in flight at once (default: pipeline stages, + 1 with async scheduling)",
        None,
    ),
    (
        "num_speculative_tokens",
        "N",
        "draft tokens per step of a speculative decoder: KV slots reserved past each step",
        None,
    ),
    ("memory_budget", "QTY", 'KV cache memory of each GPU, e.g. "40 GiB"', None),
    ("gpu_memory", "QTY", 'total memory of each GPU, e.g. "80 GiB" (instead of the budget)', None),
    ("gpu_memory_utilization", "F", "fraction of gpu_memory the engine uses (0.92)", None),
    ("weights_memory", "QTY", 'weights on each GPU, e.g. "16 GiB" (with --gpu-memory)', None),
    (
        "activation_memory",
        "QTY",
        'activations and other non-KV memory on each GPU, e.g. "4 GiB", or "estimate" '
        "(kvunits' estimate of what vLLM profiles, from config.json; with --gpu-memory)",
        None,
    ),
    ("cache_dtype", "DTYPE", "cache dtype for every layer (bfloat16, fp8, …, or auto)", None),
    (
        "kv_cache_layout",
        "LAYOUT",
        "per_group (a pool per layer group) or shared (one pool all groups draw from)",
        None,
    ),
    (
        "admission",
        "POLICY",
        "reserve (each request's cap), on_demand (blocks as steps need them, preempting), "
        "or declared (each request's declared length)",
        None,
    ),
    (
        "scheduling_policy",
        "POLICY",
        "whom on_demand preempts first: fcfs (the latest admitted) or priority",
        None,
    ),
    ("watermark", "F", "fraction of blocks on_demand keeps free when it admits (0)", None),
)

_PRECEDENCE: Final = """\
engine settings, highest precedence first:
  1. flags (--memory-budget "80 GiB", -tp 8)
  2. environment variables KVUNITS_<SETTING> (KVUNITS_MEMORY_BUDGET="80 GiB")
  3. the config file's [engine] section (or what a Hugging Face config.json states)
  4. built-in defaults: block_size_slots 16, max_num_batched_tokens "2048 token",
     memory_budget "40 GiB" (unless gpu_memory is given), one rank, no async scheduling,
     no speculative tokens
memory is per GPU: memory_budget, or gpu_memory × gpu_memory_utilization − weights_memory
− activation_memory
"""

_CHECK_EXIT: Final = """
exit status: 0 every config is valid; 2 one or more is not (or a flag is invalid): each
problem printed, or listed in the JSON document's "errors" with "file", "line" and "column"
(null where the problem is not in a file: the environment, a flag); 1 an internal error (a
bug: the traceback is printed)
"""

_MAIN_EPILOG: Final = """\
examples:
  kvunits plan                                   the shipped Voxtral Realtime example
  kvunits plan examples/hf/gemma-3-1b-it/config.json --memory-budget "16 GiB"
  kvunits plan examples/hf/llama-3.1-8b/config.json -tp 8 -pp 2   the plan per rank
  kvunits fit examples/hf/llama-3.1-8b/config.json --memory-budget "16 GiB"
  kvunits check examples/*.toml examples/hf/*/config.json --memory-budget "1 TiB"
  kvunits plan mistralai/Voxtral-Mini-4B-Realtime-2602   a model in the local HF cache
  kvunits models                                 the Hugging Face families kvunits reads
  kvunits schema > kvunits.schema.json
  kvunits convert "750 encoder_token" --to pooled_block --pool 4 --as window
  kvunits audit kv-specs.json                    vLLM's KV-cache plan (the plugin's dump)

Every size is written with its unit: "750 encoder_token", "8192 token", "40 GiB".
"""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status.

    Args:
        argv: the arguments; ``None`` when run as the program (the console script, or
            ``python -m kvunits``), which reads ``sys.argv``.
    """
    if argv is None:
        # The program itself (not a caller's process): pydantic's plugins observe a service's
        # validation, and looking for them costs every start; the command line loads none,
        # unless asked to (the variable set otherwise). And a collector tuned for a short run.
        from ._startup import prepare_process

        prepare_process()
    arguments = sys.argv[1:] if argv is None else list(argv)
    if any(
        a.startswith("--") and ("_" in a.split("=")[0] or a.startswith("--config"))
        for a in arguments
    ):
        from kvunits.contracts import KvUnitsError

        from ._vllm import normalize_argv

        try:  # vLLM's spellings: --max_model_len, --config serve.yaml
            arguments = normalize_argv(arguments)
        except KvUnitsError as exc:
            _report(exc, "kvunits: error")
            return EXIT_INVALID
    # The command named first is the one that runs: build its arguments only.
    first = arguments[0] if arguments else None
    parser = build_parser(first if first in _COMMANDS else None)
    args = parser.parse_args(arguments)
    command: Callable[[argparse.Namespace], int] = args.command
    from kvunits.contracts import KvUnitsError

    from ._table import can_encode

    for stream in (sys.stdout, sys.stderr):
        # A stream that cannot encode what kvunits writes escapes it instead of crashing
        # (the tables themselves switch to ASCII: kvunits._table).
        if isinstance(stream, io.TextIOWrapper) and not can_encode(stream, "→…"):
            stream.reconfigure(errors="backslashreplace")
    try:
        with _warnings_as_lines():
            return command(args)
    except KvUnitsError as exc:
        _report(exc, "kvunits: error")
        return EXIT_INVALID
    except BrokenPipeError:
        # `kvunits plan | head`: the reader took what it wanted and left; nothing is wrong.
        # Stop quietly, and point stdout at /dev/null so that the interpreter's flush at
        # exit does not fail again (the Python docs' advice for SIGPIPE).
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The argument parser, with ``--help`` and examples on every command.

    Args:
        command: the command about to run, if known: only its arguments are built (the
            others are registered by name, all ``kvunits plan`` needs of them); ``None``
            builds every command, as ``kvunits --help`` shows them.
    """
    parser = _Parser(
        prog="kvunits",
        description=_wrap(
            "Plan the KV cache of a model, with units: what each layer group needs "
            "per request, and what a memory budget buys."
        ),
        epilog=_MAIN_EPILOG,
        formatter_class=_FORMATTER,
    )
    parser.add_argument("--version", action=_VersionAction, help="print the version and exit")
    commands = parser.add_subparsers(title="commands", metavar="COMMAND", required=True)

    for name, add in _COMMANDS.items():
        if command in (None, name):
            add(commands)
        else:
            commands.add_parser(name)  # a placeholder: the command that runs is another
    return parser


_FORMATTER: Final = argparse.RawDescriptionHelpFormatter


class _Parser(argparse.ArgumentParser):
    """argparse, whose errors print the line that matters first: the error, then a one-line
    usage (argparse's own prints every option before it: 14 to 19 lines). Subcommands'
    parsers are of this class too (``add_subparsers`` makes them so)."""

    def error(self, message: str) -> NoReturn:
        formatter = self._get_formatter()
        positionals = [
            formatter._format_args(action, action.dest.upper())
            for action in self._get_positional_actions()
        ]
        usage = " ".join([self.prog, "[options]", *positionals])
        self.exit(
            EXIT_INVALID,
            f"{self.prog}: error: {message}\nusage: {usage}  (`{self.prog} --help` for all)\n",
        )


def _engine_flags() -> argparse.ArgumentParser:
    """The engine settings' flags, a parent of each command that plans."""
    engine_flags = argparse.ArgumentParser(add_help=False)
    group = engine_flags.add_argument_group("engine settings (override file and environment)")
    for field, metavar, text, alias in _ENGINE_FLAGS:
        names = [f"--{field.replace('_', '-')}", *([alias] if alias else [])]
        group.add_argument(*names, dest=field, metavar=metavar, help=text)
    group.add_argument(
        "--async-scheduling",
        dest="async_scheduling",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="plan one more batch in flight, as vLLM's async scheduling runs (vLLM 0.33 turns "
        "it on by default; kvunits' default is off)",
    )
    from ._vllm import add_vllm_flags

    add_vllm_flags(engine_flags)
    return engine_flags


def _add_plan(commands: Any) -> None:
    """``kvunits plan``."""
    plan = commands.add_parser(
        "plan",
        parents=[_engine_flags()],
        formatter_class=_FORMATTER,
        help="plan the cache of a config (default: the shipped Voxtral Realtime example)",
        description=_wrap(
            "Plan the KV cache: per layer group the kind and layer count, the window "
            "in model units and in manager units, the page size, the admission cap and the bytes "
            "per request; with several ranks (tensor, pipeline, decode-context parallelism) "
            "the same per rank: the layers each stage holds, each rank's heads, page, cap and "
            "blocks; then the cache blocks the memory budget buys and the concurrent requests "
            "it admits."
        ),
        epilog="examples:\n"
        "  kvunits plan\n"
        "  kvunits plan examples/voxtral_realtime.yaml --format json\n"
        "  kvunits plan examples/hf/llama-3.1-8b/config.json -tp 8 -pp 2\n"
        "  kvunits plan examples/hf/mistral-7b-v0.1/config.json --num-speculative-tokens 4 "
        "--max-concurrent-batches 2\n"
        '  KVUNITS_MEMORY_BUDGET="80 GiB" kvunits plan examples/hf/llama-3.1-8b/config.json\n'
        '  kvunits plan examples/hf/mistral-7b-v0.1/config.json --max-model-len "8192 token"\n'
        "\n" + _PRECEDENCE,
    )
    plan.add_argument(
        "config",
        nargs="?",
        metavar="CONFIG",
        help="a kvunits config (.toml, .yaml, .yml, .json), a Hugging Face config.json, a "
        "model directory, or a model id (org/name) in the local Hugging Face cache; "
        f"default: the shipped {DEFAULT_EXAMPLE}",
    )
    plan.add_argument(
        "--format",
        choices=("table", "json"),
        default="table",
        help="table for people (default), json for programs (quantities as "
        '{"value": 189, "unit": "pooled_block"})',
    )
    plan.set_defaults(command=_plan)


def _add_fit(commands: Any) -> None:
    """``kvunits fit``."""
    fit = commands.add_parser(
        "fit",
        parents=[_engine_flags()],
        formatter_class=_FORMATTER,
        help="the reverse questions: the longest max_model_len that fits, the concurrency at "
        "a length, the budget for N requests",
        description=_wrap(
            "Answer the questions a serving engineer asks of a budget, per rank: the "
            "longest max_model_len (up to the configured one) that one request can have, as "
            "vLLM estimates it when a model does not fit; how many requests of --length tokens "
            "are admitted at once; and the KV cache memory each rank needs for --requests "
            "requests of --length tokens."
        ),
        epilog="examples:\n"
        '  kvunits fit examples/hf/llama-3.1-8b/config.json --memory-budget "16 GiB"\n'
        '  kvunits fit examples/hf/llama-3.1-8b/config.json -tp 8 --length "32768 token" '
        "--requests 64\n"
        "  kvunits fit --format json\n"
        "\n" + _PRECEDENCE,
    )
    fit.add_argument(
        "config", nargs="?", metavar="CONFIG", help="as for plan; default: the shipped example"
    )
    fit.add_argument(
        "--length",
        metavar="QTY",
        help='the request length to ask about, e.g. "32768 token" (default: max_model_len)',
    )
    fit.add_argument(
        "--requests",
        type=int,
        default=1,
        metavar="N",
        help="requests of --length at once to size the budget for (default 1)",
    )
    fit.add_argument("--format", choices=("table", "json"), default="table")
    fit.set_defaults(command=_fit)


def _add_check(commands: Any) -> None:
    """``kvunits check``."""
    check = commands.add_parser(
        "check",
        parents=[_engine_flags()],
        formatter_class=_FORMATTER,
        help="validate configs: exit 0 if all are valid, 2 otherwise",
        description=_wrap(
            "Validate configs without printing a plan: the file, every field and "
            "its unit, the engine settings after precedence, and that the budget holds one "
            "full-length request (check passes exactly when plan would succeed). Every problem is "
            "printed to stderr, one per line, with the file, the field and the expected unit."
        ),
        epilog="examples:\n"
        "  kvunits check examples/voxtral_realtime.toml\n"
        "  kvunits check examples/*.toml examples/*.yaml examples/hf/*/config.json "
        '--memory-budget "1 TiB"\n'
        "  kvunits check --format json examples/*.toml examples/*.yaml > check.json\n"
        "\n" + _PRECEDENCE + _CHECK_EXIT,
    )
    check.add_argument("configs", nargs="+", metavar="CONFIG", help="config files to check")
    check.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="text: one line per problem on stderr (default); json: one document on stdout, "
        "every error with its file, line and column",
    )
    check.set_defaults(command=_check)


def _add_models(commands: Any) -> None:
    """``kvunits models``."""
    models = commands.add_parser(
        "models",
        formatter_class=_FORMATTER,
        help="list the Hugging Face model families kvunits reads, and what each is read as",
        description=_wrap(
            "The Hugging Face model families whose config.json kvunits reads as vLLM 0.33 "
            "does: by model_type (or architectures), the layer kinds each becomes. Any other "
            "model type, or a cache-sizing field a family's reader does not read, is refused "
            "by name."
        ),
        epilog="examples:\n  kvunits models\n  kvunits models --format json\n",
    )
    models.add_argument("--format", choices=("table", "json"), default="table")
    models.set_defaults(command=_models)


def _add_schema(commands: Any) -> None:
    """``kvunits schema``."""
    schema = commands.add_parser(
        "schema",
        formatter_class=_FORMATTER,
        help="print the JSON Schema of the config format",
        description=_wrap(
            "Print the JSON Schema of kvunits config files (TOML, YAML and JSON share "
            'it). Every quantity field shows its unit in "x-unit"; quantities are strings '
            '"<integer> <unit>".'
        ),
        epilog="examples:\n"
        "  kvunits schema > kvunits.schema.json\n"
        "  kvunits schema --hf        the Hugging Face fields read, with their declared units\n",
    )
    schema.add_argument(
        "--hf",
        action="store_true",
        help="print the Hugging Face config.json fields the adapter reads, with their units",
    )
    schema.set_defaults(command=_schema)


def _add_convert(commands: Any) -> None:
    """``kvunits convert``."""
    convert = commands.add_parser(
        "convert",
        formatter_class=_FORMATTER,
        help="convert a quantity between units, naming the rounding used",
        description=_wrap(
            "A unit calculator over kvunits' named conversions; it prints the "
            "conversion, its formula and its rounding. encoder_token ↔ pooled_block needs --pool; "
            "slots → cache_block needs --block-size; cache_block ↔ byte needs --page-size."
        ),
        epilog="examples:\n"
        '  kvunits convert "750 encoder_token" --to pooled_block --pool 4 --as window\n'
        "      750 encoder_token → 189 pooled_block  (pool_window: cdiv(W - 1, P) + 1, ...)\n"
        '  kvunits convert "750 encoder_token" --to pooled_block --pool 4      (a length: 188)\n'
        '  kvunits convert "189 pooled_block" --to cache_block --block-size 16\n'
        '  kvunits convert "40 GiB" --to cache_block --page-size "524288 byte"\n'
        '  kvunits convert "40 GiB" --to byte\n',
    )
    convert.add_argument("quantity", metavar="QUANTITY", help='e.g. "750 encoder_token"')
    convert.add_argument("--to", required=True, metavar="UNIT", help="the target unit")
    convert.add_argument("--pool", type=int, metavar="P", help="encoder tokens per pooled block")
    convert.add_argument(
        "--as",
        dest="as_",
        choices=("length", "window", "position"),
        help="what an encoder_token quantity is: a length (default; cdiv(n, P)), a window "
        "(cdiv(W - 1, P) + 1) or a position (i // P); a window or a position converts to "
        "pooled_block only (cache blocks count lengths)",
    )
    convert.add_argument(
        "--block-size", type=int, metavar="N", help="slots per cache block (for cache_block)"
    )
    convert.add_argument(
        "--page-size", metavar="QTY", help='bytes of one cache block, e.g. "524288 byte"'
    )
    convert.add_argument("--format", choices=("text", "json"), default="text")
    convert.set_defaults(command=_convert)


def _add_audit(commands: Any) -> None:
    """``kvunits audit`` (its arguments and run live in ``_audit_cli``)."""
    from ._audit_cli import add_audit_command

    add_audit_command(commands, _FORMATTER)


def _add_simulate(commands: Any) -> None:
    """``kvunits simulate`` (its arguments live with the command, in ``_simulate_cli``)."""
    from ._simulate_cli import add_simulate_command

    add_simulate_command(commands, _engine_flags(), _FORMATTER, _load)


#: Every command, in the order ``kvunits --help`` lists them, and what builds its arguments.
_COMMANDS: Final[dict[str, Callable[[Any], None]]] = {
    "plan": _add_plan,
    "fit": _add_fit,
    "check": _add_check,
    "models": _add_models,
    "schema": _add_schema,
    "convert": _add_convert,
    "simulate": _add_simulate,
    "audit": _add_audit,
}


# -- commands -------------------------------------------------------------------------------


def _plan(args: argparse.Namespace) -> int:
    from ._dsv4 import deepseek_v4_plan
    from ._render import plan_to_dict, render_table
    from ._vllm import vllm_lines, vllm_numbers, vllm_to_dict

    if (code := deepseek_v4_plan(args)) is not None:  # vLLM's numbers only (kvunits/_dsv4.py)
        return code
    config = _load(args.config, args)
    result = _planned(config)
    numbers = vllm_numbers(config, args.vllm)
    if args.format == "json":
        data = plan_to_dict(config, result)
        data["vllm"] = vllm_to_dict(numbers, args.vllm.notes)
        json.dump(data, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        render_table(config, result, sys.stdout)
        from ._render import clean

        sys.stdout.write(
            "\n" + "\n".join(clean(line) for line in vllm_lines(config, args.vllm, numbers)) + "\n"
        )
    sys.stdout.flush()
    return EXIT_OK


def _fit(args: argparse.Namespace) -> int:
    from ._fit import fit, fit_to_dict, render_fit

    config = _load(args.config, args)
    answers = fit(config, length=args.length, requests=args.requests)
    if args.format == "json":
        json.dump(fit_to_dict(config, answers), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        render_fit(config, answers, sys.stdout)
    sys.stdout.flush()
    return EXIT_OK


def _check(args: argparse.Namespace) -> int:
    from kvunits.contracts import KvUnitsError

    status = EXIT_OK
    files: list[dict[str, Any]] = []  # --format json
    errors: list[dict[str, Any]] = []
    from ._examples import shipped

    for path in [found for argument in args.configs for found in shipped(argument)]:
        try:
            config = _load(path, args)
            result = _planned(config)
        except KvUnitsError as exc:
            status = EXIT_INVALID
            if args.format == "json":
                from ._locate import error_records

                files.append({"config": path, "valid": False})
                errors += error_records(path, exc)
            else:
                _report(exc, path)
        else:
            from ._render import clean

            layers, groups = len(config.model.layers), len(result.groups)
            files.append({"config": path, "valid": True, "model": config.model.name})
            if args.format == "text":
                print(
                    clean(f"ok: {path}: {config.model.name}, {layers} layers in {groups} cache ")
                    + ("group" if groups == 1 else "groups")
                )
    if args.format == "json":
        document = {"valid": status == EXIT_OK, "files": files, "errors": errors}
        json.dump({"check_version": 1, **document}, sys.stdout, indent=2)
        sys.stdout.write("\n")
    return status


def _models(args: argparse.Namespace) -> int:
    from kvunits.contracts.config import HF_FAMILIES, HF_WRAPPERS

    families: list[dict[str, Any]] = [
        {
            "family": family.name,
            "model_types": list(family.model_types),
            "architectures": list(family.architectures),
            "read_as": family.read_as,
            "ignores": dict(family.ignores),
        }
        for family in HF_FAMILIES
    ]
    wrappers: list[dict[str, Any]] = [
        {
            "model_type": name,
            "text_model_type": wrapper.text_type,
            "architectures": list(wrapper.architectures),
            "read_as": wrapper.read_as,
        }
        for name, wrapper in HF_WRAPPERS.items()
    ]
    if args.format == "json":
        from kvunits.contracts.config._hf_registry import REFUSED

        listing = {"families": families, "wrappers": wrappers, "refused": dict(REFUSED)}
        json.dump(listing, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return EXIT_OK
    print("Hugging Face families kvunits reads as vLLM 0.33 does (by model_type):\n")
    width = max(len(f["family"]) for f in families) + 2
    indent = " " * width
    for row in families:
        print(f"{row['family']:<{width}}model_type: {', '.join(row['model_types'])}")
        for line in textwrap.wrap(row["read_as"], 88 - width):
            print(indent + line)
        for field, why in row["ignores"].items():
            for line in textwrap.wrap(f"not read: {field} ({why})", 88 - width):
                print(indent + line)
    print("\nmultimodal configs (the decoder is text_config, read by its family):\n")
    width = max(len(w["model_type"]) for w in wrappers) + 2
    for row in wrappers:
        text = f"{row['read_as']} (default {row['text_model_type']})"
        lines = textwrap.wrap(text, 88 - width)
        print(f"{row['model_type']:<{width}}{lines[0]}")
        for line in lines[1:]:
            print(" " * width + line)
    print(
        "\nAny other model_type, or a field that sizes the cache in some family and that the\n"
        "family's reader does not read, is refused with its name; the architectures of vLLM\n"
        "0.33's registry kvunits refuses, with the feature not modelled: --format json,\n"
        "'refused' (docs/vllm-compat.md lists them)."
    )
    return EXIT_OK


def _schema(args: argparse.Namespace) -> int:
    if args.hf:
        from kvunits.contracts.config import HF_FIELDS

        json.dump(dict(HF_FIELDS), sys.stdout, indent=2)
    else:
        from kvunits.contracts.config import config_json_schema

        from ._table import can_encode

        schema = config_json_schema()
        json.dump(schema, sys.stdout, indent=2, ensure_ascii=not can_encode(sys.stdout, "…"))
    sys.stdout.write("\n")
    return EXIT_OK


def _convert(args: argparse.Namespace) -> int:
    from ._convert import convert

    result = convert(
        args.quantity,
        args.to,
        pool=args.pool,
        as_=args.as_,
        block_size=args.block_size,
        page_size=args.page_size,
    )
    if args.format == "json":
        json.dump(result.to_dict(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        from ._table import ascii_text, can_encode

        readable = ascii_text if not can_encode(sys.stdout, "→") else str
        print(readable(result.line()))
        for note in result.notes:
            print(readable(f"  note: {note}"))
    return EXIT_OK


# -- helpers --------------------------------------------------------------------------------


def _load(path: str | None, args: argparse.Namespace) -> KvUnitsConfig:
    from kvunits.contracts.config import load_config

    from ._vllm import (
        activations_from_config,
        apply_skip_layers,
        apply_state_dtypes,
        engine_flags,
        fit_auto_length,
        preset_pool_layout,
        weights_from_directory,
    )

    flags: dict[str, object] = {field: getattr(args, field) for field, _, _, _ in _ENGINE_FLAGS}
    flags["async_scheduling"] = args.async_scheduling
    args.vllm = extra = engine_flags(args, flags)
    path = path if path is not None else getattr(args, "vllm_model", None)
    weights_from_directory(path, flags, extra)
    activations_from_config(path, flags, extra)
    if path is not None:
        from ._examples import shipped

        (path, *_) = shipped(path)  # examples/... from an installed wheel
        config = load_config(
            path, flags=flags, hf_overrides=extra.hf_overrides or None, revision=extra.revision
        )
        config = apply_state_dtypes(config, extra)
        if extra.kv_cache_dtype_skip_layers:
            config = apply_skip_layers(config, extra.kv_cache_dtype_skip_layers)
        return fit_auto_length(preset_pool_layout(config, extra), extra)
    example = os.path.join(os.path.dirname(__file__), "examples", DEFAULT_EXAMPLE)
    if os.path.isfile(example):  # package data beside the module (importlib.resources costs more)
        return fit_auto_length(preset_pool_layout(load_config(example, flags=flags), extra), extra)
    from importlib import resources

    with resources.as_file(resources.files("kvunits").joinpath("examples", DEFAULT_EXAMPLE)) as f:
        return fit_auto_length(preset_pool_layout(load_config(f, flags=flags), extra), extra)


def _planned(config: KvUnitsConfig) -> CapacityPlan:
    """The capacity plan of a loaded config. A plan-level error (a budget that holds no
    request, a block size a chunk does not divide, too many blocks) is reported as a config
    issue of each engine setting it names, at the place that setting came from: the command
    line, the environment, the file or the defaults."""
    from kvunits.contracts import SpecError
    from kvunits.contracts.errors import ConfigError, ConfigIssue
    from kvunits.runtime.capacity import plan

    try:
        return plan(config.model, config.engine)
    except SpecError as exc:
        import re

        text = str(exc)
        # Each setting named as a whole word, in the order the message names them (the
        # budget first in "memory_budget … cannot hold …; the longest max_model_len …").
        found = {
            field: match.start()
            for field, _, _, _ in _ENGINE_FLAGS
            if (match := re.search(rf"(?<![a-z_]){field}(?![a-z_])", text))
        }
        named = sorted(found, key=found.__getitem__)
        if not named:
            raise
        message = f"{exc} (planning {config.source})"
        raise ConfigError([ConfigIssue(*_origin(config, f), message) for f in named]) from None


def _origin(config: KvUnitsConfig, field: str) -> tuple[str, str]:
    """Where an engine setting of a loaded config came from, as config errors name it."""
    kind, _, detail = config.engine_sources.get(field, "file").partition(" ")
    if kind == "flag":
        return "command line", detail
    if kind == "env":
        return "environment", detail
    if kind == "default":
        return "built-in defaults", field
    if kind == "hf":
        return config.source, detail
    return config.source, f"engine.{field}"


def _wrap(text: str) -> str:
    # The help formatter keeps descriptions as written (for the epilogs' layout): wrap here.
    return textwrap.fill(text, width=88)


def _report(error: Exception, where: str) -> None:
    """Print an error to stderr: a config's issues one per line (each names its file), any
    other kvunits error as ``where: message``."""
    from kvunits.contracts.errors import ConfigError

    from ._render import clean

    if isinstance(error, ConfigError):
        lines = [str(issue) for issue in error.issues]
    else:
        lines = [f"{where}: {error}"]
    for line in lines:
        print(clean(line), file=sys.stderr)


@contextlib.contextmanager
def _warnings_as_lines() -> Iterator[None]:
    """kvunits' warnings (an ignored ``KVUNITS_*`` variable) as ``kvunits: warning: …`` lines
    on stderr, each once, while a command runs; the caller's warning settings after it."""
    from kvunits.contracts.errors import ConfigWarning

    def show(message: Warning | str, category: type[Warning], *_: object, **__: object) -> None:
        print(f"kvunits: warning: {message}", file=sys.stderr)

    with warnings.catch_warnings():
        warnings.simplefilter("once", ConfigWarning)
        warnings.showwarning = show
        yield


class _VersionAction(argparse.Action):
    """``--version``: ``kvunits.__version__``, the version the distribution is built with."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        from . import __version__

        print(f"kvunits {__version__}")
        parser.exit()


if __name__ == "__main__":
    sys.exit(main())
