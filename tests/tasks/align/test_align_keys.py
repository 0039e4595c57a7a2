"""Align artifact keys stay what they were before backends became a registry (issue 16): the
values below were recorded on the code of commit e479c36, with the same configs and inputs."""

from __future__ import annotations

import pickle
import tomllib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest

from tasks.align import ALIGN_STAGE
from tasks.align.config import AlignConfig
from tasks.stage import source_fingerprints, stage_key
from tasks.stage_config import CONFIG_DIR, config_locations

REPO = Path(__file__).resolve().parents[3]
INPUTS = {"corpus": "a" * 64, "translate": "b" * 64}

# name: (key without source fingerprints, key with them) — None where the fingerprint holds package versions
RECORDED = {
    "wacse": (
        "8f38b6736c2997b499362d520cc71355421bb8f58b2abb186d68566182be8631",
        "8f38b6736c2997b499362d520cc71355421bb8f58b2abb186d68566182be8631",
    ),
    "cpu-wacse": (
        "aabe6f617bb631ae2cfbf76fe757322c5a4a3379a88adba723b480096e6442ed",
        "aabe6f617bb631ae2cfbf76fe757322c5a4a3379a88adba723b480096e6442ed",
    ),
    "smoke": ("b8de2e435320f7dea8c209c582f875fc83249fb53b91bd134f611979b1dcb1a8", None),
    "eflomal": ("43970da715f4940c3f8732ed951104e1bbdbfcd0b32bb86aafd205961f87d375", None),
    "wsp-local": (
        "f8230ec1262e3b26e7afdfcef3580fb1bf425bfda24c025b2d603db4e739db77",
        "af3c2bcd1fb2862abc3e6c37fc031dfc28312840e44ba0ec99509347092b4005",
    ),
    "sim-local": (
        "ed7c7d918b688cdfe7fe9ec636e1f1ded8135e6e8b5b0b33e1c5ff35cf7c742d",
        "a81d5828ec4b0d775990f70b9347d455b4e853a4168d661e969c1bdb89a67fc4",
    ),
    "sim-hub": (
        "b7776ad23670775ddcf616f9ee21bafaa770ba299404abab65a520c51191ed8e",
        "b7776ad23670775ddcf616f9ee21bafaa770ba299404abab65a520c51191ed8e",
    ),
}


def model_folder(root: Path) -> Path:
    (root / "sub").mkdir(parents=True)
    (root / "config.json").write_text('{"model_type": "xlm-roberta"}\n', encoding="utf-8")
    (root / "model.safetensors").write_bytes(b"\x00weights\x01")
    (root / "sub" / "extra.txt").write_text("nested\n", encoding="utf-8")
    return root


def sections(tmp_path: Path) -> dict[str, tuple[dict, Path]]:
    folder = model_folder(tmp_path / "model")
    out = {}
    for name in ("wacse", "cpu-wacse", "smoke"):
        path = REPO / "configs" / f"{name}.toml"
        out[name] = (tomllib.loads(path.read_text(encoding="utf-8"))["align"], path.parent)
    out["eflomal"] = ({"backend": "eflomal", "eflomal": {"model": 2, "symmetrize": "union"}}, tmp_path)
    out["wsp-local"] = (
        {"backend": "wspalign", "wspalign": {"source": "local", "model": "model", "batch_tokens": 1024}},
        tmp_path,
    )
    out["sim-local"] = (
        {"backend": "simalign", "pairs": "all_pairs", "simalign": {"model": str(folder), "method": "match"}},
        tmp_path,
    )
    out["sim-hub"] = (
        {
            "backend": "simalign",
            "langs": ["en", "kk"],
            "simalign": {"model": "intfloat/multilingual-e5-small", "prefix": "query: "},
        },
        tmp_path,
    )
    return out


def test_keys_of_existing_align_configs_are_unchanged(tmp_path: Path) -> None:
    for name, (section, config_dir) in sections(tmp_path).items():
        config = AlignConfig.model_validate(section, context={CONFIG_DIR: str(config_dir)})
        keyed_only, full = RECORDED[name]
        assert stage_key(ALIGN_STAGE, config, INPUTS, {}) == keyed_only, name
        if name == "eflomal" and not _installed("eflomal"):
            continue
        fingerprints = source_fingerprints(ALIGN_STAGE, config)
        if full is not None:
            assert stage_key(ALIGN_STAGE, config, INPUTS, fingerprints) == full, name
        else:  # package versions, as the code before the registry keyed them
            packages = ("torch", "transformers", "tokenizers") if name == "smoke" else ("eflomal",)
            assert fingerprints == {"packages": {p: version(p) for p in packages}}, name
        assert pickle.loads(pickle.dumps(config)) == config


def test_local_model_folders_are_recorded_as_locations(tmp_path: Path) -> None:
    configs = {name: AlignConfig.model_validate(s, context={CONFIG_DIR: str(d)}) for name, (s, d) in sections(tmp_path).items()}
    assert config_locations(configs["wsp-local"]) == {"wspalign.model": str(tmp_path / "model")}
    assert config_locations(configs["sim-local"]) == {"simalign.model": str(tmp_path / "model")}
    assert config_locations(configs["wacse"]) == {}


def _installed(package: str) -> bool:
    try:
        version(package)
    except PackageNotFoundError:
        return False
    return True


@pytest.mark.parametrize("dump", [{"backend": "simalign", "simalign": {"method": "argmax"}, "wspalign": None, "eflomal": None}])
def test_a_dump_from_before_the_registry_still_validates(dump: dict) -> None:
    config = AlignConfig.model_validate(dump)
    assert config.settings.method == "argmax" and AlignConfig.model_validate(config.model_dump(mode="json")) == config
