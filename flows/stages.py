"""The stages xlembed knows, in dependency order. Adding a stage is one line here.

`XLEMBED_STAGES=package.module:NAME` replaces the list with another tuple of stages (the
tests use it for small multi-stage pipelines; users can use it for stages of their own).
"""

from __future__ import annotations

import importlib
import os
from typing import Any

from tasks.align import ALIGN_STAGE
from tasks.base_model import BASE_MODEL_STAGE
from tasks.corpus import CORPUS_STAGE
from tasks.evaluate import EVALUATE_STAGE
from tasks.stage import Stage
from tasks.train import TRAIN_STAGE
from tasks.translate import TRANSLATE_MODEL_STAGE, TRANSLATE_STAGE

PIPELINE_STAGES: tuple[Stage[Any], ...] = (
    CORPUS_STAGE,
    TRANSLATE_MODEL_STAGE,
    TRANSLATE_STAGE,
    BASE_MODEL_STAGE,
    ALIGN_STAGE,
    TRAIN_STAGE,
    EVALUATE_STAGE,
)

STAGES_ENV = "XLEMBED_STAGES"


def _configured_stages() -> tuple[Stage[Any], ...]:
    spec = os.environ.get(STAGES_ENV)
    if not spec:
        return PIPELINE_STAGES
    module, _, name = spec.partition(":")
    return tuple(getattr(importlib.import_module(module), name or "PIPELINE_STAGES"))


def stage_registry(stages: tuple[Stage[Any], ...] | None = None) -> dict[str, Stage[Any]]:
    """Name -> stage, checking that every stage comes after the stages it reads."""
    seen: dict[str, Stage[Any]] = {}
    ordered = stages if stages is not None else _configured_stages()
    names = {stage.name for stage in ordered}
    for stage in ordered:
        late = [name for name in stage.inputs if name not in seen]
        late += [name for name in stage.optional_inputs if name in names and name not in seen]
        if late:
            raise ValueError(f"stage {stage.name!r} reads {late}, which must be listed before it")
        if stage.name in seen:
            raise ValueError(f"stage {stage.name!r} is listed twice")
        seen[stage.name] = stage
    return seen
