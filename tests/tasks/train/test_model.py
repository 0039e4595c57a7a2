"""The dual encoder's own parameters on the tiny BERT."""

from __future__ import annotations

import pytest
import torch

from tasks.train.model import DualEncoder, load_transformer


def test_the_language_embedding_starts_random_like_the_models_embeddings(tiny_model_dir):
    """WACSE 6.1: "We initialize the language embedding layer randomly at the start of training":
    normal with the model's initializer_range, drawn from the seeded generator."""
    transformer = load_transformer(tiny_model_dir, dropout=0.0)
    n_langs, std = 6, transformer.config.initializer_range

    def drawn(seed: int) -> torch.Tensor:
        torch.manual_seed(seed)
        return DualEncoder(transformer, n_langs=n_langs).lang_embedding.weight.detach()

    weight = drawn(11)
    assert torch.equal(weight, drawn(11)) and not torch.equal(weight, drawn(12))  # from the seeded generator
    assert (weight != 0).all()
    assert 0.7 * std < float(weight.std()) < 1.3 * std  # 192 draws
    assert torch.cdist(weight, weight)[~torch.eye(n_langs, dtype=torch.bool)].min() > 0  # every language its own vector


def test_the_language_embedding_changes_the_vectors_from_step_zero(tiny_model_dir):
    torch.manual_seed(12)
    encoder = DualEncoder(load_transformer(tiny_model_dir, dropout=0.0), n_langs=3).eval()
    ids = torch.tensor([[2, 7, 8, 9, 3]])
    att = torch.ones_like(ids)
    with torch.no_grad():
        base, _ = encoder(ids, att)
        lang0, _ = encoder(ids, att, torch.tensor([0]))
        lang1, _ = encoder(ids, att, torch.tensor([1]))
    assert not torch.allclose(base, lang0) and not torch.allclose(lang0, lang1)


def test_the_old_pooling_name_is_refused_naming_the_field_and_its_new_name():
    from pydantic import ValidationError

    from tasks.train.config import TrainConfig

    with pytest.raises(
        ValidationError, match="pooling\n.*'cls_before_pooler' was renamed: write pooling = 'cls' \\(the first token"
    ):
        TrainConfig.model_validate({"pooling": "cls_before_pooler"})
    # the pooler output cannot be saved as the sentence-transformers folder the train artifact is: refused before training
    with pytest.raises(ValidationError, match="pooling\n.*'pooler'.*cannot be trained.*sentence-transformers"):
        TrainConfig.model_validate({"pooling": "pooler"})


def test_cls_keeps_the_key_cls_before_pooler_had_and_mean_its_own():
    """ "cls" computes what "cls_before_pooler" did (the first token): same cache key, so WACSE/DAP
    artifacts stay valid; an artifact of the old "cls" (the pooler output) is never reused for it."""
    from tasks.stage_config import keyed_config
    from tasks.train.config import TrainConfig

    assert keyed_config(TrainConfig(pooling="cls"))["pooling"] == "cls_before_pooler"
    assert keyed_config(TrainConfig(pooling="mean"))["pooling"] == "mean"
    assert TrainConfig.model_validate(TrainConfig(pooling="cls").model_dump(mode="json")).pooling == "cls"  # dumps its real name


def test_the_dual_encoder_refuses_pooler_without_trained_pooler_weights(tiny_model_dir, tmp_path):
    import shutil

    from safetensors.torch import load_file, save_file

    from tasks.encoders.pooling import PoolingError

    source = shutil.copytree(tiny_model_dir, tmp_path / "no-pooler")
    weights = {k: v for k, v in load_file(str(source / "model.safetensors")).items() if not k.startswith("pooler.")}
    save_file(weights, str(source / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(PoolingError, match="no trained pooler weights"):
        DualEncoder(load_transformer(source), pooling="pooler")
    with pytest.raises(PoolingError, match="was renamed"):
        DualEncoder(load_transformer(source), pooling="cls_before_pooler")
