"""The stages xlembed knows, in dependency order. Adding a stage is one line here."""

from __future__ import annotations

from typing import Any

from tasks.corpus import CORPUS_STAGE
from tasks.stage import Stage

PIPELINE_STAGES: tuple[Stage[Any], ...] = (
    CORPUS_STAGE,
)


def stage_registry(stages: tuple[Stage[Any], ...] = PIPELINE_STAGES) -> dict[str, Stage[Any]]:
    """Name -> stage, checking that every stage comes after the stages it reads."""
    seen: dict[str, Stage[Any]] = {}
    for stage in stages:
        late = [name for name in stage.inputs if name not in seen]
        if late:
            raise ValueError(f"stage {stage.name!r} reads {late}, which must be listed before it")
        if stage.name in seen:
            raise ValueError(f"stage {stage.name!r} is listed twice")
        seen[stage.name] = stage
    return seen
