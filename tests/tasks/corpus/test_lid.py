"""Language identification as a corpus filter: the backends (CLD2, a fastText model trained
here), the reasons it gives, and the corpus stage counting its drops per language."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from storage import ArtifactStore
from tasks.corpus import lid
from tasks.corpus.config import CorpusConfig, LidFilter
from tasks.corpus.stage import CORPUS_STAGE
from tasks.stage import run_stage, source_fingerprints, stage_key
from tasks.stage_config import config_locations, keyed_config
from tests.tasks.corpus.lid_sentences import ENGLISH as SHARED_ENGLISH
from tests.tasks.corpus.lid_sentences import KAZAKH, RUSSIAN

ENGLISH = [
    *SHARED_ENGLISH,
    "Kazakhstan is the largest country in Central Asia, they say.",
    "This morning we went to the village and greeted grandmother.",
]


def check(**settings: Any) -> lid.LidCheck:
    check = lid.lid_check(LidFilter.model_validate(settings))
    assert check is not None
    return check


def names(codes: np.ndarray) -> list[str]:
    return [lid.REASONS.get(int(code), "ok") for code in codes]


# ------------------------------------------------------------------ backends and reasons


def test_cld2_flags_russian_in_a_kazakh_row_and_keeps_kazakh() -> None:
    reasons = check().reasons([*KAZAKH, *RUSSIAN], ["kaz_Cyrl"] * 6)
    assert names(reasons) == ["ok"] * 4 + ["lid_mismatch"] * 2


def test_short_rows_are_not_checked() -> None:
    # "Это хорошо" (10 characters): reliably Russian to CLD2; under min_chars the row is left alone
    assert names(check(min_chars=20).reasons(["Это хорошо"], ["eng_Latn"])) == ["ok"]
    assert names(check(min_chars=0).reasons(["Это хорошо"], ["eng_Latn"])) == ["lid_mismatch"]
    # "Kazakhstan" alone: CLD2 has no reliable answer (with bestEffort it said Tatar): undecided, kept
    assert names(check(min_chars=0).reasons(["Kazakhstan"], ["eng_Latn"])) == ["ok"]


def test_low_confidence_is_its_own_reason() -> None:
    mixed = "Это предложение на русском языке. This sentence is in English and it is longer than that."
    # CLD2: Russian 51% of the bytes, English 47%: both languages are found in it, so a row
    # labelled either is kept (its confidence is CLD2's reliability, not a byte share)
    assert names(check(min_confidence=0.6).reasons([mixed], ["eng_Latn"])) == ["ok"]
    assert names(check(min_confidence=0.6).reasons([mixed], ["rus_Cyrl"])) == ["ok"]
    assert names(check(min_confidence=0.6).reasons([mixed], ["pol_Latn"])) == ["lid_mismatch"]


def test_languages_the_backend_cannot_identify_are_never_dropped() -> None:
    c = check()
    # Acehnese: CLD2 has no label; Rundi: it has one, but recall < 0.5 on FLORES (UNRELIABLE)
    assert not c.checks("ace_Latn") and not c.checks("run_Latn") and c.checks("kaz_Cyrl")
    assert names(c.reasons([ENGLISH[0], ENGLISH[1]], ["ace_Latn", "run_Latn"])) == ["ok", "ok"]
    assert c.summary(["kaz_Cyrl", "ace_Latn", "run_Latn"]) == {"backend": "cld2", "not_identifiable": ["ace_Latn", "run_Latn"]}


def test_skip_langs_are_not_checked() -> None:
    c = check(skip_langs=["kk"])
    assert names(c.reasons(RUSSIAN, ["kaz_Cyrl"] * 2)) == ["ok", "ok"]
    assert c.summary(["kaz_Cyrl"])["skipped"] == ["kaz_Cyrl"]


def test_cld2_covers_the_wacse_languages() -> None:
    c = check()
    wacse = ["kaz_Cyrl", "tel_Telu", "kat_Geor", "jav_Latn", "tgl_Latn", "swh_Latn", "mal_Mlym", "mar_Deva"]
    # jav (CLD2's withdrawn code "jw") and tgl have labels, but CLD2 keeps under 99.5% of their
    # clean FLORES/NTREX rows (Javanese/Indonesian/Sundanese, Tagalog/Cebuano/Waray): exempt
    assert [lang for lang in wacse if not c.checks(lang)] == ["jav_Latn", "tgl_Latn"]


@pytest.fixture(scope="module")
def fasttext_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny fastText LID model trained here, labelled like GlotLID (FLORES-style codes, cmn_Hani)."""
    fasttext = pytest.importorskip("fasttext")
    base = tmp_path_factory.mktemp("fasttext")
    lines = [f"__label__kaz_Cyrl {t}" for t in KAZAKH] + [f"__label__rus_Cyrl {t}" for t in RUSSIAN]
    lines += [f"__label__eng_Latn {t}" for t in ENGLISH] + [
        "__label__cmn_Hani 我们今天早上去了村子。",
        "__label__cmn_Hani 哈萨克斯坦是中亚最大的国家。",
    ]
    (base / "train.txt").write_text("\n".join(lines * 20) + "\n", encoding="utf-8")
    # fastText's supervised default lr (0.1): lr 1.0 and 0.5 each diverged to "Encountered NaN"
    # once in CI although 40 seeds of either never did here, so the divergence depends on the
    # machine. The fastText FAQ's answer to NaN is a lower lr, so a diverged run retries at half.
    lr = 0.1
    for _attempt in range(3):
        try:
            model = fasttext.train_supervised(
                str(base / "train.txt"), epoch=100, lr=lr, minn=2, maxn=4, dim=16, thread=1, seed=1, verbose=0
            )
            break
        except RuntimeError as error:
            if "NaN" not in str(error):
                raise
            lr /= 2
    else:
        pytest.fail(f"fastText diverged to NaN at every lr down to {lr * 2}")
    model.save_model(str(base / "lid.bin"))
    return base / "lid.bin"


def test_fasttext_model_labels_are_flores_codes(fasttext_model: Path) -> None:
    c = check(backend="fasttext", model=str(fasttext_model), min_confidence=0.3)
    assert set(c.identifier.labels_by_lang) == {"kaz_Cyrl", "rus_Cyrl", "eng_Latn", "zho_Hans", "zho_Hant"}
    # cmn_Hani (GlotLID's written Chinese) stands for FLORES's two Chinese scripts
    assert c.identifier.labels_by_lang["zho_Hant"] == {"cmn_Hani"}
    texts = [KAZAKH[0], RUSSIAN[0], ENGLISH[2], "我们今天早上去了村子。", "哈萨克斯坦是中亚最大的国家。"]
    langs = ["kaz_Cyrl", "kaz_Cyrl", "eng_Latn", "zho_Hans", "zho_Hant"]
    assert names(c.reasons(texts, langs)) == ["ok", "lid_mismatch", "ok", "ok", "ok"]
    assert c.not_identifiable(["kat_Geor", "eng_Latn"]) == ["kat_Geor"]


def test_fasttext_model_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(lid.LidModelError, match=r"no fastText model file at .*missing\.bin"):
        check(backend="fasttext", model=str(tmp_path / "missing.bin"))
    (tmp_path / "bad.bin").write_bytes(b"not a model")
    with pytest.raises(lid.LidModelError, match=r"bad\.bin is not a fastText model file"):
        check(backend="fasttext", model=str(tmp_path / "bad.bin"))


def test_config_model_fits_the_backend() -> None:
    with pytest.raises(ValidationError, match="lid.model .* is required when backend = 'fasttext'"):
        LidFilter.model_validate({"backend": "fasttext"})
    with pytest.raises(ValidationError, match="only used when backend = 'fasttext'"):
        LidFilter.model_validate({"backend": "cld2", "model": "x.bin"})
    with pytest.raises(ValidationError, match="xx_Unkn|unknown language"):
        LidFilter.model_validate({"skip_langs": ["xx_Unkn"]})


# ------------------------------------------------------------------ the corpus stage


def corpus_config(tmp_path: Path, columns: dict[str, list[str]], **filters: Any) -> CorpusConfig:
    files = {}
    for lang, lines in columns.items():
        (tmp_path / f"src.{lang}").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        files[lang] = str(tmp_path / f"src.{lang}")
    return CorpusConfig.model_validate({"sources": [{"kind": "text", "name": "src", "files": files}], "filters": filters})


def test_corpus_stage_drops_off_target_rows_per_language(tmp_path: Path) -> None:
    # rows 5 and 6 of the Kazakh file are Russian; Acehnese (no CLD2 label) holds English text
    # (copies of the pivot: kept here, `drop_copies` is tested in test_copies_and_rejects.py)
    columns = {"en": ENGLISH, "kk": KAZAKH + RUSSIAN, "ace": ENGLISH}
    config = corpus_config(tmp_path, columns, lid={"backend": "cld2"}, min_langs_per_group=2, drop_copies=False)
    store = ArtifactStore(tmp_path / "store")
    _, manifest = run_stage(store, CORPUS_STAGE, config, {})
    assert manifest.dropped == {"lid_mismatch": 2}
    assert manifest.rows_in == manifest.rows_out + 2
    assert manifest.metrics["dropped_by_lang"] == {"kaz_Cyrl": {"lid_mismatch": 2}}
    assert manifest.metrics["lid"] == {
        "backend": "cld2",
        "not_identifiable": ["ace_Latn"],
        "checked": "every_row",
        "checked_rows": 12,
    }
    table = store.read_table("corpus", manifest.key).to_pylist()
    kazakh = [row["text"] for row in table if row["lang"] == "kaz_Cyrl"]
    assert kazakh == KAZAKH
    assert sum(row["lang"] == "ace_Latn" for row in table) == 6  # never dropped for its language

    # without the filter the Russian rows stay, and the key differs
    plain = corpus_config(tmp_path, columns, min_langs_per_group=2, drop_copies=False)
    _, unfiltered = run_stage(store, CORPUS_STAGE, plain, {})
    assert unfiltered.dropped == {} and unfiltered.key != manifest.key


def test_group_incomplete_after_lid_drops(tmp_path: Path) -> None:
    config = corpus_config(tmp_path, {"en": ENGLISH, "kk": KAZAKH + RUSSIAN}, lid={})
    store = ArtifactStore(tmp_path / "store")
    _, manifest = run_stage(store, CORPUS_STAGE, config, {})
    # both rows of a group are required (default): the English rows of those groups go too
    assert manifest.dropped == {"lid_mismatch": 2, "group_incomplete": 2}
    assert manifest.metrics["dropped_by_lang"] == {"eng_Latn": {"group_incomplete": 2}, "kaz_Cyrl": {"lid_mismatch": 2}}


def test_lid_unset_keeps_the_key_of_configs_written_before_it(tmp_path: Path) -> None:
    config = corpus_config(tmp_path, {"en": ENGLISH})
    data = config.model_dump()
    data["filters"].pop("lid")
    before = CorpusConfig.model_validate(data)
    assert "lid" not in keyed_config(config)["filters"]
    assert stage_key(CORPUS_STAGE, config, {}, source_fingerprints(CORPUS_STAGE, config)) == stage_key(
        CORPUS_STAGE, before, {}, source_fingerprints(CORPUS_STAGE, before)
    )


@pytest.mark.slow
def test_fasttext_model_file_is_keyed_by_content_not_path(tmp_path: Path, fasttext_model: Path) -> None:
    copy = tmp_path / "elsewhere.bin"
    copy.write_bytes(fasttext_model.read_bytes())

    def key(model: Path) -> str:
        config = corpus_config(tmp_path, {"en": ENGLISH}, lid={"backend": "fasttext", "model": str(model)})
        assert config_locations(config)["filters.lid.model"] == str(model)
        return stage_key(CORPUS_STAGE, config, {}, source_fingerprints(CORPUS_STAGE, config))

    assert key(fasttext_model) == key(copy)
    with open(copy, "ab") as stream:  # a different model file (same path): a different key
        stream.write(b"\0")
    assert key(copy) != key(fasttext_model)


def test_identical_texts_go_to_the_backend_once(monkeypatch: pytest.MonkeyPatch) -> None:
    c = check()
    calls: list[list[str]] = []
    predict = c.identifier.predict_for
    monkeypatch.setattr(c.identifier, "predict_for", lambda texts, lang: calls.append(list(texts)) or predict(texts, lang))
    texts = [KAZAKH[0], RUSSIAN[0], KAZAKH[0], RUSSIAN[0], KAZAKH[1]]
    assert names(c.reasons(texts, ["kaz_Cyrl"] * 5)) == ["ok", "lid_mismatch", "ok", "lid_mismatch", "ok"]
    assert len(calls) == 1 and sorted(calls[0]) == sorted({KAZAKH[0], KAZAKH[1], RUSSIAN[0]})
