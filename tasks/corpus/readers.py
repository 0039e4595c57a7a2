"""Streaming readers: every corpus source becomes batches of translation groups.

A `GroupBatch` is a wide polars frame: `locator` (where the group sits in its source: a
line number, a row number, a CLDR key) and one text column per FLORES-200 language, null
where the source has no valid text. Lines are split with numpy and validated as UTF-8 by
Arrow a whole chunk at a time; only a chunk that holds invalid bytes is decoded line by
line, to find and null the bad lines. Nothing holds a whole source in memory.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import fsspec
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from tasks.corpus.cldr import CLDR_CATEGORIES, cldr_multiway_table
from tasks.languages import to_flores
from tasks.stage import DataError

CHUNK_BYTES = 8 << 20
UTF8_BOM = b"\xef\xbb\xbf"


class SourceError(DataError):
    """Bad source data found before or while reading; the message names file, line and field."""


@dataclass
class GroupBatch:
    frame: pl.DataFrame
    null_reason: str  # why a null text is dropped: "invalid_utf8" for line files, "missing" for tables


def _decode_lines(data: bytes, offsets: np.ndarray) -> pa.Array:
    """Lines `data[offsets[i]:offsets[i+1]]` as a large_string array; invalid UTF-8 -> null."""
    binary = pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), len(offsets) - 1, [None, pa.py_buffer(offsets.astype(np.int64)), pa.py_buffer(data)]
    )
    try:
        text = binary.cast(pa.large_string())
    except pa.ArrowInvalid:  # rare path: find the bad lines one by one
        values = []
        for line in binary.to_pylist():
            try:
                values.append(line.decode("utf-8"))
            except UnicodeDecodeError:
                values.append(None)
        text = pa.array(values, type=pa.large_string())
    return pc.utf8_rtrim(text, characters="\r\n")


def iter_line_chunks(stream: BinaryIO, chunk_bytes: int = CHUNK_BYTES) -> Iterator[pa.Array]:
    """Lines of a binary stream as string arrays of varying length, newline and BOM removed."""
    pending = b""
    # the BOM check needs the first three bytes, whatever the chunk size or short reads
    head = b""
    while len(head) < len(UTF8_BOM) and (more := stream.read(max(chunk_bytes, len(UTF8_BOM)) - len(head))):
        head += more
    if head.startswith(UTF8_BOM):
        head = head[len(UTF8_BOM) :]
    while True:
        if head:
            chunk, head = head, b""
        else:
            chunk = stream.read(chunk_bytes)
        if not chunk:
            if pending:
                yield _decode_lines(pending, np.array([0, len(pending)]))
            return
        data = pending + chunk if pending else chunk
        newlines = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 10)
        if len(newlines) == 0:
            pending = data
            continue
        end = int(newlines[-1]) + 1
        offsets = np.concatenate(([0], newlines + 1))
        yield _decode_lines(data[:end], offsets)
        pending = data[end:]


def iter_lines(stream: BinaryIO, batch_lines: int) -> Iterator[pa.Array]:
    """Lines in arrays of exactly `batch_lines` (the last may be shorter), so files can be zipped."""
    buffered: list[pa.Array] = []
    size = 0
    for chunk in iter_line_chunks(stream):
        buffered.append(chunk)
        size += len(chunk)
        if size < batch_lines:
            continue
        # concatenate once per chunk, not once per batch (a chunk can hold many batches)
        merged = buffered[0] if len(buffered) == 1 else pa.concat_arrays(buffered)
        start = 0
        while len(merged) - start >= batch_lines:
            yield merged.slice(start, batch_lines)
            start += batch_lines
        rest = merged.slice(start)
        buffered, size = ([rest] if len(rest) else []), len(rest)
    if size:
        yield pa.concat_arrays(buffered)


def count_lines(stream: BinaryIO) -> int:
    """Lines as `iter_lines` counts them: newlines, plus a final line without one."""
    count, last, first = 0, b"\n", True
    while chunk := stream.read(CHUNK_BYTES):
        if first:  # a BOM is not a line (a file holding only a BOM has none)
            while len(chunk) < len(UTF8_BOM) and (more := stream.read(CHUNK_BYTES)):
                chunk += more
            chunk = chunk[len(UTF8_BOM) :] if chunk.startswith(UTF8_BOM) else chunk
            first = False
            if not chunk:
                continue
        count += chunk.count(b"\n")
        last = chunk[-1:]
    return count + (last != b"\n")


def open_binary(path: str) -> BinaryIO:
    """A local path or fsspec URL, transparently decompressed by extension."""
    return fsspec.open(path, "rb", compression="infer").open()


def require_equal_line_counts(counts: Sequence[tuple[str, int]]) -> None:
    """Line-aligned files must have equal lengths; the error names every file and its count."""
    if len({n for _, n in counts}) > 1:
        described = ", ".join(f"{label}: {n} lines" for label, n in counts)
        raise SourceError(f"line-aligned files have different line counts ({described})")


def read_aligned_lines(
    named_streams: Sequence[tuple[str, str, BinaryIO]], batch_lines: int, *, locator_prefix: str = ""
) -> Iterator[GroupBatch]:
    """Zip line-aligned files (label, lang, stream) into groups; unequal lengths are an error."""
    iterators = [iter_lines(stream, batch_lines) for _, _, stream in named_streams]
    langs = [to_flores(lang) for _, lang, _ in named_streams]
    line = 0
    while True:
        arrays = [next(it, None) for it in iterators]
        if all(a is None for a in arrays):
            if line == 0:  # a source with no lines at all is a mistake (wrong path, failed export), not data
                raise SourceError(f"{', '.join(label for label, _, _ in named_streams)}: empty file (no lines)")
            return
        lengths = [0 if a is None else len(a) for a in arrays]
        if len(set(lengths)) > 1:
            totals = [line + n + sum(len(rest) for rest in it) for n, it in zip(lengths, iterators)]
            require_equal_line_counts([(label, total) for (label, _, _), total in zip(named_streams, totals)])
        n = lengths[0]
        locator = pl.int_range(line + 1, line + n + 1, eager=True).cast(pl.String)
        if locator_prefix:
            locator = locator_prefix + locator
        frame = pl.DataFrame({"locator": locator}).with_columns(
            [pl.from_arrow(a).cast(pl.String).alias(lang) for a, lang in zip(arrays, langs)]
        )
        line += n
        yield GroupBatch(frame, "invalid_utf8")


def check_aligned_line_counts(files: Sequence[tuple[str, str]]) -> None:
    """Count lines of aligned local files up front, so a mismatch fails before any work."""
    counts = []
    for label, path in files:
        with open_binary(path) as stream:
            counts.append((label, count_lines(stream)))
    require_equal_line_counts(counts)


def read_text_files(files: dict[str, str], batch_lines: int, *, locator_prefix: str = "") -> Iterator[GroupBatch]:
    if len(files) > 1:
        check_aligned_line_counts([(path, path) for path in files.values()])
    with ExitStack() as stack:
        streams = [(path, lang, stack.enter_context(open_binary(path))) for lang, path in files.items()]
        yield from read_aligned_lines(streams, batch_lines, locator_prefix=locator_prefix)


def read_multiway_dir(
    directory: str, langs: Sequence[str], pattern: str, batch_lines: int, file_names: dict[str, str] | None = None
) -> Iterator[GroupBatch]:
    names = file_names or {}
    files = {lang: f"{directory.rstrip('/')}/{names.get(lang) or pattern.format(code=lang)}" for lang in langs}
    missing = [path for path in files.values() if not fsspec.core.url_to_fs(path)[0].exists(path)]
    if missing:
        raise SourceError(f"multi-way directory {directory} lacks files: {missing}")
    yield from read_text_files(files, batch_lines)


def read_tatoeba_pair(directory: str, lang: str, batch_lines: int) -> Iterator[GroupBatch]:
    base = f"{directory.rstrip('/')}/tatoeba.{lang}-eng"
    # pairs share line numbers, so the locator names the pair: group ids stay unique per source
    yield from read_text_files({lang: f"{base}.{lang}", "eng": f"{base}.eng"}, batch_lines, locator_prefix=f"{lang}-eng:")


def read_moses_zip(zip_path: Path, langs: Sequence[str], batch_lines: int) -> Iterator[GroupBatch]:
    """OPUS Moses zips hold `{corpus}.{a}-{b}.{a}` and `.{b}`, with the pair in either order."""
    l1, l2 = langs
    with zipfile.ZipFile(zip_path) as archive:
        names = archive.namelist()
        members = {}
        for lang in (l1, l2):
            found = [n for n in names if n.endswith((f".{l1}-{l2}.{lang}", f".{l2}-{l1}.{lang}"))]
            if len(found) != 1:
                raise SourceError(f"{zip_path}: expected one member ending '.{l1}-{l2}.{lang}', found {found or 'none'}")
            members[lang] = found[0]
        counts = []
        for lang in (l1, l2):
            with archive.open(members[lang]) as stream:
                counts.append((f"{zip_path.name}:{members[lang]}", count_lines(stream)))
        require_equal_line_counts(counts)
        with archive.open(members[l1]) as s1, archive.open(members[l2]) as s2:
            yield from read_aligned_lines(
                [(members[l1], l1, io.BufferedReader(s1)), (members[l2], l2, io.BufferedReader(s2))], batch_lines
            )


def _binary_to_text(column: pa.ChunkedArray | pa.Array) -> pa.Array:
    if isinstance(column, pa.ChunkedArray):
        column = pa.concat_arrays(column.chunks) if column.num_chunks else pa.array([], pa.large_binary())
    if pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type):
        column = column.cast(pa.large_binary())
        offsets = np.frombuffer(column.buffers()[1], dtype=np.int64)[column.offset : column.offset + len(column) + 1]
        data = column.buffers()[2].to_pybytes() if column.buffers()[2] is not None else b""
        text = _decode_lines(data, offsets)
        return pc.if_else(column.is_null(), pa.scalar(None, pa.large_string()), text)
    return column.cast(pa.large_string())


def read_tsv(
    path: str, columns: dict[str, str | int], header: bool, batch_lines: int, malformed: list[int]
) -> Iterator[GroupBatch]:
    """Stream a TSV with Arrow's CSV reader; rows with the wrong number of fields are counted in `malformed`."""
    import pyarrow.csv as pacsv

    def on_invalid(row: pacsv.InvalidRow) -> str:
        malformed[0] += 1
        return "skip"

    def open_reader(stack: ExitStack, column_types: dict[str, pa.DataType] | None) -> pacsv.CSVStreamingReader:
        stream = stack.enter_context(open_binary(path))
        if stream.read(len(UTF8_BOM)) != UTF8_BOM:
            stream.seek(0)
        read_options = pacsv.ReadOptions(block_size=CHUNK_BYTES, autogenerate_column_names=not header)
        parse_options = pacsv.ParseOptions(
            delimiter="\t", quote_char=False, newlines_in_values=False, invalid_row_handler=on_invalid
        )
        convert_options = pacsv.ConvertOptions(column_types=column_types or {}, strings_can_be_null=False)
        return pacsv.open_csv(stream, read_options=read_options, parse_options=parse_options, convert_options=convert_options)

    with ExitStack() as stack:
        names = open_reader(stack, None).schema.names
    selected: dict[str, str] = {}
    for lang, column in columns.items():
        name = names[column] if isinstance(column, int) and 0 <= column < len(names) else column
        if name not in names:
            raise SourceError(f"{path}: no column {column!r} for {lang}; columns are {names}")
        selected[to_flores(lang)] = str(name)
    # read every column as bytes: invalid UTF-8 becomes a counted drop, not a reader crash
    malformed[0] = 0
    with ExitStack() as stack:
        reader = open_reader(stack, {name: pa.binary() for name in names})
        row = 0
        for batch in reader:
            n = batch.num_rows
            data = {"locator": pl.int_range(row + 1 + header, row + n + 1 + header, eager=True).cast(pl.String)}
            for lang, name in selected.items():
                data[lang] = pl.from_arrow(_binary_to_text(batch.column(name))).cast(pl.String)
            row += n
            # every cell is read as bytes and empty cells stay "", so a null is invalid UTF-8
            yield GroupBatch(pl.DataFrame(data), "invalid_utf8")


def is_text_type(data_type: pa.DataType) -> bool:
    """Whether a Parquet column can be read as text: strings, or bytes (decoded as UTF-8, invalid
    ones counted as drops), plain or dictionary-encoded. Numbers, dates, lists and the like are
    not text: casting them would turn 80 integers into 80 "sentences"."""
    if pa.types.is_dictionary(data_type):
        data_type = data_type.value_type
    return (
        pa.types.is_string(data_type)
        or pa.types.is_large_string(data_type)
        or pa.types.is_string_view(data_type)
        or pa.types.is_binary(data_type)
        or pa.types.is_large_binary(data_type)
        or pa.types.is_binary_view(data_type)
    )


def check_text_columns(part: str, schema: pa.Schema, columns: dict[str, str]) -> None:
    """A SourceError naming the file, the column and its type for the first column in `columns`
    (language -> column) that is missing from `schema` or not a text type."""
    names = schema.names
    missing = [c for c in columns.values() if c not in names]
    if missing:
        raise SourceError(f"{part}: no columns {missing}; columns are {names}")
    for lang, column in columns.items():
        data_type = schema.field(column).type
        if not is_text_type(data_type):
            raise SourceError(
                f"{part}: column {column!r} ({lang}) has type {data_type}, not text (string, large_string or a dictionary of strings)"
            )


def read_parquet(path: str, columns: dict[str, str], batch_lines: int) -> Iterator[GroupBatch]:
    import pyarrow.parquet as pq

    fs, root = fsspec.core.url_to_fs(path)
    if fs.isdir(root):  # a dataset: its .parquet files in name order, rows numbered across them
        parts = sorted(p for p in fs.find(root) if p.endswith(".parquet"))
        if not parts:
            raise SourceError(f"{path}: a directory without .parquet files")
    else:
        parts = [root]
    row = 0
    for part in parts:
        with fs.open(part, "rb") as f:
            parquet = pq.ParquetFile(f)
            check_text_columns(part, parquet.schema_arrow, columns)
            for batch in parquet.iter_batches(batch_size=batch_lines, columns=list(columns.values())):
                data = {"locator": pl.int_range(row, row + batch.num_rows, eager=True).cast(pl.String)}
                for lang, name in columns.items():
                    data[to_flores(lang)] = pl.from_arrow(_binary_to_text(batch.column(name))).cast(pl.String)
                row += batch.num_rows
                yield GroupBatch(pl.DataFrame(data), "missing")


def read_cldr(langs: Sequence[str], categories: Sequence[str] | None) -> Iterator[GroupBatch]:

    flores = [to_flores(lang) for lang in langs]
    table = cldr_multiway_table(flores, categories or CLDR_CATEGORIES)
    frame = pl.from_arrow(table).rename({"key": "locator"})
    yield GroupBatch(frame.select("locator", *flores), "missing")
