"""The weights' memory on each GPU, from a model directory's safetensors files.

vLLM loads a checkpoint's tensors and shards them over its ranks; the memory left for the KV
cache is what the GPU's share of ``gpu_memory_utilization`` leaves after them (and after the
activations, which kvunits does not profile: give ``activation_memory``). This module reads
the sizes the directory states, never the weights:

* each ``*.safetensors`` file's header (8 bytes of length, then JSON naming every tensor
  with its dtype, shape and byte range), when the files are there;
* else ``model.safetensors.index.json``'s ``metadata.total_size`` (its ``weight_map`` names
  the tensors but not their sizes), split evenly: an estimate, and said so.

Per rank, as vLLM shards (``vllm/model_executor/layers/linear.py``,
``vocab_parallel_embedding.py``, ``vllm/distributed/utils.py get_pp_indices``): a tensor of
layer ``i`` lives on the stage that holds layer ``i``; the embedding on the first stage, the
LM head and the final norm on the last; a tensor of two or more dimensions is split over
the TP ranks (column- or row-parallel linears, vocab-parallel embeddings: ``ceil(bytes /
tp)``), a 1-D one (norms, biases) is whole on every rank. K and V projections with fewer
KV heads than TP ranks are replicated in vLLM (each rank holds one head); this rule splits
them, which under-counts by at most those projections. The answer is marked as this rule's
estimate, not a measurement.
"""

from __future__ import annotations

import json
import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from .._counts import Layers
from .._quantity import Bytes
from ..deploy import Parallelism, RankBytes, layers_per_stage

#: Bytes per element of the safetensors dtypes.
_DTYPE_BYTES: Final = {
    "F64": 8,
    "I64": 8,
    "U64": 8,
    "F32": 4,
    "I32": 4,
    "U32": 4,
    "F16": 2,
    "BF16": 2,
    "I16": 2,
    "U16": 2,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "F8_E8M0": 1,
    "I8": 1,
    "U8": 1,
    "BOOL": 1,
    "F4": 1,  # packed two per byte in U8 tensors in practice; counted as stored
}
_LAYER: Final = re.compile(r"(?:^|\.)(?:layers|h|blocks|block)\.(\d+)\.")
_HEADER_LIMIT: Final = 100 << 20


@dataclass(frozen=True, slots=True)
class WeightsMemory:
    """The weights of a model directory on its fullest rank.

    Attributes:
        per_rank: the bytes the fullest rank holds (`RankBytes`).
        total: every tensor's bytes, the model's.
        how: where the sizes came from and which rule split them (printed as the source).
    """

    per_rank: RankBytes
    total: Bytes
    how: str


def weights_memory(
    directory: Path, num_layers: int, parallelism: Parallelism
) -> WeightsMemory | None:
    """The weights each rank holds, or ``None`` when the directory states no sizes.

    Args:
        directory: the model directory (its ``config.json``'s parent).
        num_layers: the decoder's layers (to place each layer's tensors on its stage).
        parallelism: the TP and PP sizes.
    """
    tensors = _headers(directory)
    if tensors:
        return _split(tensors, num_layers, parallelism)
    index = directory / "model.safetensors.index.json"
    if not index.is_file():
        return None
    try:
        data = json.loads(index.read_text(encoding="utf-8")[: 16 << 20])
        total = int(data["metadata"]["total_size"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if total <= 0:
        return None
    ranks = parallelism.tensor_parallel_size * parallelism.pipeline_parallel_size
    return WeightsMemory(
        RankBytes(-(-total // ranks)),
        Bytes(total),
        "estimate: model.safetensors.index.json total_size split evenly over "
        f"{ranks} rank(s) (no safetensors headers to place the tensors)",
    )


def _headers(directory: Path) -> dict[str, tuple[int, int]]:
    """Each tensor's bytes and dimensions, from the safetensors headers present."""
    tensors: dict[str, tuple[int, int]] = {}
    for file in sorted(directory.glob("*.safetensors")):
        try:
            with file.open("rb") as handle:
                (length,) = struct.unpack("<Q", handle.read(8))
                if not 0 < length <= _HEADER_LIMIT:
                    continue
                header = json.loads(handle.read(length))
        except (OSError, ValueError, struct.error):
            continue
        for name, info in header.items():
            if name == "__metadata__" or not isinstance(info, dict):
                continue
            offsets = info.get("data_offsets")
            shape = info.get("shape")
            if not (isinstance(offsets, list) and len(offsets) == 2 and isinstance(shape, list)):
                continue
            size = int(offsets[1]) - int(offsets[0])
            tensors[name] = (size, len(shape))
    return tensors


def _split(
    tensors: dict[str, tuple[int, int]], num_layers: int, parallelism: Parallelism
) -> WeightsMemory:
    tp = parallelism.tensor_parallel_size
    stages = layers_per_stage(Layers(num_layers), parallelism)
    stage_of = {i: s for s, span in enumerate(stages) for i in span}
    last = len(stages) - 1
    per_stage = [0] * len(stages)
    total = 0
    for name, (size, dims) in tensors.items():
        total += size
        match = _LAYER.search(name)
        if match is not None and int(match.group(1)) in stage_of:
            stage = stage_of[int(match.group(1))]
        elif "lm_head" in name or name.endswith("norm.weight") or "output" in name:
            stage = last
        else:
            stage = 0  # embeddings, vision and audio towers: the first stage
        per_stage[stage] += size if dims < 2 else -(-size // tp)
    return WeightsMemory(
        RankBytes(max(per_stage)),
        Bytes(total),
        f"estimate: safetensors headers, {len(tensors)} tensors, >= 2-D split over TP "
        f"{tp}, placed on {len(stages)} stage(s)",
    )
