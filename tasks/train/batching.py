"""Batches of the training data: each step's rows and views, rebuilt from the step number.

A batch is `batch_size` rows, each with the pivot text in view 0 and up to `views - 1` other
languages after it; no text appears twice in a batch (duplicates would be false negatives).
Which languages a row shows and the order of rows are drawn from `(seed, epoch)`, and what an
objective draws for a step (AWP: which aligned words it masks) from `(seed, step)`, so the batch
of any step can be rebuilt from the step number alone: that is what makes resume exact.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tasks.train.data import TrainingData


def epoch_batches(
    data: TrainingData, *, epoch: int, batch_size: int, views: int, seed: int, pivot_in_every_row: bool = True
) -> list[np.ndarray]:
    """The epoch's batches: [batch_size, views] arrays of group row and language column (column -1: no view).

    Row order and each row's languages come from (seed, epoch); a row whose texts already
    appear in the batch waits for the next batch; a last incomplete batch is dropped. View 0 is
    the pivot unless `pivot_in_every_row` is False: then all views are drawn from every
    language, the pivot included (multi-way en-ablate; the rows' pivot alignments go unused).
    """
    rng = np.random.default_rng([seed, epoch])
    n_groups, n_langs = data.groups.shape
    order = rng.permutation(n_groups)
    fixed = 1 if pivot_in_every_row else 0  # column 0, the pivot, is always view 0; else drawn like the rest
    keys = rng.random((n_groups, n_langs - fixed))
    keys[data.groups[:, fixed:] < 0] = np.inf
    chosen = np.argsort(keys, axis=1, kind="stable")[:, : views - fixed] + fixed
    chosen[np.take_along_axis(keys, chosen - fixed, axis=1) == np.inf] = -1
    cols = np.concatenate([np.zeros((n_groups, fixed), dtype=np.int64), chosen], axis=1)  # [n_groups, views]
    batches: list[np.ndarray] = []
    current: list[int] = []
    seen: set[int] = set()
    waiting: list[int] = []
    for g in order.tolist():
        queue = [*waiting, g]
        waiting = []
        for item in queue:
            row_texts = {int(data.groups[item, c]) for c in cols[item] if c >= 0}
            if row_texts & seen:
                waiting.append(item)
                continue
            current.append(item)
            seen |= row_texts
            if len(current) == batch_size:
                rows = np.array(current, dtype=np.int64)
                batches.append(np.concatenate([rows[:, None], cols[rows]], axis=1))  # [B, 1 + views]
                current, seen = [], set()
    return batches


class BatchPlan:
    """Step number -> batch, over as many epochs as needed (each epoch's batches computed once)."""

    def __init__(self, data: TrainingData, *, batch_size: int, views: int, seed: int, pivot_in_every_row: bool = True) -> None:
        self.data, self.batch_size, self.views, self.seed = data, batch_size, views, seed
        self.pivot_in_every_row = pivot_in_every_row
        self._epochs: dict[int, list[np.ndarray]] = {}
        first = self.epoch(0)
        if not first:
            raise ValueError(
                f"not one batch of {batch_size} rows without duplicate texts can be formed from "
                f"{data.n_groups} training rows: lower batch_size or add data"
            )

    def epoch(self, e: int) -> list[np.ndarray]:
        if e not in self._epochs:
            self._epochs = {k: v for k, v in self._epochs.items() if k >= e - 1}
            self._epochs[e] = epoch_batches(
                self.data,
                epoch=e,
                batch_size=self.batch_size,
                views=self.views,
                seed=self.seed,
                pivot_in_every_row=self.pivot_in_every_row,
            )
        return self._epochs[e]

    def position(self, step: int) -> tuple[int, int]:
        """(epoch, batch within the epoch) of a 0-based step."""
        e = 0
        while step >= len(self.epoch(e)):
            step -= len(self.epoch(e))
            e += 1
        return e, step

    def batch(self, step: int) -> StepBatch:
        e, i = self.position(step)
        plan = self.epoch(e)[i]
        return make_step_batch(self.data, plan, step=step)


@dataclass
class StepBatch:
    """Everything one optimiser step needs, indexed by row so that it can be cut into chunks/ranks."""

    text_ids: np.ndarray  # [B, V] text id, -1 for no view
    lang_ids: np.ndarray  # [B, V] column in data.langs, -1 for no view
    pairs: np.ndarray  # [B, A, 2] aligned (view-1 word, pivot word), -1 padded
    step: int = 0
    drawn: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)  # objective -> what it drew for the step, [B, ...] each

    def draw(self, draws: Mapping[str, Any], rng: np.random.Generator) -> StepBatch:
        """This batch with what each of `draws` (objective name -> `draw(batch, rng)`) draws from `rng`, in order."""
        drawn = dict(self.drawn)
        for name, draw in draws.items():
            arrays = draw(self, rng)
            if arrays:
                drawn[name] = arrays
        return StepBatch(self.text_ids, self.lang_ids, self.pairs, self.step, drawn)

    @property
    def size(self) -> int:
        return int(self.text_ids.shape[0])

    def rows(self, start: int, stop: int) -> StepBatch:
        drawn = {name: {k: v[start:stop] for k, v in arrays.items()} for name, arrays in self.drawn.items()}
        return StepBatch(self.text_ids[start:stop], self.lang_ids[start:stop], self.pairs[start:stop], self.step, drawn)


def make_step_batch(data: TrainingData, plan: np.ndarray, *, step: int) -> StepBatch:
    rows, cols = plan[:, 0], plan[:, 1:]
    text_ids = np.where(cols >= 0, data.groups[rows[:, None], np.maximum(cols, 0)], -1)
    start, count = data.alignments.lookup(text_ids[:, 1], text_ids[:, 0])  # each row's (view 1, view 0) pairs
    pairs = np.full((len(rows), max(int(count.max(initial=0)), 1), 2), -1, dtype=np.int32)
    at = np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count)
    pairs[np.repeat(np.arange(len(rows)), count), at] = data.alignments.pairs[np.repeat(start, count) + at]
    return StepBatch(text_ids.astype(np.int64), np.where(cols >= 0, cols, -1).astype(np.int64), pairs, step)


def step_draws_rng(seed: int, step: int) -> np.random.Generator:
    """The generator objectives draw a step's random choices from (`StepBatch.draw`)."""
    return np.random.default_rng([seed, step, 1])


# ----------------------------------------------------------------------------- tensors


def texts_to_arrays(data: TrainingData, text_ids: np.ndarray) -> dict[str, np.ndarray]:
    """input_ids, attention_mask, word_ids for a flat list of text ids, cut to their longest."""
    lengths = data.lengths[text_ids]
    width = int(lengths.max()) if len(lengths) else 1
    return {
        "input_ids": data.token_ids[text_ids, :width],
        "attention_mask": (np.arange(width)[None, :] < lengths[:, None]).astype(np.int64),
        "word_ids": data.word_ids[text_ids, :width],
    }
