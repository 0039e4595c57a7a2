"""What a shard builder reports besides its tables (`ShardContext`): rows read, rows dropped and
why, the dropped rows themselves (tasks/rejects.py), metrics, progress, and files to attach."""

from __future__ import annotations

import tempfile
import zlib
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from storage import AlreadyCommitted
from tasks.drop_reasons import drop_reason
from tasks.rejects import REJECTS_PER_REASON, REJECTS_SCHEMA, Reservoir, rejects_file
from tasks.stop import raise_if_stopping


class ShardContext:
    """What a shard builder reports besides its tables: rows read, rows dropped and why,
    metrics, and files to attach to the artifact (model weights, reports), written into
    `workdir` (a scratch folder that lives as long as the shard)."""

    def __init__(
        self,
        shard_id: str,
        progress: Callable[[int], None] | None = None,
        workdir: Path | None = None,
        artifact_key: str | None = None,
        built_elsewhere: Callable[[], bool] | None = None,
    ) -> None:
        self.shard_id = shard_id
        self._built_elsewhere = built_elsewhere
        self.artifact_key = artifact_key  # the key of the artifact being built (None outside run_shard)
        self.rows_in = 0
        self.dropped: Counter[str] = Counter()
        self.metrics: dict[str, Any] = {}
        self.attachments: dict[str, Path] = {}
        self.workdir = workdir if workdir is not None else Path(tempfile.mkdtemp(prefix="xlembed-shard-"))
        self._progress = progress
        self._counts_rows = True  # until expect() names another unit
        self._rejects: dict[str, Reservoir] = {}

    def raise_if_built_elsewhere(self) -> None:
        """Call after waiting on a lock that another build of the same artifact held (training's
        checkpoint lock): if that build finished this shard or committed the artifact meanwhile,
        stop here; `run_shard` then returns what the other build committed instead of building
        (and writing) it a second time."""
        if self._built_elsewhere is not None and self._built_elsewhere():
            raise AlreadyCommitted(f"shard {self.shard_id} was built by another run while this one waited")

    def attach(self, name: str, path: Path) -> None:
        """Store a local file as `files/{name}` of the artifact."""
        self.attachments[name] = path

    def attach_dir(self, directory: Path, prefix: str = "") -> None:
        """Attach every file under a folder, keeping relative paths."""
        for path in sorted(p for p in directory.rglob("*") if p.is_file()):
            self.attach(f"{prefix}{path.relative_to(directory).as_posix()}", path)

    def progress(self, n: int, *, check_stop: bool = True) -> None:
        """Advance the shard's progress by `n` units (see `expect`); also where a shard stops when
        the run is asked to (its record is not written, so a rerun builds it again). A stage
        that stops at its own safe points (training: after the step, with a checkpoint) passes
        `check_stop=False`."""
        if check_stop:
            raise_if_stopping(f"shard {self.shard_id}: stopped before it finished")
        if self._progress is not None:
            self._progress(n)

    def expect(self, total: int | None, unit: str, done: int = 0, *, label: str | None = None) -> None:
        """Count progress in `unit` (shards, sentences, pairs, steps) out of `total`, `done` of
        them already (a resumed run): the bar and the log lines show rate and ETA in it.
        `label` says what is counted now (evaluate: the model and the benchmark); the bar and
        the lines show it after the shard's name."""
        self._counts_rows = unit == "rows"
        expect = getattr(self._progress, "expect", None)
        if expect is not None:
            if label is None:
                expect(total, unit, done)
            else:
                expect(total, unit, done, label=label)

    def sharing_progress(self) -> ShardContext:
        """A new context of the same shard and workdir reporting to the same progress display,
        counting its own rows (evaluate scores the base model beside the trained one)."""
        return ShardContext(self.shard_id, progress=self._progress, workdir=self.workdir)

    def report(self, line: str) -> None:
        """A progress line worth keeping (the trainer's step, losses, speed, ETA)."""
        report = getattr(self._progress, "report", None)
        if report is not None:
            report(line)

    def read(self, rows: int) -> None:
        self.rows_in += rows
        if self._progress is not None and self._counts_rows:
            self._progress(rows)

    def drop(self, reason: str, rows: int = 1) -> None:
        """Count `rows` dropped for `reason`, a name in DROP_REASONS (tasks/drop_reasons.py)."""
        drop_reason(reason)
        if rows:
            self.dropped[reason] += int(rows)

    def reject(self, reason: str, rows: pa.Table | Any, *, cap: int = REJECTS_PER_REASON) -> None:
        """Keep dropped rows for a person to look at, in the attached `rejects/{shard}.parquet`
        (REJECTS_SCHEMA): all of a reason's rows up to `cap`, then a uniform sample of `cap`,
        seeded by shard and reason. `rows`: an Arrow table or polars frame with any of the
        columns id, lang, text, source, line (missing ones are null). Counting them is `drop`'s job."""
        drop_reason(reason)
        table = rows if isinstance(rows, pa.Table) else rows.to_arrow()
        if not table.num_rows:
            return
        columns = {}
        for name in REJECTS_SCHEMA.names[1:]:
            kind = REJECTS_SCHEMA.field(name).type
            columns[name] = table.column(name).cast(kind) if name in table.column_names else pa.nulls(table.num_rows, kind)
        table = pa.table({"reason": pa.array([reason] * table.num_rows, pa.string()), **columns}, schema=REJECTS_SCHEMA)
        if reason not in self._rejects:
            self._rejects[reason] = Reservoir(cap, zlib.crc32(f"{self.shard_id}\0{reason}".encode()))
        self._rejects[reason].add(table)
        # written now (a few thousand rows at most): run_shard uploads attachments after the builder ends
        kept = pa.concat_tables([self._rejects[r].rows for r in sorted(self._rejects)])
        path = self.workdir / rejects_file(self.shard_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(kept, path)
        self.attach(rejects_file(self.shard_id), path)
