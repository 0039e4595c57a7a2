"""The float precision that inference (evaluate, align) and training compute in.

  fp32  float32 throughout, TF32 off for matmuls: a GPU gives the CPU's numbers up to float
        noise, so the cache key need not say which device computed them. The default.
  bf16  autocast to bfloat16 on the device (CPU included, so one key still means one
        computation): about 3 significant digits, faster on GPUs with bf16 tensor cores.
        Changes results beyond float noise (on the H100, WSPAlign's links differed on 1 of
        64 pairs), so configs key it.

Importing this module does not import torch.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Literal

Precision = Literal["fp32", "bf16"]
PRECISIONS: tuple[str, ...] = ("fp32", "bf16")


def check_precision(value: object, where: str) -> str:
    if value not in PRECISIONS:
        raise ValueError(f"{where} must be one of {list(PRECISIONS)}, got {value!r}")
    return str(value)


@contextlib.contextmanager
def full_fp32_matmuls() -> Iterator[None]:
    """float32 matmuls in IEEE float32 (no TF32) inside the block, whatever the process set."""
    import torch

    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)


def compute_precision(device_type: str, precision: str) -> contextlib.AbstractContextManager:
    """The context to run a forward pass on `device_type` ("cpu", "cuda") in `precision`."""
    import torch

    if check_precision(precision, "precision") == "bf16":
        return torch.autocast(device_type, dtype=torch.bfloat16)
    return full_fp32_matmuls()
