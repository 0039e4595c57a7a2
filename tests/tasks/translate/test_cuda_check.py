"""CTranslate2's CUDA needs checked when a translate config is loaded, with the machine's
answers given as probes: an H100 with CUDA 13 libraries only (what issue 28 met), a machine
where all is well, one with no GPU, and this machine itself."""

from __future__ import annotations

import time

import pytest

from tasks.translate.config import TranslateConfig
from tasks.translate.cuda_check import CudaProbes, CudaUnavailableError, resolve_translate_device

MISSING = "libcublas.so.12: cannot open shared object file: No such file or directory"


def machine(*, torch_gpus: int, ct2_gpus: int, cublas_loads: bool, version: str = "4.8.5") -> CudaProbes:
    return CudaProbes(
        torch_cuda_count=lambda: torch_gpus,
        ct2_cuda_count=lambda: ct2_gpus,
        ct2_version=lambda: version,
        load_library=lambda name: None if cublas_loads else f"{name}: cannot open shared object file: No such file or directory",
    )


@pytest.mark.parametrize("device", ["auto", "cuda"])
def test_a_gpu_machine_with_cuda_13_only_is_refused_naming_cublas_12_and_the_fix(device: str) -> None:
    h100 = machine(torch_gpus=1, ct2_gpus=1, cublas_loads=False)
    with pytest.raises(CudaUnavailableError) as err:
        resolve_translate_device(device, h100)
    message = str(err.value)
    assert MISSING in message and "CTranslate2 4.8.5" in message and "CTranslate2 4.x needs CUDA 12" in message
    assert "cuBLAS 12" in message and "a CTranslate2 build for this machine's CUDA" in message and 'device = "cpu"' in message
    assert "\n" not in message


def test_torch_sees_a_gpu_that_ctranslate2_does_not_count() -> None:
    cpu_build = machine(torch_gpus=2, ct2_gpus=0, cublas_loads=True)
    with pytest.raises(
        CudaUnavailableError, match="counts 0 CUDA devices where torch sees 2; it loads libcublas.so.12 but finds no device"
    ):
        resolve_translate_device("auto", cpu_build)


def test_ctranslate2_3_needs_cuda_11() -> None:
    with pytest.raises(CudaUnavailableError, match=r"cannot load libcublas\.so\.11 .*CTranslate2 3\.x needs CUDA 11"):
        resolve_translate_device("cuda", machine(torch_gpus=1, ct2_gpus=1, cublas_loads=False, version="3.24.0"))


def test_a_working_gpu_resolves_auto_to_cuda_and_no_gpu_to_cpu() -> None:
    assert resolve_translate_device("auto", machine(torch_gpus=1, ct2_gpus=1, cublas_loads=True)) == "cuda"
    assert resolve_translate_device("cuda", machine(torch_gpus=1, ct2_gpus=1, cublas_loads=True)) == "cuda"
    no_gpu = machine(torch_gpus=0, ct2_gpus=0, cublas_loads=False)
    assert resolve_translate_device("auto", no_gpu) == "cpu"
    # planned here, run on a GPU worker: nothing to check on this machine
    assert resolve_translate_device("cuda", no_gpu) == "cuda"
    assert resolve_translate_device("cpu", machine(torch_gpus=1, ct2_gpus=1, cublas_loads=False)) == "cpu"


def test_this_machine_answers_in_seconds() -> None:
    started = time.perf_counter()
    config = TranslateConfig.model_validate({"targets": ["fra_Latn"]})
    assert config.device in ("cpu", "cuda") and time.perf_counter() - started < 30
