"""eflomal (Östling & Tiedemann, 2016): statistical word alignment, no weights, fast on CPU.

The PyPI package `eflomal` runs its C sampler on text files. Pairs are grouped by language
pair (each gets its own model, trained on that language pair's pairs of the call), both
directions are aligned, and the directional links are symmetrised (grow-diag-final-and by
default). Score: 1.0 for a link found in both directions, 0.5 for a link of one direction.

eflomal seeds its sampler from /dev/urandom and has no seed option: two runs on the same
input can differ. Cached artifacts make a pipeline's output stable; a rerun with --force
may change links.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import Field

from tasks.align.backends.base import AlignBackend, AlignerSettings, ParallelText, Progress, register_backend
from tasks.align.combine import DirectionalLinks, Links, combine_directions, empty_links, grow_diag_final_and
from tasks.extras import require_extra


@register_backend
class EflomalSettings(AlignerSettings):
    """eflomal (`[align.eflomal]`; Östling & Tiedemann 2016): Bayesian IBM-style alignment by Gibbs
    sampling, per language pair, over the pairs of a shard (larger shards give better statistics).
    Directional links are symmetrised; score 1.0 for links found in both directions, else 0.5.
    eflomal seeds its sampler from /dev/urandom: results are not bit-for-bit reproducible."""

    name = "eflomal"
    description = "eflomal: Bayesian IBM-style statistical alignment, per language pair, on CPU (Östling & Tiedemann 2016)"
    extras = {"eflomal": ("eflomal",)}  # pip install 'xlembed[eflomal]'

    model: Literal[1, 2, 3] = Field(default=3, description="1: IBM1, 2: +HMM, 3: +fertility")
    symmetrize: Literal["grow_diag_final_and", "intersection", "union"] = "grow_diag_final_and"
    n_samplers: int = Field(default=3, ge=1, le=64)
    null_prior: float = Field(default=0.2, gt=0.0, lt=1.0)
    iterations_scale: float = Field(default=1.0, gt=0.0, le=100.0, description="eflomal's rel_iterations")

    def build(self, base_model: Path | None = None) -> EflomalAligner:
        return EflomalAligner(self)

    def fingerprint(self) -> dict[str, Any]:
        from importlib.metadata import version

        return {"packages": {"eflomal": version("eflomal")}}


class EflomalAligner(AlignBackend):
    label = "eflomal"

    def __init__(self, settings: EflomalSettings) -> None:
        for extra, modules in settings.extras.items():  # fail early, naming the extra
            require_extra(extra, "align backend 'eflomal'", modules)
        self.settings = settings
        self.extra: list[tuple[list[str], list[str]]] = []

    @classmethod
    def load(cls, settings: EflomalSettings, base_model: Path | None = None) -> EflomalAligner:
        return cls(settings)

    def fit(self, extra: ParallelText) -> None:
        """Parallel text (word lists) sampled together with the pairs of every later `align` call,
        for better statistics; eflomal has no separate training step. Same language pair as
        the pairs to align. Replaces the text of an earlier call."""
        self.extra = [(list(src), list(tgt)) for src, tgt in extra]

    def align(
        self, sentences: Sequence[list[str]], langs: Sequence[str], pairs: np.ndarray, progress: Progress = None
    ) -> list[Links | None]:
        """Align `pairs`, each language pair on its own (with the text given to `fit`)."""
        pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
        out: list[Links | None] = [None] * len(pairs)
        keys = [(langs[a], langs[b]) for a, b in pairs]
        for key in sorted(set(keys)):
            index = [k for k, other in enumerate(keys) if other == key]
            src = [sentences[pairs[k, 0]] for k in index]
            tgt = [sentences[pairs[k, 1]] for k in index]
            for k, links in zip(index, self.align_words(src, tgt, self.extra)):
                out[k] = links
            if progress is not None:
                progress(len(index))
        return out

    def align_words(self, src: Sequence[list[str]], tgt: Sequence[list[str]], extra: ParallelText = ()) -> list[Links]:
        """Alignments of parallel word lists of one language pair."""
        import eflomal

        if not src:
            return []
        all_src = [*src, *(s for s, _ in extra)]
        all_tgt = [*tgt, *(t for _, t in extra)]
        with tempfile.TemporaryDirectory(prefix="xlembed-eflomal-") as tmp:
            fwd_file, rev_file = Path(tmp, "fwd"), Path(tmp, "rev")
            aligner = eflomal.Aligner(
                model=self.settings.model,
                n_samplers=self.settings.n_samplers,
                null_prior=self.settings.null_prior,
                rel_iterations=self.settings.iterations_scale,
            )
            aligner.align(
                [" ".join(words) + "\n" for words in all_src],
                [" ".join(words) + "\n" for words in all_tgt],
                links_filename_fwd=str(fwd_file),
                links_filename_rev=str(rev_file),
                quiet=True,
            )
            fwd = _read_pharaoh(fwd_file, len(src))
            rev = _read_pharaoh(rev_file, len(src))
        return self.symmetrize(src, tgt, fwd, rev)

    def symmetrize(
        self, src: Sequence[list[str]], tgt: Sequence[list[str]], fwd: DirectionalLinks, rev: DirectionalLinks
    ) -> list[Links]:
        # directional scores are 1.0, so the average is 1.0 for links of both directions, 0.5 for one
        method = self.settings.symmetrize
        if method == "intersection":
            return combine_directions(len(src), fwd, rev, method="average", threshold=0.75)
        merged = combine_directions(len(src), fwd, rev, method="average", threshold=0.0)
        if method == "union":
            return merged
        out = []
        bounds_f = np.searchsorted(fwd.pair, np.arange(len(src) + 1))
        bounds_r = np.searchsorted(rev.pair, np.arange(len(src) + 1))
        for k, (s_words, t_words) in enumerate(zip(src, tgt)):
            m, n = len(s_words), len(t_words)
            f = np.zeros((m, n), dtype=bool)
            r = np.zeros((m, n), dtype=bool)
            f[fwd.src[bounds_f[k] : bounds_f[k + 1]], fwd.tgt[bounds_f[k] : bounds_f[k + 1]]] = True
            r[rev.src[bounds_r[k] : bounds_r[k + 1]], rev.tgt[bounds_r[k] : bounds_r[k + 1]]] = True
            keep = grow_diag_final_and(m, n, f, r)
            i, j, score = merged[k]
            chosen = keep[i, j] if len(i) else np.zeros(0, dtype=bool)
            out.append((i[chosen], j[chosen], score[chosen]) if len(i) else empty_links())
        return out


def _read_pharaoh(path: Path, n_lines: int) -> DirectionalLinks:
    """Links of the first `n_lines` lines of eflomal's `i-j` output, as directional links of score 1.0."""
    pair, src, tgt = [], [], []
    with open(path, encoding="utf-8") as handle:
        for k, line in enumerate(handle):
            if k >= n_lines:
                break
            fields = line.split()
            if fields:
                links = np.array([f.split("-") for f in fields], dtype=np.int64)
                pair.append(np.full(len(links), k))
                src.append(links[:, 0])
                tgt.append(links[:, 1])
    if not pair:
        return DirectionalLinks.empty()
    pair_a, src_a, tgt_a = np.concatenate(pair), np.concatenate(src), np.concatenate(tgt)
    return DirectionalLinks(pair_a, src_a, tgt_a, np.ones(len(pair_a), dtype=np.float32), np.ones(len(pair_a), dtype=np.int64))
