"""Issue 16 §1: a new align backend, written and registered in this module without editing any
file of the package, runs through the real align stage, the pipeline config and the gold scorer."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import polars as pl
import pytest
from pydantic import Field, ValidationError

from flows.config import ConfigError, load_config
from storage import ArtifactStore
from tasks.align import ALIGN_STAGE
from tasks.align.backends import ALIGN_BACKENDS, AlignBackend, AlignerSettings, Progress, register_backend
from tasks.align.combine import Links
from tasks.align.config import AlignConfig
from tasks.align.gold import GoldInputError, score_gold_set
from tasks.corpus import CORPUS_STAGE
from tasks.corpus.config import CorpusConfig
from tasks.stage import run_stage
from tasks.stage_config import keyed_config
from tests.tasks.align.conftest import DATA


@register_backend
class DiagonalSettings(AlignerSettings):
    """`[align.diagonal]`: the score of every link, and how many leading words to skip."""

    name = "diagonal"
    description = "word i of the source to word i of the target (a toy)"
    loads: ClassVar[int] = 0

    score: float = Field(default=1.0, gt=0.0, le=1.0)
    skip: int = Field(default=0, ge=0)

    def build(self, base_model: Path | None = None) -> DiagonalAligner:
        DiagonalSettings.loads += 1
        return DiagonalAligner(self)

    def fingerprint(self) -> dict[str, Any]:
        return {"diagonal_rule": "i-i"}


class DiagonalAligner(AlignBackend):
    """Word i of the source to word i of the target, for i < both lengths (a toy)."""

    def __init__(self, settings: DiagonalSettings) -> None:
        self.settings = settings
        self.label = f"diagonal:{settings.score}"

    def align(
        self, sentences: Sequence[list[str]], langs: Sequence[str], pairs: np.ndarray, progress: Progress = None
    ) -> list[Links | None]:
        out: list[Links | None] = []
        for a, b in np.asarray(pairs).reshape(-1, 2):
            i = np.arange(self.settings.skip, min(len(sentences[a]), len(sentences[b])), dtype=np.int32)
            out.append((i, i.copy(), np.full(len(i), self.settings.score, dtype=np.float32)))
        if progress is not None:
            progress(len(out))
        return out


TEXTS = {
    "eng": ["The cat sleeps on the sofa.", "I drink coffee every morning.", "The train leaves at seven."],
    "fra": ["Le chat dort sur le canapé.", "Je bois du café chaque matin.", "Le train part à sept heures."],
    "kaz": ["Мысық диванда ұйықтап жатыр.", "Мен күн сайын кофе ішемін.", "Пойыз жетіде жүреді."],
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[ArtifactStore, dict[str, str]]:
    tmp = tmp_path_factory.mktemp("plugin-align-corpus")
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


def test_a_backend_registered_from_a_test_module_runs_through_the_align_stage(corpus) -> None:
    store, keys = corpus
    assert ALIGN_BACKENDS["diagonal"] is DiagonalSettings
    config = AlignConfig.model_validate({"backend": "diagonal", "groups_per_shard": 2, "diagonal": {"score": 0.5}})
    assert config.settings == DiagonalSettings(score=0.5)
    loads = DiagonalSettings.loads
    _, manifest = run_stage(store, ALIGN_STAGE, config, keys)
    assert DiagonalSettings.loads == loads + 1  # loaded once, shared by both shards
    frame = pl.from_arrow(store.read_table("align", manifest.key))
    assert frame.height == 6 and set(frame["backend"]) == {"diagonal:0.5"}
    assert set(zip(frame["src_lang"], frame["tgt_lang"])) == {("eng_Latn", "fra_Latn"), ("eng_Latn", "kaz_Cyrl")}
    for row in frame.iter_rows(named=True):
        n = min(len(row["src_words"]), len(row["tgt_words"]))
        assert [(a["src"], a["tgt"], a["score"]) for a in row["alignments"]] == [(i, i, 0.5) for i in range(n)]
    assert manifest.shards == ["groups-00000", "groups-00001"] and manifest.metrics["pairs"] == 6
    # the backend's own fingerprint and settings are keyed; the built-in tables stay null in the key
    assert manifest.source_fingerprints == {"diagonal_rule": "i-i"}
    assert manifest.config["diagonal"] == {"score": 0.5, "skip": 0} and manifest.config["wspalign"] is None
    _, other = run_stage(store, ALIGN_STAGE, AlignConfig.model_validate({"backend": "diagonal", "diagonal": {"skip": 1}}), keys)
    assert other.key != manifest.key and other.rows_out == 6


def test_the_new_backend_is_configured_in_toml_and_scores_a_gold_set(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    body = (
        f'[pipeline]\nname = "p"\nroot = "store"\n\n[corpus]\n[[corpus.sources]]\nname = "x"\nkind = "text"\n'
        f'files = {{ eng = "{DATA / "eng-fra.eng"}", fra = "{DATA / "eng-fra.fra"}" }}\n\n'
        '[align]\nbackend = "diagonal"\n\n[align.diagonal]\nskip = 1\n'
    )
    path.write_text(body, encoding="utf-8")
    config = load_config(path).stage_configs["align"]
    assert config.backend == "diagonal" and config.settings.skip == 1

    result = score_gold_set(config, DATA / "eng-fra.gold", DATA / "eng-fra.eng", DATA / "eng-fra.fra")
    assert result.label == "diagonal:1.0" and result.scores.pairs == 12
    expected = [{(i, i) for i in range(1, min(len(s), len(t)))} for s, t in zip(result.src, result.tgt)]
    assert result.predicted == expected and result.scores.predicted == sum(map(len, expected))
    with pytest.raises(GoldInputError, match="'diagonal' learns nothing from extra parallel text"):
        score_gold_set(
            config,
            DATA / "eng-fra.gold",
            DATA / "eng-fra.eng",
            DATA / "eng-fra.fra",
            train=(DATA / "eng-fra.eng", DATA / "eng-fra.fra"),
        )

    path.write_text(body + "\n[align.wspalign]\nthreshold = 0.5\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"\[align.wspalign\] is given but backend = 'diagonal'"):
        load_config(path)
    with pytest.raises(ValidationError, match=r"\[align.diagonal\]: skip: Input should be greater than or equal to 0"):
        AlignConfig.model_validate({"backend": "diagonal", "diagonal": {"skip": -1}})


def test_registering_a_backend_leaves_the_keys_of_the_others_alone() -> None:
    config = AlignConfig.model_validate({"backend": "wspalign"})
    assert set(keyed_config(config)) >= {"wspalign", "simalign", "eflomal"} and "diagonal" not in keyed_config(config)


def test_registration_errors_name_the_class() -> None:
    def build(self: Any, base_model: Path | None = None) -> Any: ...

    def backend(class_name: str, base: type = AlignerSettings, **namespace: Any) -> type:
        return type(class_name, (base,), {"__module__": __name__, "__qualname__": class_name, **namespace})

    with pytest.raises(ValueError, match="Unnamed.name must be a lower-case identifier"):
        register_backend(backend("Unnamed", name="Bad-Name", build=build))
    with pytest.raises(ValueError, match="'wspalign' is already registered by tasks.align.backends.wspalign.WspalignSettings"):
        register_backend(backend("Taken", name="wspalign", build=build))
    with pytest.raises(TypeError, match="Unbuilt must implement build"):
        register_backend(backend("Unbuilt", name="unbuilt"))
    with pytest.raises(TypeError, match="is not a subclass of tasks.align.backends.AlignerSettings"):
        register_backend(backend("NoSettings", AlignBackend, name="nosettings"))
    assert {"unbuilt", "nosettings"}.isdisjoint(ALIGN_BACKENDS) and ALIGN_BACKENDS["wspalign"].__name__ == "WspalignSettings"

    register_backend(backend("Clash", name="pairs", build=build))  # a field of [align] itself
    try:
        with pytest.raises(ValidationError, match="align backend name 'pairs' is a field of \\[align\\]; rename the backend"):
            AlignConfig.model_validate({"backend": "pairs"})
    finally:
        del ALIGN_BACKENDS["pairs"]
