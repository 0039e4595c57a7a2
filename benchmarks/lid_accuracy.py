"""Accuracy of the `lid` filter's backends on FLORES-200 dev, as Markdown tables.

    python benchmarks/lid_accuracy.py [--flores ../shared/data/flores200-dev] [--backend cld2]
                                      [--model glotlid/model.bin] [--rows 997] [--rate 0.05]

1. Per language (all 204 FLORES-200 dev files, `--rows` lines each): can the backend identify
   it (a label that maps to the code), its recall (rows whose top label is the language),
   precision (rows predicted as the language that are in it, over the 204-language mix) and
   the share of clean rows the filter drops at its default settings (min_chars 20,
   min_confidence 0.5). Languages with a label but recall < 0.5 are listed: the backends
   treat them as not identifiable (`UNRELIABLE` in tasks/corpus/lid.py).
2. Off-target rows caught: for pairs of related languages, `--rate` of the line-aligned rows
   (seeded) are swapped between the two labels (a "kaz_Cyrl" row holding the Russian
   sentence, and the reverse), as an MT system or a mislabelled source would; the filter's
   drops are split into swapped rows caught and clean rows lost.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
FLORES = REPO.parent / "shared" / "data" / "flores200-dev"
PAIRS = [
    ("kaz_Cyrl", "rus_Cyrl"),
    ("mar_Deva", "hin_Deva"),
    ("jav_Latn", "ind_Latn"),
    ("tgl_Latn", "ceb_Latn"),
    ("swh_Latn", "nya_Latn"),
    ("zsm_Latn", "ind_Latn"),
    ("bos_Latn", "hrv_Latn"),
]


def load(flores: Path, rows: int) -> dict[str, list[str]]:
    files = sorted(flores.glob("*.dev"))
    if not files:
        raise SystemExit(f"no *.dev files in {flores}")
    return {path.stem: path.read_text(encoding="utf-8").splitlines()[:rows] for path in files}


def per_language(check, data: dict[str, list[str]]) -> tuple[str, list[str], float]:  # noqa: ANN001
    identifier = check.identifier
    label_to_lang = {label: lang for lang, labels in identifier.labels_by_lang.items() for label in labels}
    texts = [t for lines in data.values() for t in lines]
    gold = np.array([lang for lang, lines in data.items() for _ in lines])
    started = time.perf_counter()
    labels, _ = identifier.predict(texts)
    seconds = time.perf_counter() - started
    predicted = np.array([label_to_lang.get(label, "") for label in labels])
    reasons = check.reasons(texts, list(gold))
    # recall over every label the backend has (including those treated as unreliable)
    raw = {lang for label in identifier.raw_labels() if (lang := identifier.label_lang(label))}
    lines = ["| language | identifiable | recall | precision | clean rows dropped |", "| --- | --- | ---: | ---: | ---: |"]
    unreliable = []
    for lang in data:
        mine = gold == lang
        if not identifier.identifiable(lang):
            if lang in raw:
                unreliable.append(lang)
                recall = np.mean([identifier.label_lang(label) == lang for label in labels[mine]])
                lines.append(f"| {lang} | no (recall {recall:.2f} < 0.5) | | | 0% |")
            else:
                lines.append(f"| {lang} | no (no label) | | | 0% |")
            continue
        hit = predicted == lang
        recall = float(np.mean(hit[mine]))
        precision = float(np.sum(hit & mine) / max(np.sum(hit), 1))
        dropped = float(np.mean(reasons[mine] != 0))
        lines.append(f"| {lang} | yes | {recall:.3f} | {precision:.3f} | {dropped:.1%} |")
    return "\n".join(lines), unreliable, len(texts) / seconds


def off_target(check, data: dict[str, list[str]], rate: float, seed: int = 42) -> str:  # noqa: ANN001
    from tasks.corpus import lid

    rng = np.random.default_rng(seed)
    lines = [
        "| pair | rows | swapped | caught (mismatch / low confidence) | caught share | clean rows dropped | drop precision |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for a, b in PAIRS:
        if a not in data or b not in data:
            continue
        n = min(len(data[a]), len(data[b]))
        swap = np.zeros(n, dtype=bool)
        swap[rng.choice(n, size=max(1, int(round(rate * n))), replace=False)] = True
        texts, langs, swapped = [], [], []
        for lang, other in ((a, b), (b, a)):
            for i in range(n):
                texts.append(data[other][i] if swap[i] else data[lang][i])
                langs.append(lang)
                swapped.append(bool(swap[i]))
        reasons = check.reasons(texts, langs)
        swapped_arr = np.array(swapped)
        dropped = reasons != 0
        caught = int(np.sum(dropped & swapped_arr))
        mism = int(np.sum((reasons == lid.MISMATCH) & swapped_arr))
        low = int(np.sum((reasons == lid.LOW_CONFIDENCE) & swapped_arr))
        clean_lost = int(np.sum(dropped & ~swapped_arr))
        total_swapped = int(swapped_arr.sum())
        precision = caught / max(int(dropped.sum()), 1)
        note = "" if check.checks(a) and check.checks(b) else f" (not identifiable: {', '.join(x for x in (a, b) if not check.checks(x))})"
        lines.append(
            f"| {a} / {b}{note} | {2 * n} | {total_swapped} | {caught} ({mism} / {low}) | {caught / total_swapped:.0%} | "
            f"{clean_lost} ({clean_lost / (2 * n - total_swapped):.1%}) | {precision:.0%} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--flores", type=Path, default=FLORES)
    parser.add_argument("--backend", default="cld2", choices=["cld2", "fasttext"])
    parser.add_argument("--model", help="fastText model file (backend = fasttext)")
    parser.add_argument("--rows", type=int, default=997)
    parser.add_argument("--rate", type=float, default=0.05)
    parser.add_argument("--min-chars", type=int, default=20)
    parser.add_argument("--min-confidence", type=float, default=0.5)
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    from tasks.corpus.config import LidFilter
    from tasks.corpus.lid import lid_check

    config = LidFilter(backend=args.backend, model=args.model, min_chars=args.min_chars, min_confidence=args.min_confidence)
    check = lid_check(config)
    data = load(args.flores, args.rows)
    table, unreliable, rate = per_language(check, data)
    identifiable = [lang for lang in data if check.identifier.identifiable(lang)]
    print(f"## {args.backend}: {len(identifiable)} of {len(data)} FLORES-200 languages identifiable")
    print(f"\n{sum(len(v) for v in data.values()):,} rows; prediction {rate:,.0f} rows/s on one core")
    print(f"min_chars = {args.min_chars}, min_confidence = {args.min_confidence}\n")
    print(f"not identifiable: {', '.join(lang for lang in data if not check.identifier.identifiable(lang))}\n")
    print(f"a label, but recall < 0.5 (treated as not identifiable): {', '.join(unreliable) or 'none'}\n")
    print(table)
    print(f"\n### Off-target rows caught ({args.rate:.0%} of rows swapped between related languages)\n")
    print(off_target(check, data, args.rate))


if __name__ == "__main__":
    main()
