"""The align stage through run_stage: schema, pairs, resume, drops, config errors, each backend."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import polars as pl
import pyarrow as pa
import pytest
from pydantic import ValidationError

from storage import ArtifactStore
from tasks.align import ALIGN_STAGE
from tasks.align.config import AlignConfig
from tasks.align.schema import WORD_ALIGNMENT_SCHEMA
from tasks.corpus import CORPUS_STAGE
from tasks.corpus.config import CorpusConfig
from tasks.shard_context import ShardContext
from tasks.stage import InputArtifact, run_shard, run_stage, source_fingerprints, stage_key
from tasks.stage_config import keyed_config

TEXTS = {
    "eng": [
        "The cat sleeps on the sofa.",
        "I drink coffee every morning.",
        "The train leaves at seven.",
        "My sister is a doctor.",
        "It rains today.",
    ],
    "fra": [
        "Le chat dort sur le canapé.",
        "Je bois du café chaque matin.",
        "Le train part à sept heures.",
        "Ma sœur est médecin.",
        "Il pleut aujourd'hui.",
    ],
    "kaz": [
        "Мысық диванда ұйықтап жатыр.",
        "Мен күн сайын кофе ішемін.",
        "Пойыз жетіде жүреді.",
        "Менің әпкем дәрігер.",
        "Бүгін жаңбыр жауады.",
    ],
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[ArtifactStore, dict[str, str]]:
    tmp = tmp_path_factory.mktemp("align-corpus")
    for code, lines in TEXTS.items():
        (tmp / f"train.{code}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    config = CorpusConfig.model_validate(
        {
            "sources": [{"name": "inline", "kind": "text", "files": {c: str(tmp / f"train.{c}") for c in TEXTS}}],
            "dev_fraction": 0.0,
        }
    )
    store = ArtifactStore(tmp / "artifacts")
    ref, _ = run_stage(store, CORPUS_STAGE, config, {})
    return store, {"corpus": ref.key}


def wsp_config(model_dir: Path, **extra) -> AlignConfig:
    return AlignConfig.model_validate(
        {
            "backend": "wspalign",
            "groups_per_shard": 2,
            **extra,
            "wspalign": {"source": "local", "model": str(model_dir), "threshold": 0.0, "combine": "union"},
        }
    )


def test_wspalign_stage_writes_english_pivot_pairs_and_resumes(corpus, tiny_wspalign_dir: Path) -> None:
    store, keys = corpus
    config = wsp_config(tiny_wspalign_dir)
    _, manifest = run_stage(store, ALIGN_STAGE, config, keys)
    table = store.read_table("align", manifest.key)
    assert table.schema.equals(WORD_ALIGNMENT_SCHEMA)
    assert manifest.shards == ["groups-00000", "groups-00001", "groups-00002"]
    frame = pl.from_arrow(table)
    assert frame.height == 10 and set(frame["src_lang"]) == {"eng_Latn"} and set(frame["tgt_lang"]) == {"fra_Latn", "kaz_Cyrl"}
    assert all(i == f"{g}:{s}-{t}" for i, g, s, t in frame.select("id", "group_id", "src_lang", "tgt_lang").iter_rows())
    assert set(frame["backend"]) == {"wspalign"}
    for row in frame.iter_rows(named=True):
        assert row["src_words"][-1] == "." and all(
            0 <= a["src"] < len(row["src_words"]) and 0 <= a["tgt"] < len(row["tgt_words"]) for a in row["alignments"]
        )
    assert manifest.metrics["pairs"] == 10 and manifest.metrics["pairs_by_language"] == {
        "eng_Latn-fra_Latn": 5,
        "eng_Latn-kaz_Cyrl": 5,
    }

    # interrupted after the first shard, then run again: the rest is built, the output is the same
    other = wsp_config(tiny_wspalign_dir, max_words=100)  # another key, same output
    key = stage_key(ALIGN_STAGE, other, keys, source_fingerprints(ALIGN_STAGE, other))
    shards = ALIGN_STAGE.plan_shards(other, {"corpus": InputArtifact(store, "corpus", keys["corpus"])})
    run_shard(store, ALIGN_STAGE, key, other, keys, shards[0])
    assert store.completed_shard("align", key, shards[0].shard_id) is not None and not store.is_committed("align", key)
    _, second = run_stage(store, ALIGN_STAGE, other, keys)
    assert second.key == key
    assert store.read_table("align", key).equals(table)


def test_all_pairs_and_language_selection(corpus, tiny_wspalign_dir: Path) -> None:
    store, keys = corpus
    _, manifest = run_stage(store, ALIGN_STAGE, wsp_config(tiny_wspalign_dir, pairs="all_pairs", max_groups=2), keys)
    frame = pl.from_arrow(store.read_table("align", manifest.key))
    assert frame.height == 6
    assert set(zip(frame["src_lang"], frame["tgt_lang"])) == {
        ("eng_Latn", "fra_Latn"),
        ("eng_Latn", "kaz_Cyrl"),
        ("fra_Latn", "kaz_Cyrl"),
    }
    _, manifest = run_stage(store, ALIGN_STAGE, wsp_config(tiny_wspalign_dir, langs=["en", "kk"]), keys)
    assert set(pl.from_arrow(store.read_table("align", manifest.key))["tgt_lang"]) == {"kaz_Cyrl"}


def test_simalign_and_eflomal_stages(corpus, tiny_encoder_dir: Path) -> None:
    store, keys = corpus
    config = AlignConfig.model_validate(
        {"backend": "simalign", "simalign": {"model": str(tiny_encoder_dir), "method": "itermax"}}
    )
    _, manifest = run_stage(store, ALIGN_STAGE, config, keys)
    frame = pl.from_arrow(store.read_table("align", manifest.key))
    assert frame.height == 10 and set(frame["backend"]) == {"simalign:itermax"} and manifest.metrics["links"] > 0
    pytest.importorskip("eflomal")
    config = AlignConfig.model_validate({"backend": "eflomal", "eflomal": {"iterations_scale": 0.2, "n_samplers": 1}})
    _, manifest = run_stage(store, ALIGN_STAGE, config, keys)
    frame = pl.from_arrow(store.read_table("align", manifest.key))
    assert frame.height == 10 and set(frame["backend"]) == {"eflomal"} and manifest.metrics["links"] > 0
    assert "packages" in manifest.source_fingerprints


class FakeCorpus:
    """An input artifact holding rows the corpus stage would never write (its filters drop them)."""

    stage = "corpus"

    def __init__(self, rows: list[tuple[str, str, str]]) -> None:
        self.table = pa.table(
            {
                "group_id": [r[0] for r in rows],
                "lang": [r[1] for r in rows],
                "text": [r[2] for r in rows],
                "split": ["train"] * len(rows),
            }
        )

    def manifest(self):
        return SimpleNamespace(columns=[SimpleNamespace(name=n) for n in self.table.column_names])

    def read_table(self, columns=None):
        return self.table.select(columns) if columns else self.table


def test_bad_rows_are_counted_as_drops(tiny_wspalign_dir: Path) -> None:
    rows = [
        ("g1", "eng_Latn", "The cat."),
        ("g1", "fra_Latn", "   "),  # empty
        ("g1", "kaz_Cyrl", "\u200b\u200b"),  # no words
        ("g2", "eng_Latn", "word " * 50),  # too many words
        ("g2", "fra_Latn", "Le chat."),
        ("g3", "eng_Latn", "The dog."),
        ("g3", "fra_Latn", "Le chien."),
        ("g3", "fra_Latn", "Un chien."),  # a second French row in the group
        ("g4", "fra_Latn", "Seul."),  # no pivot in the group
    ]
    config = wsp_config(tiny_wspalign_dir, max_words=20)
    inputs = {"corpus": FakeCorpus(rows)}
    shards = ALIGN_STAGE.plan_shards(config, inputs)
    context = ShardContext("t")
    tables = [t for s in shards for t in ALIGN_STAGE.build_shard(config, inputs, s, ShardContext(s.shard_id))]
    for shard in shards:
        ALIGN_STAGE.build_shard(config, inputs, shard, context)
    assert dict(context.dropped) == {
        "empty_sentence": 1,
        "no_words": 1,
        "too_many_words": 1,
        "duplicate_language": 1,
        "no_partner": 3,
    }
    assert context.rows_in == 9
    assert sum(t.num_rows for t in tables) == 1


def test_config_errors() -> None:
    with pytest.raises(ValidationError, match="align.eflomal. is given but backend = 'simalign'"):
        AlignConfig.model_validate({"backend": "simalign", "eflomal": {}})
    with pytest.raises(ValidationError, match="backend"):
        AlignConfig.model_validate({})
    with pytest.raises(ValidationError, match="extra"):
        AlignConfig.model_validate({"backend": "wspalign", "wspalign": {"treshold": 0.9}})
    config = AlignConfig.model_validate({"backend": "wspalign", "pivot": "en"})
    assert config.pivot == "eng_Latn" and config.settings.threshold == 0.9 and config.settings.combine == "sum"
    assert keyed_config(config)["simalign"] is None and "simalign" not in config.model_dump()
    with pytest.raises(ValidationError, match="unknown align backend 'wsp'; registered: .*eflomal, simalign, wspalign"):
        AlignConfig.model_validate({"backend": "wsp"})
    built = AlignConfig(backend="eflomal", max_words=9, eflomal={"model": 2})  # as model_validate: the backend's config class
    assert built.settings.model == 2 and built.max_words == 9 and built == AlignConfig.model_validate(built.model_dump())


def test_xlembed_align_scores_the_gold_set(tmp_path: Path, tiny_encoder_dir: Path) -> None:
    from typer.testing import CliRunner

    from flows.cli import app
    from tests.tasks.align.conftest import DATA

    config = tmp_path / "align.toml"
    config.write_text(
        f'[pipeline]\nname = "t"\nroot = "{tmp_path / "art"}"\n\n[corpus]\n[[corpus.sources]]\nname = "x"\nkind = "text"\n'
        f'files = {{ eng = "{DATA / "eng-fra.eng"}", fra = "{DATA / "eng-fra.fra"}" }}\n\n'
        f'[align]\nbackend = "simalign"\n\n[align.simalign]\nmodel = "{tiny_encoder_dir}"\n',
        encoding="utf-8",
    )
    args = [
        "align",
        str(config),
        "--gold",
        str(DATA / "eng-fra.gold"),
        "--src",
        str(DATA / "eng-fra.eng"),
        "--tgt",
        str(DATA / "eng-fra.fra"),
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "AER" in result.output and "simalign:itermax" in result.output
    bad = tmp_path / "bad.gold"
    bad.write_text("1-1 x\n", encoding="utf-8")
    result = CliRunner().invoke(app, [*args[:3], str(bad), *args[4:]])
    assert result.exit_code == 2 and "bad.gold:1: field 2" in " ".join(result.output.split())
    # extra training text for a backend that learns nothing from it: refused, not silently ignored
    result = CliRunner().invoke(app, [*args, "--train-src", str(DATA / "eng-fra.eng"), "--train-tgt", str(DATA / "eng-fra.fra")])
    assert result.exit_code == 2 and "'simalign' learns nothing from extra parallel text" in " ".join(result.output.split())
    result = CliRunner().invoke(app, [*args, "--train-src", str(DATA / "eng-fra.eng")])
    assert result.exit_code == 2 and "give both a source and a target file" in " ".join(result.output.split())
    # no model and no [base_model] section to take one from
    config.write_text(config.read_text(encoding="utf-8").split("[align.simalign]")[0], encoding="utf-8")
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and "'simalign' reads the pipeline's base model: add a [base_model] section" in " ".join(
        result.output.split()
    )


def test_align_progress_counts_word_pairs_toward_the_shards_total(corpus, tiny_wspalign_dir: Path) -> None:
    """Issue 15: progress in a unit that means something (pairs), toward a total, not rows read."""
    store, keys = corpus

    class Recorder:
        def __init__(self) -> None:
            self.expected: list[tuple] = []
            self.done = 0

        def __call__(self, n: int) -> None:
            self.done += n

        def expect(self, total, unit, done=0) -> None:  # noqa: ANN001 - as StageProgress: counting starts again
            self.expected.append((total, unit, done))
            self.done = done

    progress = Recorder()
    _, manifest = run_stage(store, ALIGN_STAGE, wsp_config(tiny_wspalign_dir, groups_per_shard=10), keys, progress=progress)
    assert [unit for _, unit, _ in progress.expected] == ["pairs"]
    assert progress.done == progress.expected[0][0] == manifest.rows_out + manifest.dropped.get("pair_too_long_for_model", 0)
