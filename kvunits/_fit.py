"""``kvunits fit``: the reverse questions a serving engineer asks of a budget, per rank.

* the longest ``max_model_len`` (up to the configured one) that one request can have, the
  estimate vLLM prints when a model does not fit (``estimate_max_model_len``);
* the requests of ``--length`` tokens admitted at once (vLLM logs it as a ratio, "Maximum
  concurrency for L tokens per request: X.XXx"; kvunits counts whole requests);
* the KV cache memory each rank needs for ``--requests`` requests of ``--length`` tokens.

All three come from `kvunits.runtime.deployment.Layout`, the plan's own numbers, so an answer holds
when planned: a budget of exactly `FitAnswers.budget` admits the requests, one byte less does
not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO, final

if TYPE_CHECKING:
    from kvunits.contracts import Tokens
    from kvunits.contracts.config import KvUnitsConfig
    from kvunits.contracts.deploy import Parallelism, RankBytes


@final
@dataclass(frozen=True, slots=True)
class FitAnswers:
    """The answers of ``kvunits fit``.

    Attributes:
        max_model_len: the engine's (the model's or the config's) longest sequence.
        longest_max_model_len: the longest ``max_model_len`` up to it that one request can
            have in each rank's budget (0 token: not even one token fits).
        length: the request length asked about (``--length``, default ``max_model_len``).
        concurrency: requests of ``length`` admitted at once (0: one does not fit).
        requests: the requests to size the budget for (``--requests``).
        budget: the KV cache memory each rank needs for ``requests`` of ``length``.
        kv_cache_memory: each rank's budget as configured.
        parallelism: the deployment's shape.
    """

    max_model_len: Tokens
    longest_max_model_len: Tokens
    length: Tokens
    concurrency: int
    requests: int
    budget: RankBytes
    kv_cache_memory: RankBytes
    parallelism: Parallelism


def fit(config: KvUnitsConfig, *, length: str | None, requests: int) -> FitAnswers:
    """Answer the three questions for a loaded config.

    Args:
        length: ``--length`` as written, e.g. ``"32768 token"``; ``None``: ``max_model_len``.
        requests: ``--requests``, at least 1.

    Raises:
        UnitTypeError: ``length`` is not a quantity of tokens.
        UnitValueError: ``length`` or ``requests`` is below 1.
        SpecError: the deployment does not suit the model (as `kvunits.runtime.plan`).
    """
    from kvunits.contracts import Tokens, UnitValueError, parse_quantity
    from kvunits.runtime.deployment import Layout, Shortfall

    engine = config.engine
    asked = (
        engine.max_model_len if length is None else parse_quantity(length, Tokens, field="--length")
    )
    if asked.numerical_value_in(Tokens) < 1:
        raise UnitValueError(
            f"--length must be >= 1 token, got {asked}", field="--length", got=str(asked)
        )
    if requests < 1:
        raise UnitValueError(
            f"--requests must be >= 1, got {requests}", field="--requests", got=str(requests)
        )
    if asked > engine.max_model_len:
        # vLLM rejects a request longer than max_model_len: admitting it would be a fiction.
        raise UnitValueError(
            f"--length {asked} is longer than max_model_len {engine.max_model_len}, and vLLM "
            "rejects such a request; raise --max-model-len to ask about it",
            field="--length",
            got=str(asked),
        )
    layout = Layout(config.model, engine)
    caps = layout.rank_caps(asked)
    blocks = layout.split(caps)
    concurrency = 0 if isinstance(blocks, Shortfall) else layout.concurrency(caps, blocks)
    return FitAnswers(
        max_model_len=engine.max_model_len,
        longest_max_model_len=layout.longest_max_model_len(),
        length=asked,
        concurrency=concurrency,
        requests=requests,
        budget=layout.budget_for(requests, asked),
        kv_cache_memory=engine.kv_cache_memory,
        parallelism=layout.parallelism,
    )


def fit_to_dict(config: KvUnitsConfig, answers: FitAnswers) -> dict[str, Any]:
    """``--format json``: the engine settings once, then the answers, quantities with units."""
    from ._render import SCHEMA_VERSION, engine_settings, quantity

    return {
        "schema_version": SCHEMA_VERSION,
        "model": config.model.name,
        "source": config.source,
        "engine": engine_settings(config),
        "ranks": answers.parallelism.world_size,
        "kv_cache_memory": quantity(answers.kv_cache_memory),
        "longest_max_model_len": quantity(answers.longest_max_model_len),
        "length": quantity(answers.length),
        "concurrent_requests": answers.concurrency,
        "requests": answers.requests,
        "kv_cache_memory_needed": quantity(answers.budget),
    }


def render_fit(config: KvUnitsConfig, answers: FitAnswers, out: TextIO) -> None:
    """The answers for people, one sentence each."""
    from ._render import clean, human_bytes
    from ._table import Line, Screen

    screen = Screen(out)
    screen.print(
        Line("kvunits fit: ")
        .append(clean(config.model.name), "bold")
        .append(f"  ({clean(config.source)})", "dim")
    )
    budget = answers.kv_cache_memory
    screen.print(f"each rank's KV cache: {budget} ({human_bytes(budget)}); {answers.parallelism}")
    longest = answers.longest_max_model_len
    if not longest:
        line = "longest max_model_len for one request: none fits, not even 1 token"
    elif longest == answers.max_model_len:
        line = f"longest max_model_len for one request: {longest} (all of max_model_len fits)"
    else:
        line = (
            f"longest max_model_len for one request: {longest} "
            f"(max_model_len {answers.max_model_len} does not fit)"
        )
    screen.print(line)
    screen.print(f"requests of {answers.length} admitted at once: {answers.concurrency}", "bold")
    plural = "request" if answers.requests == 1 else "requests"
    needed = answers.budget
    screen.print(
        f"KV cache each rank needs for {answers.requests} {plural} of {answers.length}: "
        f"{needed} ({human_bytes(needed)})"
    )
