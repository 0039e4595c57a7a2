"""Paired bootstrap intervals for the difference between two encoders scored on the same items:
the one implementation behind the evaluation report (tasks/evaluate/report.py) and the sweep
comparison (tasks/evaluate/compare.py).

Retrieval: each sentence pair (row i of a language pair) gives two queries, one per direction.
The two queries of a pair share their sentences, so their outcomes are not independent: the
resampling unit is the sentence pair, both directions together (a cluster bootstrap; Koehn
2004, Berg-Kirkpatrick et al. 2012 resample sentences). Pairs are resampled with replacement
within their stratum (a language pair); the statistic of a stratum is the mean over the
queries its resampled pairs hold, so on the observed data it is the metrics table's
accuracy_mean (both directions' queries). The statistic over strata is their weighted mean
(equal weights: the unweighted mean over languages that the group rows report).

STS: a set's statistic is a Spearman correlation, not a mean over items, so the difference of
the two encoders' correlations is recomputed on each resample of the sentence pairs
(`paired_spearman_bootstrap`).

Everything here is deterministic: the same items in any row order give the same interval
(each stratum is put in a canonical order before it is resampled), and the generator is
seeded.

    >>> stratum = Stratum(diffs=row_correct - base_correct, units=item_ids)   # one per language pair
    >>> interval = paired_bootstrap([stratum_afr, stratum_amh])
    >>> interval.significant   # True only when the 95% interval excludes zero
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "DEFAULT_CONFIDENCE",
    "DEFAULT_RESAMPLES",
    "BootstrapInterval",
    "Stratum",
    "paired_bootstrap",
    "paired_spearman_bootstrap",
    "paired_spearman_mean_bootstrap",
]

DEFAULT_RESAMPLES = 2000
DEFAULT_CONFIDENCE = 0.95
# resample rows per block in the Spearman bootstrap: bounds memory at ~block x pairs x 8 bytes per array
_SPEARMAN_BLOCK = 250


@dataclass(frozen=True)
class BootstrapInterval:
    """Paired difference (the observed statistic) with its percentile bootstrap interval."""

    delta: float  # the observed statistic (weighted mean over strata of each stratum's mean difference)
    low: float
    high: float
    items: int  # paired items (queries, or STS sentence pairs) in all strata
    strata: int
    confidence: float
    units: int = 0  # resampled units (sentence pairs) in all strata

    @property
    def significant(self) -> bool:
        """The interval excludes zero (a difference inside the noise is not a win or a loss)."""
        return self.low > 0 or self.high < 0

    def scaled(self, factor: float) -> BootstrapInterval:
        """The same interval in other units (x100 for percentage points)."""
        return BootstrapInterval(
            self.delta * factor, self.low * factor, self.high * factor, self.items, self.strata, self.confidence, self.units
        )


@dataclass(frozen=True)
class Stratum:
    """One stratum's per-item paired differences (row minus reference on the same item).

    `units`: the resampling unit of each item (items with the same unit are drawn together, e.g.
    the two directions' queries of one sentence pair); None: every item is its own unit.
    `weight`: the stratum's weight in the statistic (normalised over the strata)."""

    diffs: np.ndarray
    units: np.ndarray | None = None
    weight: float = 1.0


def _unit_sums(stratum: Stratum, index: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Per unit (in ascending unit order): the sum of its differences and its number of items."""
    diffs = np.asarray(stratum.diffs, dtype=np.float64).ravel()
    if diffs.size == 0:
        raise ValueError(f"paired_bootstrap: stratum {index} is empty")
    if not np.isfinite(diffs).all():
        raise ValueError(f"paired_bootstrap: stratum {index} has NaN or infinite differences")
    if stratum.units is None:
        units = np.arange(diffs.size)
    else:
        units = np.asarray(stratum.units).ravel()
        if units.shape != diffs.shape:
            raise ValueError(f"paired_bootstrap: stratum {index} has {diffs.size} differences but {units.size} units")
    # canonical order (unit, then value): sums do not depend on the order the rows came in
    order = np.lexsort((diffs, units))
    diffs, units = diffs[order], units[order]
    starts = np.flatnonzero(np.r_[True, units[1:] != units[:-1]])
    sums = np.add.reduceat(diffs, starts)
    counts = np.diff(np.r_[starts, diffs.size]).astype(np.float64)
    return sums, counts, diffs.size


def paired_bootstrap(
    strata: Sequence[Stratum | np.ndarray],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = 0,
) -> BootstrapInterval:
    """Percentile bootstrap interval of the weighted mean over strata of each stratum's mean paired difference.

    ``strata``: `Stratum`s (or plain 1-D arrays: one unit per item, weight 1). Within each
    stratum, its units are drawn with replacement (``resamples`` x units indices, one
    vectorised draw per stratum, strata in the order given); a replicate's stratum mean is the
    sum of the drawn units' differences over the number of items they hold. Raises ValueError
    for no strata, an empty stratum, non-finite differences or weights that are not positive.
    """
    if not strata:
        raise ValueError("paired_bootstrap: no strata (nothing to compare)")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    given = [s if isinstance(s, Stratum) else Stratum(np.asarray(s)) for s in strata]
    weights = np.array([s.weight for s in given], dtype=np.float64)
    if not (np.isfinite(weights).all() and (weights > 0).all()):
        raise ValueError(f"paired_bootstrap: stratum weights must be positive, got {weights.tolist()}")
    weights = weights / weights.sum()
    rng = np.random.default_rng(seed)
    observed = 0.0
    replicate = np.zeros(resamples, dtype=np.float64)
    items = units = 0
    for index, (stratum, weight) in enumerate(zip(given, weights)):
        sums, counts, n_items = _unit_sums(stratum, index)
        observed += weight * (sums.sum() / counts.sum())
        picks = rng.integers(0, sums.size, size=(resamples, sums.size))
        replicate += weight * (sums[picks].sum(axis=1) / counts[picks].sum(axis=1))
        items += n_items
        units += sums.size
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(replicate, [tail, 100 - tail])
    return BootstrapInterval(float(observed), float(low), float(high), items, len(given), confidence, units)


def _row_ranks(values: np.ndarray) -> np.ndarray:
    """Average ranks along the last axis (ties share their mean rank), as Spearman's rho uses."""
    import scipy.stats

    return scipy.stats.rankdata(values, axis=-1)


def _row_pearson(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a - a.mean(axis=-1, keepdims=True)
    b = b - b.mean(axis=-1, keepdims=True)
    denominator = np.sqrt((a * a).sum(axis=-1) * (b * b).sum(axis=-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return (a * b).sum(axis=-1) / denominator


def _spearman_arrays(scores: np.ndarray, reference_scores: np.ndarray, gold: np.ndarray, what: str) -> list[np.ndarray]:
    arrays = [np.asarray(a, dtype=np.float64).ravel() for a in (scores, reference_scores, gold)]
    if len({a.size for a in arrays}) != 1:
        raise ValueError(f"{what}: arrays differ in length: {[a.size for a in arrays]}")
    if arrays[0].size < 2:
        raise ValueError(f"{what}: need at least two sentence pairs")
    if not all(np.isfinite(a).all() for a in arrays):
        raise ValueError(f"{what}: NaN or infinite values")
    order = np.lexsort(arrays[::-1])  # by score, then reference score, then gold: a fixed order of the rows' values
    return [a[order] for a in arrays]


def _spearman_replicates(arrays: Sequence[np.ndarray], rng: np.random.Generator, resamples: int) -> tuple[float, np.ndarray]:
    """(observed difference, one difference per resample of the pairs; NaN where a draw is constant)."""
    ours, theirs, gold = arrays
    n = gold.size

    def difference(index: np.ndarray) -> np.ndarray:
        g = _row_ranks(gold[index])
        return _row_pearson(_row_ranks(ours[index]), g) - _row_pearson(_row_ranks(theirs[index]), g)

    observed = float(difference(np.arange(n)[None, :])[0])
    picks = rng.integers(0, n, size=(resamples, n))
    return observed, np.concatenate([difference(picks[i : i + _SPEARMAN_BLOCK]) for i in range(0, resamples, _SPEARMAN_BLOCK)])


def paired_spearman_bootstrap(
    scores: np.ndarray,
    reference_scores: np.ndarray,
    gold: np.ndarray,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = 0,
) -> BootstrapInterval:
    """Percentile bootstrap interval of spearman(scores, gold) - spearman(reference_scores, gold).

    The three arrays are per sentence pair, in the same order; each resample draws sentence pairs
    with replacement and recomputes both correlations on the same draw. The pairs are put in a
    canonical order first (the interval does not depend on the order they came in). A resample
    where a correlation is undefined (constant draw) is left out. Raises ValueError for arrays
    of different lengths, fewer than two pairs or non-finite values.
    """
    return paired_spearman_mean_bootstrap(
        [(scores, reference_scores, gold)], resamples=resamples, confidence=confidence, seed=seed
    )


def paired_spearman_mean_bootstrap(
    sets: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = 0,
) -> BootstrapInterval:
    """`paired_spearman_bootstrap` of the unweighted mean over STS sets (strata) of each set's
    difference in Spearman: each set's pairs are resampled within the set, sets in the order
    given. A resample where any set's correlation is undefined is left out."""
    if not sets:
        raise ValueError("paired_spearman_bootstrap: no sets (nothing to compare)")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    rng = np.random.default_rng(seed)
    observed = 0.0
    replicate = np.zeros(resamples, dtype=np.float64)
    items = 0
    for scores, reference_scores, gold in sets:
        arrays = _spearman_arrays(scores, reference_scores, gold, "paired_spearman_bootstrap")
        difference, replicates = _spearman_replicates(arrays, rng, resamples)
        observed += difference / len(sets)
        replicate += replicates / len(sets)
        items += arrays[0].size
    replicate = replicate[np.isfinite(replicate)]
    if replicate.size == 0:
        raise ValueError("paired_spearman_bootstrap: every resample has a constant side (no correlation)")
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(replicate, [tail, 100 - tail])
    return BootstrapInterval(observed, float(low), float(high), items, len(sets), confidence, items)
