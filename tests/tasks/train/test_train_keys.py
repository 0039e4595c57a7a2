"""Train artifact keys stay what they were before objectives became a registry (issue 16): the
values below were recorded on the code of commit ae6bf4d, with the same configs and inputs."""

from __future__ import annotations

import pickle
import tomllib
from pathlib import Path

from tasks.stage import stage_key
from tasks.stage_config import CONFIG_DIR
from tasks.train import TRAIN_STAGE
from tasks.train.config import TrainConfig

REPO = Path(__file__).resolve().parents[3]
INPUTS = {"corpus": "a" * 64, "translate": "b" * 64, "align": "c" * 64}
CONFIGS = ("cpu-small", "cpu-wacse", "dap", "demo", "dueam", "multiway-supcon", "offline-multiway", "smoke", "wacse")
EXTRA = {  # every objective on, with options off their defaults
    "all-objectives": {
        "objectives": {
            "translation_ranking": {"weight": 0.5, "symmetric": True, "margin": 0.1},
            "multiway_supcon": {"weight": 0.3, "regularization": 0.2, "denominator": "paper", "reduction": "sum"},
            "aligned_word_prediction": {"weight": 0.2, "mask_fraction": 0.5, "vocabulary": "sampled", "negatives": 16},
            "word_translation_ranking": {"weight": 0.1, "reduction": "per_word"},
            "representation_translation": {"weight": 0.4, "layers": 1, "direction": "both"},
            "dueam": {"weight": 0.6, "pairs": "random"},
            "base_regularization": {"weight": 0.01},
        }
    },
}

RECORDED = {
    "cpu-small": "b2047c08bc1e1e3e96d37d59f0c84500e52460f5f6415198cf6e217e94afb550",  # base_regularization 30 -> 100 (issue 39, measured)
    "cpu-wacse": "f9733aff6d0dcf8f83c090d197a4ce8011f0e770cb62188501872e3a222743fe",
    "dap": "3d26d29c9d624b3c7a6b36516d6bed135d9c35ebe8b52ddea5dd922255d352bc",
    "demo": "713a4b76b268383a45891297fd9b545eaaa39707b793b0dbe1689d318024dae5",  # interpolation 0.25 -> 0.1 (issue 13, measured)
    "dueam": "8d9ce33ab8e8f8723aa77bec30fa778cb968951925339b75fd1e59f8be4ee51f",
    "multiway-supcon": "4d393ffe1b62ca6c6df7da2c2f29308563e63ed11c21ec143e13d3266d96276c",
    "offline-multiway": "568b76a1a2c508dfb1449cecb713a8cfb6e4e04180217a01507f95d819a094bb",
    "smoke": "31f2c65c9ddbcd569340524ba28360c1e741e9ad9c9a94533d77924d44ca50c5",
    "wacse": "b9748e912b10b1f075dd8729897194132de1f7d3bc038e1db2f7f4f06652af86",
    "all-objectives": "dce6c942b036bb29a1de80fbed6951754c4f4fd4901bbe94e2440648ca11326b",
}


def sections() -> dict[str, tuple[dict, Path]]:
    out = {}
    for name in CONFIGS:
        path = REPO / "configs" / f"{name}.toml"
        out[name] = (tomllib.loads(path.read_text(encoding="utf-8"))["train"], path.parent)
    for name, section in EXTRA.items():
        out[name] = (section, REPO)
    return out


def keys() -> dict[str, str]:
    out = {}
    for name, (section, config_dir) in sections().items():
        config = TrainConfig.model_validate(section, context={CONFIG_DIR: str(config_dir)})
        out[name] = stage_key(TRAIN_STAGE, config, INPUTS, {})
        assert pickle.loads(pickle.dumps(config)) == config
    return out


def test_keys_of_existing_train_configs_are_unchanged() -> None:
    assert keys() == RECORDED
