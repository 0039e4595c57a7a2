"""Precision is part of what a cache key means: fp32 (the default, TF32 off) stays out of the
key so artifacts keyed before the option existed keep their keys; bf16 changes the key of
evaluate and align artifacts, since it changes their numbers beyond float noise."""

from __future__ import annotations

import pytest

from tasks.align import ALIGN_STAGE
from tasks.align.config import AlignConfig
from tasks.evaluate import EVALUATE_STAGE
from tasks.evaluate.config import EvaluateConfig
from tasks.stage import stage_key

INPUTS = {"corpus": "c" * 64, "base_model": "b" * 64}
BENCHMARKS = [{"kind": "corpus_dev", "pivot": "eng_Latn"}]


def evaluate_key(**encoder) -> str:
    return stage_key(EVALUATE_STAGE, EvaluateConfig.model_validate({"encoder": encoder, "benchmarks": BENCHMARKS}), INPUTS, {})


def align_key(backend: str, **settings) -> str:
    config = AlignConfig.model_validate({"backend": backend, backend: {"model": "intfloat/multilingual-e5-small", **settings}})
    return stage_key(ALIGN_STAGE, config, INPUTS, {})


def test_evaluate_precision_bf16_is_keyed_and_fp32_keeps_the_key_of_a_config_without_it() -> None:
    assert evaluate_key(precision="fp32") == evaluate_key()
    assert evaluate_key(precision="bf16") != evaluate_key()


@pytest.mark.parametrize("backend", ["wspalign", "simalign"])
def test_align_precision_bf16_is_keyed_and_fp32_keeps_the_key_of_a_config_without_it(backend: str) -> None:
    assert align_key(backend, precision="fp32") == align_key(backend)
    assert align_key(backend, precision="bf16") != align_key(backend)


def test_device_stays_out_of_the_key_because_fp32_gives_every_device_the_same_numbers() -> None:
    assert evaluate_key(device="cuda") == evaluate_key(device="cpu") == evaluate_key()
    assert align_key("wspalign", device="cuda") == align_key("wspalign")


@pytest.mark.parametrize("old", ["auto", "bfloat16", "float16"])
def test_an_unknown_precision_is_refused_with_the_ones_there_are(old: str) -> None:
    with pytest.raises(ValueError, match="'fp32' or 'bf16'"):
        align_key("wspalign", precision=old)
