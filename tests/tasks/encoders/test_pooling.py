"""The one pooling (tasks/encoders/pooling.py): the vectors it gives, that training and the
Encoder both use it, sentence-transformers' names, and the errors for "pooler" and old names."""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from tasks.encoders import Encoder, EncoderLoadError, EncoderSpec
from tasks.encoders.pooling import (
    POOLING_MODES,
    PoolingError,
    check_pooling,
    embed,
    pool,
    sentence_transformers_mode,
)
from tasks.train.model import DualEncoder, load_transformer

TEXTS = ["the river", "la ville claire petite gens eau sous sur lumière nuit", "қала", "the city under the bright night light"]


def batch(model_dir: Path, texts: list[str]) -> dict[str, torch.Tensor]:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
    return tokenizer(texts, padding=True, return_tensors="pt")


@pytest.fixture(scope="module")
def states(tiny_model_dir: Path) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Last hidden states, attention mask and pooler output of the tiny BERT on a right-padded batch."""
    model = load_transformer(tiny_model_dir).eval()
    inputs = batch(tiny_model_dir, TEXTS)
    with torch.no_grad():
        out = model(**inputs)
    return out.last_hidden_state, inputs["attention_mask"], out.pooler_output


def without_pooler(model_dir: Path, out: Path) -> Path:
    """A copy of the tiny BERT without pooler weights, as E5 checkpoints are."""
    from safetensors.torch import load_file, save_file

    shutil.copytree(model_dir, out)
    weights = {k: v for k, v in load_file(str(out / "model.safetensors")).items() if not k.startswith("pooler.")}
    save_file(weights, str(out / "model.safetensors"), metadata={"format": "pt"})
    return out


def test_mean_and_cls_are_bit_for_bit_what_the_training_model_computed_before(states):
    """The formulas of DualEncoder.pool before issue 16 ("mean" and "cls_before_pooler"): the
    same bits, so artifacts trained with them keep their results and keys."""
    hidden, mask, _ = states
    w = mask.unsqueeze(-1).to(hidden.dtype)
    old_mean = torch.nn.functional.normalize(((hidden * w).sum(1) / w.sum(1).clamp(min=1e-9)).float(), p=2, dim=-1)
    old_first = torch.nn.functional.normalize(hidden[:, 0].float(), p=2, dim=-1)
    assert torch.equal(embed("mean", hidden, mask), old_mean)
    assert torch.equal(embed("cls", hidden, mask), old_first)


def test_the_modes_compute_what_their_names_say_on_unpadded_texts(tiny_model_dir, states):
    hidden, mask, pooled = states
    model = load_transformer(tiny_model_dir).eval()
    for i, text in enumerate(TEXTS):
        with torch.no_grad():
            alone = model(**batch(tiny_model_dir, [text]))
        n = int(mask[i].sum())
        torch.testing.assert_close(pool("mean", hidden, mask)[i], alone.last_hidden_state[0, :n].mean(0), atol=1e-5, rtol=0)
        torch.testing.assert_close(pool("cls", hidden, mask)[i], alone.last_hidden_state[0, 0], atol=1e-5, rtol=0)
        torch.testing.assert_close(pool("pooler", hidden, mask, pooled)[i], alone.pooler_output[0], atol=1e-5, rtol=0)
    assert not torch.allclose(pool("cls", hidden, mask), pooled)  # "cls" is not the pooler output any more


@pytest.mark.parametrize("mode", POOLING_MODES)
def test_the_training_model_and_the_encoder_give_the_same_vectors(tiny_model_dir, mode):
    encoder = Encoder.load(EncoderSpec(str(tiny_model_dir), pooling=mode, batch_size=2, device="cpu"))
    dual = DualEncoder(load_transformer(tiny_model_dir), pooling=mode).eval()
    inputs = batch(tiny_model_dir, TEXTS)
    with torch.no_grad():
        trained, _ = dual(inputs["input_ids"], inputs["attention_mask"])
    np.testing.assert_allclose(encoder.encode(TEXTS), trained.numpy(), atol=1e-5)


def test_pooler_without_trained_pooler_weights_is_an_error_everywhere(tiny_model_dir, tmp_path, states):
    source = without_pooler(tiny_model_dir, tmp_path / "no-pooler")
    with pytest.raises(EncoderLoadError, match="pooling 'pooler'.*no-pooler.*no trained pooler weights.*'cls'"):
        Encoder.load(EncoderSpec(str(source), pooling="pooler", device="cpu"))
    with pytest.raises(PoolingError, match="pooling 'pooler'.*no trained pooler weights"):
        DualEncoder(load_transformer(source), pooling="pooler")
    hidden, mask, _ = states
    with pytest.raises(PoolingError, match="no \\(trained\\) pooler"):
        pool("pooler", hidden, mask, None)
    # the other modes work on it, and "cls" is its first token
    assert Encoder.load(EncoderSpec(str(source), pooling="cls", device="cpu")).encode(TEXTS[:1]).shape == (1, 32)


@pytest.mark.parametrize("value", ["cls_before_pooler", "max", None, 1])
def test_unknown_and_renamed_modes_are_refused_naming_the_field(value):
    with pytest.raises(PoolingError, match="^train.pooling"):
        check_pooling(value, "train.pooling")
    if value == "cls_before_pooler":
        with pytest.raises(PoolingError, match="was renamed: write train.pooling = 'cls' \\(the first token's state"):
            check_pooling(value, "train.pooling")


def test_sentence_transformers_names():
    assert {m: sentence_transformers_mode(m) for m in ("mean", "cls")} == {"mean": "mean", "cls": "cls"}
    with pytest.raises(PoolingError, match="'pooler'.*cannot be expressed by a sentence-transformers Pooling module"):
        sentence_transformers_mode("pooler")


def test_cls_asked_for_on_a_model_with_a_trained_pooler_warns_once_what_it_used_to_mean(
    tiny_model_dir, tmp_path, st_cls_dir, caplog
):
    copy = shutil.copytree(tiny_model_dir, tmp_path / "with-pooler")  # a `where` not warned about yet in this process
    with caplog.at_level(logging.WARNING, logger="tasks.encoders.pooling"):
        Encoder.load(EncoderSpec(str(copy), pooling="cls", device="cpu"))
        Encoder.load(EncoderSpec(str(copy), pooling="cls", device="cpu"))
        Encoder.load(EncoderSpec(str(copy), pooling="mean", device="cpu"))
        Encoder.load(EncoderSpec(str(st_cls_dir), device="cpu"))  # "cls" from a sentence-transformers folder: its own meaning
        Encoder.load(EncoderSpec(str(without_pooler(tiny_model_dir, tmp_path / "no-pooler")), pooling="cls", device="cpu"))
    warnings = [r.getMessage() for r in caplog.records if r.name == "tasks.encoders.pooling"]
    assert len(warnings) == 1 and "with-pooler" in warnings[0] and "write pooling = 'pooler'" in warnings[0]


def test_importing_the_pooling_module_does_not_import_torch():
    code = "import sys, tasks.encoders.pooling; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parents[3])
