"""Can CTranslate2 use this machine's GPU? Answered when a translate config is loaded, so a GPU
machine whose CUDA the installed CTranslate2 was not built for fails in seconds, naming the
library it could not load and the fix, not when the translate stage starts.

CTranslate2's Linux wheels link the CUDA runtime statically and load cuBLAS when they first
use the GPU: a machine with a newer CUDA only (an H100 with CUDA 13 and CTranslate2 4.8.5)
counts its GPUs fine, then cannot translate. The cuBLAS each major version loads:

  CTranslate2 4.x   CUDA 12: libcublas.so.12 (cuDNN 9 only for convolutional models, which
                    translation does not use)
  CTranslate2 3.x   CUDA 11: libcublas.so.11

The probes are arguments, so tests give the answers of a machine they are not on.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from dataclasses import dataclass

# CTranslate2 major version -> (the CUDA its wheels are built for, the cuBLAS library they load)
CUBLAS_OF_CTRANSLATE2 = {4: ("12", "libcublas.so.12"), 3: ("11", "libcublas.so.11")}


class CudaUnavailableError(ValueError):
    """A GPU is visible but CTranslate2 cannot use it; the message says why and what to do."""


def _torch_cuda_count() -> int:
    try:
        import torch
    except ImportError:
        return 0
    return torch.cuda.device_count()


def _ct2_cuda_count() -> int:
    import ctranslate2

    return ctranslate2.get_cuda_device_count()


def _ct2_version() -> str:
    import ctranslate2

    return ctranslate2.__version__


def _load_library(name: str) -> str | None:
    """None when `name` loads; else the loader's message."""
    try:
        ctypes.CDLL(name)
    except OSError as err:
        return str(err)
    return None


@dataclass(frozen=True)
class CudaProbes:
    torch_cuda_count: Callable[[], int] = _torch_cuda_count
    ct2_cuda_count: Callable[[], int] = _ct2_cuda_count
    ct2_version: Callable[[], str] = _ct2_version
    load_library: Callable[[str], str | None] = _load_library


def resolve_translate_device(device: str, probes: CudaProbes = CudaProbes()) -> str:
    """ "cpu" or "cuda" for a config's `device` ("auto", "cpu", "cuda"), checked.

    auto: "cuda" when CTranslate2 can use a GPU, "cpu" when no GPU is visible at all. Where
    torch or CTranslate2 sees a GPU, "auto" and "cuda" raise CudaUnavailableError unless
    CTranslate2 counts it and its cuBLAS loads. "cuda" on a machine with no GPU is left to the
    machine that runs the stage (a config may be planned on one machine and run on another).
    """
    if device == "cpu":
        return device
    ct2_count = probes.ct2_cuda_count()
    torch_count = probes.torch_cuda_count() if ct2_count == 0 else 0
    if ct2_count == 0 and torch_count == 0:
        return "cpu" if device == "auto" else device
    version = probes.ct2_version()
    cuda, cublas = CUBLAS_OF_CTRANSLATE2.get(int(version.split(".")[0]), ("12", "libcublas.so.12"))
    load_error = probes.load_library(cublas)
    if ct2_count > 0 and load_error is None:
        return "cuda"
    seen = f"CTranslate2 {version} counts {ct2_count} CUDA devices" + (f" where torch sees {torch_count}" if torch_count else "")
    why = f"it cannot load {cublas} ({load_error})" if load_error else f"it loads {cublas} but finds no device"
    raise CudaUnavailableError(
        f"translate device = {device!r}: {seen}; {why}. CTranslate2 {version.split('.')[0]}.x needs CUDA {cuda}: install the "
        f"CUDA {cuda} runtime with cuBLAS {cuda} (e.g. pip install nvidia-cublas-cu{cuda} and put its lib folder on "
        f'LD_LIBRARY_PATH), or a CTranslate2 build for this machine\'s CUDA; or set device = "cpu" to translate on the CPU'
    )
