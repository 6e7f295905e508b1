"""Mutated real ``config.json`` files: whatever a field holds, only a `KvUnitsError` escapes.

Each example is a published config (``examples/hf``); hypothesis replaces, deletes or adds
fields anywhere in it — with NaN, infinities, huge and negative integers, floats, strings,
lists, mappings — and the file is read and planned. A traceback of any other class is a bug:
a field the reader uses without checking it.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvunits.contracts import KvUnitsError
from kvunits.contracts.config import HF_FIELDS, load_config_data
from kvunits.runtime.capacity import plan

from ..examples import examples
from .conftest import EXAMPLES

CONFIGS = {
    path.parent.name: json.loads(path.read_text())
    for path in sorted(EXAMPLES.glob("hf/*/config.json"))
}
KEYS = sorted(
    {key.strip() for names in HF_FIELDS for key in names.split(",")}
    | {"text_config", "audio_config", "quantization_config", "rope_scaling", "factor"}
)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.sampled_from([0, 1, 2, 3, 4, 16, 750, 4096, 2**20 + 1, 2**24, 2**40 + 1]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=6),
    st.sampled_from(
        [
            "bfloat16",
            "float32",
            "sliding_attention",
            "full_attention",
            "linear_attention",
            "M*-E",
            "llama",
            "linear",
            "longrope",
        ]
    ),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(KEYS), inner, max_size=3)
    ),
    max_leaves=6,
)


def _containers(node: Any) -> list[Any]:
    found = [node]
    if isinstance(node, dict):
        for value in node.values():
            found += _containers(value)
    elif isinstance(node, list):
        for value in node[:4]:
            found += _containers(value)
    return [n for n in found if isinstance(n, (dict, list))]


@st.composite
def mutated(draw: st.DrawFn) -> dict[str, Any]:
    data: dict[str, Any] = copy.deepcopy(CONFIGS[draw(st.sampled_from(sorted(CONFIGS)))])
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        node = draw(st.sampled_from(_containers(data)))
        if isinstance(node, list):
            if node:
                node[draw(st.integers(0, len(node) - 1))] = draw(values)
            continue
        action = draw(st.sampled_from(["replace", "delete", "add"]))
        if action == "add" or not node:
            node[draw(st.sampled_from(KEYS))] = draw(values)
        elif action == "delete":
            del node[draw(st.sampled_from(sorted(node)))]
        else:
            node[draw(st.sampled_from(sorted(node)))] = draw(values)
    return data


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_only_kvunits_errors_escape(data: dict[str, Any]) -> None:
    try:
        config = load_config_data(data, where="config.json", flags={"memory_budget": "1 PiB"})
        plan(config.model, config.engine)
    except KvUnitsError:
        pass
