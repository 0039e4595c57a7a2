"""Gold word alignments (Pharaoh format) and alignment error rate.

A gold file has one line per sentence pair: links separated by spaces, `i-j` for a sure
link and `i?j` or `ipj` for a possible one (`i` indexes the source sentence's
whitespace-separated tokens, `j` the target's; 1-based by default, as in the Och & Ney /
WPT gold sets; `zero_based=True` for 0-based files). An empty line is a pair with no links.

    AER = 1 - (|A∩S| + |A∩P|) / (|A| + |S|)      with S ⊆ P (sure links are also possible)
    precision = |A∩P| / |A|,  recall = |A∩S| / |S|,  F1 = 2PR / (P + R)

counted over the whole set (Och & Ney 2003). `score_gold_set` does it all for an `[align]`
config: read and check the files, load the backend, align, score (`xlembed align`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import regex

from tasks.align.backends import WordAligner
from tasks.align.config import AlignConfig
from tasks.align.stage import load_aligner
from tasks.languages import to_flores

_LINK = regex.compile(r"^(\d+)([-?p])(\d+)$")


class GoldInputError(ValueError):
    """The files or options of a gold-set scoring cannot be used; the message names which."""


class GoldFormatError(GoldInputError):
    """A gold or sentence file that cannot be used; the message names file, line and field."""


@dataclass(frozen=True)
class GoldPair:
    sure: frozenset[tuple[int, int]]
    possible: frozenset[tuple[int, int]]  # includes the sure links


@dataclass(frozen=True)
class AlignmentScores:
    aer: float
    precision: float
    recall: float
    f1: float
    pairs: int
    predicted: int
    sure: int
    possible: int


def parse_gold_line(line: str, *, zero_based: bool = False, where: str = "") -> GoldPair:
    sure, possible = set(), set()
    for field_no, field in enumerate(line.split(), start=1):
        match = _LINK.match(field)
        if not match:
            raise GoldFormatError(
                f"{where}: field {field_no} {field!r} is not a link like '3-4' (sure) or '3?4' / '3p4' (possible)"
            )
        i, j = int(match.group(1)), int(match.group(3))
        if not zero_based:
            if i == 0 or j == 0:
                raise GoldFormatError(f"{where}: field {field_no} {field!r} has index 0 in a 1-based gold file (pass zero_based)")
            i, j = i - 1, j - 1
        possible.add((i, j))
        if match.group(2) == "-":
            sure.add((i, j))
    return GoldPair(frozenset(sure), frozenset(possible))


def read_gold(path: str | Path, *, zero_based: bool = False) -> list[GoldPair]:
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise GoldFormatError(f"{path}: no such gold file") from None
    except UnicodeDecodeError as exc:
        raise GoldFormatError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    return [parse_gold_line(line, zero_based=zero_based, where=f"{path}:{n}") for n, line in enumerate(lines, start=1)]


def read_tokenized(path: str | Path) -> list[list[str]]:
    """One sentence per line, tokens separated by whitespace (the tokens gold indices refer to)."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise GoldFormatError(f"{path}: no such sentence file") from None
    except UnicodeDecodeError as exc:
        raise GoldFormatError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    out = []
    for n, line in enumerate(lines, start=1):
        words = line.split()
        if not words:
            raise GoldFormatError(f"{path}:{n}: empty sentence")
        out.append(words)
    return out


def check_gold(gold: Sequence[GoldPair], src: Sequence[list[str]], tgt: Sequence[list[str]], gold_path: str | Path) -> None:
    """Same number of lines everywhere, and every gold index inside its sentence."""
    if not (len(gold) == len(src) == len(tgt)):
        raise GoldFormatError(f"{gold_path}: {len(gold)} gold lines, but {len(src)} source and {len(tgt)} target sentences")
    for n, (pair, s, t) in enumerate(zip(gold, src, tgt), start=1):
        bad = sorted((i, j) for i, j in pair.possible if i >= len(s) or j >= len(t))
        if bad:
            i, j = bad[0]
            raise GoldFormatError(
                f"{gold_path}:{n}: link ({i}, {j}) (0-based) is outside the sentences ({len(s)} source, {len(t)} target tokens)"
            )


def score_alignments(predicted: Iterable[Iterable[tuple[int, int]]], gold: Sequence[GoldPair]) -> AlignmentScores:
    """Corpus-level AER, precision, recall and F1 of predicted links against gold pairs."""
    a_total = s_total = p_total = a_s = a_p = pairs = 0
    for links, pair in zip(predicted, gold, strict=True):
        links = set(links)
        pairs += 1
        a_total += len(links)
        s_total += len(pair.sure)
        p_total += len(pair.possible)
        a_s += len(links & pair.sure)
        a_p += len(links & pair.possible)
    precision = a_p / a_total if a_total else 0.0
    recall = a_s / s_total if s_total else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    aer = 1.0 - (a_s + a_p) / (a_total + s_total) if a_total + s_total else 0.0
    return AlignmentScores(aer, precision, recall, f1, pairs, a_total, s_total, p_total)


def align_gold_set(
    aligner: WordAligner, src: Sequence[list[str]], tgt: Sequence[list[str]], src_lang: str, tgt_lang: str
) -> list[set[tuple[int, int]]]:
    """Links predicted for each (src, tgt) sentence pair; a pair the backend drops predicts none."""
    import numpy as np

    n = len(src)
    sentences, langs = [*src, *tgt], [src_lang] * n + [tgt_lang] * n
    pairs = np.stack([np.arange(n), n + np.arange(n)], axis=1)
    links = aligner.align(sentences, langs, pairs)
    return [set() if link is None else set(zip(link[0].tolist(), link[1].tolist())) for link in links]


@dataclass(frozen=True)
class GoldSetResult:
    """What `score_gold_set` found: the scores, and per pair the sentences and predicted links."""

    label: str  # the aligner's label, e.g. "simalign:itermax"
    scores: AlignmentScores
    src: list[list[str]]
    tgt: list[list[str]]
    predicted: list[set[tuple[int, int]]]


def score_gold_set(
    config: AlignConfig,
    gold: str | Path,
    src: str | Path,
    tgt: str | Path,
    langs: tuple[str, str] = ("eng_Latn", "fra_Latn"),
    *,
    zero_based: bool = False,
    train: tuple[str | Path | None, str | Path | None] = (None, None),
    base_model: Callable[[], Path] | None = None,
) -> GoldSetResult:
    """Align a gold set's sentence pairs with the backend of an `[align]` config and score them.

    `train`: extra parallel text (source file, target file, tokenised like `src`/`tgt`) given
    to the aligner's `fit` first, for a backend that learns from it (eflomal).
    `base_model`: returns the pipeline's base_model artifact folder (building it if needed),
    called only when the backend reads it. Unusable files or options raise GoldInputError
    naming them; the gold files are read and checked before any model is loaded."""

    gold_pairs = read_gold(gold, zero_based=zero_based)
    src_words, tgt_words = read_tokenized(src), read_tokenized(tgt)
    check_gold(gold_pairs, src_words, tgt_words, gold)
    extra = read_parallel(*train)
    try:
        src_lang, tgt_lang = (to_flores(code) for code in langs)
    except ValueError as exc:
        raise GoldInputError(str(exc)) from None
    folder = None
    if config.settings.uses_base_model():
        if base_model is None:
            raise GoldInputError(
                f"align backend {config.backend!r} reads the pipeline's base model: add a [base_model] section, or name a model in [align.{config.backend}]"
            )
        folder = base_model()
    aligner = load_aligner(config, folder)
    if extra:
        try:
            aligner.fit(extra)
        except ValueError as exc:
            raise GoldInputError(f"{exc}: leave out the extra training text ({train[0]}, {train[1]})") from None
    predicted = align_gold_set(aligner, src_words, tgt_words, src_lang, tgt_lang)
    return GoldSetResult(aligner.label, score_alignments(predicted, gold_pairs), src_words, tgt_words, predicted)


def read_parallel(src: str | Path | None, tgt: str | Path | None) -> list[tuple[list[str], list[str]]]:
    """Line-aligned tokenised files as sentence pairs; none when both are None."""
    if (src is None) != (tgt is None):
        raise GoldInputError("extra training text: give both a source and a target file, or neither")
    if src is None or tgt is None:
        return []
    src_words, tgt_words = read_tokenized(src), read_tokenized(tgt)
    if len(src_words) != len(tgt_words):
        raise GoldInputError(f"{src} has {len(src_words)} lines, {tgt} has {len(tgt_words)}")
    return list(zip(src_words, tgt_words))
