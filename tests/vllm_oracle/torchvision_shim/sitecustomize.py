"""Lets vLLM's multimodal model modules import torchvision on a CPU-only torch (oracle only).

The only torchvision wheel here (0.28.0, the release for torch 2.13) is built for CUDA: its
compiled operators do not load against the CPU torch, and importing it then fails in
``torchvision/_meta_registrations.py``, which registers fake kernels for ``torchvision::nms``
and ``torchvision::qnms`` without checking that the operators exist. Declaring those two
schemas first lets the pure-Python parts (the image transforms vLLM's processors import)
load; no operator is ever run: ``model_view.py`` builds ``ModelConfig`` objects only.

Put on ``PYTHONPATH`` by ``scripts/vllm-model-view`` (with the wheel's ``--target``
directory) so that vLLM's registry subprocesses get it too. Never on kvunits' own path.
"""

import importlib.util

if importlib.util.find_spec("torchvision") is not None:
    import torch

    _LIB = torch.library.Library("torchvision", "DEF")  # type: ignore[no-untyped-call]
    for _op in ("nms", "qnms"):
        _LIB.define(f"{_op}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")  # type: ignore[no-untyped-call]
