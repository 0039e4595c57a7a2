"""Gold word alignments (Pharaoh format) and alignment error rate.

A gold file has one line per sentence pair: links separated by spaces, `i-j` for a sure
link and `i?j` or `ipj` for a possible one (`i` indexes the source sentence's
whitespace-separated tokens, `j` the target's; 1-based by default, as in the Och & Ney /
WPT gold sets; `zero_based=True` for 0-based files). An empty line is a pair with no links.

    AER = 1 - (|A∩S| + |A∩P|) / (|A| + |S|)      with S ⊆ P (sure links are also possible)
    precision = |A∩P| / |A|,  recall = |A∩S| / |S|,  F1 = 2PR / (P + R)

counted over the whole set (Och & Ney 2003).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import regex

_LINK = regex.compile(r"^(\d+)([-?p])(\d+)$")


class GoldFormatError(ValueError):
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

    def as_dict(self) -> dict[str, float | int]:
        return {k: getattr(self, k) for k in ("aer", "precision", "recall", "f1", "pairs", "predicted", "sure", "possible")}


def parse_gold_line(line: str, *, zero_based: bool = False, where: str = "") -> GoldPair:
    sure, possible = set(), set()
    for field_no, field in enumerate(line.split(), start=1):
        match = _LINK.match(field)
        if not match:
            raise GoldFormatError(f"{where}: field {field_no} {field!r} is not a link like '3-4' (sure) or '3?4' / '3p4' (possible)")
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
    aligner: Any,
    src: Sequence[list[str]],
    tgt: Sequence[list[str]],
    src_lang: str,
    tgt_lang: str,
    extra: Sequence[tuple[list[str], list[str]]] = (),
) -> list[set[tuple[int, int]]]:
    """Links predicted for each (src, tgt) sentence pair; a pair the backend drops predicts none.

    `extra` pairs (unlabelled parallel text) only add training statistics, for eflomal."""
    import numpy as np

    n = len(src)
    sentences, langs = [*src, *tgt], [src_lang] * n + [tgt_lang] * n
    pairs = np.stack([np.arange(n), n + np.arange(n)], axis=1)
    links = aligner.align(sentences, langs, pairs, extra=extra) if extra else aligner.align(sentences, langs, pairs)
    return [set() if l is None else set(zip(l[0].tolist(), l[1].tolist())) for l in links]
