"""Tatoeba bitext retrieval (XTREME/LASER layout), optionally with distractor rows in the candidate pools."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from pydantic import Field, field_validator

from tasks.languages import LangCodes, LangKeyed
from tasks.evaluate.benchmarks.registry import Benchmark, Evaluation, register_benchmark
from tasks.stage import CONTENT_KEYED, KEYED_UNLESS_DEFAULT, ConfigPath, StageConfig, folder_fingerprint

if TYPE_CHECKING:
    from tasks.evaluate.datasets import DistractorFolder


class DistractorSource(StageConfig):
    """A folder of line-aligned files, one per language (FLORES-200 `{code}.dev`; NTREX
    `newstest2019-ref.{code}.txt` with `files = {eng = "newstest2019-src.eng.txt"}`), whose rows
    join the Tatoeba candidate pools as distractors. Codes in file names are mapped to
    FLORES-200; a language with no file here gets no distractors from this folder."""

    name: str = Field(min_length=1, description="names the source in drop counts and fingerprints")
    path: ConfigPath = Field(json_schema_extra=CONTENT_KEYED)
    pattern: str = "{code}.dev"
    files: Annotated[dict[str, str], LangKeyed] = Field(
        default_factory=dict,
        description="file names for codes that do not follow `pattern`; they win over pattern matches",
    )

    @field_validator("pattern")
    @classmethod
    def _pattern(cls, pattern: str) -> str:
        if pattern.count("{code}") != 1 or "/" in pattern:
            raise ValueError(f"pattern {pattern!r} must contain '{{code}}' once and no '/'")
        return pattern

    @field_validator("files")
    @classmethod
    def _plain_names(cls, files: dict[str, str]) -> dict[str, str]:
        bad = [name for name in files.values() if "/" in name or not name.strip()]
        if bad:
            raise ValueError(f"files: {bad} must be plain file names inside path (no '/')")
        return files


@register_benchmark
class TatoebaBenchmark(Benchmark):
    """XTREME/LASER Tatoeba layout: `tatoeba.{xx}-eng.{xx}` and `.eng` in `path`.

    With `distractors`, each language is also scored as dataset `tatoeba-distractors`: the
    candidates of each side are its Tatoeba sentences plus every distractor row of that
    language (rows equal to a Tatoeba sentence of the same side are removed and counted)."""

    main_metric: ClassVar[str] = "accuracy_mean"
    item_metric: ClassVar[str | None] = "accuracy_mean"
    hub_task_type: ClassVar[str] = "bitext-mining"

    kind: Literal["tatoeba"]
    path: ConfigPath = Field(json_schema_extra=CONTENT_KEYED)
    langs: LangCodes = Field(min_length=1, description="Tatoeba codes as in the file names, e.g. kaz, tel")
    distractors: list[DistractorSource] = Field(default_factory=list)
    max_pairs: int | None = Field(
        default=None,
        ge=2,
        json_schema_extra=KEYED_UNLESS_DEFAULT,
        description="the first N pairs of each language only (cheaper CPU sweeps, wider intervals); unset: all",
    )

    @field_validator("distractors")
    @classmethod
    def _unique_names(cls, sources: list[DistractorSource]) -> list[DistractorSource]:
        names = [source.name for source in sources]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(f"distractor source names must be unique, repeated: {repeated}")
        return sources

    def check_files(self) -> None:
        from tasks.evaluate.datasets import read_tatoeba, scan_distractor_folder

        langs = {read_tatoeba(self.path, lang).src_lang for lang in self.langs} | {"eng_Latn"}
        for source in self.distractors:
            folder = scan_distractor_folder(source.path, source.pattern, source.files)
            for lang in sorted(langs):
                folder.read(lang)

    def fingerprint(self) -> dict[str, Any]:
        prints = super().fingerprint()
        for source in self.distractors:  # distractor folders live outside `path`
            folder = Path(source.path).expanduser()
            if not folder.is_dir():
                raise FileNotFoundError(f"distractors {source.name!r}: {folder} is not a folder")
            prints[f":distractors:{source.name}"] = folder_fingerprint(folder, (p for p in folder.iterdir() if p.is_file()))
        return prints

    def score(self, evaluation: Evaluation) -> None:
        from tasks.evaluate.datasets import read_tatoeba, scan_distractor_folder
        from tasks.evaluate.retrieval import score_pair

        folders = [(s.name, scan_distractor_folder(s.path, s.pattern, s.files)) for s in self.distractors]
        lines: dict[tuple[str, str], tuple[str, ...]] = {}  # English is read once for all languages
        for lang in self.langs:
            pairs = read_tatoeba(self.path, lang)
            if self.max_pairs is not None and len(pairs) > self.max_pairs:
                evaluation.context.drop("tatoeba_pair_beyond_max_pairs", len(pairs) - self.max_pairs)
                pairs = dataclasses.replace(pairs, src=pairs.src[: self.max_pairs], tgt=pairs.tgt[: self.max_pairs])
            src, tgt = evaluation.encode(pairs.src, pairs.src_lang), evaluation.encode(pairs.tgt, pairs.tgt_lang)
            names = {"src_lang": pairs.src_lang, "tgt_lang": pairs.tgt_lang, "benchmark": "tatoeba"}
            evaluation.add_scores([score_pair(src, tgt, dataset="tatoeba", **names)])
            for dataset in ("tatoeba", "tatoeba-distractors") if folders else ("tatoeba",):
                evaluation.add_sentences("tatoeba", dataset, pairs.src_lang, pairs.tgt_lang, pairs.src, pairs.tgt)
            evaluation.add_pair(pairs.src_lang, pairs.tgt_lang, src, tgt)
            if folders:
                src_pool = distractor_pool(evaluation, folders, lines, pairs.src_lang, pairs.src)
                tgt_pool = distractor_pool(evaluation, folders, lines, pairs.tgt_lang, pairs.tgt)
                evaluation.add_scores(
                    [
                        score_pair(
                            src, tgt, dataset="tatoeba-distractors", src_distractors=evaluation.encode(src_pool, pairs.src_lang),
                            tgt_distractors=evaluation.encode(tgt_pool, pairs.tgt_lang), **names,
                        )
                    ]
                )


def distractor_pool(
    evaluation: Evaluation,
    folders: Sequence[tuple[str, DistractorFolder]],
    lines: dict[tuple[str, str], tuple[str, ...]],
    lang: str,
    tatoeba_side: Sequence[str],
) -> list[str]:
    """Distractor rows of `lang` from every folder, each text once, without the texts of
    `tatoeba_side`: a distractor equal to a sentence's translation would be scored as a
    wrong answer. Both removals are counted. `lines` keeps each folder's files once read."""
    pool: dict[str, None] = {}
    offered = 0
    for name, folder in folders:
        if (name, lang) not in lines:
            lines[name, lang] = folder.read(lang)
        offered += len(lines[name, lang])
        pool.update(dict.fromkeys(line.strip() for line in lines[name, lang]))
    unique = len(pool)
    for text in tatoeba_side:
        pool.pop(text.strip(), None)
    evaluation.context.drop("tatoeba_distractor_repeated", offered - unique)
    evaluation.context.drop("tatoeba_distractor_equals_tatoeba_sentence", unique - len(pool))
    return list(pool)
