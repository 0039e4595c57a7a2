"""The dual encoder's own parameters on the tiny BERT."""

from __future__ import annotations

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
