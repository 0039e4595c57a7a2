"""Paired bootstrap confidence intervals for differences between two encoders on the same items.

A retrieval benchmark scores each query sentence once per model (correct or not, and a
margin); two models scored on the same sentences give a paired difference per sentence.
The interval of the mean difference comes from resampling sentences with replacement
(Koehn 2004; Berg-Kirkpatrick et al. 2012), separately within each language (stratum), and
the statistic is the unweighted mean over languages of the per-language mean difference: the
same average the language-group rows of the metrics table report. Several seeds of one
variant are averaged per sentence first, so the interval is over sentences, and the spread
over seeds is reported apart from it.

    >>> diffs = [trained_correct_afr - base_correct_afr, trained_correct_amh - base_correct_amh]
    >>> interval = paired_bootstrap(diffs)
    >>> interval.significant   # True only when the 95% interval excludes zero
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["BootstrapInterval", "paired_bootstrap"]

DEFAULT_RESAMPLES = 2000
DEFAULT_CONFIDENCE = 0.95


@dataclass(frozen=True)
class BootstrapInterval:
    """Mean paired difference with its percentile bootstrap interval."""

    delta: float  # the observed statistic (mean over strata of the per-stratum mean difference)
    low: float
    high: float
    items: int  # paired items in all strata
    strata: int
    confidence: float

    @property
    def significant(self) -> bool:
        """The interval excludes zero (a difference inside the noise is not a win or a loss)."""
        return self.low > 0 or self.high < 0

    def scaled(self, factor: float) -> BootstrapInterval:
        """The same interval in other units (x100 for percentage points)."""
        return BootstrapInterval(self.delta * factor, self.low * factor, self.high * factor, self.items, self.strata, self.confidence)


def paired_bootstrap(
    strata: Sequence[np.ndarray],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = 0,
) -> BootstrapInterval:
    """Percentile bootstrap interval of the mean over strata of each stratum's mean paired difference.

    ``strata``: one 1-D array of per-item differences (model A minus model B on the same
    item) per language. Items are resampled with replacement within their stratum, all strata
    in one vectorised draw per stratum (``resamples`` x n indices). Raises ValueError for no
    strata, an empty stratum or non-finite differences.
    """
    if not strata:
        raise ValueError("paired_bootstrap: no strata (nothing to compare)")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    arrays = [np.asarray(s, dtype=np.float64).ravel() for s in strata]
    for index, array in enumerate(arrays):
        if array.size == 0:
            raise ValueError(f"paired_bootstrap: stratum {index} is empty")
        if not np.isfinite(array).all():
            raise ValueError(f"paired_bootstrap: stratum {index} has NaN or infinite differences")
    rng = np.random.default_rng(seed)
    observed = float(np.mean([a.mean() for a in arrays]))
    replicate = np.zeros(resamples, dtype=np.float64)
    for array in arrays:
        picks = rng.integers(0, array.size, size=(resamples, array.size))
        replicate += array[picks].mean(axis=1)
    replicate /= len(arrays)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(replicate, [tail, 100 - tail])
    return BootstrapInterval(observed, float(low), float(high), int(sum(a.size for a in arrays)), len(arrays), confidence)
