"""What a component needs of the machine is declared by the component (issue 38 §1), not read by
the flow from its settings: a plug-in source, aligner, objective or benchmark that runs only on
the accelerator sets `requires_gpu = True`, one with a `device` setting is asked through
`needs_gpu()`, and the Ray runner reserves `ray_gpus_per_task` for the shards of its stage. Before,
the flow looked for `device` fields only: a GPU-only plug-in without one got no GPU."""

from __future__ import annotations

import copy
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar, Literal

import pytest

from flows.config import load_config_dict
from flows.runners import shard_resources
from tasks.align.backends import AlignerSettings, register_backend
from tasks.align.backends.base import ALIGN_BACKENDS
from tasks.corpus.sources import Source, register_source
from tasks.corpus.sources.registry import SOURCES
from tasks.evaluate.benchmarks import Benchmark, register_benchmark
from tasks.evaluate.benchmarks.registry import BENCHMARKS
from tasks.stage_config import StageConfig
from tasks.train.objectives import ObjectiveConfig, register_objective
from tasks.train.objectives.base import OBJECTIVES

REPO = Path(__file__).resolve().parents[2]
SMOKE = REPO / "configs" / "smoke.toml"
TOY = "gpu_only_toy"


@pytest.fixture(autouse=True, scope="module")
def _toys_leave_with_this_module() -> Iterator[None]:
    """The toys are registered when this module is imported; later modules list the registries
    (an unknown kind's error names every registered one) and must not find them."""
    yield
    for registry in (ALIGN_BACKENDS, SOURCES, BENCHMARKS, OBJECTIVES):
        registry.pop(TOY, None)


@register_backend
class GpuOnlyAligner(AlignerSettings):
    name = "gpu_only_toy"
    description = "a toy that would run only on the accelerator"
    requires_gpu: ClassVar[bool] = True

    def build(self, base_model: Path | None = None) -> Any:
        raise AssertionError("never built here: only its declaration is read")


@register_source
class GpuOnlySource(Source):
    kind: Literal["gpu_only_toy"]
    requires_gpu: ClassVar[bool] = True

    def languages(self, shard: Any = None) -> list[str]:
        return ["eng_Latn", "kaz_Cyrl"]

    def read(self, shard: Any, io: Any) -> Iterator[Any]:
        yield from ()

    def fingerprint(self, io: Any) -> dict[str, Any]:
        return {}


@register_objective
class GpuOnlyObjective(ObjectiveConfig):
    name = "gpu_only_toy"
    description = "a toy loss that would run only on the accelerator"
    requires_gpu: ClassVar[bool] = True

    def build(self, model: Any, data: Any, base_dir: Path) -> Any:
        raise AssertionError("never built here: only its declaration is read")


@register_benchmark
class GpuOnlyBenchmark(Benchmark):
    kind: Literal["gpu_only_toy"]
    main_metric: ClassVar[str] = "accuracy"
    requires_gpu: ClassVar[bool] = True

    def score(self, evaluation: Any) -> None:
        raise AssertionError("never scored here: only its declaration is read")


def smoke_with(edit: Any) -> dict[str, StageConfig]:
    """configs/smoke.toml, edited in memory, validated as a file would be."""
    raw = copy.deepcopy(tomllib.loads(SMOKE.read_text(encoding="utf-8")))
    edit(raw)
    return load_config_dict(raw, SMOKE).stage_configs


def reserved(stage: str, config: StageConfig, gpus: float = 1) -> dict[str, Any]:
    return shard_resources("build-shard", {"stage_name": stage, "config": config}, gpus)


@pytest.fixture(autouse=True)
def _built_in_stages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XLEMBED_STAGES", raising=False)


def test_a_gpu_only_aligner_without_a_device_setting_gets_a_gpu() -> None:
    def gpu_only_backend(raw: dict) -> None:
        raw["align"] = {"backend": "gpu_only_toy"}

    config = smoke_with(gpu_only_backend)["align"]
    assert config.settings.needs_gpu()
    assert reserved("align", config) == {"num_gpus": 1}
    assert reserved("align", config, gpus=0) == {}  # no GPUs configured: nothing reserved


def test_a_gpu_only_source_makes_its_corpus_shards_reserve_a_gpu() -> None:
    plain = smoke_with(lambda raw: None)["corpus"]
    assert reserved("corpus", plain) == {}  # the built-in sources run on the CPU

    def add_source(raw: dict) -> None:
        raw["corpus"]["sources"].append({"name": "toy", "kind": "gpu_only_toy"})

    assert reserved("corpus", smoke_with(add_source)["corpus"]) == {"num_gpus": 1}


def test_an_objective_needs_the_gpu_only_while_it_is_on() -> None:
    def objective(weight: float, device: str | None = "cpu") -> Any:
        def edit(raw: dict) -> None:
            if device is None:
                raw["train"].pop("device", None)
            else:
                raw["train"]["device"] = device
            raw["train"].setdefault("objectives", {})["gpu_only_toy"] = {"weight": weight}

        return edit

    assert reserved("train", smoke_with(objective(0.0))["train"]) == {}  # off: the CPU trainer needs none
    assert reserved("train", smoke_with(objective(1.0, device=None))["train"]) == {"num_gpus": 1}
    assert reserved("train", smoke_with(objective(1.0, device="cuda"))["train"]) == {"num_gpus": 1}


def test_a_gpu_only_objective_on_a_cpu_trainer_is_refused_when_the_config_loads() -> None:
    def on_cpu(raw: dict) -> None:
        raw["train"]["device"] = "cpu"
        raw["train"].setdefault("objectives", {})["gpu_only_toy"] = {"weight": 1.0}

    with pytest.raises(ValueError, match=r"device = 'cpu', but gpu_only_toy runs only on a GPU") as refused:
        smoke_with(on_cpu)
    assert "\n" not in str(refused.value).strip().splitlines()[-1]  # one line, naming the section
    assert "train" in str(refused.value)


def test_a_gpu_only_benchmark_is_asked_too() -> None:
    def on_cpu(raw: dict) -> None:
        raw["evaluate"]["encoder"]["device"] = "cpu"

    def with_benchmark(raw: dict) -> None:
        on_cpu(raw)
        raw["evaluate"]["benchmarks"].append({"kind": "gpu_only_toy"})

    assert reserved("evaluate", smoke_with(on_cpu)["evaluate"]) == {}  # the encoder on the CPU
    assert reserved("evaluate", smoke_with(with_benchmark)["evaluate"]) == {"num_gpus": 1}


def test_the_default_declaration_reads_the_components_own_device() -> None:
    class WithDevice(StageConfig):
        device: str | None = None

    class Holder(StageConfig):
        parts: list[WithDevice] = []

    assert not StageConfig().needs_gpu()  # no device, no declaration: the CPU
    assert WithDevice().needs_gpu() and WithDevice(device="cuda:1").needs_gpu()  # unset: the accelerator when there is one
    assert not WithDevice(device="cpu").needs_gpu() and not WithDevice(device="cpu:0").needs_gpu()
    assert Holder(parts=[WithDevice(device="cpu"), WithDevice(device="cuda")]).needs_gpu()
    assert not Holder(parts=[WithDevice(device="cpu")]).needs_gpu()
