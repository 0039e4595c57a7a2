"""Every file under tests/data/bad/ gives a clear error (file, line, field) before any compute,
or a counted drop in the manifest. Table-driven: one entry per bad input."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from flows.cli import app
from flows.config import ConfigError, load_config
from storage import ArtifactStore
from tasks.stage import run_stage

BAD = Path(__file__).resolve().parents[1] / "data" / "bad"


def run_corpus(tmp: Path, source: dict[str, Any], **config: Any):
    from tasks.corpus import CORPUS_STAGE
    from tasks.corpus.config import CorpusConfig

    cfg = CorpusConfig.model_validate({"sources": [{"name": "bad", **source}], "dev_fraction": 0.0, **config})
    return run_stage(ArtifactStore(tmp / "root"), CORPUS_STAGE, cfg, {})[1]


def pair(stem: str) -> dict[str, Any]:
    return {"kind": "text", "files": {"en": str(BAD / "corpus" / f"{stem}.en"), "kk": str(BAD / "corpus" / f"{stem}.kk")}}


@dataclass(frozen=True)
class DropCase:
    name: str
    source: dict[str, Any]
    dropped: dict[str, int]  # reasons that must be counted, with their counts
    check: Callable[[Any], None] | None = None


def no_carriage_returns_or_boms(table: Any) -> None:
    texts = table.column("text").to_pylist()
    assert not any("\r" in t or "\ufeff" in t for t in texts)


def tabs_kept_and_no_control_characters(table: Any) -> None:
    import re

    texts = table.column("text").to_pylist()
    assert "tab\tis fine" in texts and "таб\tжақсы" in texts
    assert not any(re.search(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]", t) for t in texts), texts


DROPS = [
    DropCase("whitespace-only lines", pair("whitespace_lines"), {"empty": 5, "group_incomplete": 3}),
    DropCase("100,000-character line", pair("long_line"), {"too_long": 1, "group_incomplete": 1}),
    DropCase(
        "invalid UTF-8 (Latin-1 byte, truncated character)", pair("invalid_utf8"), {"invalid_utf8": 2, "group_incomplete": 2}
    ),
    DropCase("mixed CRLF/LF line endings", pair("mixed_endings"), {}, no_carriage_returns_or_boms),
    DropCase("UTF-8 byte-order marks (text)", pair("bom"), {}, no_carriage_returns_or_boms),
    DropCase(
        "UTF-8 byte-order mark (TSV header)",
        {"kind": "tsv", "path": str(BAD / "corpus" / "bom.tsv"), "columns": {"en": "en", "kk": "kk"}},
        {},
        no_carriage_returns_or_boms,
    ),
    DropCase(
        "TSV rows with the wrong number of fields",
        {"kind": "tsv", "path": str(BAD / "corpus" / "wrong_fields.tsv"), "columns": {"en": "en", "kk": "kk"}},
        {"malformed_row": 4},
    ),
    DropCase("duplicate rows", pair("duplicate_rows"), {"duplicate": 4}),
    DropCase(
        "control characters (NUL, ESC, DEL; a tab is kept)",
        pair("control_chars"),
        {"control_characters": 3, "group_incomplete": 3},
        tabs_kept_and_no_control_characters,
    ),
]


@pytest.mark.parametrize("case", DROPS, ids=lambda c: c.name)
def test_corpus_bad_rows_are_counted_drops(case: DropCase, tmp_path: Path, record) -> None:
    manifest = run_corpus(tmp_path, case.source)
    for reason, n in case.dropped.items():
        assert manifest.dropped.get(reason) == n, f"{reason}: {manifest.dropped}"
    assert set(manifest.dropped) - {"duplicate", "not_sampled"} == set(case.dropped) - {"duplicate", "not_sampled"}
    assert manifest.rows_in == manifest.rows_out + sum(manifest.dropped.values())
    table = ArtifactStore(tmp_path / "root").read_table("corpus", manifest.key)
    if case.check:
        case.check(table)
    shown = {k: v for k, v in manifest.dropped.items() if v}
    record(
        "bad-input",
        f"corpus: {case.name}",
        "counted drop" if shown else "read correctly",
        f"manifest dropped {shown or '{}'}; {manifest.rows_out} rows kept",
    )


@dataclass(frozen=True)
class ErrorCase:
    name: str
    run: Callable[[Path], Any]
    error: type[BaseException] | tuple[type[BaseException], ...]
    must_mention: tuple[str, ...]  # file, line, field


def _corpus_error(source: dict[str, Any]) -> Callable[[Path], Any]:
    return lambda tmp: run_corpus(tmp, source)


def _config(name: str) -> Callable[[Path], Any]:
    return lambda tmp: load_config(BAD / "configs" / name)


def _integer_parquet_source(tmp: Path) -> Any:
    """An English column that holds integers: 80 rows of "0", "1", ... were accepted as text.
    The stage's `check_sources` (what the plan runs before any stage) names file, column, type."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tasks.corpus import CORPUS_STAGE
    from tasks.corpus.config import CorpusConfig
    from tasks.corpus.readers import SourceError

    path = tmp / "data" / "numbers.parquet"
    path.parent.mkdir(parents=True)
    pq.write_table(pa.table({"english": pa.array(range(80), pa.int64()), "kazakh": [f"сөйлем {i}" for i in range(80)]}), path)
    config = CorpusConfig.model_validate(
        {
            "sources": [{"name": "numbers", "kind": "parquet", "path": str(path), "columns": {"en": "english", "kk": "kazakh"}}],
            "dev_fraction": 0.0,
        }
    )
    problems = CORPUS_STAGE.check_sources(config)
    assert len(problems) == 1, problems
    with pytest.raises(SourceError) as in_stage:  # a remote file, not checked at plan time, fails the same way when read
        run_corpus(tmp, {"kind": "parquet", "path": str(path), "columns": {"en": "english", "kk": "kazakh"}})
    assert str(in_stage.value) in problems[0]
    raise SourceError(problems[0])


# each benchmark's reader lives in its benchmark's file
READERS = {
    "read_tatoeba": "tasks.evaluate.benchmarks.tatoeba",
    "read_bucc": "tasks.evaluate.benchmarks.bucc",
    "read_sts_tsv": "tasks.evaluate.benchmarks.sts",
    "read_multiway_rows": "tasks.evaluate.benchmarks.multiway",
}


def _evaluate(reader: str, *args: Any) -> Callable[[Path], Any]:
    def call(tmp: Path) -> Any:
        import importlib

        return getattr(importlib.import_module(READERS[reader]), reader)(*args)

    return call


def _model(tmp: Path) -> Any:
    from tasks.base_model import BASE_MODEL_STAGE
    from tasks.base_model.config import BaseModelConfig

    return run_stage(
        ArtifactStore(tmp / "root"),
        BASE_MODEL_STAGE,
        BaseModelConfig(source="local", model=str(BAD / "models" / "pickle_only")),
        {},
    )


def _errors() -> list[ErrorCase]:
    from tasks.base_model.stage import ModelSourceError
    from tasks.corpus.readers import SourceError
    from tasks.evaluate.datasets import BenchmarkDataError
    from tasks.languages import UnknownLanguageError

    tat, bucc, sts, multi = (BAD / "evaluate" / d for d in ("tatoeba", "bucc", "sts", "multiway"))
    return [
        ErrorCase("corpus: empty files", _corpus_error(pair("empty")), SourceError, ("empty.en", "empty")),
        ErrorCase(
            "corpus: mismatched line counts in aligned files",
            _corpus_error(pair("mismatch")),
            SourceError,
            ("mismatch.en: 4 lines", "mismatch.kk: 3 lines"),
        ),
        ErrorCase(
            "corpus: unknown language code in a source",
            _corpus_error(
                {"kind": "text", "files": {"en": str(BAD / "corpus" / "bom.en"), "xx-klingon": str(BAD / "corpus" / "bom.kk")}}
            ),
            ValueError,
            ("xx-klingon",),
        ),
        ErrorCase("config: empty file", _config("empty.toml"), ConfigError, ("empty.toml", "[pipeline]")),
        ErrorCase("config: malformed TOML", _config("malformed.toml"), ConfigError, ("malformed.toml", "line 3")),
        ErrorCase(
            "config: wrong types", _config("wrong_types.toml"), ConfigError, ("wrong_types.toml", "pipeline.max_workers", "'two'")
        ),
        ErrorCase(
            "config: quoted numbers",
            _config("quoted_numbers.toml"),
            ConfigError,
            ("quoted_numbers.toml", "pipeline.max_workers", "'2'"),
        ),
        ErrorCase(
            "config: a boolean for a number",
            _config("boolean_number.toml"),
            ConfigError,
            ("boolean_number.toml", "pipeline.max_workers", "(got True)"),
        ),
        ErrorCase(
            "corpus: a Parquet text column of integers",
            _integer_parquet_source,
            SourceError,
            ("numbers.parquet", "column 'english'", "type int64", "not text"),
        ),
        ErrorCase(
            "config: unknown language code",
            _config("unknown_language.toml"),
            ConfigError,
            ("unknown_language.toml", "corpus.sources[0].langs", "klingon"),
        ),
        ErrorCase(
            "config: unknown key", _config("unknown_key.toml"), ConfigError, ("unknown_key.toml", "corpus.sede", "unknown key")
        ),
        ErrorCase(
            "config: duplicate source names",
            _config("duplicate_source_names.toml"),
            ConfigError,
            ("duplicate_source_names.toml", "corpus.sources", "'s'"),
        ),
        ErrorCase("config: duplicate key", _config("duplicate_key.toml"), ConfigError, ("duplicate_key.toml", "line 3")),
        ErrorCase(
            "config: one language under two spellings",
            _config("duplicate_language.toml"),
            ConfigError,
            ("duplicate_language.toml", "corpus.sources[0].langs", "eng_Latn"),
        ),
        ErrorCase("config: invalid UTF-8", _config("invalid_utf8.toml"), ConfigError, ("invalid_utf8.toml", "UTF-8", "line 3")),
        ErrorCase(
            "config: pipeline name escaping the store root",
            _config("path_traversal_name.toml"),
            ConfigError,
            ("path_traversal_name.toml", "pipeline.name", "../../etc"),
        ),
        ErrorCase(
            "evaluate: Tatoeba files with different line counts",
            _evaluate("read_tatoeba", tat, "kaz"),
            BenchmarkDataError,
            ("tatoeba.kaz-eng.kaz has 3 lines", "tatoeba.kaz-eng.eng has 2 lines"),
        ),
        ErrorCase(
            "evaluate: Tatoeba whitespace-only line",
            _evaluate("read_tatoeba", tat, "tel"),
            BenchmarkDataError,
            ("tatoeba.tel-eng.tel:2", "tel", "empty line"),
        ),
        ErrorCase(
            "evaluate: Tatoeba invalid UTF-8",
            _evaluate("read_tatoeba", tat, "kat"),
            BenchmarkDataError,
            ("tatoeba.kat-eng.kat:2", "invalid UTF-8"),
        ),
        ErrorCase(
            "evaluate: Tatoeba empty files",
            _evaluate("read_tatoeba", tat, "swh"),
            BenchmarkDataError,
            ("tatoeba.swh-eng.swh", "no sentences"),
        ),
        ErrorCase(
            "evaluate: Tatoeba unknown language code", _evaluate("read_tatoeba", tat, "qqq"), UnknownLanguageError, ("qqq",)
        ),
        ErrorCase(
            "evaluate: BUCC duplicate sentence id",
            _evaluate("read_bucc", bucc, "de", "sample"),
            BenchmarkDataError,
            ("de-en.sample.de:3", "id", "de-000001", "first on line 1"),
        ),
        ErrorCase(
            "evaluate: BUCC gold id that does not exist",
            _evaluate("read_bucc", bucc, "fr", "sample"),
            BenchmarkDataError,
            ("fr-en.sample.gold:2", "id_en", "en-000009"),
        ),
        ErrorCase(
            "evaluate: STS score that is not a number",
            _evaluate("read_sts_tsv", sts / "scores_not_numbers.tsv", "en", "en"),
            BenchmarkDataError,
            ("scores_not_numbers.tsv:3", "score", "'five'"),
        ),
        ErrorCase(
            "evaluate: STS line with the wrong field count",
            _evaluate("read_sts_tsv", sts / "wrong_field_count.tsv", "en", "en"),
            BenchmarkDataError,
            ("wrong_field_count.tsv:2", "expected 3"),
        ),
        ErrorCase(
            "evaluate: empty multi-way (FLORES) files",
            _evaluate("read_multiway_rows", multi, ["eng_Latn", "kaz_Cyrl"], slice(0, 10)),
            BenchmarkDataError,
            ("eng_Latn.dev", "empty"),
        ),
        ErrorCase(
            "base_model: only pickled weights (pytorch_model.bin)",
            _model,
            ModelSourceError,
            ("pickle_only", "pytorch_model.bin", "pickled weights are not loaded"),
        ),
    ]


@pytest.mark.parametrize("case", _errors(), ids=lambda c: c.name)
def test_bad_inputs_fail_with_a_clear_error_before_any_work(case: ErrorCase, tmp_path: Path, record) -> None:
    with pytest.raises(case.error) as caught:
        case.run(tmp_path)
    message = str(caught.value)
    for needle in case.must_mention:
        assert needle in message, f"{needle!r} missing from: {message}"
    written = [p for p in (tmp_path / "root").rglob("*") if p.is_file()] if (tmp_path / "root").exists() else []
    assert written == [], f"work was written before the error: {written}"
    first = message.splitlines()[0] if message else ""
    shown = " / ".join(line.strip() for line in message.splitlines()[:4])
    record(
        "bad-input",
        case.name,
        "clear error",
        f"`{type(caught.value).__name__}: {shown[:220]}{' …' if len(shown) > 220 or first != message else ''}`",
    )


def test_bom_config_loads(record) -> None:
    config = load_config(BAD / "configs" / "bom.toml")
    assert config.name == "bom"
    record("bad-input", "config: UTF-8 byte-order mark (Windows editors)", "read correctly", "the BOM is skipped")


@pytest.mark.parametrize("name", ["malformed.toml", "wrong_types.toml", "unknown_language.toml"])
def test_cli_exits_2_on_bad_config_without_traceback(name: str, tmp_path: Path) -> None:
    config = tmp_path / name
    shutil.copy(BAD / "configs" / name, config)
    result = CliRunner().invoke(app, ["plan", str(config)])
    flat = result.output.replace("\n", "")  # rich wraps long paths
    assert result.exit_code == 2 and "Traceback" not in result.output and name in flat, result.output


@pytest.mark.slow
def test_a_data_error_inside_a_stage_is_one_line_without_a_traceback(tmp_path: Path, record) -> None:
    """Issue 15 (2): a data error that only the stage finds (here two empty line-aligned files:
    equal line counts, so the plan-time check passes; the corpus shard raises `SourceError`)
    came after about 100 lines of Prefect traceback. A real run through Prefect: the message
    once, exit 1, no traceback."""
    import subprocess
    import sys

    from flows.sweep import toml_document
    from tests.reliability.conftest import driver_env

    data = tmp_path / "data"
    data.mkdir()
    for lang in ("en", "kk"):
        (data / f"empty.{lang}").write_bytes(b"")
    sources = [{"name": "empty", "kind": "text", "files": {lang: str(data / f"empty.{lang}") for lang in ("en", "kk")}}]
    config = tmp_path / "pipeline.toml"
    config.write_text(
        toml_document(
            {"pipeline": {"name": "data-error", "root": str(tmp_path / "root"), "max_workers": 1}, "corpus": {"sources": sources}}
        ),
        encoding="utf-8",
    )
    home = tmp_path / "prefect-home"
    home.mkdir()
    env = driver_env(tmp_path, PREFECT_HOME=str(home), PREFECT_SERVER_ANALYTICS_ENABLED="false")
    env.pop("PREFECT_API_URL", None)
    env.pop("XLEMBED_DEBUG", None)
    result = subprocess.run(
        [sys.executable, "-m", "flows.cli", "run", str(config)], env=env, capture_output=True, text=True, timeout=120
    )
    output = result.stdout + result.stderr
    assert result.returncode == 1, output[-3000:]
    assert "Traceback" not in output, output[-3000:]
    error_line = next(line for line in result.stderr.splitlines() if line.startswith("error: run failed: "))
    assert error_line.endswith(f"{data / 'empty.en'}, {data / 'empty.kk'}: empty file (no lines)"), output[-3000:]
    assert len([line for line in result.stderr.splitlines() if "empty file (no lines)" in line]) == 2, output[
        -3000:
    ]  # the shard's line, the summary
    verbose = subprocess.run(
        [sys.executable, "-m", "flows.cli", "--verbose", "run", str(config)], env=env, capture_output=True, text=True, timeout=120
    )
    assert verbose.returncode == 1 and "Traceback" in verbose.stderr and "SourceError" in verbose.stderr, verbose.stderr[
        -3000:
    ]  # --verbose keeps them
    record(
        "bad input", "a data error inside a stage (empty line-aligned files)", "one line", f"exit 1, '{error_line}', no traceback"
    )
