"""Tatoeba bitext retrieval (XTREME/LASER layout), optionally with distractor rows in the candidate pools."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, field_validator

from tasks.evaluate.benchmarks.registry import Benchmark, Evaluation, register_benchmark
from tasks.evaluate.datasets import (
    BenchmarkDataError,
    Lines,
    no_empty_lines,
    parsed_once,
    read_line_array,
    read_lines,
    same_line_counts,
)
from tasks.evaluate.retrieval import score_pair
from tasks.languages import LangCodes, LangKeyed, UnknownLanguageError, to_flores
from tasks.stage import folder_fingerprint
from tasks.stage_config import CONTENT_KEYED, KEYED_UNLESS_DEFAULT, ConfigPath, StageConfig

# ------------------------------------------------------------------ reading: Tatoeba


@dataclass(frozen=True)
class BitextPairs:
    """Line-aligned translations: ``src[i]`` translates ``tgt[i]``."""

    src_lang: str  # FLORES-200
    tgt_lang: str  # FLORES-200
    src: Sequence[str]  # Lines when read from files
    tgt: Sequence[str]
    source: str  # where it was read from

    def __len__(self) -> int:
        return len(self.src)


def tatoeba_languages(folder: str | Path) -> list[str]:
    """Tatoeba codes (``kaz``, ``cmn``, ...) with a ``tatoeba.{xx}-eng.{xx}`` file in ``folder``."""
    found = []
    for path in Path(folder).glob("tatoeba.*-eng.*"):
        code = path.name[len("tatoeba.") :].split("-eng.")[0]
        if path.name == f"tatoeba.{code}-eng.{code}":
            found.append(code)
    return sorted(found)


@parsed_once
def read_tatoeba(folder: str | Path, lang: str) -> BitextPairs:
    """Tatoeba pairs of ``lang`` (a Tatoeba / ISO 639-3 code such as ``kaz``) with English.

    Raises:
        BenchmarkDataError: a file is missing, the two files differ in line count (message
            names both files and counts), or a line is empty (``file:line``).
        UnknownLanguageError: ``lang`` has no FLORES-200 code.
    """
    folder = Path(folder)
    src_lang = to_flores(lang)
    src_path = folder / f"tatoeba.{lang}-eng.{lang}"
    tgt_path = folder / f"tatoeba.{lang}-eng.eng"
    src, tgt = read_line_array(src_path), read_line_array(tgt_path)
    same_line_counts({src_path: src, tgt_path: tgt})
    no_empty_lines(src_path, src, lang)
    no_empty_lines(tgt_path, tgt, "eng")
    if not len(src):
        raise BenchmarkDataError(src_path, None, "no sentences")
    return BitextPairs(src_lang, "eng_Latn", Lines(src), Lines(tgt), str(src_path))


# ------------------------------------------------------------------ distractor folders


@dataclass(frozen=True)
class DistractorFolder:
    """Which file of a folder of per-language files holds which FLORES-200 language."""

    path: Path
    by_lang: Mapping[str, Path]  # FLORES-200 code -> file
    ambiguous: Mapping[str, tuple[Path, ...]] = field(default_factory=dict)  # several files, none preferred

    def file_for(self, lang: str) -> Path | None:
        """The file of FLORES-200 ``lang``, or None. Raises BenchmarkDataError where several
        pattern files map to ``lang`` with equally short codes (name one in ``files``)."""
        if lang in self.ambiguous:
            names = ", ".join(p.name for p in self.ambiguous[lang])
            raise BenchmarkDataError(
                self.path, None, f'several files map to {lang}: {names}; name one in files = {{code = "file"}}', "pattern"
            )
        return self.by_lang.get(lang)

    def read(self, lang: str) -> tuple[str, ...]:
        """The lines of ``lang``'s file; () where the folder has none.

        Raises BenchmarkDataError for invalid UTF-8, an empty file or an empty line (the
        files are line-aligned translations: an empty line means a damaged file)."""
        path = self.file_for(lang)
        if path is None:
            return ()
        return _read_distractor_lines(path, lang)


@parsed_once
def _read_distractor_lines(path: Path, lang: str) -> tuple[str, ...]:
    lines = read_lines(path)
    if not lines:
        raise BenchmarkDataError(path, None, "no sentences")
    for number, line in enumerate(lines, 1):
        if not line.strip():
            raise BenchmarkDataError(path, number, "empty line (the files are line-aligned: is the file damaged?)", lang)
    return tuple(lines)


def scan_distractor_folder(
    path: str | Path, pattern: str = "{code}.dev", files: Mapping[str, str] | None = None
) -> DistractorFolder:
    """Map the files of ``path`` to FLORES-200 languages.

    ``files`` (code -> file name) come first; then every file whose name fits ``pattern``, its
    ``{code}`` part mapped with :func:`to_flores` (names whose code maps to no language are
    not language files and are skipped). Where several pattern files give one language, the
    shortest code wins (``fra`` over ``fra-CA``); a tie is reported when that language is read.

    Raises:
        BenchmarkDataError: the folder or a file named in ``files`` does not exist.
        UnknownLanguageError: a ``files`` code without a FLORES-200 code.
    """
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise BenchmarkDataError(folder, None, "distractor folder not found")
    if pattern.count("{code}") != 1:
        raise ValueError(f"pattern {pattern!r} must contain {{code}} once")
    by_lang: dict[str, Path] = {}
    for code, name in (files or {}).items():
        file = folder / name
        if not file.is_file():
            raise BenchmarkDataError(file, None, f"file not found (named in files for {code!r})", "files")
        by_lang[to_flores(code)] = file
    prefix, suffix = pattern.split("{code}")
    named = {folder / name for name in (files or {}).values()}
    fitting = re.compile(re.escape(prefix) + r"(?P<code>.+)" + re.escape(suffix))
    candidates: dict[str, list[tuple[str, Path]]] = {}
    for file in sorted(folder.iterdir()):
        match = fitting.fullmatch(file.name)
        if match is None or file in named or not file.is_file():
            continue
        try:
            lang = to_flores(match["code"])
        except UnknownLanguageError:
            continue
        if lang not in by_lang:
            candidates.setdefault(lang, []).append((match["code"], file))
    ambiguous: dict[str, tuple[Path, ...]] = {}
    for lang, found in candidates.items():
        shortest = min(len(code) for code, _ in found)
        best = [file for code, file in found if len(code) == shortest]
        if len(best) == 1:
            by_lang[lang] = best[0]
        else:
            ambiguous[lang] = tuple(best)
    return DistractorFolder(folder, by_lang, ambiguous)


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
    supports_subset: ClassVar[bool] = True
    subset_unit: ClassVar[str] = "translation pairs (both directions)"

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

        folders = [(s.name, scan_distractor_folder(s.path, s.pattern, s.files)) for s in self.distractors]
        lines: dict[tuple[str, str], tuple[str, ...]] = {}  # English is read once for all languages
        for lang in self.langs:
            pairs = read_tatoeba(self.path, lang)
            if self.max_pairs is not None and len(pairs) > self.max_pairs:
                evaluation.context.drop("tatoeba_pair_beyond_max_pairs", len(pairs) - self.max_pairs)
                pairs = dataclasses.replace(pairs, src=pairs.src[: self.max_pairs], tgt=pairs.tgt[: self.max_pairs])
            chosen = self.subset_indices(len(pairs), f"tatoeba:{lang}")
            if chosen is not None:  # a pair is one item: both its directions stay together
                evaluation.context.drop("tatoeba_pair_outside_subset", len(pairs) - len(chosen))
                pairs = dataclasses.replace(
                    pairs, src=tuple(pairs.src[i] for i in chosen), tgt=tuple(pairs.tgt[i] for i in chosen)
                )
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
                            src,
                            tgt,
                            dataset="tatoeba-distractors",
                            src_distractors=evaluation.encode(src_pool, pairs.src_lang),
                            tgt_distractors=evaluation.encode(tgt_pool, pairs.tgt_lang),
                            **names,
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
