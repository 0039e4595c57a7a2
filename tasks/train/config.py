"""Typed config of the train stage (the `[train]` section of a pipeline TOML).

Every objective has a `weight`; an objective trains when its weight is above 0, and the
objectives' weighted losses are summed. Settings that change how the work is spread (GradCache
chunk size, worker processes, device, threads, where in-progress checkpoints live) are
NOT_KEYED: they change speed, not the trained weights (up to float rounding) — with one
exception: dropout masks are drawn per forward pass, so with dropout on (`dropout` > 0, or unset,
which keeps the model's own, 0.1 for BERT, XLM-R and E5) the GradCache chunk and the process
count change which masks a text gets, hence the gradients (48% relative difference of one
step's gradient, chunks of 3 against one pass of 8 rows, on the test model at dropout 0.1:
tests/tasks/train/test_trainer.py). The key then includes them wherever they split the batch
(`TrainConfig.keyed_view`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import ConfigDict, Field, ValidationInfo, field_validator, model_validator

from storage.user_cache import xlembed_cache_dir
from tasks.encoders.pooling import check_pooling, keyed_pooling
from tasks.languages import LangCodes
from tasks.registry import validate_named
from tasks.stage_config import KEYED_UNLESS_DEFAULT, NOT_KEYED, ConfigPath, StageConfig

if TYPE_CHECKING:  # annotations only: the objectives' modules import torch (see ObjectivesConfig)
    from tasks.train.objectives import ObjectiveConfig


def default_checkpoint_dir() -> str:
    """`$XDG_CACHE_HOME/xlembed/train-checkpoints` (~/.cache by default), read when a config is built."""
    return str(xlembed_cache_dir("train-checkpoints"))


class ObjectivesConfig(StageConfig):
    """`[train.objectives]`: one section per objective, each validated by the objective registered
    under its name (tasks/train/objectives), and held under that name. Every built-in objective's
    section is there (off by default but for translation ranking); a plug-in's only where the
    config has it. The objectives' modules, torch among their imports, are imported when a config
    is first validated, not when this module is."""

    model_config = ConfigDict(extra="allow", frozen=True)  # the sections: their names are the registry's

    @model_validator(mode="before")
    @classmethod
    def _registered_sections(cls, data: Any, info: ValidationInfo) -> Any:
        if not isinstance(data, dict):
            return data
        from tasks.train.objectives import (  # lazy: they import torch, loaded at the first validation (above)
            BUILT_IN_OBJECTIVES,
            OBJECTIVES,
        )

        sections = {name: data.get(name) for name in BUILT_IN_OBJECTIVES}
        sections.update(data)
        return {
            name: validate_named(section, OBJECTIVES, name, f"[train.objectives.{name}]", "objective", info.context)
            for name, section in sections.items()
        }

    def sections(self) -> dict[str, ObjectiveConfig]:
        """Every objective section, on or off: the built-in ones, then the registered ones present."""
        return dict(self.__pydantic_extra__ or {})

    def active(self) -> dict[str, ObjectiveConfig]:
        return {name: section for name, section in self.sections().items() if section.weight > 0}

    def keyed_view(self, data: dict[str, Any]) -> dict[str, Any]:
        # a weight-0 objective's options cannot change the weights: keep them out of the key
        return {name: data[name] for name in self.active()}

    @model_validator(mode="after")
    def _some_objective(self) -> ObjectivesConfig:
        if not [name for name, section in self.active().items() if section.trains_alone]:
            alone = ", ".join(name for name, section in self.sections().items() if not section.trains_alone)
            raise ValueError(f"every training objective has weight 0 ({alone} cannot train alone): give one a positive weight")
        return self


class OptimizerConfig(StageConfig):
    lr: float = Field(default=5e-5, gt=0.0)
    weight_decay: float = Field(default=0.01, ge=0.0)
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = Field(default=1e-8, gt=0.0)
    max_grad_norm: float | None = Field(default=1.0, gt=0.0, description="clip the global gradient norm; unset: no clipping")


class ScheduleConfig(StageConfig):
    kind: Literal["constant", "linear", "cosine"] = "linear"
    warmup_steps: int = Field(default=0, ge=0)


class DistributedConfig(StageConfig):
    """Data-parallel training: the stage launches torchrun; the global batch stays `batch_size`."""

    nproc_per_node: int = Field(
        default=1, ge=1, json_schema_extra=NOT_KEYED,
        description="the same weights up to float rounding at dropout 0; keyed when > 1 with dropout on (each process draws its own masks)",
    )  # fmt: skip
    backend: Literal["auto", "gloo", "nccl"] = Field(default="auto", json_schema_extra=NOT_KEYED)
    timeout_s: int = Field(default=1800, ge=10, json_schema_extra=NOT_KEYED)


class TrainConfig(StageConfig):
    objectives: ObjectivesConfig = Field(default_factory=ObjectivesConfig)
    optimizer: OptimizerConfig = OptimizerConfig()
    schedule: ScheduleConfig = ScheduleConfig()
    distributed: DistributedConfig = DistributedConfig()

    steps: int = Field(default=1000, ge=1)
    batch_size: int = Field(default=64, ge=2, description="multi-way rows per step (global, over all processes)")
    views: int = Field(default=2, ge=2, description="texts per row: the pivot plus views-1 other languages (SupCon uses all)")
    max_length: int = Field(default=32, ge=4, le=8192, description="tokens per text, special tokens included")
    pivot: str = Field(default="eng_Latn", description="the language every pair has (English in the papers)")
    langs: LangCodes | None = Field(default=None, description="non-pivot languages to train on; default: all in the data")
    pivot_in_every_row: bool = Field(
        default=True,
        description="False: every view of a row is drawn from all languages, the pivot included (multi-way en-ablate); SupCon/TR only",
    )
    pooling: Literal["mean", "cls"] = Field(
        default="mean",
        description="the sentence vector: 'mean' of the tokens or 'cls', the first token's state (tasks/encoders/pooling.py)",
    )
    prefix: str = Field(default="", description="prepended to every text (e.g. 'query: ' for E5)")
    language_embedding: bool = Field(default=False, description="learned language-ID vector added to token embeddings")
    freeze_word_embeddings: bool = Field(default=False, description="keep the input embedding matrix fixed (fast on CPU)")
    freeze_lower_layers: int = Field(
        default=0, ge=0, le=1024, json_schema_extra=KEYED_UNLESS_DEFAULT,
        description=(
            "keep the embeddings and the lowest N transformer layers fixed, training only the layers above: "
            "the sentence space moves less, and a step back-propagates through fewer layers"
        ),
    )  # fmt: skip
    dropout: float | None = Field(
        default=None, ge=0.0, lt=1.0,
        description="override the model's dropout; unset: keep it (0.1 for BERT, XLM-R, E5). Above 0, GradCache chunks and processes are keyed",
    )  # fmt: skip
    precision: Literal["fp32", "bf16"] = Field(default="fp32", description="bf16 autocast (GPU only)")
    seed: int = 42
    min_alignment_score: float = Field(default=0.0, ge=0.0, le=1.0, description="word pairs scored lower are ignored")

    interpolation: float = Field(
        default=1.0,
        gt=0.0,
        le=1.0,
        json_schema_extra=KEYED_UNLESS_DEFAULT,
        description=(
            "alpha of the exported weights alpha * trained + (1 - alpha) * base (WiSE-FT, Wortsman et al. 2022): "
            "keeps what the base does well out of domain; 1.0 = the trained weights as they are. Below 1 nothing is "
            "trained: the same config at 1.0 is its own (cached) artifact, and this one is derived from it, so "
            "changing alpha costs no training"
        ),
    )
    eval_every: int = Field(default=0, ge=0, description="dev retrieval every N steps (0: only at the end)")
    eval_max_groups: int | None = Field(default=None, ge=2, description="dev rows per language used for selection")

    grad_cache_chunk: int | None = Field(
        default=None,
        ge=1,
        json_schema_extra=NOT_KEYED,
        description=(
            "rows per GradCache chunk; unset: one pass. The same weights up to float rounding at dropout 0; with dropout on, "
            "each chunk draws its own masks, so a chunk smaller than a process's rows is keyed"
        ),
    )
    checkpoint_every: int = Field(default=100, ge=1, json_schema_extra=NOT_KEYED)
    checkpoint_dir: ConfigPath = Field(
        default_factory=default_checkpoint_dir,
        json_schema_extra=NOT_KEYED,
        description="the in-progress checkpoints' local folder",
    )
    checkpoint_location: Literal["local", "store"] = Field(
        default="local", json_schema_extra=NOT_KEYED,
        description=(
            "local: checkpoints only in checkpoint_dir (lost with the machine); store: also under the artifact root "
            "({root}/_checkpoints/train/{key}/, S3 too), so a run killed on one machine resumes on another"
        ),
    )  # fmt: skip
    device: str | None = Field(default=None, json_schema_extra=NOT_KEYED, description="default: cuda when available")
    torch_threads: int | None = Field(default=None, ge=1, json_schema_extra=NOT_KEYED)
    log_every: int = Field(
        default=10, ge=1, json_schema_extra=NOT_KEYED,
        description="a progress line (step, losses per objective, lr, examples/s, ETA) every N steps",
    )  # fmt: skip
    report_to: list[Literal["tensorboard", "wandb", "mlflow"]] = Field(
        default=["tensorboard"], json_schema_extra=NOT_KEYED,
        description="curves also go to TensorBoard event files (in the artifact), W&B or MLflow (where installed)",
    )  # fmt: skip
    stop_after: int | None = Field(
        default=None, ge=1, json_schema_extra=NOT_KEYED, description="testing: stop after this step as if killed"
    )

    @field_validator("pooling", mode="before")
    @classmethod
    def _pooling(cls, value: Any) -> Any:
        check_pooling(value)  # the old name "cls_before_pooler" is refused with its new one
        if value == "pooler":
            raise ValueError(
                "'pooler' (the model's pooler output) cannot be trained: the train artifact's model/ is a "
                "sentence-transformers folder, whose Pooling module cannot express it; use 'cls' (the first token) or 'mean'"
            )
        return value

    def keyed_view(self, data: dict[str, Any]) -> dict[str, Any]:
        data = {**data, "pooling": keyed_pooling(self.pooling)}  # "cls" keeps the key it had as "cls_before_pooler"
        # with dropout on, every forward pass draws its own masks: how the batch is split over
        # processes and GradCache chunks changes the gradients, so it joins the key (as the fields
        # themselves, where they split the batch; one process in one pass stays out, as before)
        if self.dropout == 0.0:
            return data
        nproc = self.distributed.nproc_per_node
        local_rows = self.batch_size // nproc
        data = dict(data)
        if nproc > 1:
            data["distributed"] = {**data.get("distributed", {}), "nproc_per_node": nproc}
        if self.grad_cache_chunk is not None and self.grad_cache_chunk < local_rows:
            data["grad_cache_chunk"] = self.grad_cache_chunk
        return data

    @model_validator(mode="after")
    def _consistent(self) -> TrainConfig:
        if self.distributed.nproc_per_node > 1 and self.batch_size % self.distributed.nproc_per_node:
            raise ValueError(
                f"batch_size {self.batch_size} must divide by distributed.nproc_per_node {self.distributed.nproc_per_node}"
            )
        if not self.pivot_in_every_row:
            needs_pivot = [name for name, section in self.objectives.active().items() if section.needs_pivot]
            if needs_pivot:
                raise ValueError(
                    f"pivot_in_every_row = false leaves rows without the pivot, which {needs_pivot} need: set their weight to 0"
                )
        if self.schedule.warmup_steps > self.steps:
            raise ValueError(f"schedule.warmup_steps ({self.schedule.warmup_steps}) exceeds steps ({self.steps})")
        return self
