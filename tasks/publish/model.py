"""Publishing a trained model: a sentence-transformers folder with a model card, out of the store,
and optionally onto the model hub. `xlembed export` (flows/cli/export.py) calls these.

    export = export_trained_model(store, train_key, Path("my-model"))
    url = push_to_hub(export.folder, "me/my-model")

The folder is written by sentence-transformers' own saving (tasks/train/model_folder.py), from the
train artifact's `model/` (read through the store, so a local and an s3:// root behave the same).

The card: the evaluate stage stores, for the trained model it scored, a card with its results
(`model-card.md` in the evaluate artifact: a new artifact per evaluation, never an edit of the
train artifact). Export uses the card of the NEWEST evaluation of the model (the evaluate
artifact whose recorded `train` input is this key), or of the evaluation named; an evaluation
that stored no card (made by older code) has its card rendered from its metrics table; with no
evaluation the card says so. The folder truncates inputs at the evaluation's max length (what
the card's numbers were measured with), else at the training max length.

A model trained with `language_embedding = true` is refused: transformers and
sentence-transformers cannot add the language-ID vector without custom code, so the published
model would compute other vectors than the one trained and evaluated. The refusal measures how
much (vectors and dev retrieval with and without the language vector, on the corpus's dev
rows); `drop_language_embedding=True` exports without it and writes the measurement into the card.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.compute as pc

from storage import ArtifactStore
from tasks.encoders.language_vectors import has_language_vectors, read_language_vectors
from tasks.encoders.loading import quiet_transformers
from tasks.encoders.neighbours import bitext_accuracy
from tasks.encoders.pooling import recorded_pooling
from tasks.evaluate.benchmarks.registry import hub_task_type, main_metric
from tasks.evaluate.groups import group_languages
from tasks.evaluate.paired import paired_delta_intervals
from tasks.publish import ExportError
from tasks.publish.permissions import readable_by_all
from tasks.reporting.card_facts import CARD_FILE, card_facts
from tasks.reporting.card_results import EvaluationResults
from tasks.reporting.model_card import render_model_card
from tasks.train.card import TRAIN_CARD
from tasks.train.model import DualEncoder, load_transformer
from tasks.train.model_folder import save_sentence_transformer

log = logging.getLogger(__name__)

PLACEHOLDER_NAME = "path/to/exported-model"  # the model name in a card's usage snippet before it has a repo id
# The evaluate artifact's per-query items (tasks/evaluate/stage.py ITEMS_FILE, BASE_ITEMS_FILE; that
# module imports this one, so the paths are spelled here; tests/tasks/train/test_export.py checks them)
EVALUATE_ITEMS, EVALUATE_BASE_ITEMS = "items.parquet", "items/base_items.parquet"
MEASURE_GROUPS = 200  # dev rows per language the language-embedding measurement encodes


class LanguageEmbeddingRefused(ExportError):
    """The model adds a language-ID vector that a published model would silently lose."""


class PushError(RuntimeError):
    """The upload to the model hub failed; the message names the repo, never the token."""


@dataclass
class LanguageEmbeddingEffect:
    """What dropping the language-ID vector changes, measured on the corpus's dev rows."""

    pivot: str
    groups: int  # dev rows per language encoded (at most MEASURE_GROUPS)
    per_language: dict[str, dict[str, float]] = field(default_factory=dict)  # lang -> cosine, accuracy_with, accuracy_without
    problem: str | None = None  # why it could not be measured

    def summary(self) -> str:
        if self.problem:
            return f"the effect could not be measured: {self.problem}"
        parts = [
            f"{lang}: cosine(with, without) {v['cosine']:.3f}, dev retrieval vs {self.pivot} {v['accuracy_with']:.3f} -> {v['accuracy_without']:.3f}"
            for lang, v in self.per_language.items()
        ]
        return f"measured on {self.groups} dev rows per language: " + "; ".join(parts)


@dataclass
class ModelExport:
    folder: Path
    train_key: str
    evaluation_key: str | None
    card_source: str  # where the card came from, in words
    max_seq_length: int
    language_embedding: LanguageEmbeddingEffect | None = None


def newest_evaluation(store: ArtifactStore, train_key: str) -> str | None:
    """The key of the newest evaluate artifact that scored the train artifact `train_key`, or None."""
    evaluations = [m for m in store.list_manifests("evaluate") if m.input_keys.get("train") == train_key]
    return max(evaluations, key=lambda m: m.created_at).key if evaluations else None


def evaluation_results(store: ArtifactStore, evaluate_key: str) -> EvaluationResults:
    """An evaluate artifact's metrics (and the untrained base's, when it scored it too) for a card."""
    import pyarrow.parquet as pq

    manifest = store.manifest("evaluate", evaluate_key)
    attached = {f.path.removeprefix("files/") for f in manifest.attached_files}
    folder = store.attached_dir("evaluate", evaluate_key) if attached else None

    def table(path: str) -> Any:
        return pq.read_table(folder / path) if path in attached else None

    encoder = dict(manifest.config.get("encoder", {}))
    encoder.setdefault("max_length", 128)
    return EvaluationResults.from_tables(
        evaluate_key, store.read_table("evaluate", evaluate_key), encoder, table("report/base_metrics.parquet"), main_metric=main_metric,
        hub_task_type=hub_task_type,
        items=table(EVALUATE_ITEMS), base_items=table(EVALUATE_BASE_ITEMS), seed=int(manifest.config.get("seed", 0)),
        paired_intervals=paired_delta_intervals, group_members=group_languages,
    )  # fmt: skip


def _empty_target(out_dir: Path) -> None:
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise ExportError(f"{out_dir} exists and is not an empty folder: give a new folder to export into")


def export_trained_model(
    store: ArtifactStore,
    train_key: str,
    out_dir: Path,
    *,
    evaluation_key: str | None = None,
    drop_language_embedding: bool = False,
    repo_id: str | None = None,
) -> ModelExport:
    """Write the train artifact `train_key` into `out_dir` (new or empty) as a sentence-transformers
    folder with a README.md model card; see the module docstring for the card and the refusal."""

    _empty_target(out_dir)
    manifest = store.manifest("train", train_key)
    model_dir = store.attached_dir("train", train_key) / "model"
    if not (model_dir / "config.json").is_file():
        raise ExportError(f"train artifact {train_key[:12]} holds no model/config.json: nothing to export")
    facts = card_facts(store, train_key, TRAIN_CARD)
    config = facts.config

    effect = None
    if has_language_vectors(model_dir):
        effect = measure_language_embedding(store, manifest, model_dir, config)
        if not drop_language_embedding:
            raise LanguageEmbeddingRefused(
                f"train artifact {train_key[:12]} was trained with language_embedding = true: it adds a learned vector per "
                "language to every token, which transformers and sentence-transformers cannot apply without custom code, so "
                f"the exported model would encode differently from the one trained and evaluated ({effect.summary()}). "
                "Retrain with language_embedding = false to publish, or pass --drop-language-embedding to export without it "
                "(the card states the difference)."
            )
        facts.notes.append(
            "Trained with a language-ID embedding, which this export DROPS (transformers and sentence-transformers cannot "
            f"apply it); its vectors differ from the trained model's: {effect.summary()}. The evaluation results above were "
            "measured WITH the language embedding."
        )

    if evaluation_key is None:
        evaluation_key = newest_evaluation(store, train_key)
    elif store.manifest("evaluate", evaluation_key).input_keys.get("train") != train_key:
        raise ExportError(f"evaluate artifact {evaluation_key[:12]} did not score train artifact {train_key[:12]}")
    max_seq_length = int(config.get("max_length", 32))
    card = None
    if evaluation_key is not None:
        evaluation = store.manifest("evaluate", evaluation_key)
        max_seq_length = int(evaluation.config.get("encoder", {}).get("max_length", 128))
        stored = [f for f in evaluation.attached_files if f.path == f"files/{CARD_FILE}"]
        if stored and not facts.notes:
            card = (store.attached_dir("evaluate", evaluation_key) / CARD_FILE).read_text(encoding="utf-8")
            source = f"the card stored by evaluate artifact {evaluation_key[:12]}"
        else:
            card = render_model_card(facts, evaluation_results(store, evaluation_key))
            source = f"rendered from evaluate artifact {evaluation_key[:12]}'s results"
    if card is None:
        card = render_model_card(facts)
        source = "rendered without results: no evaluation of this model in the store"
    if repo_id:
        card = card.replace(PLACEHOLDER_NAME, repo_id)

    staging = out_dir.with_name(f".{out_dir.name}.partial")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        pooling = recorded_pooling(str(config.get("pooling", "mean")))  # the manifest spells "cls" as "cls_before_pooler"
        save_sentence_transformer(model_dir, staging, pooling=pooling, max_seq_length=max_seq_length,
                                  prefix=str(config.get("prefix", "")))  # fmt: skip
        (staging / "README.md").write_text(card, encoding="utf-8")
        readable_by_all(staging)
        if out_dir.exists():
            out_dir.rmdir()  # empty (checked above)
        os.replace(staging, out_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return ModelExport(out_dir, train_key, evaluation_key, source, max_seq_length, effect)


# ------------------------------------------------------------------ language-ID embedding


def _dev_pairs(store: ArtifactStore, manifest: Any, pivot: str, langs: list[str]) -> dict[str, tuple[list[str], list[str]]]:
    """Per non-pivot language: (its dev texts, their pivot translations), at most MEASURE_GROUPS rows."""
    key = manifest.input_keys.get("corpus")
    if key is None or not store.is_committed("corpus", key):
        raise ExportError("the corpus artifact it was trained on is no longer in the store")
    table = store.read_table("corpus", key, ["group_id", "lang", "text", "split"])
    table = table.filter(pc.equal(table["split"], "dev"))
    by_lang: dict[str, dict[str, str]] = {}
    for row in table.select(["group_id", "lang", "text"]).to_pylist():
        by_lang.setdefault(row["lang"], {})[row["group_id"]] = row["text"]
    pivots = by_lang.get(pivot, {})
    pairs = {}
    for lang in langs:
        if lang == pivot:
            continue
        groups = sorted(g for g in by_lang.get(lang, {}) if g in pivots)[:MEASURE_GROUPS]
        if len(groups) >= 2:
            pairs[lang] = ([by_lang[lang][g] for g in groups], [pivots[g] for g in groups])
    if not pairs:
        raise ExportError("the corpus has no dev rows pairing a trained language with the pivot")
    return pairs


def measure_language_embedding(
    store: ArtifactStore, manifest: Any, model_dir: Path, config: Mapping[str, Any]
) -> LanguageEmbeddingEffect:
    """Encode the corpus's dev rows with and without the language vector (as trained: added to
    every token embedding) and compare: cosine of the two vectors, and retrieval accuracy
    against the pivot (mean of both directions, the train stage's dev metric)."""
    pivot = str(config.get("pivot", "eng_Latn"))
    vectors = read_language_vectors(model_dir)
    langs = list(vectors)
    effect = LanguageEmbeddingEffect(pivot=pivot, groups=0)
    try:
        pairs = _dev_pairs(store, manifest, pivot, langs)
    except ExportError as exc:
        effect.problem = str(exc)
        return effect
    import numpy as np

    encode = _language_encoder(model_dir, vectors, config)
    effect.groups = max(len(texts) for texts, _ in pairs.values())
    for lang, (texts, pivot_texts) in pairs.items():
        with_src, without_src = encode(texts, lang)
        with_tgt, without_tgt = encode(pivot_texts, pivot)
        cosine = float(np.mean(np.sum(with_src * without_src, axis=1)))
        acc_with = float(np.mean(bitext_accuracy(with_src, with_tgt)))
        acc_without = float(np.mean(bitext_accuracy(without_src, without_tgt)))
        effect.per_language[lang] = {"cosine": cosine, "accuracy_with": acc_with, "accuracy_without": acc_without}
    return effect


def _language_encoder(model_dir: Path, vectors: Mapping[str, Any], config: Mapping[str, Any]) -> Any:
    """A function (texts, lang) -> (vectors with the language vector, vectors without), float32 numpy."""
    import numpy as np
    import torch
    from transformers import AutoTokenizer

    with quiet_transformers():
        tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    langs = list(vectors)
    model = DualEncoder(
        load_transformer(model_dir), pooling=recorded_pooling(str(config.get("pooling", "mean"))), n_langs=len(langs)
    )
    model.lang_embedding.load_state_dict({"weight": torch.from_numpy(np.stack([vectors[lang] for lang in langs]))})
    model.eval()
    prefix, max_length = str(config.get("prefix", "")), int(config.get("max_length", 32))

    def encode(texts: list[str], lang: str) -> tuple[Any, Any]:
        batch = tokenizer([prefix + t for t in texts], padding=True, truncation=True, max_length=max_length, return_tensors="pt")
        ids = torch.full((len(texts),), langs.index(lang), dtype=torch.long)
        with torch.inference_mode():
            with_lang, _ = model(batch["input_ids"], batch["attention_mask"], ids)
            without, _ = model(batch["input_ids"], batch["attention_mask"], None)
        return with_lang.numpy(), without.numpy()

    return encode


# ------------------------------------------------------------------------------ the hub


def push_to_hub(
    folder: Path, repo_id: str, *, repo_type: str = "model", private: bool = False, commit_message: str | None = None
) -> str:
    """Create `repo_id` (if needed) and upload `folder` into it; return the commit URL.

    The token is huggingface_hub's own: HF_TOKEN or a `hf auth login`; HF_ENDPOINT (read now, not
    at import) names another hub. The token is never printed: an error message that contains it
    has it replaced."""
    from huggingface_hub import HfApi, get_token

    api = HfApi(endpoint=os.environ.get("HF_ENDPOINT") or None)
    token = get_token()
    try:
        api.create_repo(repo_id, repo_type=repo_type, private=private, exist_ok=True)
        info = api.upload_folder(folder_path=str(folder), repo_id=repo_id, repo_type=repo_type,
                                 commit_message=commit_message or f"Upload {folder.name} with xlembed export")  # fmt: skip
    except Exception as exc:  # noqa: BLE001 - any hub or network failure: one line naming the repo
        message = f"{type(exc).__name__}: {exc}"
        if token:
            message = message.replace(token, "***")
        raise PushError(f"pushing {folder} to the hub repo {repo_id} ({api.endpoint}) failed: {message}") from None
    return str(info.commit_url)
