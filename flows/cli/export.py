"""`xlembed export`: copy a model or dataset artifact out of the store, with its card."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.text import Text

from flows.cli.common import (
    StoreRootOpt,
    _one_line,
    _resolve_artifact,
    _size,
    _store,
    app,
    err,
    fail,
    out,
    refuse_inside_store,
)
from tasks.publish import ExportError


@app.command("export")
def export(
    artifact: Annotated[
        str,
        typer.Argument(
            metavar="ARTIFACT",
            help="key or unique key prefix, or a stage name (train, corpus, ...): the artifact its newest ref points to",
            show_default=False,
        ),
    ],
    directory: Annotated[Path, typer.Argument(metavar="DIR", help="new or empty folder to write", show_default=False)],
    push: Annotated[
        Optional[str],
        typer.Option(
            "--push",
            metavar="REPO_ID",
            help="also upload DIR to this Hugging Face model or dataset repo (token: HF_TOKEN or `hf auth login`)",
        ),
    ] = None,
    private: Annotated[bool, typer.Option("--private", help="with --push: create the repo private")] = False,
    drop_language_embedding: Annotated[
        bool,
        typer.Option(
            "--drop-language-embedding",
            help="model: export one trained with language_embedding = true without it (refused otherwise)",
        ),
    ] = False,
    layout: Annotated[
        str,
        typer.Option(
            help="dataset: multiway, pairs or both (one row per group, and/or one config per language paired with --pivot)"
        ),
    ] = "both",
    pivot: Annotated[
        Optional[str],
        typer.Option(
            metavar="LANG",
            help="dataset: the language pairs are made with; default: translate's source language, else the one with most rows",
        ),
    ] = None,
    pipeline: Annotated[Optional[str], typer.Option(help="take the key from this pipeline's ref")] = None,
    root: StoreRootOpt = "artifacts",
) -> None:
    """Copy an artifact out of the store in the form its users load, with its card.

    A train artifact is a sentence-transformers model folder with a model card (the card of its
    newest evaluation); an evaluate artifact exports the model it scored with that evaluation's
    card (docs/train.md, "Publishing a model"). A corpus or translate artifact is a Hugging Face
    dataset: Parquet configs and a dataset card (docs/translate.md, "Publishing a corpus").
    """
    store = _store(root)
    refuse_inside_store(store, directory, "DIR")
    stage, key = _resolve_artifact(store, artifact, pipeline)
    if stage in ("train", "evaluate"):
        _export_model(store, stage, key, directory, push=push, private=private, drop_language_embedding=drop_language_embedding)
    elif stage in ("corpus", "translate"):
        _export_dataset(store, stage, key, directory, push=push, private=private, layout=layout, pivot=pivot)
    else:
        raise fail(
            f"cannot export a {stage} artifact: export takes a model (train, evaluate) or a dataset (corpus, translate)", 2
        )


def _export_dataset(
    store: Any, stage: str, key: str, folder: Path, *, push: str | None, private: bool, layout: str, pivot: str | None
) -> None:
    from tasks.publish.dataset import export_dataset, push_dataset  # lazy: polars and the stages it reads, not needed for --help

    if layout not in ("multiway", "pairs", "both"):
        raise fail(f"--layout {layout!r}: use multiway, pairs or both", 2)
    try:
        result = export_dataset(store, stage, key, folder, layout=layout, pivot=pivot)  # type: ignore[arg-type]
    except ExportError as exc:
        raise fail(str(exc), 2) from None
    out.print(
        f"{stage} {key[:12]}: {result.groups:,} groups -> {result.folder} (configs: {', '.join(c.name for c in result.configs)})",
        highlight=False,
    )
    if push:
        try:
            out.print(f"pushed: {push_dataset(result.folder, push, private=private or None)}", highlight=False)
        except Exception as exc:  # noqa: BLE001 - the hub's errors as one line; the export stays
            raise fail(f"--push {push}: {_one_line(exc)} (the export is in {result.folder})") from None


def _export_model(
    store: Any, stage: str, key: str, directory: Path, *, push: str | None, private: bool, drop_language_embedding: bool
) -> None:
    from tasks.publish.model import (  # lazy: torch and transformers, not needed for --help
        LanguageEmbeddingRefused,
        PushError,
        export_trained_model,
        push_to_hub,
    )

    evaluation = None
    if stage == "evaluate":
        evaluation, key = key, store.manifest("evaluate", key).input_keys.get("train")
        if key is None:
            raise fail(f"evaluate artifact {evaluation[:12]} scored a base model, not a trained one: nothing to export", 2)
    try:
        result = export_trained_model(
            store, key, directory, evaluation_key=evaluation, drop_language_embedding=drop_language_embedding, repo_id=push
        )
    except LanguageEmbeddingRefused as exc:
        raise fail(str(exc), 1) from None
    except ExportError as exc:
        raise fail(str(exc), 2) from None
    files = [p for p in result.folder.rglob("*") if p.is_file()]
    out.print(
        f"exported train {key[:12]} to {result.folder} ({len(files)} files, {_size(sum(p.stat().st_size for p in files))})",
        highlight=False,
        markup=False,
    )
    out.print(f"  card      {result.card_source}", highlight=False, markup=False)
    out.print(f"  inputs    truncated at {result.max_seq_length} tokens", highlight=False, markup=False)
    if result.language_embedding is not None:
        err.print(Text(f"language embedding dropped: {result.language_embedding.summary()}", style="yellow"), highlight=False)
    if push:
        try:
            url = push_to_hub(result.folder, push, private=private)
        except PushError as exc:
            raise fail(f"{exc} (the exported folder {result.folder} is kept)", 1) from None
        out.print(f"  pushed    {url}", highlight=False, markup=False)
