"""Kernel tests: Triton's interpreter on the CPU unless a CUDA device is there to run them.

``TRITON_INTERPRET`` must be set before `kernels` decorates its kernels with ``@triton.jit``,
so it is set here, at collection, before any test module imports `kernels`. Without torch or
triton (the ``kernels`` extra) the whole directory is skipped.
"""

from __future__ import annotations

import importlib.util
import os

if importlib.util.find_spec("torch") is None or importlib.util.find_spec("triton") is None:
    # pytest reads this name: nothing under tests/kernels is collected.
    collect_ignore_glob = ["*.py"]
else:
    import torch

    if not torch.cuda.is_available():
        os.environ["TRITON_INTERPRET"] = "1"
