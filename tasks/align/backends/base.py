"""What an align backend is, and the registry that finds one by name.

A backend is its settings: an `AlignerSettings` subclass (one file in this folder) that is the
`[align.<name>]` table and declares its `name` (the `backend = "..."` of `[align]`), a one-line
`description`, the optional packages it needs (`extras`), and:

    settings.build(base_model)          ->  the aligner (a `WordAligner`)
    settings.uses_base_model()          ->  reads the pipeline's base_model artifact?
    settings.fingerprint()              ->  what the key needs beyond the settings (files, packages)
    aligner.align(sentences, langs, pairs)  ->  per pair: (src int32, tgt int32, score float32) or None
    aligner.fit(extra)                  ->  optional: learn from unlabelled parallel text

`sentences` are word lists (each sentence once, however many pairs it is in); `pairs` is an
int array [P, 2] of (source, target) indices into them. None marks a pair the backend
cannot align (too long for its model); the stage counts it as dropped.

`@register_backend` puts a settings class into `ALIGN_BACKENDS`; nothing else in xlembed names a backend.
"""

from __future__ import annotations

import keyword
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar, Protocol, TypeVar

import numpy as np

from tasks.align.combine import Links
from tasks.registry import register_unique
from tasks.stage_config import StageConfig

Progress = Callable[[int], None] | None
ParallelText = Sequence[tuple[list[str], list[str]]]


class WordAligner(Protocol):
    """A loaded backend, as the align stage and the gold scorer use it."""

    label: str  # the output's `backend` column: "wspalign", "simalign:itermax", "eflomal"

    def align(
        self, sentences: Sequence[list[str]], langs: Sequence[str], pairs: np.ndarray, progress: Progress = None
    ) -> list[Links | None]: ...

    def fit(self, extra: ParallelText) -> None: ...


class AlignerSettings(StageConfig):
    """Base of a backend: its `[align.<name>]` table and what the align stage needs to know about
    it. A subclass sets `name` (and `description`, `extras` where it has them), declares its
    settings as pydantic fields and implements `build`; `@register_backend` registers it."""

    name: ClassVar[str] = ""  # [align] backend = "<name>", and its table [align.<name>]
    description: ClassVar[str] = ""  # what it does, in one line
    # the optional packages it needs: the xlembed extra that installs them -> the modules it imports
    # (checked when a config choosing it loads: tasks/extras.py)
    extras: ClassVar[dict[str, tuple[str, ...]]] = {}
    # the accelerator: `needs_gpu()` (StageConfig) reads its `device` setting, if it has one; one
    # that runs only on the accelerator sets `requires_gpu = True`. The align stage's shards reserve a GPU then.

    def required_extras(self) -> list[tuple[str, str, tuple[str, ...]]]:
        return [(extra, f'[align] backend = "{self.name}"', modules) for extra, modules in self.extras.items()]

    def build(self, base_model: Path | None = None) -> WordAligner:
        """The aligner for these settings; `base_model` is the pipeline's base_model artifact
        folder, given when `uses_base_model()` and the pipeline has one."""
        raise NotImplementedError(f"align backend {self.name!r} does not implement build()")

    def uses_base_model(self) -> bool:
        """Whether `build` reads the base_model artifact (its folder then also names the loaded aligner in the stage's cache)."""
        return False

    def fingerprint(self) -> dict[str, Any]:
        """Keyed contents beyond the settings: local model files (`tasks.stage.folder_fingerprint`),
        package versions that change the output. Default: none."""
        return {}


class AlignBackend:
    """A convenient base of an aligner (what `build` returns): implement `align`, and `fit` when
    the backend learns from extra parallel text."""

    label: str  # the output's `backend` column
    settings: AlignerSettings

    def align(
        self, sentences: Sequence[list[str]], langs: Sequence[str], pairs: np.ndarray, progress: Progress = None
    ) -> list[Links | None]:
        raise NotImplementedError(f"{type(self).__name__}.align")

    def fit(self, extra: ParallelText) -> None:
        """Learn from unlabelled parallel sentence pairs (word lists) of the language pair that
        later `align` calls align. Backends with nothing to learn refuse."""
        raise ValueError(f"align backend {self.settings.name!r} learns nothing from extra parallel text")


ALIGN_BACKENDS: dict[str, type[AlignerSettings]] = {}

B = TypeVar("B", bound=type[AlignerSettings])


def register_backend(cls: B) -> B:
    """Class decorator: make `cls` the backend named `cls.name` (`[align] backend = "<name>"`)."""
    if not (isinstance(cls, type) and issubclass(cls, AlignerSettings)):
        raise TypeError(f"{cls!r} is not a subclass of tasks.align.backends.AlignerSettings")
    name = cls.__dict__.get("name")
    if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name) or name != name.lower():
        raise ValueError(
            f"{cls.__qualname__}.name must be a lower-case identifier (it names a TOML table [align.<name>]), got {name!r}"
        )
    if cls.build is AlignerSettings.build:
        raise TypeError(f"{cls.__qualname__} must implement build(), which returns its aligner")
    return register_unique(ALIGN_BACKENDS, name, cls, "align backend")


def is_local_dir(path: str) -> bool:
    """Whether a model setting names an existing local folder (keyed by its files, not its path)."""
    return Path(path).expanduser().is_dir()


def word_of_tokens(word_lengths: np.ndarray, token_starts: np.ndarray) -> np.ndarray:
    """Word index of each token of `" ".join(words)`, from the tokens' character starts.

    A token belongs to the first word that ends after the token starts: a word's own
    subwords, and a lone "▁" (whose offset may cover the space before a word) to the word after.
    """
    ends = np.cumsum(word_lengths + 1) - 1  # exclusive end of each word in the joined string
    return np.searchsorted(ends, token_starts, side="right")
