"""Keys of evaluate artifacts stay what they were before benchmarks became a registry
(issue 16 §1): the values below were computed on the code before that change.

The key of an evaluate artifact is built from its keyed config, its code version, its input
keys and the fingerprints of the benchmark files; input keys are fixed here, so a change in
the keyed config (a field renamed, a default moved) or in the fingerprints (a file left out,
a name changed) changes a recorded value. The values were recorded at evaluate code version 3;
a deliberate bump of the version (4: language vectors applied) is not such a change, so the keys
are computed here as of version 3 (`KEYED_AS`)."""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path

import pytest

from tasks.evaluate import EVALUATE_STAGE
from tasks.evaluate.config import EvaluateConfig
from tasks.stage import source_fingerprints, stage_key
from tasks.stage_config import CONFIG_DIR

CONFIGS = Path(__file__).resolve().parents[3] / "configs"
INPUT_KEYS = {"corpus": "c" * 64, "base_model": "b" * 64}
KEYED_AS = dataclasses.replace(EVALUATE_STAGE, code_version="3")  # the version the values below were recorded at

# evaluate key of each shipped config's [evaluate] section, without source fingerprints
# (their benchmark files are not part of the repository)
SHIPPED_KEYS = {
    "cpu-small.toml": "a6f27b20343ec15a232d0b70027f36a4d4e93a5f0198fb51af903165094bbfd9",
    "cpu-wacse.toml": "b80956ed977bf696976010485d3556a12e094eb89c15db106364d78445ba77a1",
    "dap.toml": "315edce4b252d39ac0327dd0801eab45027fe36ef4f6c506f6eb79a6e01640a5",
    "demo.toml": "a2a1d157522d06d4f0f3af71821aec33099793f63db50b0fdfbaf3c6d530547d",
    "dueam.toml": "aaa46981fd2c153c96c202c0e01e0e3eb1b97ca460528d939c775ff6c5e1577e",
    "multiway-supcon.toml": "0bc002e9c9f9a57c07e2880269974aaf1b34aa38fa80bb11c468ae531cc5702f",
    "offline-multiway.toml": "a9415ee6cb5ba93d1bc59d2bcddea3b9ef76b5b76e108b3f5643c36e10cf6ca9",
    "smoke.toml": "a30f450d958f9a05c1cb3610fa73cd320d74b4c709daa653a019882c8f6b8e75",
    "wacse.toml": "e5da6fb2102ec5a4318231951b4c9a69f9ac688823e6a38587458a5c7658eaaf",
}


# stsb-multi-mt (issue 31) was added to these configs after the values above were recorded: the
# values above are their keys without it (so the other benchmarks key as before), these with it
WITH_STSB_KEYS = {
    "cpu-small.toml": "e84cbd047b96ba2739eb66e12818d271c84b46c902320c77a10ea31fa69fac67",
    "cpu-wacse.toml": "3da5c1ca19b62f15debe16c7f7ea391f710a5bc0bb3c6c2303a3ef4e6a56cdcf",
    "offline-multiway.toml": "0fae42b6e64d56dbbd65867731fb41bc028386785cc235d485dd3951e80798ec",
}


def shipped_evaluate_config(name: str, *, without_kinds: tuple[str, ...] = ()) -> EvaluateConfig:
    path = CONFIGS / name
    section = tomllib.loads(path.read_text(encoding="utf-8"))["evaluate"]
    section["benchmarks"] = [b for b in section.get("benchmarks", []) if b["kind"] not in without_kinds]
    return EvaluateConfig.model_validate(section, context={CONFIG_DIR: str(path.parent)})


@pytest.mark.parametrize("name", sorted(SHIPPED_KEYS))
def test_shipped_configs_keep_their_evaluate_keys(name: str) -> None:
    config = shipped_evaluate_config(name, without_kinds=("stsb_multi_mt",))
    assert stage_key(KEYED_AS, config, INPUT_KEYS, {}) == SHIPPED_KEYS[name]
    kinds = [b.kind for b in shipped_evaluate_config(name).benchmarks]
    assert ("stsb_multi_mt" in kinds) == (name in WITH_STSB_KEYS)
    if name in WITH_STSB_KEYS:
        assert stage_key(KEYED_AS, shipped_evaluate_config(name), INPUT_KEYS, {}) == WITH_STSB_KEYS[name]


def write_benchmark_files(root: Path) -> dict[str, Path]:
    """One small folder or file per benchmark kind that reads files, with fixed contents."""
    tatoeba, distractors, bucc, sts, multiway, xnli = (
        root / n for n in ("tatoeba", "distractors", "bucc", "sts", "multiway", "xnli")
    )
    for folder in (tatoeba, distractors, bucc, sts, multiway, xnli):
        folder.mkdir()
    (tatoeba / "tatoeba.kaz-eng.kaz").write_text("бір\nекі\n", encoding="utf-8")
    (tatoeba / "tatoeba.kaz-eng.eng").write_text("one\ntwo\n", encoding="utf-8")
    (distractors / "eng_Latn.dev").write_text("three\n", encoding="utf-8")
    for split in ("training", "test"):
        (bucc / f"de-en.{split}.de").write_text(f"de-{split}-1\teins\nde-{split}-2\tzwei\n", encoding="utf-8")
        (bucc / f"de-en.{split}.en").write_text(f"en-{split}-1\tone\nen-{split}-2\ttwo\n", encoding="utf-8")
        (bucc / f"de-en.{split}.gold").write_text(f"de-{split}-1\ten-{split}-1\n", encoding="utf-8")
    (sts / "STS.input.track5.en-en.txt").write_text("a cat\ta dog\n", encoding="utf-8")
    (sts / "STS.gs.track5.en-en.txt").write_text("2.5\n", encoding="utf-8")
    (root / "sts.tsv").write_text("a cat\ta dog\t2.5\nthe sun\tthe moon\t1.0\n", encoding="utf-8")
    for code, line in (("eng_Latn", "one"), ("kaz_Cyrl", "бір")):
        (multiway / f"{code}.dev").write_text(line + "\n", encoding="utf-8")
    (xnli / "xnli.dev.tsv").write_text("language\tgold_label\tsentence1\tsentence2\nen\tneutral\ta\tb\n", encoding="utf-8")
    (root / "mnli.jsonl").write_text('{"gold_label": "neutral", "sentence1": "a", "sentence2": "b"}\n', encoding="utf-8")
    return {
        "tatoeba": tatoeba,
        "distractors": distractors,
        "bucc": bucc,
        "sts": sts,
        "sts_tsv": root / "sts.tsv",
        "multiway": multiway,
        "xnli": xnli,
        "train_file": root / "mnli.jsonl",
    }


# every benchmark kind with its files: (keyed config, fingerprints) -> key
ALL_KINDS_KEY = "d2fad9f4ed15f3e296f4093a69a352d1d1f507567c0b734ffdbdb075208f14cb"


def test_every_benchmark_kind_keeps_its_key_and_fingerprints(tmp_path: Path) -> None:
    files = write_benchmark_files(tmp_path)
    config = EvaluateConfig.model_validate(
        {
            "benchmarks": [
                {
                    "kind": "tatoeba",
                    "path": str(files["tatoeba"]),
                    "langs": ["kaz"],
                    "max_pairs": 2,
                    "distractors": [{"name": "flores", "path": str(files["distractors"])}],
                },
                {"kind": "bucc", "path": str(files["bucc"]), "langs": ["de"], "k": 3},
                {"kind": "sts", "path": str(files["sts"])},
                {"kind": "sts", "path": str(files["sts_tsv"]), "layout": "tsv", "langs": ["en", "en"]},
                {"kind": "multiway", "path": str(files["multiway"]), "langs": ["eng_Latn", "kaz_Cyrl"], "pairs": "all"},
                {"kind": "corpus_dev", "max_groups": 10},
                {"kind": "mteb", "tasks": ["STS22"], "cache_dir": str(tmp_path)},
                {
                    "kind": "xnli",
                    "path": str(files["xnli"]),
                    "train_file": str(files["train_file"]),
                    "langs": ["en"],
                    "learning_rates": [1e-5],
                },
            ],
            "groups": ["wacse-4"],
        }
    )
    fingerprints = source_fingerprints(EVALUATE_STAGE, config)
    assert stage_key(KEYED_AS, config, INPUT_KEYS, fingerprints) == ALL_KINDS_KEY


def test_pooling_cls_keeps_the_key_of_cls_before_pooler_and_the_old_name_is_refused() -> None:
    """dap.toml and wacse.toml said "cls_before_pooler" and now say "cls" (the same first token):
    their keys above are unchanged. The old name is refused, naming the field and the new name."""
    from pydantic import ValidationError

    from tasks.evaluate.config import EncoderSettings
    from tasks.stage_config import keyed_config

    assert keyed_config(EncoderSettings(pooling="cls"))["pooling"] == "cls_before_pooler"
    assert {p: keyed_config(EncoderSettings(pooling=p))["pooling"] for p in ("mean", "pooler", None)} == {
        "mean": "mean",
        "pooler": "pooler",
        None: None,
    }
    with pytest.raises(ValidationError, match="pooling\n.*'cls_before_pooler' was renamed: write pooling = 'cls'"):
        EncoderSettings.model_validate({"pooling": "cls_before_pooler"})
    with pytest.raises(ValidationError, match="pooling\n.*got 'max'"):
        EncoderSettings.model_validate({"pooling": "max"})


def test_the_code_version_is_part_of_the_key() -> None:
    """So the bump to 4 recomputes every cached evaluation (a model with language vectors was
    scored without them before)."""
    config = shipped_evaluate_config("demo.toml")
    assert EVALUATE_STAGE.code_version == "4"
    assert stage_key(EVALUATE_STAGE, config, INPUT_KEYS, {}) != SHIPPED_KEYS["demo.toml"]
