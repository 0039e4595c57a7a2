"""Encoder on a tiny locally built BERT: pooling vs manual computation, batching/sorting, ST dirs, errors."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers

from tasks.encoders import POOLING_MODES, Encoder, EncoderLoadError, EncoderSpec
from tasks.tiny_models import synthetic_sentences

TEXTS = [
    "the river",
    "la rivière ville claire petite gens eau sous sur lumière nuit maison verte marché route route route",
    "қала",
    "მდინარე ქალაქი ნათელი პატარა",
    "",
    "mto mji angavu ndogo watu maji chini juu mwanga usiku nyumba kijani soko barabara mto mji",
    "నది నగరం",
    "the city under the bright night light",
]


@pytest.fixture(scope="module")
def encoders(tiny_model_dir: Path) -> dict[str, Encoder]:
    """One encoder per pooling mode; batch_size 3 so TEXTS spans several padded batches."""
    return {p: Encoder.load(EncoderSpec(str(tiny_model_dir), pooling=p, batch_size=3)) for p in POOLING_MODES}


def manual(reference_model, text: str, pooling: str) -> np.ndarray:
    """The vector of one unpadded text, computed directly with the reference model."""
    tokenizer, model = reference_model
    inputs = tokenizer(text, return_tensors="pt")
    with torch.no_grad():
        out = model(**inputs)
    hidden = out.last_hidden_state[0]
    vector = {"mean": hidden.mean(0), "cls": hidden[0], "pooler": out.pooler_output[0]}[pooling]
    vector = vector / vector.norm()
    return vector.numpy()


# ---------------------------------------------------------------------- spec


def test_spec_defaults_and_json_round_trip():
    spec = EncoderSpec("some/model")
    assert spec.pooling is None and spec.trust_remote_code is False and spec.device is None
    full = EncoderSpec("m", pooling="cls", prefix="query: ", max_length=64, batch_size=8, device="cpu", trust_remote_code=True)
    assert EncoderSpec.from_dict(json.loads(json.dumps(full.to_dict()))) == full
    assert full.keyed() == {"model": "m", "pooling": "cls", "prefix": "query: ", "max_length": 64, "trust_remote_code": True}


@pytest.mark.parametrize(
    "kwargs",
    [{"pooling": "max"}, {"max_length": 0}, {"batch_size": -1}, {"batch_size": True}, {"trust_remote_code": "yes"}],
)
def test_spec_rejects_bad_values(kwargs):
    with pytest.raises(ValueError):
        EncoderSpec("m", **kwargs)
    with pytest.raises(ValueError, match="unknown"):
        EncoderSpec.from_dict({"model": "m", "pool": "cls"})


def test_spec_refuses_the_old_name_with_the_new_one():
    with pytest.raises(
        ValueError, match="EncoderSpec.pooling = 'cls_before_pooler' was renamed: write EncoderSpec.pooling = 'cls'"
    ):
        EncoderSpec("m", pooling="cls_before_pooler")


def test_spec_inside_a_stage_config():
    from tasks.stage_config import StageConfig

    class Config(StageConfig):
        encoder: EncoderSpec

    config = Config.model_validate({"encoder": {"model": "m", "pooling": "mean", "prefix": "query: "}})
    assert config.encoder == EncoderSpec("m", pooling="mean", prefix="query: ")
    assert Config.model_validate(config.model_dump(mode="json")) == config


# ---------------------------------------------------------------------- encode


def test_shape_dtype_unit_norm(encoders):
    enc = encoders["mean"]
    vectors = enc.encode(TEXTS)
    assert vectors.shape == (len(TEXTS), 32) and vectors.dtype == np.float32 and enc.dim == 32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    empty = enc.encode([])
    assert empty.shape == (0, 32) and empty.dtype == np.float32


@pytest.mark.parametrize("pooling", POOLING_MODES)
def test_pooling_matches_manual_on_unpadded_text(encoders, reference_model, pooling):
    """A mixed-length, multi-batch encode equals per-text computations: padding and sorting change nothing."""
    vectors = encoders[pooling].encode(TEXTS)
    expected = np.stack([manual(reference_model, t, pooling) for t in TEXTS])
    np.testing.assert_allclose(vectors, expected, atol=1e-5)
    singles = np.concatenate([encoders[pooling].encode([t]) for t in TEXTS])
    np.testing.assert_allclose(vectors, singles, atol=1e-5)


def test_pooling_modes_differ(encoders):
    a, b, c = (encoders[p].encode(TEXTS[:2]) for p in ("mean", "cls", "pooler"))
    assert not np.allclose(a, b) and not np.allclose(b, c) and not np.allclose(a, c)


def test_order_restored_under_any_permutation(encoders):
    enc = encoders["mean"]
    texts = synthetic_sentences(50, seed=3, min_words=1, max_words=40)
    base = enc.encode(texts)
    perm = np.random.default_rng(0).permutation(len(texts))
    np.testing.assert_allclose(enc.encode([texts[i] for i in perm]), base[perm], atol=1e-5)


def test_batches_are_length_sorted_padded_per_batch_and_in_inference_mode(encoders, monkeypatch):
    enc = encoders["mean"]
    calls = []
    forward = enc.model.forward

    def spy(**inputs):
        calls.append((inputs["input_ids"].shape, bool(inputs["attention_mask"][:, -1].any()), torch.is_inference_mode_enabled()))
        return forward(**inputs)

    monkeypatch.setattr(enc.model, "forward", spy)
    texts = synthetic_sentences(20, seed=5, min_words=1, max_words=30)
    enc.encode(texts)
    assert len(calls) == math.ceil(20 / 3)
    widths = [shape[1] for shape, _, _ in calls]
    assert widths == sorted(widths, reverse=True) and widths[0] > widths[-1]
    assert all(longest_fills_width and inference for _, longest_fills_width, inference in calls)
    assert not enc.model.training


def test_progress_sums_to_n(encoders):
    seen: list[int] = []
    encoders["mean"].encode(TEXTS, progress=seen.append)
    assert sum(seen) == len(TEXTS) and seen == [3, 3, 2]
    seen.clear()
    encoders["mean"].encode([], progress=seen.append)
    assert seen == []


def test_prefix_is_prepended(tiny_model_dir):
    plain = Encoder.load(EncoderSpec(str(tiny_model_dir), pooling="mean"))
    prefixed = Encoder.load(EncoderSpec(str(tiny_model_dir), pooling="mean", prefix="the river: "))
    texts = TEXTS[:4]
    got = prefixed.encode(texts)
    np.testing.assert_allclose(got, plain.encode(["the river: " + t for t in texts]), atol=1e-5)
    assert not np.allclose(got, plain.encode(texts), atol=1e-3)


def test_rejects_a_bare_string(encoders):
    with pytest.raises(TypeError, match="single string"):
        encoders["mean"].encode("the river")


# ---------------------------------------------------------------------- token embeddings


def test_token_embeddings_drop_special_and_prefix_tokens(tiny_model_dir, reference_model):
    tokenizer, model = reference_model
    prefix = "the river: "
    enc = Encoder.load(EncoderSpec(str(tiny_model_dir), prefix=prefix, batch_size=3))
    vectors, offsets = enc.token_embeddings(TEXTS, return_offsets=True)
    n_prefix = len(tokenizer(prefix, add_special_tokens=False)["input_ids"])
    for text, vecs, spans in zip(TEXTS, vectors, offsets):
        inputs = tokenizer(prefix + text, return_tensors="pt")
        with torch.no_grad():
            hidden = model(**inputs).last_hidden_state[0].numpy()
        expected = hidden[1 + n_prefix : -1]  # [CLS] prefix... text... [SEP]
        assert vecs.dtype == np.float32 and vecs.shape == expected.shape == (
            len(tokenizer(text, add_special_tokens=False)["input_ids"]),
            32,
        )
        np.testing.assert_allclose(vecs, expected, atol=1e-5)
        assert spans.shape == (len(vecs), 2) and (spans[:, 0] >= 0).all() and (spans[:, 1] <= len(text)).all()
        assert all(text[s:e].strip() for s, e in spans)
    assert enc.token_embeddings([]) == []


def test_truncation_to_max_length(tiny_model_dir):
    enc = Encoder.load(EncoderSpec(str(tiny_model_dir), max_length=8))
    long = " ".join(["river"] * 50)
    (vecs,) = enc.token_embeddings([long])
    assert vecs.shape == (6, 32)
    np.testing.assert_allclose(enc.encode([long]), enc.encode([" ".join(["river"] * 6)]), atol=1e-5)


# ---------------------------------------------------------------------- sentence-transformers dirs


@pytest.mark.parametrize("fixture, pooling, dim", [("st_cls_dir", "cls", 32), ("st_mean_dense_dir", "mean", 16)])
def test_sentence_transformers_dir_matches_sentence_transformers(request, fixture, pooling, dim):
    from sentence_transformers import SentenceTransformer

    directory = request.getfixturevalue(fixture)
    enc = Encoder.load(EncoderSpec(str(directory), batch_size=3))
    assert enc.pooling == pooling and enc.dim == dim
    expected = SentenceTransformer(str(directory), device="cpu").encode(TEXTS, normalize_embeddings=True, batch_size=3)
    got = enc.encode(TEXTS)
    assert got.shape == (len(TEXTS), dim)
    np.testing.assert_allclose(got, expected, atol=1e-5)


def test_explicit_pooling_overrides_sentence_transformers_config(st_cls_dir, encoders):
    enc = Encoder.load(EncoderSpec(str(st_cls_dir), pooling="mean"))
    assert enc.pooling == "mean"
    np.testing.assert_allclose(enc.encode(TEXTS), encoders["mean"].encode(TEXTS), atol=1e-5)


def test_unsupported_sentence_transformers_pooling(st_cls_dir, tmp_path):
    directory = shutil.copytree(st_cls_dir, tmp_path / "st-max")
    (directory / "1_Pooling" / "config.json").write_text(json.dumps({"embedding_dimension": 32, "pooling_mode": "max"}))
    with pytest.raises(EncoderLoadError, match="max"):
        Encoder.load(EncoderSpec(str(directory)))
    assert Encoder.load(EncoderSpec(str(directory), pooling="cls")).pooling == "cls"


def test_legacy_sentence_transformers_pooling_config(st_cls_dir, tmp_path):
    directory = shutil.copytree(st_cls_dir, tmp_path / "st-legacy")
    legacy = {"word_embedding_dimension": 32, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True}
    (directory / "1_Pooling" / "config.json").write_text(json.dumps(legacy))
    assert Encoder.load(EncoderSpec(str(directory))).pooling == "mean"


# ---------------------------------------------------------------------- errors and loading kwargs


def test_missing_path_names_it(tmp_path):
    missing = tmp_path / "no-such-model"
    with pytest.raises(FileNotFoundError, match="no-such-model"):
        Encoder.load(EncoderSpec(str(missing)))


def test_directory_without_tokenizer_names_it(tiny_model_dir, tmp_path):
    directory = tmp_path / "model-only"
    directory.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(tiny_model_dir / name, directory / name)
    with pytest.raises(EncoderLoadError, match="model-only.*fast tokenizer"):
        Encoder.load(EncoderSpec(str(directory)))


def test_slow_tokenizer_is_refused(tiny_model_dir, monkeypatch):
    class Slow:
        is_fast = False

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", lambda *a, **k: Slow())
    with pytest.raises(EncoderLoadError, match=f"{tiny_model_dir.name}.*no fast tokenizer"):
        Encoder.load(EncoderSpec(str(tiny_model_dir)))


@pytest.mark.parametrize("trust", [None, True])
def test_trust_remote_code_passed_only_as_given(tiny_model_dir, monkeypatch, trust):
    seen: dict[str, dict] = {}
    for name in ("AutoModel", "AutoTokenizer"):
        cls = getattr(transformers, name)
        original = cls.from_pretrained

        def spy(*args, _original=original, _name=name, **kwargs):
            seen[_name] = kwargs
            return _original(*args, **kwargs)

        monkeypatch.setattr(cls, "from_pretrained", spy)
    spec = EncoderSpec(str(tiny_model_dir)) if trust is None else EncoderSpec(str(tiny_model_dir), trust_remote_code=True)
    Encoder.load(spec)
    for kwargs in seen.values():
        assert kwargs["trust_remote_code"] is bool(trust) and kwargs["local_files_only"] is True
    assert seen["AutoTokenizer"]["use_fast"] is True and set(seen) == {"AutoModel", "AutoTokenizer"}


def test_import_does_not_pull_in_torch():
    import subprocess
    import sys

    code = "import sys, tasks.encoders; assert 'torch' not in sys.modules and 'transformers' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parents[3])


def test_missing_pooler_weights_are_not_used_for_pooler_pooling(tmp_path) -> None:
    """A checkpoint saved without a pooler must not pool through a random one: "cls" is the
    first token, "pooler" is refused naming the folder."""
    import numpy as np
    import torch
    from transformers import BertModel, PreTrainedTokenizerFast

    from tasks.tiny_models import build_tiny_model

    build_tiny_model(tmp_path, pooler=False)
    tokenizer = PreTrainedTokenizerFast.from_pretrained(tmp_path)
    model = BertModel.from_pretrained(tmp_path, add_pooling_layer=False)
    from tasks.encoders import Encoder, EncoderSpec

    model.eval()
    encoder = Encoder.load(EncoderSpec(model=str(tmp_path), pooling="cls"))
    assert encoder.model.pooler is None
    inputs = tokenizer(["a b c"], return_tensors="pt")
    with torch.no_grad():
        first = model(**inputs).last_hidden_state[:, 0]
    np.testing.assert_allclose(encoder.encode(["a b c"]), torch.nn.functional.normalize(first, dim=-1).numpy(), atol=1e-6)
    with pytest.raises(EncoderLoadError, match=f"{tmp_path.name}.*no trained pooler weights.*'cls'"):
        Encoder.load(EncoderSpec(model=str(tmp_path), pooling="pooler"))


def test_embedding_offset_matches_the_trainers_language_vector(encoders: dict[str, Encoder], tiny_model_dir: Path) -> None:
    """`encode(..., embedding_offset=v)` is what the trainer's DualEncoder computes with language
    vector v added to the token embeddings (unpadded, one text at a time); a zero offset changes
    nothing, and an offset of the wrong size is refused."""
    from tasks.train.model import DualEncoder, load_transformer

    encoder = encoders["mean"]
    texts = [t for t in TEXTS if t]
    dual = DualEncoder(load_transformer(tiny_model_dir), pooling="mean", n_langs=2).eval()
    torch.nn.init.normal_(dual.lang_embedding.weight, std=0.5)  # large enough to move every vector
    vector = dual.lang_embedding.weight[1].detach().numpy()
    shifted = encoder.encode(texts, embedding_offset=vector)
    for i, text in enumerate(texts):
        inputs = encoder.tokenizer(text, return_tensors="pt")
        with torch.no_grad():
            expected, _ = dual(inputs["input_ids"], inputs["attention_mask"], torch.tensor([1]))
        np.testing.assert_allclose(shifted[i], expected[0].numpy(), atol=1e-5)
    plain = encoder.encode(texts)
    assert np.abs(shifted - plain).max() > 1e-2
    np.testing.assert_allclose(encoder.encode(texts, embedding_offset=np.zeros(encoder.hidden_size)), plain, atol=1e-6)
    with pytest.raises(ValueError, match="embedding_offset has shape"):
        encoder.encode(texts, embedding_offset=np.zeros(encoder.hidden_size + 1))


# ---------------------------------------------------------------------- precision

# How close vectors from two computations of one model must be, per precision: fp32 differs
# by float rounding only (device, batch shape); bf16 keeps about 3 significant digits.
TOLERANCE = {"fp32": {"atol": 1e-5, "rtol": 1e-5}, "bf16": {"atol": 3e-2, "rtol": 3e-2}}


def matmul_precision_in_forward(encoder: Encoder, texts: list[str]) -> list[tuple[str, torch.dtype]]:
    """(float32 matmul precision, output dtype of the first linear layer) seen in each forward pass."""
    seen = []
    linear = next(m for m in encoder.model.modules() if isinstance(m, torch.nn.Linear))
    handle = linear.register_forward_hook(lambda _m, _i, out: seen.append((torch.get_float32_matmul_precision(), out.dtype)))
    try:
        encoder.encode(texts)
    finally:
        handle.remove()
    return seen


def test_default_precision_is_fp32_with_tf32_off_whatever_the_process_set(encoders, reference_model):
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("medium")  # what a notebook or another library may have left
    try:
        seen = matmul_precision_in_forward(encoders["mean"], TEXTS)
        assert seen and all(s == ("highest", torch.float32) for s in seen)
        assert torch.get_float32_matmul_precision() == "medium"  # put back after
    finally:
        torch.set_float32_matmul_precision(before)
    expected = np.stack([manual(reference_model, t, "mean") for t in TEXTS])
    np.testing.assert_allclose(encoders["mean"].encode(TEXTS), expected, **TOLERANCE["fp32"])


def test_bf16_autocasts_on_any_device_and_differs_from_fp32_beyond_float_noise(tiny_model_dir, encoders):
    bf16 = Encoder.load(EncoderSpec(str(tiny_model_dir), pooling="mean", batch_size=3, precision="bf16"))
    assert {dtype for _, dtype in matmul_precision_in_forward(bf16, TEXTS)} == {torch.bfloat16}
    got, fp32 = bf16.encode(TEXTS), encoders["mean"].encode(TEXTS)
    np.testing.assert_allclose(got, fp32, **TOLERANCE["bf16"])
    fp32_noise = np.abs(np.concatenate([encoders["mean"].encode([t]) for t in TEXTS]) - fp32).max()  # batch shape only
    assert np.abs(got - fp32).max() > 10 * fp32_noise  # measured: 3.3e-5 against 3e-8 on the tiny model


def test_precision_is_keyed_only_when_not_fp32():
    assert "precision" not in EncoderSpec("m").keyed()
    assert EncoderSpec("m", precision="bf16").keyed()["precision"] == "bf16"
    with pytest.raises(ValueError, match="EncoderSpec.precision must be one of"):
        EncoderSpec("m", precision="bfloat16")
