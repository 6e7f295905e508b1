"""Kernel tests: Triton's interpreter on the CPU unless a CUDA device is there to run them.

``TRITON_INTERPRET`` must be set before `kernels` decorates its kernels with ``@triton.jit``,
so it is set here, at collection, before any test module imports `kernels`. Without torch or
triton (the ``kernels`` extra) the whole directory is skipped, with the reason in the summary.
"""

from __future__ import annotations

import importlib.util
import os

import pytest

_MISSING = [name for name in ("torch", "triton") if importlib.util.find_spec(name) is None]
if _MISSING:
    pytest.skip(
        f"{' and '.join(_MISSING)} not installed: the kernel tests need the kernels extra "
        "(pip install torch first, then kvunits[kernels])",
        allow_module_level=True,
    )

import torch  # noqa: E402

if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"
