"""Issue 16 §1: a training objective written and registered in this module, without editing any
file of the package, validates from `[train.objectives.<name>]`, joins the train key, and trains
through the real Trainer: its loss is logged and its gradient reaches the encoder and its own
parameters; what it declares it needs (the pivot, the frozen model) is honoured."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import torch
from pydantic import Field, ValidationError

from tasks.align.schema import WORD_ALIGNMENT_SCHEMA
from tasks.corpus.schema import CORPUS_SCHEMA
from tasks.stage import stage_key
from tasks.stage_config import keyed_config
from tasks.tiny_models import build_tiny_model, multiway_rows
from tasks.train import TRAIN_STAGE
from tasks.train.config import TrainConfig
from tasks.train.data import TrainingData
from tasks.train.objectives import OBJECTIVES, ObjectiveConfig, SentenceObjective, TrainContext, register_objective
from tasks.train.trainer import Trainer, TrainInputs
from tasks.train.views import encode_views


@register_objective
class PullToPivotConfig(ObjectiveConfig):
    """`[train.objectives.pull_to_pivot]`: squared distance of every view's vector to the pivot's."""

    name = "pull_to_pivot"
    description = "pull every view's vector to the pivot's"
    needs_pivot = True
    needs_frozen_model = True

    scale: float = Field(default=1.0, gt=0.0)
    anchor: float = Field(default=0.0, ge=0.0, description="weight of the distance to the frozen model's pivot vector")

    def build(self, model: Any, data: TrainingData, base_dir: Path) -> PullToPivotLoss:
        return PullToPivotLoss(self)


class PullToPivotLoss(SentenceObjective):
    """A toy: mean ||z_v - z_pivot||^2 over non-pivot views, times a learned scale (a parameter of
    its own, to check that it reaches the optimizer), plus `anchor` x the distance of the pivot
    vector to the frozen model's."""

    Settings = PullToPivotConfig

    def __init__(self, settings: PullToPivotConfig) -> None:
        super().__init__(settings)
        self.log_scale = torch.nn.Parameter(torch.tensor(float(settings.scale)).log())

    def prepare(self, ctx: TrainContext, batch: Any) -> dict[str, torch.Tensor]:
        with torch.no_grad():
            return {"z_orig": encode_views(ctx, ctx.frozen, batch)[:, 0]}

    def forward(self, embeddings: torch.Tensor, valid: torch.Tensor, extras: dict[str, torch.Tensor]) -> torch.Tensor:
        pivot = embeddings[:, :1]
        dist = ((embeddings[:, 1:] - pivot) ** 2).sum(-1)
        mask = valid[:, 1:].float()
        pulled = (dist * mask).sum() / mask.sum().clamp(min=1.0)
        anchored = ((embeddings[:, 0] - extras["z_orig"]) ** 2).sum(-1).mean()
        return self.log_scale.exp() * pulled + self.settings.anchor * anchored


BASE = {"steps": 3, "batch_size": 8, "views": 3, "max_length": 24, "eval_every": 0, "checkpoint_every": 3,
        "optimizer": {"lr": 1e-3}, "seed": 3, "dropout": 0.0, "torch_threads": 1}  # fmt: skip


def config(**objectives: dict) -> TrainConfig:
    return TrainConfig.model_validate({**BASE, "objectives": {"translation_ranking": {"weight": 0.0}, **objectives}})


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> TrainInputs:
    corpus, align = multiway_rows(60)
    model_dir = build_tiny_model(tmp_path_factory.mktemp("plugin-objective-bert"))
    return TrainInputs(
        pa.Table.from_pylist(corpus, schema=CORPUS_SCHEMA), pa.Table.from_pylist(align, schema=WORD_ALIGNMENT_SCHEMA), model_dir
    )


def test_the_section_validates_and_errors_name_it() -> None:
    assert (
        OBJECTIVES["pull_to_pivot"] is PullToPivotConfig
        and PullToPivotConfig.needs_pivot
        and PullToPivotConfig.needs_frozen_model
    )
    cfg = config(pull_to_pivot={"weight": 0.5, "scale": 2.0})
    section = cfg.objectives.active()["pull_to_pivot"]
    assert isinstance(section, PullToPivotConfig) and section.scale == 2.0
    assert TrainConfig.model_validate(cfg.model_dump(mode="json")) == cfg
    with pytest.raises(ValidationError, match=r"\[train.objectives.pull_to_pivot\]: scale: Input should be greater than 0"):
        config(pull_to_pivot={"weight": 0.5, "scale": -1.0})
    with pytest.raises(ValidationError, match=r"\[train.objectives.pull_to_pivut\]: no such objective"):
        config(pull_to_pivut={"weight": 0.5})
    with pytest.raises(ValidationError, match=r"pull_to_pivot.*need"):  # its declared need of the pivot
        TrainConfig.model_validate({**BASE, "pivot_in_every_row": False, "objectives": {"pull_to_pivot": {"weight": 1.0}}})


def test_a_name_taken_by_another_objective_or_section_is_refused() -> None:
    def other(name: str | None, **body: Any) -> type:
        namespace = {"__module__": __name__, **({"name": name} if name else {}), **body}
        return type("Other", (ObjectiveConfig,), namespace)

    def build(self: Any, model: Any, data: Any, base_dir: Any) -> Any: ...

    with pytest.raises(ValueError, match="'pull_to_pivot' is already registered"):
        register_objective(other("pull_to_pivot", build=build))
    with pytest.raises(ValueError, match="'dueam' is already registered by tasks.train.objectives.dueam_wmd.DuEAMConfig"):
        register_objective(other("dueam", build=build))
    with pytest.raises(TypeError, match="must implement build"):
        register_objective(other("unbuilt"))
    with pytest.raises(TypeError, match="an objective is an ObjectiveConfig subclass"):
        register_objective(type("Other", (SentenceObjective,), {"name": "a_module"}))
    assert OBJECTIVES["pull_to_pivot"] is PullToPivotConfig and OBJECTIVES["dueam"].__name__ == "DuEAMConfig"


def test_its_settings_join_the_key_only_while_it_trains() -> None:
    inputs = {"corpus": "a" * 64}
    on = config(translation_ranking={"weight": 1.0}, pull_to_pivot={"weight": 0.5, "scale": 2.0})
    assert keyed_config(on)["objectives"]["pull_to_pivot"] == {"weight": 0.5, "scale": 2.0, "anchor": 0.0}
    other_scale = config(translation_ranking={"weight": 1.0}, pull_to_pivot={"weight": 0.5, "scale": 3.0})
    assert stage_key(TRAIN_STAGE, on, inputs, {}) != stage_key(TRAIN_STAGE, other_scale, inputs, {})
    off = config(translation_ranking={"weight": 1.0}, pull_to_pivot={"weight": 0.0, "scale": 3.0})
    assert stage_key(TRAIN_STAGE, off, inputs, {}) == stage_key(
        TRAIN_STAGE, config(translation_ranking={"weight": 1.0}), inputs, {}
    )


@pytest.mark.slow
def test_it_trains_through_the_real_trainer(inputs: TrainInputs, tmp_path: Path) -> None:
    trainer = Trainer(config(pull_to_pivot={"weight": 0.5, "scale": 2.0, "anchor": 0.1}), inputs)
    assert trainer.frozen is not None  # declared needs_frozen_model
    assert trainer.objectives["pull_to_pivot"].weight == 0.5

    loss, parts = trainer.backward_step(0)
    assert set(parts) == {"pull_to_pivot"} and loss == pytest.approx(0.5 * float(parts["pull_to_pivot"]), rel=1e-5)
    own = trainer.objectives["pull_to_pivot"].log_scale
    assert own.grad is not None and float(own.grad) != 0.0
    encoder_grads = [p.grad for p in trainer.model.parameters() if p.requires_grad]
    assert any(g is not None and float(g.abs().sum()) > 0 for g in encoder_grads)
    assert any(p is own for p in trainer.params)  # reaches the optimizer
    trainer.optimizer.zero_grad(set_to_none=True)

    before = {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}
    metrics = trainer.run(tmp_path / "out", tmp_path / "ckpt")
    assert metrics["objectives"] == {"pull_to_pivot": 0.5}
    assert torch.isfinite(torch.tensor(metrics["final_losses"]["loss/pull_to_pivot"]))
    after = trainer.model.state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before if before[k].is_floating_point())
