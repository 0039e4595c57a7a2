"""The stages the fault tests kill, in one table.

Each `StageScenario` names the stage under test, the stages to run (upstream first, so that
the one under test has its inputs) and a function that writes small input data under a
folder and returns the config sections. The kill tests, the S3 fault tests and the report
iterate over `SCENARIOS`; a new stage joins every fault test by adding one entry here
(see `docs/reliability.md`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TOY_REGISTRY = "tests.flows.toy_stages:PIPELINE_STAGES"

WORDS = {
    "en": "the river city bright small people water under over light night house green market road".split(),
    "kk": "өзен қала жарық кішкентай адамдар су астында үстінде түн үй жасыл базар жол".split(),
    "fr": "la rivière ville claire petite gens eau sous sur lumière nuit maison verte marché route".split(),
}


def _sentence(lang: str, i: int) -> str:
    words = WORDS[lang]
    return " ".join(words[(i * 7 + j * 3) % len(words)] for j in range(3 + i % 9)) + f" {i}"


def write_parallel_text(folder: Path, name: str, lines: int, langs: tuple[str, ...] = ("en", "kk")) -> dict[str, str]:
    folder.mkdir(parents=True, exist_ok=True)
    files = {}
    for lang in langs:
        path = folder / f"{name}.{lang}"
        if not path.exists():  # written once: the same bytes keep the key (content keys), and skipping saves time
            path.write_text("".join(_sentence(lang, i) + "\n" for i in range(lines)), encoding="utf-8")
        files[lang] = str(path)
    return files


def corpus_section(data: Path, sources: int = 4, lines: int = 3000) -> dict[str, Any]:
    """Several text sources, so the corpus artifact has several shards to resume between."""
    specs = [
        {"name": f"src{i}", "kind": "text", "files": write_parallel_text(data / "corpus", f"src{i}", lines + 97 * i)}
        for i in range(sources)
    ]
    return {"seed": 11, "dev_fraction": 0.2, "read_batch_lines": 500, "sources": specs}


_TINY_MODEL: dict[str, Path] = {}


def tiny_model(cache: Path) -> Path:
    """A small random BERT with its tokenizer (the encoder tests' builder), built once per folder."""
    target = cache / "tiny-model"
    if (target / "config.json").exists():
        return target
    from tasks.tiny_models import build_tiny_model

    build_tiny_model(target)
    return target


def tatoeba_folder(data: Path) -> Path:
    folder = data / "tatoeba"
    folder.mkdir(parents=True, exist_ok=True)
    for code, lang in (("kaz", "kk"), ("fra", "fr")):
        if (folder / f"tatoeba.{code}-eng.eng").exists():
            continue
        (folder / f"tatoeba.{code}-eng.{code}").write_text(
            "".join(_sentence(lang, i) + "\n" for i in range(120)), encoding="utf-8"
        )
        (folder / f"tatoeba.{code}-eng.eng").write_text("".join(_sentence("en", i) + "\n" for i in range(120)), encoding="utf-8")
    return folder


def _corpus(data: Path, cache: Path) -> dict[str, Any]:
    return {"corpus": corpus_section(data)}


def _base_model(data: Path, cache: Path) -> dict[str, Any]:
    return {"base_model": {"source": "local", "model": str(tiny_model(cache))}}


def _evaluate(data: Path, cache: Path) -> dict[str, Any]:
    return {
        "corpus": corpus_section(data, sources=2, lines=400),
        "base_model": {"source": "local", "model": str(tiny_model(cache))},
        "evaluate": {
            "title": "fault test",
            "encoder": {"pooling": "mean", "batch_size": 32, "max_length": 32},
            "word_map_concepts": 0,
            "groups": ["wacse-4"],
            "benchmarks": [
                {"kind": "tatoeba", "path": str(tatoeba_folder(data)), "langs": ["kaz", "fra"]},
                {"kind": "corpus_dev", "pivot": "eng_Latn", "max_groups": 60},
            ],
        },
    }


def _translate(data: Path, cache: Path) -> dict[str, Any]:
    """A tiny random NLLB-architecture model (CTranslate2 int8): mechanics only, 4 shards of 48 rows."""
    return {
        "corpus": corpus_section(data, sources=2, lines=120),
        "translate_model": {"source": "tiny_random", "tiny": {"seed": 0, "vocab_size": 1000, "d_model": 32, "layers": 1}},
        "translate": {
            "source_lang": "eng_Latn",
            "targets": ["fra_Latn", "deu_Latn", "spa_Latn", "kaz_Cyrl"],
            "k": 2,
            "seed": 42,
            "shard_rows": 48,
            "max_batch_tokens": 1024,
            "device": "cpu",
            "compute_type": "int8",
            "inter_threads": 1,
            "intra_threads": 1,
            "decoding": {
                "beam_size": 1,
                "max_length_ratio": 1.0,
                "max_length_extra": 4,
                "max_decoding_length": 32,
                "no_repeat_ngram_size": 2,
            },
            "filters": {
                "drop_identical": False,
                "repetition_max_ngram": 0,
                "min_length_ratio": 0,
                "max_length_ratio": 0,
                "min_script_share": 0,
            },
        },
    }


def _align_section(max_groups: int = 150) -> dict[str, Any]:
    return {
        "backend": "wspalign",
        "groups_per_shard": 50,
        "max_groups": max_groups,
        "wspalign": {"source": "tiny_random", "combine": "union", "threshold": 0.0, "device": "cpu"},
    }


def _align(data: Path, cache: Path) -> dict[str, Any]:
    """Tiny random WSPAlign (seeded, bit-reproducible on CPU); eflomal is not (it seeds from /dev/urandom)."""
    return {"corpus": corpus_section(data, sources=2, lines=120), "align": _align_section()}


def _train(data: Path, cache: Path) -> dict[str, Any]:
    """TR + AWP + WTR for 12 steps on the tiny BERT, a durable checkpoint every 2 steps.

    The checkpoints live in `checkpoint_dir` (not keyed), under the data folder: it is shared by
    the reference run and the killed runs, one after another; every finished run removes its
    run-id folder, and a killed one leaves it for its resume."""
    return {
        "corpus": corpus_section(data, sources=2, lines=120),
        "base_model": {"source": "local", "model": str(tiny_model(cache))},
        "align": _align_section(max_groups=100),
        "train": {
            "steps": 12,
            "batch_size": 8,
            "max_length": 24,
            "freeze_word_embeddings": True,
            "checkpoint_every": 2,
            "eval_every": 4,
            "torch_threads": 1,
            "device": "cpu",
            "checkpoint_dir": str(data / "train-checkpoints"),
            "objectives": {
                "translation_ranking": {"weight": 0.8},
                "aligned_word_prediction": {"weight": 0.1},
                "word_translation_ranking": {"weight": 0.1},
            },
        },
    }


def _toy(data: Path, cache: Path) -> dict[str, Any]:
    return {
        "corpus": corpus_section(data, sources=2, lines=1500),
        "lengths": {"shards": 6, "unit": "chars"},
        "histogram": {"bucket": 10},
    }


@dataclass(frozen=True)
class StageScenario:
    """One stage under fault: which stages to run, with what data, and how many kills."""

    stage: str  # the stage whose run is interrupted
    stages: tuple[str, ...]  # run in this order; the ones before `stage` are built first and cached
    configs: Callable[[Path, Path], dict[str, Any]]  # (data folder, shared cache folder) -> config sections
    registry: str | None = None  # XLEMBED_STAGES-style "module:ATTR"; None = the real pipeline
    quick_kills: int = 1  # kills in the default (CI) suite
    long_kills: int = 5  # kills with --long-faults / XLEMBED_LONG_FAULTS=1
    s3: str = "quick"  # against the flaky S3 endpoint: "quick" (default suite too), "long" (long variant only), "off"
    notes: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def spec(self, root: str, data: Path, cache: Path, *, upto: str | None = None) -> dict[str, Any]:
        configs = self.configs(data, cache)
        stages = list(self.stages)
        if upto is not None:
            stages = stages[: stages.index(upto) + 1]
        return {"root": root, "stages": stages, "configs": configs, "registry": self.registry}


SCENARIOS: tuple[StageScenario, ...] = (
    StageScenario("corpus", ("corpus",), _corpus, notes="4 text sources = 4 shards"),
    StageScenario("base_model", ("base_model",), _base_model, notes="local safetensors model: attached files only"),
    StageScenario(
        "translate",
        ("corpus", "translate_model", "translate"),
        _translate,
        long_kills=4,
        s3="long",
        notes="tiny random NLLB (CTranslate2 int8, 1 thread), 5 shards of 48 source rows",
    ),  # fmt: skip
    StageScenario(
        "align",
        ("corpus", "align"),
        _align,
        long_kills=4,
        s3="long",
        notes="tiny random WSPAlign (seeded, CPU), 3 shards of 50 groups; eflomal left out: not bit-reproducible",
    ),  # fmt: skip
    StageScenario(
        "train",
        ("corpus", "base_model", "align", "train"),
        _train,
        long_kills=5,
        s3="long",
        notes="tiny BERT, TR + AWP + WTR, 12 steps, durable checkpoint every 2 (kills also at checkpoint writes); "
        "weights bit-identical, metrics.json equal but for its two timings",
    ),  # fmt: skip
    StageScenario(
        "evaluate", ("corpus", "base_model", "evaluate"), _evaluate, s3="long", notes="tatoeba + corpus-dev with a tiny BERT"
    ),
    StageScenario(
        "lengths", ("corpus", "lengths", "histogram"), _toy, registry=TOY_REGISTRY, s3="long", notes="toy stage, 6 shards"
    ),
    StageScenario(
        "histogram", ("corpus", "lengths", "histogram"), _toy, registry=TOY_REGISTRY, quick_kills=0, long_kills=3, s3="off"
    ),
)


def scenario(stage: str) -> StageScenario:
    return next(s for s in SCENARIOS if s.stage == stage)


def dump_spec(spec: dict[str, Any], path: Path) -> Path:
    path.write_text(json.dumps(spec, indent=1), encoding="utf-8")
    return path
