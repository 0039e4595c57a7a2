"""`xlembed align`: score the config's align backend against gold word alignments."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from flows.cli.common import ConfigArg, RootOpt, _load, app, fail, out
from flows.cli.run import _execute


@app.command()
def align(
    config: ConfigArg,
    gold: Annotated[Path, typer.Option("--gold", help="Pharaoh gold links, one line per pair: i-j sure, i?j or ipj possible")],
    src: Annotated[Path, typer.Option("--src", help="source sentences, one per line, tokens separated by spaces")],
    tgt: Annotated[Path, typer.Option("--tgt", help="target sentences, line-aligned with --src")],
    src_lang: Annotated[str, typer.Option("--src-lang", help="language of --src")] = "eng_Latn",
    tgt_lang: Annotated[str, typer.Option("--tgt-lang", help="language of --tgt")] = "fra_Latn",
    zero_based: Annotated[bool, typer.Option("--zero-based", help="gold indices start at 0 (default: 1)")] = False,
    train_src: Annotated[
        Optional[Path],
        typer.Option("--train-src", help="extra parallel source text, for a backend that learns from it (eflomal)"),
    ] = None,
    train_tgt: Annotated[
        Optional[Path], typer.Option("--train-tgt", help="extra parallel target text, line-aligned with --train-src")
    ] = None,
    examples: Annotated[int, typer.Option("--examples", min=0, help="aligned examples to print")] = 2,
    root: RootOpt = None,
) -> None:
    """Score the backend of the config's align section against gold word alignments: AER, precision, recall, F1."""
    from tasks.align.gold import GoldInputError, score_gold_set  # lazy: polars and the align stage, not needed for --help

    cfg = _load(config, root)
    if "align" not in cfg.stage_configs:
        raise fail(f"{config}: no [align] section", 2)

    def base_model() -> Path:  # built (or found cached) only when the backend reads it
        store, keys = _execute(cfg, config, "base_model", None, [], root)
        return store.attached_dir("base_model", keys["base_model"])

    try:
        result = score_gold_set(
            cfg.stage_configs["align"],
            gold,
            src,
            tgt,
            (src_lang, tgt_lang),
            zero_based=zero_based,
            train=(train_src, train_tgt),
            base_model=base_model if "base_model" in cfg.stage_configs else None,
        )
    except GoldInputError as exc:
        raise fail(str(exc), 2) from None
    scores = result.scores
    table = Table(title=f"{result.label} on {gold}", title_justify="left")
    for column in ("pairs", "AER", "precision", "recall", "F1", "links", "sure", "possible"):
        table.add_column(column, justify="right")
    table.add_row(
        str(scores.pairs),
        f"{scores.aer:.4f}",
        f"{scores.precision:.4f}",
        f"{scores.recall:.4f}",
        f"{scores.f1:.4f}",
        str(scores.predicted),
        str(scores.sure),
        str(scores.possible),
    )
    out.print(table)
    for n in range(min(examples, len(result.predicted))):
        pairs = " ".join(f"{result.src[n][i]}={result.tgt[n][j]}" for i, j in sorted(result.predicted[n]))
        out.print(f"{n + 1}: {pairs}", highlight=False, markup=False)
