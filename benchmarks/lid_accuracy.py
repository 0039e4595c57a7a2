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
3. `--kept` (cld2): rows kept per language on FLORES-200 dev and NTREX-128 (human translations:
   every row is in its labelled language) with every labelled language checked, and the share of
   rows of another language (a neighbour, or English) labelled as it that the filter drops. The
   languages kept below 99.5% are the ones CLD2 cannot tell apart; `--write-exempt` writes them
   to tasks/corpus/lid_exempt.py, which exempts them by default. Its Markdown output is the
   table in docs/data-quality.md.
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
        note = (
            ""
            if check.checks(a) and check.checks(b)
            else f" (not identifiable: {', '.join(x for x in (a, b) if not check.checks(x))})"
        )
        lines.append(
            f"| {a} / {b}{note} | {2 * n} | {total_swapped} | {caught} ({mism} / {low}) | {caught / total_swapped:.0%} | "
            f"{clean_lost} ({clean_lost / (2 * n - total_swapped):.1%}) | {precision:.0%} |"
        )
    return "\n".join(lines)


NTREX = REPO.parent / "shared" / "data" / "ntrex128"
KEEP_TARGET = 0.995
# the language whose rows are swapped in as "another language" (default: English; English gets French)
NEIGHBOUR = {
    "kaz_Cyrl": "rus_Cyrl", "mar_Deva": "hin_Deva", "jav_Latn": "ind_Latn", "tgl_Latn": "ceb_Latn", "zsm_Latn": "ind_Latn",
    "ita_Latn": "spa_Latn", "por_Latn": "spa_Latn", "spa_Latn": "por_Latn", "deu_Latn": "nld_Latn", "nld_Latn": "deu_Latn",
    "hrv_Latn": "slv_Latn", "nob_Latn": "dan_Latn", "dan_Latn": "swe_Latn", "ukr_Cyrl": "rus_Cyrl", "bel_Cyrl": "rus_Cyrl",
    "eng_Latn": "fra_Latn", "ind_Latn": "zsm_Latn", "hin_Deva": "mar_Deva", "rus_Cyrl": "ukr_Cyrl", "ceb_Latn": "tgl_Latn",
}  # fmt: skip


def load_ntrex(ntrex: Path) -> dict[str, list[str]]:
    """NTREX-128 references by FLORES code (regional variants such as eng-GB and second references left out)."""
    from tasks.languages import FLORES200_CODES, UnknownLanguageError, to_flores

    out: dict[str, list[str]] = {}
    for path in sorted(ntrex.glob("newstest2019-ref.*.txt")):
        code = path.name.removeprefix("newstest2019-ref.").removesuffix(".txt")
        base, _, variant = code.replace("_", "-").partition("-")
        if variant and f"{base}_{variant}" in FLORES200_CODES:
            lang = f"{base}_{variant}"
        elif variant:
            continue
        else:
            try:
                lang = to_flores(base)
            except UnknownLanguageError:
                continue
        out[lang] = path.read_text(encoding="utf-8").splitlines()
    return out


def kept(flores: Path, ntrex: Path, rows: int, write_exempt: bool) -> None:
    from tasks.corpus.config import LidFilter
    from tasks.corpus.lid import Cld2Identifier, LidCheck

    class EveryLabel(Cld2Identifier):  # measure every labelled language, the exempt ones included
        CONFUSED = frozenset()

    config = LidFilter()
    check = LidCheck(config, EveryLabel())
    sets = {"FLORES-200 dev": load(flores, rows), "NTREX-128": load_ntrex(ntrex) if ntrex.is_dir() else {}}
    langs = sorted(set(sets["FLORES-200 dev"]) | set(sets["NTREX-128"]))
    lines = [
        "| language | checked | FLORES dev rows kept | NTREX rows kept | other-language rows dropped (from) |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    confused, unknown = [], []
    for lang in langs:
        if not check.checks(lang):
            unknown.append(lang)
            continue
        shares = []
        cells = []
        for data in sets.values():
            if lang not in data:
                cells.append("")
                continue
            texts = [t for t in data[lang] if t.strip()]
            share = float(np.mean(check.reasons(texts, [lang] * len(texts)) == 0))
            shares.append(share)
            cells.append(f"{share:.1%} of {len(texts):,}")
        flores_data = sets["FLORES-200 dev"]
        other = NEIGHBOUR.get(lang, "eng_Latn")
        swapped = ""
        if lang in flores_data and other in flores_data:
            texts = [t for t in flores_data[other] if len(t) >= config.min_chars]
            swapped = f"{float(np.mean(check.reasons(texts, [lang] * len(texts)) != 0)):.1%} ({other})"
        exempt = min(shares) < KEEP_TARGET
        if exempt:
            confused.append(lang)
        lines.append(f"| {lang} | {'no: exempt (kept < 99.5%)' if exempt else 'yes'} | {cells[0]} | {cells[1]} | {swapped} |")
    print(
        f"CLD2 (bestEffort off, reliable answers only), min_chars {config.min_chars}: {len(langs) - len(unknown)} languages labelled\n"
    )
    print("\n".join(lines))
    print(f"\n**Exempt by default, CLD2 cannot tell them apart (kept < 99.5%, {len(confused)}):** {', '.join(confused)}\n")
    print(f"**Exempt, CLD2 has no (reliable) label ({len(unknown)}):** {', '.join(unknown)}")
    if write_exempt:
        target = REPO / "tasks" / "corpus" / "lid_exempt.py"
        head = target.read_text(encoding="utf-8").split("CLD2_CONFUSED")[0]
        target.write_text(
            head + "CLD2_CONFUSED = (\n" + "".join(f'    "{lang}",\n' for lang in confused) + ")\n", encoding="utf-8"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--flores", type=Path, default=FLORES)
    parser.add_argument("--backend", default="cld2", choices=["cld2", "fasttext"])
    parser.add_argument("--model", help="fastText model file (backend = fasttext)")
    parser.add_argument("--rows", type=int, default=997)
    parser.add_argument("--rate", type=float, default=0.05)
    parser.add_argument("--min-chars", type=int, default=20)
    parser.add_argument("--min-confidence", type=float, default=0.5)
    parser.add_argument("--ntrex", type=Path, default=NTREX)
    parser.add_argument("--kept", action="store_true", help="rows kept per language on FLORES dev and NTREX (cld2)")
    parser.add_argument("--write-exempt", action="store_true", help="with --kept: write tasks/corpus/lid_exempt.py")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    if args.kept:
        kept(args.flores, args.ntrex, args.rows, args.write_exempt)
        return
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
