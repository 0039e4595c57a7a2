"""Readers for the evaluation benchmarks: Tatoeba, BUCC 2018, STS (SemEval 2017 and TSV), FLORES-200.

Each reader returns a small frozen dataclass of sentences (and gold labels) with languages
as FLORES-200 codes. Bad data is a :class:`BenchmarkDataError` whose message starts with
``file:line:`` and names the field; the only silent-looking drops are the ones a format
defines (unscored STS pairs, repeated BUCC gold lines), and those are counted on the result.

Lines are split on ``\\n`` only (a trailing ``\\r`` is removed, a UTF-8 BOM at the start is
ignored), never with ``str.splitlines``: that also splits on U+2028, U+0085 and friends,
which occur inside real sentences and would shift every later line of a positional gold.

Layouts:
  * Tatoeba (XTREME / LASER): ``tatoeba.{xx}-eng.{xx}`` and ``tatoeba.{xx}-eng.eng``,
    line i of one translating line i of the other; ``xx`` is the Tatoeba code (kaz, cmn, ...).
  * BUCC 2018: ``{xx}-en.{split}.{xx}``, ``{xx}-en.{split}.en`` (``id<TAB>sentence``) and
    ``{xx}-en.{split}.gold`` (``id_xx<TAB>id_en``), split in sample / training / test, in the
    given folder or its ``{xx}-en/`` subfolder.
  * STS 2017: ``STS.input.track{N}.{l1}-{l2}.txt`` (``sentence1<TAB>sentence2``) with
    ``STS.gs.track{N}.{l1}-{l2}.txt`` (one score per line; an empty line = unscored pair).
  * STS TSV: ``sentence1<TAB>sentence2<TAB>score``, optional header line.
  * FLORES-200 multi-way: ``{code}.{split}`` per language, line-aligned.
  * Distractor folders: one file per language named by a pattern (``{code}.dev``,
    ``newstest2019-ref.{code}.txt``) or listed by name; any code :func:`to_flores` maps.

Tatoeba and BUCC sentences (and BUCC ids) are held as Arrow string columns (:class:`Lines`, a
read-only sequence of ``str``), split and checked with Arrow compute, not as tuples of Python
strings: a parsed result stays in memory for the later reads, and at 10M lines a side a BUCC
split held as ``str`` objects (ids, sentences and an id -> line dict) took some 180 bytes a
line for lines of 20 (4.7 GB per split), where a column takes the line's bytes plus 8.

Each file is parsed once per process: the readers remember their results (a few, least
recently used first out) with the state (size, times, inode) of every file and folder they
looked at, and parse again only when one of those changed. The evaluate stage checks every
benchmark's files at plan time and reads them again to score one or two models; those later
reads are lookups, not parses.
"""

from __future__ import annotations

import functools
import math
import os
import re
import stat
import sys
import threading
import time
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tasks.languages import UnknownLanguageError, to_flores
from tasks.stage import DataError

__all__ = [
    "BUCC_SPLITS",
    "STS2017_TRACK_LANGUAGES",
    "BenchmarkDataError",
    "BitextPairs",
    "BuccSplit",
    "clear_parsed",
    "DistractorFolder",
    "Lines",
    "MultiwayRows",
    "StsPairs",
    "held_out_rows",
    "read_bucc",
    "read_line_array",
    "read_lines",
    "read_multiway_rows",
    "read_sts2017",
    "read_sts2017_folder",
    "read_sts_tsv",
    "read_stsb_multi_mt",
    "stsb_multi_mt_languages",
    "read_tatoeba",
    "scan_distractor_folder",
    "tatoeba_languages",
]

BUCC_SPLITS = ("sample", "training", "test")

# SemEval-2017 Task 1 tracks (Cer et al., 2017): track -> (language of sentence 1, of sentence 2).
# Used when a file name carries no "l1-l2" part; a pair in the file name wins. track4b is the
# WMT-quality-estimation Spanish-English track, with the same languages as track4a.
STS2017_TRACK_LANGUAGES: Mapping[str, tuple[str, str]] = {
    "track1": ("ar", "ar"),
    "track2": ("ar", "en"),
    "track3": ("es", "es"),
    "track4a": ("es", "en"),
    "track4b": ("es", "en"),
    "track5": ("en", "en"),
    "track6": ("tr", "en"),
}

_UTF8_BOM = b"\xef\xbb\xbf"
_STS_TRACK = re.compile(r"^STS\.(?:input|gs)\.(track[0-9]+[a-z]?)(?:\.([A-Za-z_]+)-([A-Za-z_]+))?\.txt$")


class BenchmarkDataError(DataError):
    """Malformed benchmark data; the message names the file, the line (1-based) and the field."""

    def __init__(self, path: str | Path, line: int | None, problem: str, field: str | None = None) -> None:
        self.path = str(path)
        self.line = line
        self.field = field
        self.problem = problem
        where = self.path if line is None else f"{self.path}:{line}"
        super().__init__(f"{where}: {field + ': ' if field else ''}{problem}")

    def __reduce__(self):  # picklable across worker processes
        return (type(self), (self.path, self.line, self.problem, self.field))


# ------------------------------------------------------------------ parsed once

PARSED_LIMIT = 32  # readers' results kept per process (a BUCC split is one)
_RACY_NS = 2_000_000_000
_PARSED: OrderedDict[tuple, tuple[tuple[tuple[str, tuple | None], ...], object]] = OrderedDict()
_PARSED_LOCK = threading.Lock()
_LOOKED_AT: ContextVar[list[tuple[str, tuple | None]] | None] = ContextVar("_LOOKED_AT", default=None)


def _state(path: str | Path) -> tuple | None:
    """What changes when a file or folder is written, replaced or removed (None: absent).

    Size, times and inode; for one modified in the last 2 s also its content (a checksum) or
    its listing, since file times are coarse: a second write in the same tick would not show."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    state: tuple = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
    if time.time_ns() - st.st_mtime_ns < _RACY_NS:
        try:
            state += (tuple(sorted(os.listdir(path))) if stat.S_ISDIR(st.st_mode) else zlib.crc32(Path(path).read_bytes()),)
        except OSError:
            return None
    return state


def _look_at(path: str | Path) -> None:
    """Note a file or folder (and its state now, before it is read) for the reader running."""
    seen = _LOOKED_AT.get()
    if seen is not None:
        seen.append((os.path.abspath(path), _state(path)))


def _frozen(value: object) -> object:
    if isinstance(value, Mapping):
        return ("mapping", tuple(sorted((k, _frozen(v)) for k, v in value.items())))
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    if isinstance(value, slice):
        return ("slice", value.start, value.stop, value.step)
    if isinstance(value, Path):
        return os.path.abspath(value)
    return value


def _parsed_once(reader: Callable) -> Callable:
    """Remember `reader`'s result by its arguments and the state of what it looked at."""

    @functools.wraps(reader)
    def remembered(*args, **kwargs):
        key = (reader.__qualname__, os.getcwd(), _frozen(args), _frozen(kwargs))
        outer = _LOOKED_AT.get()
        with _PARSED_LOCK:
            hit = _PARSED.get(key)
        if hit is not None and all(_state(path) == state for path, state in hit[0]):
            with _PARSED_LOCK:
                if key in _PARSED:
                    _PARSED.move_to_end(key)
            if outer is not None:
                outer.extend(hit[0])
            return hit[1]
        seen: list[tuple[str, tuple | None]] = []
        token = _LOOKED_AT.set(seen)
        try:
            result = reader(*args, **kwargs)
        finally:
            _LOOKED_AT.reset(token)
        if outer is not None:
            outer.extend(seen)
        with _PARSED_LOCK:
            _PARSED[key] = (tuple(dict.fromkeys(seen)), result)
            _PARSED.move_to_end(key)
            while len(_PARSED) > PARSED_LIMIT:
                _PARSED.popitem(last=False)
        return result

    return remembered


def clear_parsed() -> None:
    """Forget every remembered reader result (the next reads parse again)."""
    with _PARSED_LOCK:
        _PARSED.clear()


# ------------------------------------------------------------------ lines


def read_line_array(path: str | Path) -> pa.LargeStringArray:
    """The lines of a UTF-8 text file as one Arrow ``large_string`` column: split on ``\\n``
    only, without ``\\r``/``\\n`` and BOM, with numpy on the bytes (no ``str`` per line).

    A final newline does not make an extra empty line; one ``\\r`` before a line's end is
    removed. Invalid UTF-8 is a BenchmarkDataError naming the line.
    """
    path = Path(path)
    _look_at(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise BenchmarkDataError(path, None, "file not found") from None
    if data.startswith(_UTF8_BOM):
        data = data[len(_UTF8_BOM) :]
    raw = np.frombuffer(data, dtype=np.uint8)
    ends = np.flatnonzero(raw == 10)  # each line's "\n"
    if len(raw) and raw[-1] != 10:
        ends = np.append(ends, len(raw))  # a last line without "\n"
    starts = np.concatenate([[0], ends[:-1] + 1]).astype(np.int64) if len(ends) else np.zeros(0, dtype=np.int64)
    carriage = (ends > starts) & (raw[np.maximum(ends - 1, 0)] == 13) if len(raw) else np.zeros(0, dtype=bool)
    stops = ends - carriage
    keep = raw != 10  # every byte but the newlines and the "\r" removed before them
    keep[stops[carriage]] = False
    kept = raw[keep]
    offsets = np.concatenate([[0], np.cumsum(stops - starts)]).astype(np.int64)
    lines = pa.LargeStringArray.from_buffers(len(starts), pa.py_buffer(offsets), pa.py_buffer(kept))
    try:
        lines.validate(full=True)
    except pa.ArrowInvalid:
        try:
            data.decode("utf-8")  # the first invalid byte, as Python's decoder finds it
        except UnicodeDecodeError as error:
            line = data.count(b"\n", 0, error.start) + 1
            raise BenchmarkDataError(path, line, f"invalid UTF-8 at byte {error.start}") from None
        raise
    return lines


def read_lines(path: str | Path) -> list[str]:
    """The lines of a UTF-8 text file as a list of ``str`` (`read_line_array`'s lines)."""
    return read_line_array(path).to_pylist()


# characters `str.strip()` removes (those `str.isspace()` calls whitespace), for Arrow's trim
_WHITESPACE = "".join(c for c in map(chr, range(sys.maxunicode + 1)) if c.isspace())


def _blank(values: pa.Array) -> np.ndarray:
    """Which values are empty or whitespace only (``not value.strip()``), as a bool array."""
    return pc.equal(pc.utf8_length(pc.utf8_trim(values, _WHITESPACE)), 0).to_numpy(zero_copy_only=False)


class Lines(Sequence):
    """Lines held as one Arrow ``large_string`` column: a read-only sequence of ``str``.

    ``len``, ``lines[i]`` (a ``str``), ``lines[a:b]`` (a :class:`Lines` sharing the column),
    iteration (the column turned into ``str`` a block at a time), and equality with another
    :class:`Lines` or with a tuple or list of the same strings. ``array`` is the column.
    """

    __slots__ = ("array",)
    _BLOCK = 65_536

    def __init__(self, array: pa.Array | Sequence[str]) -> None:
        self.array = array.cast(pa.large_string()) if isinstance(array, pa.Array) else pa.array(list(array), type=pa.large_string())

    def __len__(self) -> int:
        return len(self.array)

    def __getitem__(self, index):
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self.array))
            if step == 1:
                return Lines(self.array.slice(start, max(0, stop - start)))
            return Lines(self.array.take(pa.array(np.arange(start, stop, step, dtype=np.int64))))
        n = len(self.array)
        i = index + n if index < 0 else index
        if not 0 <= i < n:
            raise IndexError(f"line {index} out of range for {n} lines")
        return self.array[i].as_py()

    def __iter__(self) -> Iterator[str]:
        for start in range(0, len(self.array), self._BLOCK):
            yield from self.array.slice(start, self._BLOCK).to_pylist()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Lines):
            return self.array.equals(other.array)
        if isinstance(other, (tuple, list)):
            return len(other) == len(self) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        head = ", ".join(repr(line) for line in self[:3])
        return f"Lines([{head}{', ...' if len(self) > 3 else ''}], {len(self)} lines)"


def _no_empty_lines(path: Path, lines: pa.Array, field: str) -> None:
    blank = np.flatnonzero(_blank(lines))
    if len(blank):
        raise BenchmarkDataError(path, int(blank[0]) + 1, "empty line (the gold is positional: a line cannot be dropped)", field)


def _same_line_counts(files: Mapping[Path, Sequence[str]]) -> None:
    counts = {path: len(lines) for path, lines in files.items()}
    if len(set(counts.values())) > 1:
        listing = ", ".join(f"{path} has {n} lines" for path, n in counts.items())
        raise BenchmarkDataError(next(iter(counts)), None, f"line counts differ: {listing}")


# ------------------------------------------------------------------ Tatoeba


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


@_parsed_once
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
    _same_line_counts({src_path: src, tgt_path: tgt})
    _no_empty_lines(src_path, src, lang)
    _no_empty_lines(tgt_path, tgt, "eng")
    if not len(src):
        raise BenchmarkDataError(src_path, None, "no sentences")
    return BitextPairs(src_lang, "eng_Latn", Lines(src), Lines(tgt), str(src_path))


# ------------------------------------------------------------------ BUCC 2018


@dataclass(frozen=True)
class BuccSplit:
    """One BUCC 2018 split: two monolingual sentence sets and the gold translation pairs."""

    src_lang: str  # FLORES-200 code of xx
    tgt_lang: str  # eng_Latn
    split: str
    src_ids: Lines
    src: Lines
    tgt_ids: Lines
    tgt: Lines
    gold: frozenset[tuple[str, str]] | None  # (id_xx, id_en); None when read without gold
    duplicate_gold_lines: int = 0  # repeated gold lines, counted once

    def gold_indices(self) -> tuple[np.ndarray, np.ndarray]:
        """Gold pairs as (row in ``src``, row in ``tgt``) int64 arrays, for the mining code."""
        if self.gold is None:
            raise ValueError(f"BUCC {self.src_lang} {self.split} was read without gold")
        pairs = sorted(self.gold)
        src = _positions([a for a, _ in pairs], self.src_ids)
        tgt = _positions([b for _, b in pairs], self.tgt_ids)
        return src, tgt


def _positions(ids: Sequence[str] | pa.Array, of: Lines) -> np.ndarray:
    """The line of each of `ids` among the ids `of` (int64; -1 where absent), one hash join."""
    values = ids if isinstance(ids, pa.Array) else pa.array(list(ids), type=pa.large_string())
    return pc.index_in(values, value_set=of.array).fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)


def _tab_fields(lines: pa.Array) -> tuple[pa.Array, pa.Array, int]:
    """(first fields, second fields, lines with a tab) of ``a<TAB>b`` lines, split at the first tab:
    the lines before the first line without a tab (the caller reports that line unless one
    before it is wrong in another way: lines are checked in order)."""
    parts = pc.split_pattern(lines, "\t", max_splits=1)
    no_tab = np.flatnonzero(pc.list_value_length(parts).to_numpy(zero_copy_only=False) < 2)
    good = int(no_tab[0]) if len(no_tab) else len(lines)
    parts = parts.slice(0, good)
    return pc.list_element(parts, 0), pc.list_element(parts, 1), good


def _bucc_sentences(path: Path) -> tuple[Lines, Lines]:
    """(ids, sentences) of an ``id<TAB>sentence`` file; the first bad line (no tab, an empty id
    or sentence, an id seen before) is an error naming it, the same checks in the same order
    as a loop over the lines would make, done on the columns."""
    lines = read_line_array(path)
    ids, sentences, good = _tab_fields(lines)
    empty_id, empty_sentence = _blank(ids), _blank(sentences)
    codes = ids.dictionary_encode().indices.to_numpy(zero_copy_only=False)  # numbered in order of first appearance:
    duplicate = codes <= np.maximum.accumulate(np.concatenate([[-1], codes[:-1]]))  # a line whose id is not new is a repeat
    bad = np.flatnonzero(empty_id | empty_sentence | duplicate)
    if len(bad):
        i = int(bad[0])
        sentence_id = ids[i].as_py()
        if empty_id[i]:
            raise BenchmarkDataError(path, i + 1, "empty", "id")
        if empty_sentence[i]:
            raise BenchmarkDataError(path, i + 1, f"empty sentence for id {sentence_id!r}", "sentence")
        first = int(np.flatnonzero(codes == codes[i])[0])
        raise BenchmarkDataError(path, i + 1, f"duplicate id {sentence_id!r} (first on line {first + 1})", "id")
    if good < len(lines):
        raise BenchmarkDataError(path, good + 1, "no tab: expected id<TAB>sentence")
    if not len(ids):
        raise BenchmarkDataError(path, None, "no sentences")
    return Lines(ids), Lines(sentences)


@_parsed_once
def read_bucc(folder: str | Path, lang: str, split: str, *, with_gold: bool = True) -> BuccSplit:
    """BUCC 2018 ``{lang}-en`` ``split`` (sample, training or test) from ``folder``.

    ``lang`` is the BUCC code (de, fr, ru, zh). Files are looked up in ``folder`` and then in
    ``folder/{lang}-en/``. ``with_gold=False`` reads a split whose gold is not available
    (``gold`` is then None).

    Raises:
        BenchmarkDataError: missing file; a line without a tab; an empty id or sentence; a
            duplicate id; a gold id absent from its sentence file (message names the gold
            file, line and id).
        UnknownLanguageError: ``lang`` has no FLORES-200 code.
    """
    if split not in BUCC_SPLITS:
        raise ValueError(f"unknown BUCC split {split!r}: expected one of {', '.join(BUCC_SPLITS)}")
    folder = Path(folder)
    stem = f"{lang}-en.{split}"
    _look_at(folder)
    _look_at(folder / f"{lang}-en")
    if not (folder / f"{stem}.{lang}").exists() and (folder / f"{lang}-en" / f"{stem}.{lang}").exists():
        folder = folder / f"{lang}-en"
    src_ids, src = _bucc_sentences(folder / f"{stem}.{lang}")
    tgt_ids, tgt = _bucc_sentences(folder / f"{stem}.en")
    gold: frozenset[tuple[str, str]] | None = None
    duplicates = 0
    if with_gold:
        gold_path = folder / f"{stem}.gold"
        lines = read_line_array(gold_path)
        id_xx, id_en, good = _tab_fields(lines)
        missing_xx, missing_en = _positions(id_xx, src_ids) < 0, _positions(id_en, tgt_ids) < 0
        bad = np.flatnonzero(missing_xx | missing_en)
        if len(bad):
            i = int(bad[0])
            if missing_xx[i]:
                raise BenchmarkDataError(gold_path, i + 1, f"id {id_xx[i].as_py()!r} is not in {folder / f'{stem}.{lang}'}", "id_xx")
            raise BenchmarkDataError(gold_path, i + 1, f"id {id_en[i].as_py()!r} is not in {folder / f'{stem}.en'}", "id_en")
        if good < len(lines):
            raise BenchmarkDataError(gold_path, good + 1, "no tab: expected id_xx<TAB>id_en")
        gold = frozenset(zip(id_xx.to_pylist(), id_en.to_pylist()))
        duplicates = good - len(gold)
    return BuccSplit(to_flores(lang), "eng_Latn", split, src_ids, src, tgt_ids, tgt, gold, duplicates)


# ------------------------------------------------------------------ STS


@dataclass(frozen=True)
class StsPairs:
    """Sentence pairs with gold similarity scores (unscored pairs already removed)."""

    dataset: str  # e.g. "STS.input.track5.en-en"
    src_lang: str  # FLORES-200 code of sentence 1
    tgt_lang: str  # FLORES-200 code of sentence 2
    sentence1: tuple[str, ...]
    sentence2: tuple[str, ...]
    scores: np.ndarray  # float64, one per pair
    unscored_dropped: int = 0  # pairs whose gold line was empty

    def __len__(self) -> int:
        return len(self.sentence1)


def _parse_score(path: Path, number: int, text: str, field_name: str = "score") -> float:
    try:
        value = float(text)
    except ValueError:
        raise BenchmarkDataError(path, number, f"not a number: {text!r}", field_name) from None
    if not math.isfinite(value):
        raise BenchmarkDataError(path, number, f"not a finite number: {text!r}", field_name)
    return value


def _split_pair(path: Path, number: int, line: str, n_fields: int) -> list[str]:
    fields = line.split("\t")
    if len(fields) != n_fields:
        raise BenchmarkDataError(path, number, f"expected {n_fields} tab-separated fields, found {len(fields)}")
    for name, value in zip(("sentence1", "sentence2"), fields):
        if not value.strip():
            raise BenchmarkDataError(path, number, "empty", name)
    return fields


@_parsed_once
def read_sts2017(
    input_path: str | Path, gold_path: str | Path | None = None, languages: tuple[str, str] | None = None
) -> StsPairs:
    """One SemEval-2017 STS track: ``STS.input.track*.txt`` and its ``STS.gs.track*.txt``.

    ``gold_path`` defaults to the input name with ``STS.input.`` replaced by ``STS.gs.``.
    Languages come from ``languages`` if given, else from the ``l1-l2`` part of the file name,
    else from :data:`STS2017_TRACK_LANGUAGES`. Empty gold lines mean "unscored" in SemEval
    data: those pairs are dropped and counted in ``unscored_dropped``.

    Raises:
        BenchmarkDataError: line counts differ (names both files and counts); an input line
            without exactly two fields or with an empty sentence; a gold value that is not a number.
    """
    input_path = Path(input_path)
    gold_path = (
        Path(gold_path) if gold_path is not None else input_path.with_name(input_path.name.replace("STS.input.", "STS.gs.", 1))
    )
    match = _STS_TRACK.match(input_path.name)
    if languages is None:
        if match and match.group(2):
            languages = (match.group(2), match.group(3))
        elif match and match.group(1) in STS2017_TRACK_LANGUAGES:
            languages = STS2017_TRACK_LANGUAGES[match.group(1)]
        else:
            raise ValueError(f"cannot tell the languages of {input_path}: pass languages=(l1, l2)")
    src_lang, tgt_lang = to_flores(languages[0]), to_flores(languages[1])
    inputs, gold = read_lines(input_path), read_lines(gold_path)
    _same_line_counts({input_path: inputs, gold_path: gold})
    sentence1: list[str] = []
    sentence2: list[str] = []
    scores: list[float] = []
    unscored = 0
    for number, (line, gold_line) in enumerate(zip(inputs, gold), 1):
        first, second = _split_pair(input_path, number, line, 2)
        if not gold_line.strip():
            unscored += 1
            continue
        scores.append(_parse_score(gold_path, number, gold_line.strip()))
        sentence1.append(first)
        sentence2.append(second)
    if not scores:
        raise BenchmarkDataError(gold_path, None, "no scored pairs")
    name = input_path.name.removesuffix(".txt")
    return StsPairs(name, src_lang, tgt_lang, tuple(sentence1), tuple(sentence2), np.array(scores, dtype=np.float64), unscored)


@_parsed_once
def read_sts2017_folder(folder: str | Path, languages: Mapping[str, tuple[str, str]] | None = None) -> list[StsPairs]:
    """Every ``STS.input.track*.txt`` in ``folder`` with its gold file, sorted by name.

    ``languages`` maps a track name (``track4a``) to its (l1, l2), overriding file names and
    :data:`STS2017_TRACK_LANGUAGES`.
    """
    found = []
    _look_at(folder)
    for path in sorted(Path(folder).glob("STS.input.track*.txt")):
        match = _STS_TRACK.match(path.name)
        override = languages.get(match.group(1)) if (languages and match) else None
        found.append(read_sts2017(path, languages=override))
    if not found:
        raise BenchmarkDataError(folder, None, "no STS.input.track*.txt files")
    return found


@_parsed_once
def read_sts_tsv(
    path: str | Path, src_lang: str, tgt_lang: str, *, header: bool | None = None, dataset: str | None = None
) -> StsPairs:
    """``sentence1<TAB>sentence2<TAB>score`` lines; an empty score = unscored (dropped, counted).

    ``header=None`` detects a header: a first line whose score field is not a number.

    Raises:
        BenchmarkDataError: a line without exactly three fields, an empty sentence, a score
            that is not a number (all naming file and line).
    """
    path = Path(path)
    lines = read_lines(path)
    start = 0
    if lines:
        first = lines[0].split("\t")
        if header is None:
            header = len(first) == 3 and not _is_number(first[2])
        start = 1 if header else 0
    sentence1: list[str] = []
    sentence2: list[str] = []
    scores: list[float] = []
    unscored = 0
    for number in range(start + 1, len(lines) + 1):
        first, second, score = _split_pair(path, number, lines[number - 1], 3)
        if not score.strip():
            unscored += 1
            continue
        scores.append(_parse_score(path, number, score.strip()))
        sentence1.append(first)
        sentence2.append(second)
    if not scores:
        raise BenchmarkDataError(path, None, "no scored pairs")
    name = dataset or path.name
    return StsPairs(
        name, to_flores(src_lang), to_flores(tgt_lang), tuple(sentence1), tuple(sentence2), np.array(scores), unscored
    )


STSB_MULTI_MT_PATTERN = "stsb-{code}-{split}.csv"


def stsb_multi_mt_languages(folder: str | Path, split: str = "dev") -> list[str]:
    """The language codes of the ``stsb-{code}-{split}.csv`` files in ``folder``, sorted."""
    folder = Path(folder)
    _look_at(folder)
    if not folder.is_dir():
        raise BenchmarkDataError(folder, None, "folder not found")
    name = re.compile(rf"^stsb-([A-Za-z_-]+)-{re.escape(split)}\.csv$")
    return sorted(m.group(1) for p in folder.iterdir() if (m := name.match(p.name)))


@_parsed_once
def read_stsb_multi_mt(folder: str | Path, code: str, split: str = "dev") -> StsPairs:
    """One language of stsb-multi-mt (``stsb-{code}-{split}.csv``: CSV rows ``sentence1,sentence2,score``,
    quoted where a sentence holds a comma; no header). The languages' files are line-aligned: row i
    is the same pair translated, with the same gold score.

    Raises:
        BenchmarkDataError: a row without exactly three fields, an empty sentence, a score that is
            not a number, invalid UTF-8 (all naming file and line); a file with no rows.
    """
    import csv
    import io

    path = Path(folder) / STSB_MULTI_MT_PATTERN.format(code=code, split=split)
    _look_at(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise BenchmarkDataError(path, None, "file not found") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise BenchmarkDataError(path, data.count(b"\n", 0, error.start) + 1, f"invalid UTF-8 at byte {error.start}") from None
    reader = csv.reader(io.StringIO(text, newline=""))
    sentence1: list[str] = []
    sentence2: list[str] = []
    scores: list[float] = []
    try:
        for row in reader:
            number = reader.line_num
            if len(row) != 3:
                raise BenchmarkDataError(path, number, f"expected 3 comma-separated fields (sentence1,sentence2,score), found {len(row)}")
            for name, value in zip(("sentence1", "sentence2"), row):
                if not value.strip():
                    raise BenchmarkDataError(path, number, "empty", name)
            scores.append(_parse_score(path, number, row[2].strip()))
            sentence1.append(row[0])
            sentence2.append(row[1])
    except csv.Error as error:
        raise BenchmarkDataError(path, reader.line_num, f"malformed CSV: {error}") from None
    if not scores:
        raise BenchmarkDataError(path, None, "no scored pairs")
    lang = to_flores(code)
    return StsPairs(path.name, lang, lang, tuple(sentence1), tuple(sentence2), np.array(scores, dtype=np.float64))


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


# ------------------------------------------------------------------ FLORES-200 multi-way


@dataclass(frozen=True)
class MultiwayRows:
    """The same rows of line-aligned files in several languages."""

    rows: range  # line indices (0-based) into the files
    sentences: Mapping[str, tuple[str, ...]]  # FLORES-200 code -> sentences of those rows
    total_lines: int  # lines in each file

    @property
    def langs(self) -> tuple[str, ...]:
        return tuple(self.sentences)

    def __len__(self) -> int:
        return len(self.rows)


def held_out_rows(total_lines: int, fraction: float = 0.2) -> range:
    """The last ``fraction`` of ``total_lines`` rows (at least one), e.g. a held-out evaluation set."""
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    keep = max(1, round(total_lines * fraction))
    return range(total_lines - keep, total_lines)


@_parsed_once
def read_multiway_rows(
    path: str | Path, langs: Sequence[str], rows: range | slice, *, pattern: str = "{code}.dev"
) -> MultiwayRows:
    """Rows ``rows`` of the line-aligned file ``pattern.format(code=lang)`` of each of ``langs``.

    ``langs`` are the codes as they appear in the file names (FLORES-200: ``kaz_Cyrl.dev``);
    the result is keyed by their FLORES-200 codes. A ``slice`` is resolved against the line
    count (``slice(-200, None)`` = the last 200 lines; see also :func:`held_out_rows`); a
    ``range`` must lie inside the files.

    Raises:
        BenchmarkDataError: missing file, files with different line counts (all named with
            their counts), an empty line among the selected rows, a range past the end.
        UnknownLanguageError: a code without a FLORES-200 code.
    """
    if "{code}" not in pattern:
        raise ValueError(f"pattern {pattern!r} has no {{code}}")
    folder = Path(path)
    if not langs:
        raise ValueError("no languages given")
    codes = {to_flores(lang): folder / pattern.format(code=lang) for lang in langs}
    if len(codes) != len(langs):
        raise ValueError(f"languages given twice (after mapping to FLORES-200): {list(langs)}")
    files = {file: read_lines(file) for file in codes.values()}
    _same_line_counts(files)
    total = len(next(iter(files.values())))
    if total == 0:
        raise BenchmarkDataError(next(iter(files)), None, "empty file (no lines)")
    if isinstance(rows, slice):
        selected = range(*rows.indices(total))
    else:
        selected = rows
        if len(selected) and (min(selected) < 0 or max(selected) >= total):
            raise BenchmarkDataError(next(iter(files)), None, f"rows {selected} outside the {total} lines of the files")
    if len(selected) == 0:
        raise ValueError(f"rows {rows} select nothing from {total} lines")
    sentences: dict[str, tuple[str, ...]] = {}
    for code, file in codes.items():
        lines = files[file]
        chosen = tuple(lines[i] for i in selected)
        for i, text in zip(selected, chosen):
            if not text.strip():
                raise BenchmarkDataError(file, i + 1, "empty line (rows are aligned across languages)", code)
        sentences[code] = chosen
    return MultiwayRows(selected, sentences, total)


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
                self.path, None, f"several files map to {lang}: {names}; name one in files = {{code = \"file\"}}", "pattern"
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


@_parsed_once
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
