"""What the benchmarks' readers share: the line reader, the error they raise and the parse cache,
and the reader results another module takes (`BuccSplit`, which tasks/evaluate/mining.py scores).
Each benchmark's reader is in its own file (tasks/evaluate/benchmarks/<kind>.py: Tatoeba and its
distractor folders, BUCC 2018, STS, FLORES-200 multi-way rows, XNLI).

A reader returns a small frozen dataclass of sentences (and gold labels) with languages as
FLORES-200 codes. Bad data is a :class:`BenchmarkDataError` whose message starts with
``file:line:`` and names the field; the only silent-looking drops are the ones a format
defines (unscored STS pairs, repeated BUCC gold lines), and those are counted on the result.

Lines are split on ``\\n`` only (a trailing ``\\r`` is removed, a UTF-8 BOM at the start is
ignored), never with ``str.splitlines``: that also splits on U+2028, U+0085 and friends,
which occur inside real sentences and would shift every later line of a positional gold.

Sentences (and BUCC ids) are held as Arrow string columns (:class:`Lines`, a read-only
sequence of ``str``), split and checked with Arrow compute, not as tuples of Python strings:
a parsed result stays in memory for the later reads, and at 10M lines a side a BUCC split held
as ``str`` objects (ids, sentences and an id -> line dict) took some 180 bytes a line for
lines of 20 (4.7 GB per split), where a column takes the line's bytes plus 8.

Each file is parsed once per process: a reader decorated with :func:`parsed_once` remembers
its results (a few, least recently used first out) with the state (size, times, inode) of
every file and folder it looked at (:func:`read_line_array` and :func:`look_at` note them),
and parses again only when one of those changed. The evaluate stage checks every benchmark's
files at plan time and reads them again to score one or two models; those later reads are
lookups, not parses.
"""

from __future__ import annotations

import functools
import os
import stat
import sys
import threading
import time
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tasks.stage import DataError

__all__ = [
    "BuccSplit",
    "BenchmarkDataError",
    "Lines",
    "blank_values",
    "clear_parsed",
    "line_positions",
    "look_at",
    "no_empty_lines",
    "parsed_once",
    "read_line_array",
    "read_lines",
    "same_line_counts",
]

_UTF8_BOM = b"\xef\xbb\xbf"


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


def look_at(path: str | Path) -> None:
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


def parsed_once(reader: Callable) -> Callable:
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
    look_at(path)
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


def blank_values(values: pa.Array) -> np.ndarray:
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
        self.array = (
            array.cast(pa.large_string()) if isinstance(array, pa.Array) else pa.array(list(array), type=pa.large_string())
        )

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


def no_empty_lines(path: Path, lines: pa.Array, field: str) -> None:
    blank = np.flatnonzero(blank_values(lines))
    if len(blank):
        raise BenchmarkDataError(path, int(blank[0]) + 1, "empty line (the gold is positional: a line cannot be dropped)", field)


def same_line_counts(files: Mapping[Path, Sequence[str]]) -> None:
    counts = {path: len(lines) for path, lines in files.items()}
    if len(set(counts.values())) > 1:
        listing = ", ".join(f"{path} has {n} lines" for path, n in counts.items())
        raise BenchmarkDataError(next(iter(counts)), None, f"line counts differ: {listing}")


# ------------------------------------------------------------------ reader results other modules take


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
        src = line_positions([a for a, _ in pairs], self.src_ids)
        tgt = line_positions([b for _, b in pairs], self.tgt_ids)
        return src, tgt


def line_positions(ids: Sequence[str] | pa.Array, of: Lines) -> np.ndarray:
    """The line of each of `ids` among the ids `of` (int64; -1 where absent), one hash join."""
    values = ids if isinstance(ids, pa.Array) else pa.array(list(ids), type=pa.large_string())
    return pc.index_in(values, value_set=of.array).fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
