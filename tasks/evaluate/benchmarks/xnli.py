"""XNLI cross-lingual transfer: fine-tune on English NLI pairs, test on the XNLI languages.

The setting of WACSE (Table 7) and DAP (Table 4, appendix C), following Chi et al. (2021):
the encoder and a linear head are fine-tuned on English training pairs (MultiNLI), each
learning rate of a small grid is tried, the one with the best dev accuracy is kept, and
test accuracy is reported for each of the 15 XNLI languages. Paper settings are the
defaults of `XnliBenchmark` (below): batch 256, max length 128, 2 epochs, no weight decay,
learning rates {1e-5, 3e-5, 5e-5, 7e-5}; AdamW with transformers' linear decay (no warmup unless
`warmup_ratio` is set), dropout 0.1 before the head. The papers do not say on which dev set
the rate is picked: `select_on = "all_dev"` (default) takes the mean over the evaluated
languages, `"english_dev"` English only (strict zero-shot).

Two classifiers (`mode`):
  cross_encoder  premise and hypothesis concatenated as one input ([CLS] p [SEP] h [SEP]),
                 pooled as the evaluate stage pools (tasks/encoders/pooling.py: mean, cls =
                 the first token, pooler = the pooler output): what the papers do.
  bi_encoder     each sentence pooled alone, the head on [u, v, |u - v|, u * v]
                 (InferSent / Sentence-BERT), the encoder fine-tuned too.
Only the transformer is fine-tuned: sentence-transformers Dense/Normalize modules are not used.

Data (local files, XNLI layout): `xnli.dev.tsv` and `xnli.test.tsv` (or `.jsonl`) in one
folder, with columns language, gold_label, sentence1, sentence2 (others ignored); training
pairs from MultiNLI (`multinli_1.0_train.jsonl` or `.txt`: gold_label, sentence1, sentence2)
or XNLI-MT (`multinli.train.en.tsv`: premise, hypo, label; "contradictory" = contradiction).
Labels: entailment = 0, neutral = 1, contradiction = 2 (as the `datasets` XNLI). A gold
label "-" (no annotator consensus, MultiNLI) drops the pair and is counted; anything else
malformed is a BenchmarkDataError naming file, line and field. Without files, the `datasets`
library's "facebook/xnli" is used (its English train split is MultiNLI), when installed and
its data cached or reachable.

Metric rows (benchmark "xnli"): dataset "xnli-test" and "xnli-dev", per language,
`accuracy` at the selected learning rate and `accuracy@lr=<rate>` for every rate tried,
plus the unweighted mean over the evaluated languages as src_lang "group:xnli" (the papers'
Avg column when all 15 languages are evaluated).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import numpy as np
from pydantic import Field

from tasks.encoders import Encoder, EncoderSpec, pooling
from tasks.encoders.precision import compute_precision
from tasks.evaluate.benchmarks.registry import Benchmark, Evaluation, register_benchmark
from tasks.evaluate.datasets import BenchmarkDataError, read_lines
from tasks.evaluate.groups import metric_row
from tasks.languages import group_code
from tasks.stage import file_fingerprint
from tasks.stage_config import CONTENT_KEYED, NOT_KEYED, ConfigPath

if TYPE_CHECKING:
    import torch

    from tasks.evaluate.config import EncoderSettings

__all__ = [
    "LABELS",
    "XNLI_LANGUAGES",
    "NliPairs",
    "XnliBenchmark",
    "load_xnli_data",
    "read_nli_file",
    "read_xnli_split",
    "xnli_rows",
]

LABELS = ("entailment", "neutral", "contradiction")
_LABEL_IDS = {"entailment": 0, "neutral": 1, "contradiction": 2, "contradictory": 2, "0": 0, "1": 1, "2": 2}
_NO_GOLD = "-"
# column name -> the names it has in MultiNLI, XNLI and XNLI-MT files
_FIELDS = {
    "premise": ("sentence1", "premise"),
    "hypothesis": ("sentence2", "hypothesis", "hypo"),
    "label": ("gold_label", "label"),
    "language": ("language", "lang"),
}
GROUP = group_code("xnli")
DATASETS_NAME = "facebook/xnli"


@dataclass(frozen=True)
class NliPairs:
    premises: tuple[str, ...]
    hypotheses: tuple[str, ...]
    labels: np.ndarray  # int64: 0 entailment, 1 neutral, 2 contradiction
    source: str
    no_gold: int = 0  # pairs without a gold label ("-"), left out

    def __len__(self) -> int:
        return len(self.premises)

    def take(self, index: Sequence[int] | np.ndarray) -> NliPairs:
        index = np.asarray(index, dtype=np.int64)
        return NliPairs(
            tuple(self.premises[i] for i in index),
            tuple(self.hypotheses[i] for i in index),
            self.labels[index],
            self.source,
            self.no_gold,
        )


# ---------------------------------------------------------------------------- files


def _records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, record) of a .jsonl file, or of a TSV file with a header line."""
    lines = read_lines(path)
    if path.suffix == ".jsonl":
        for number, line in enumerate(lines, 1):
            if not line.strip():
                raise BenchmarkDataError(path, number, "empty line")
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise BenchmarkDataError(path, number, f"not JSON: {exc.msg}") from None
            if not isinstance(record, dict):
                raise BenchmarkDataError(path, number, f"expected a JSON object, got {type(record).__name__}")
            yield number, record
        return
    if not lines:
        raise BenchmarkDataError(path, None, "empty file (a header line is expected)")
    header = lines[0].split("\t")
    for number, line in enumerate(lines[1:], 2):
        fields = line.split("\t")  # no quoting: XNLI/MultiNLI text contains bare quotes
        if len(fields) != len(header):
            raise BenchmarkDataError(
                path, number, f"expected {len(header)} tab-separated fields as in the header, got {len(fields)}"
            )
        yield number, dict(zip(header, fields))


def _column(path: Path, names: Sequence[str], wanted: str, record: dict[str, Any], number: int) -> str | None:
    for name in _FIELDS[wanted]:
        if name in record:
            return name
    if wanted == "language":
        return None
    raise BenchmarkDataError(path, number, f"no {wanted} column: expected one of {list(_FIELDS[wanted])}, found {list(names)}")


def read_nli_file(path: str | Path, langs: Sequence[str] | None = None) -> dict[str | None, NliPairs]:
    """Pairs of an NLI file by language (None when the file has no language column).

    With `langs`, rows of other languages are skipped and each of `langs` must be present.
    """
    path = Path(path)
    columns: dict[str, str | None] | None = None
    grouped: dict[str | None, tuple[list[str], list[str], list[int], list[int]]] = {}
    wanted = set(langs) if langs is not None else None
    for number, record in _records(path):
        if columns is None:
            columns = {name: _column(path, list(record), name, record, number) for name in _FIELDS}
        lang = None
        if columns["language"] is not None:
            lang = str(record.get(columns["language"], "")).strip()
            if not lang:
                raise BenchmarkDataError(path, number, "empty language", columns["language"])
        if wanted is not None and lang is not None and lang not in wanted:
            continue
        premises, hypotheses, labels, no_gold = grouped.setdefault(lang, ([], [], [], [0]))
        texts = []
        for name in ("premise", "hypothesis"):
            column = columns[name]
            value = record.get(column)
            if not isinstance(value, str) or not value.strip():
                raise BenchmarkDataError(
                    path, number, f"missing or empty {name}" + (f" (got {value!r})" if not isinstance(value, str) else ""), column
                )
            texts.append(value.strip())
        raw_label = record.get(columns["label"])
        label = str(raw_label).strip().lower() if raw_label is not None else ""
        if label == _NO_GOLD:
            no_gold[0] += 1
            continue
        if label not in _LABEL_IDS:
            raise BenchmarkDataError(
                path,
                number,
                f"unknown label {raw_label!r}; expected one of {list(LABELS)} (or 0/1/2, or '-' for no gold label)",
                columns["label"],
            )
        premises.append(texts[0])
        hypotheses.append(texts[1])
        labels.append(_LABEL_IDS[label])
    if columns is None:
        raise BenchmarkDataError(path, None, "no pairs")
    if wanted is not None and columns["language"] is not None:
        missing = sorted(wanted - set(grouped))
        if missing:
            raise BenchmarkDataError(path, None, f"no rows for language(s) {missing}", columns["language"])
    return {
        lang: NliPairs(tuple(p), tuple(h), np.asarray(y, dtype=np.int64), str(path), n[0])
        for lang, (p, h, y, n) in grouped.items()
    }


def read_xnli_split(folder: str | Path, split: str, langs: Sequence[str]) -> dict[str, NliPairs]:
    """`xnli.{split}.tsv` (or .jsonl) of an XNLI folder, per language of `langs`."""
    folder = Path(folder)
    for suffix in (".tsv", ".jsonl"):
        path = folder / f"xnli.{split}{suffix}"
        if path.is_file():
            break
    else:
        raise BenchmarkDataError(folder / f"xnli.{split}.tsv", None, f"file not found (nor xnli.{split}.jsonl) in {folder}")
    pairs = read_nli_file(path, langs)
    if None in pairs:
        raise BenchmarkDataError(path, None, "no language column: an XNLI file needs one", "language")
    return {lang: pairs[lang] for lang in langs}


def read_nli_train(path: str | Path) -> NliPairs:
    """English training pairs: every row of the file (rows in a language other than en are skipped)."""
    pairs = read_nli_file(path)
    if None in pairs:
        return pairs[None]
    if "en" not in pairs:
        raise BenchmarkDataError(
            path, None, f"no English (en) rows to train on; languages: {sorted(k for k in pairs if k)}", "language"
        )
    return pairs["en"]


def _from_datasets(lang: str, split: str) -> NliPairs:
    try:
        import datasets
    except ImportError:
        raise BenchmarkDataError(
            DATASETS_NAME, None, "the datasets library is not installed: set path (and train_file) to local XNLI files instead"
        ) from None
    data = datasets.load_dataset(DATASETS_NAME, lang, split=split)
    labels = np.asarray(data["label"], dtype=np.int64)
    keep = labels >= 0
    return NliPairs(
        tuple(p for p, k in zip(data["premise"], keep) if k),
        tuple(h for h, k in zip(data["hypothesis"], keep) if k),
        labels[keep],
        f"{DATASETS_NAME}:{lang}:{split}",
        int((~keep).sum()),
    )


# ---------------------------------------------------------------------------- model


def _classifier(encoder: Any, mode: str, dropout: float) -> torch.nn.Module:
    import torch

    class NliClassifier(torch.nn.Module):
        """The encoder's transformer and a linear head over 3 labels."""

        def __init__(self) -> None:
            super().__init__()
            self.encoder = encoder.model
            self.dropout = torch.nn.Dropout(dropout)
            self.head = torch.nn.Linear(encoder.hidden_size * (4 if mode == "bi_encoder" else 1), len(LABELS))

        def pool(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
            output = self.encoder(**inputs)
            pooled = getattr(output, "pooler_output", None)
            return pooling.pool(encoder.pooling, output.last_hidden_state, inputs["attention_mask"], pooled)

        def forward(self, first: dict[str, torch.Tensor], second: dict[str, torch.Tensor] | None = None) -> torch.Tensor:
            if second is None:
                features = self.pool(first)
            else:
                u, v = self.pool(first), self.pool(second)
                features = torch.cat([u, v, (u - v).abs(), u * v], dim=-1)
            return self.head(self.dropout(features).float())

    return NliClassifier()


class _Batches:
    """Tokenised inputs of pairs, for one classifier mode."""

    def __init__(self, encoder: Any, bench: XnliBenchmark, prefix: str) -> None:
        self.tokenizer = encoder.tokenizer
        self.device = encoder.device
        self.precision = encoder.spec.precision
        self.mode = bench.mode
        self.max_length = bench.max_length
        self.prefix = prefix
        names = getattr(self.tokenizer, "model_input_names", ("input_ids", "attention_mask"))
        self.keep = {n for n in names if n in ("input_ids", "attention_mask", "token_type_ids")}

    def _tokens(self, *texts: list[str]) -> dict[str, torch.Tensor]:
        encoded = self.tokenizer(*texts, truncation=True, max_length=self.max_length, padding=True, return_tensors="pt")
        return {k: v.to(self.device) for k, v in encoded.items() if k in self.keep}

    def inputs(self, pairs: NliPairs, index: np.ndarray) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor] | None]:
        premises = [pairs.premises[i] for i in index]
        hypotheses = [pairs.hypotheses[i] for i in index]
        if self.mode == "cross_encoder":
            return self._tokens(premises, hypotheses), None
        return self._tokens([self.prefix + p for p in premises]), self._tokens([self.prefix + h for h in hypotheses])


def _autocast(device: Any, precision: str) -> Any:

    return compute_precision(device.type, precision)


def fine_tune(
    spec: Any, bench: XnliBenchmark, prefix: str, train: NliPairs, lr: float, progress: Callable[[int], None] | None = None
) -> tuple[Any, _Batches]:
    """A fresh copy of the encoder fine-tuned with a new head at learning rate `lr` (seeded)."""
    import torch
    from transformers import get_scheduler

    torch.manual_seed(bench.seed)
    encoder = Encoder.load(spec)
    model = _classifier(encoder, bench.mode, bench.dropout).to(encoder.device)
    batches = _Batches(encoder, bench, prefix)
    decay = [p for n, p in model.named_parameters() if not (n.endswith("bias") or "LayerNorm" in n or "layer_norm" in n)]
    no_decay = [p for n, p in model.named_parameters() if n.endswith("bias") or "LayerNorm" in n or "layer_norm" in n]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": bench.weight_decay}, {"params": no_decay, "weight_decay": 0.0}], lr=lr
    )
    steps_per_epoch = math.ceil(len(train) / bench.batch_size)
    total = steps_per_epoch * bench.epochs
    # transformers' linear schedule, as the train stage uses (warmup from 0, as HF's Trainer)
    scheduler = get_scheduler("linear", optimizer, num_warmup_steps=int(total * bench.warmup_ratio), num_training_steps=total)
    rng = np.random.default_rng(bench.seed)
    labels = torch.from_numpy(train.labels).to(encoder.device)
    micro = bench.micro_batch_size or bench.batch_size
    model.train()
    for _ in range(bench.epochs):
        order = rng.permutation(len(train))
        for start in range(0, len(order), bench.batch_size):
            batch = order[start : start + bench.batch_size]
            optimizer.zero_grad(set_to_none=True)
            for part_start in range(0, len(batch), micro):
                part = batch[part_start : part_start + micro]
                with _autocast(encoder.device, spec.precision):
                    logits = model(*batches.inputs(train, part))
                loss = torch.nn.functional.cross_entropy(
                    logits, labels[torch.from_numpy(part).to(encoder.device)], reduction="sum"
                ) / len(batch)
                loss.backward()
            optimizer.step()
            scheduler.step()
            if progress is not None:
                progress(len(batch))
    model.eval()
    return model, batches


def predict(model: Any, batches: _Batches, pairs: NliPairs, batch_size: int) -> np.ndarray:
    """Predicted label ids of `pairs`, in order."""
    import torch

    out = []
    with torch.inference_mode(), _autocast(batches.device, batches.precision):
        for start in range(0, len(pairs), batch_size):
            index = np.arange(start, min(start + batch_size, len(pairs)))
            out.append(model(*batches.inputs(pairs, index)).argmax(-1).cpu().numpy())
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


# ---------------------------------------------------------------------------- the benchmark


def _rate(lr: float) -> str:
    return f"{lr:g}"


def load_xnli_data(bench: XnliBenchmark) -> tuple[NliPairs, dict[str, NliPairs], dict[str, NliPairs]]:
    """(train, dev per language, test per language) after the configured sampling."""
    train = read_nli_train(bench.train_file) if bench.train_file else _from_datasets("en", "train")
    if bench.path:
        dev, test = read_xnli_split(bench.path, "dev", bench.langs), read_xnli_split(bench.path, "test", bench.langs)
    else:
        dev = {lang: _from_datasets(lang, "validation") for lang in bench.langs}
        test = {lang: _from_datasets(lang, "test") for lang in bench.langs}
    if len(train) == 0:
        raise BenchmarkDataError(train.source, None, "no training pairs with a gold label")
    if bench.max_train_pairs is not None and len(train) > bench.max_train_pairs:
        train = train.take(np.sort(np.random.default_rng(bench.seed).choice(len(train), bench.max_train_pairs, replace=False)))
    if bench.max_eval_pairs is not None:
        dev = {lang: p.take(np.arange(min(len(p), bench.max_eval_pairs))) for lang, p in dev.items()}
        test = {lang: p.take(np.arange(min(len(p), bench.max_eval_pairs))) for lang, p in test.items()}
    for split, data in (("dev", dev), ("test", test)):
        empty = [lang for lang, p in data.items() if len(p) == 0]
        if empty:
            raise BenchmarkDataError(next(iter(data.values())).source, None, f"no {split} pairs with a gold label for {empty}")
    return train, dev, test


def xnli_rows(
    model_dir: Path,
    bench: XnliBenchmark,
    encoder: EncoderSettings,
    *,
    progress: Callable[[int], None] | None = None,
    drop: Callable[[str, int], None] | None = None,
) -> list[dict]:
    """Fine-tune once per learning rate, keep the best on dev; metric rows (see the module docstring)."""

    if bench.select_on == "english_dev" and "en" not in bench.langs:
        raise ValueError("evaluate: xnli select_on = 'english_dev' needs 'en' among langs")
    train, dev, test = load_xnli_data(bench)
    if drop is not None:
        drop("xnli_no_gold_label", train.no_gold + sum(p.no_gold for p in (*dev.values(), *test.values())))
    spec = EncoderSpec(model=str(model_dir), pooling=encoder.pooling, max_length=bench.max_length, batch_size=bench.eval_batch_size, device=encoder.device,
                       precision=encoder.precision)  # fmt: skip
    accuracy: dict[float, dict[str, dict[str, float]]] = {}
    for lr in bench.learning_rates:
        model, batches = fine_tune(spec, bench, encoder.prefix, train, lr, progress)
        accuracy[lr] = {
            split: {
                lang: float(np.mean(predict(model, batches, pairs, bench.eval_batch_size) == pairs.labels))
                for lang, pairs in data.items()
            }
            for split, data in (("dev", dev), ("test", test))
        }
        del model, batches

    def selection_score(lr: float) -> float:
        scores = accuracy[lr]["dev"]
        return scores["en"] if bench.select_on == "english_dev" else math.fsum(scores.values()) / len(scores)

    best = max(bench.learning_rates, key=selection_score)  # the first of equals
    rows = []
    for split, data in (("dev", dev), ("test", test)):
        dataset = f"xnli-{split}"
        metrics = {"accuracy": best} | {f"accuracy@lr={_rate(lr)}": lr for lr in bench.learning_rates}
        for metric, lr in metrics.items():
            values = accuracy[lr][split]
            rows += [metric_row("xnli", dataset, lang, None, metric, values[lang], len(data[lang])) for lang in bench.langs]
            rows.append(metric_row("xnli", dataset, GROUP, None, metric, math.fsum(values.values()) / len(values), len(values)))
    return rows


# ------------------------------------------------------------------ the benchmark

XNLI_LANGUAGES = ("en", "fr", "es", "de", "el", "bg", "ru", "tr", "ar", "vi", "th", "zh", "hi", "sw", "ur")


@register_benchmark
class XnliBenchmark(Benchmark):
    """XNLI cross-lingual transfer (WACSE Table 7, DAP Table 4): fine-tune the encoder and a linear
    head on English NLI pairs, pick the learning rate on dev, report test accuracy per language.
    Defaults are the papers' settings; see the module docstring."""

    main_metric: ClassVar[str] = "accuracy"  # at the learning rate picked on dev (not the accuracy@lr=... rows)

    kind: Literal["xnli"]
    path: ConfigPath | None = Field(
        default=None,
        json_schema_extra=CONTENT_KEYED,
        description="folder with xnli.dev.tsv and xnli.test.tsv (or .jsonl); unset: the datasets library",
    )
    train_file: ConfigPath | None = Field(
        default=None,
        json_schema_extra=CONTENT_KEYED,
        description="English NLI training pairs: MultiNLI .jsonl/.txt or XNLI-MT .tsv; unset: XNLI's English train split (datasets)",
    )
    langs: list[str] = Field(
        default_factory=lambda: list(XNLI_LANGUAGES), min_length=1, description="XNLI language codes, as in the files"
    )
    mode: Literal["cross_encoder", "bi_encoder"] = Field(
        default="cross_encoder",
        description="cross_encoder: the pair concatenated, as the papers; bi_encoder: head on [u, v, |u-v|, u*v]",
    )
    learning_rates: list[float] = Field(default_factory=lambda: [1e-5, 3e-5, 5e-5, 7e-5], min_length=1)
    batch_size: int = Field(default=256, ge=1)
    max_length: int = Field(default=128, ge=8, le=8192)
    epochs: int = Field(default=2, ge=1)
    weight_decay: float = Field(default=0.0, ge=0.0)
    warmup_ratio: float = Field(default=0.0, ge=0.0, lt=1.0)
    dropout: float = Field(default=0.1, ge=0.0, lt=1.0)
    select_on: Literal["all_dev", "english_dev"] = Field(
        default="all_dev", description="dev accuracy that picks the learning rate: mean over langs, or English only"
    )
    max_train_pairs: int | None = Field(default=None, ge=1, description="a seeded sample of the training pairs (cpu-small runs)")
    max_eval_pairs: int | None = Field(default=None, ge=1, description="first N pairs per language of dev and of test")
    seed: int = 0
    micro_batch_size: int | None = Field(
        default=None, ge=1, json_schema_extra=NOT_KEYED, description="split each batch for memory (gradients accumulate)"
    )
    eval_batch_size: int = Field(default=256, ge=1, json_schema_extra=NOT_KEYED)

    def check_files(self) -> None:
        if self.path and self.train_file:  # without either, the data come from the datasets library
            load_xnli_data(self)

    def fingerprint(self) -> dict[str, Any]:
        prints = {}
        if self.train_file:  # the training pairs live outside `path`
            prints[":train_file"] = file_fingerprint(Path(self.train_file).expanduser())
        if self.warmup_ratio > 0:  # warmup now starts at 0 (transformers' schedule): results before differ
            prints[":schedule"] = "transformers-linear"
        return prints | super().fingerprint()

    def score(self, evaluation: Evaluation) -> None:
        context = evaluation.context
        evaluation.add_rows(
            xnli_rows(evaluation.model_dir, self, evaluation.config.encoder, progress=context.progress, drop=context.drop)
        )
