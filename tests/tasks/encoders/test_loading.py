"""Loading a checkpoint without pooler weights (E5, the offline base model) is quiet:
no transformers LOAD REPORT table, no weight-loading bar, the pooler dropped."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tasks.tiny_models import build_tiny_model


@pytest.fixture(scope="module")
def model_without_pooler(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("no-pooler"), pooler=False)


@pytest.mark.parametrize("loader", ["train", "encoder"])
def test_a_checkpoint_without_pooler_loads_without_a_load_report(model_without_pooler, loader, capfd, caplog):
    import torch

    caplog.set_level(logging.INFO)
    if loader == "train":
        from tasks.train.model import load_transformer

        model = load_transformer(model_without_pooler)
    else:
        from tasks.encoders.model_source import load_model

        model = load_model(str(model_without_pooler), {}, str(model_without_pooler))
    assert model.pooler is None
    assert model(torch.tensor([[1, 2, 3]])).last_hidden_state.shape == (1, 3, 32)
    printed = capfd.readouterr()
    everything = printed.out + printed.err + caplog.text
    assert "LOAD REPORT" not in everything and "MISSING" not in everything and "Loading weights" not in everything


def test_other_missing_weights_are_one_warning_line(tmp_path, caplog):
    import torch
    from safetensors.torch import load_file, save_file

    build_tiny_model(tmp_path, pooler=False)
    weights = load_file(str(tmp_path / "model.safetensors"))
    save_file(
        {k: v for k, v in weights.items() if "encoder.layer.0.output.dense" not in k},
        str(tmp_path / "model.safetensors"),
        metadata={"format": "pt"},
    )
    from tasks.encoders.loading import load_auto_model

    with caplog.at_level(logging.WARNING, logger="tasks.encoders.loading"):
        load_auto_model(str(tmp_path), dtype=torch.float32)
    warnings = [r.getMessage() for r in caplog.records if r.name == "tasks.encoders.loading"]
    assert len(warnings) == 1 and "2 weights missing" in warnings[0] and "encoder.layer.0.output.dense.bias" in warnings[0]
