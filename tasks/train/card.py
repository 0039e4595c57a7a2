"""What the train stage tells a model card (tasks/reporting/model_card.py) that only it knows: a
recorded config's defaults and what each objective does, with the papers it comes from."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tasks.registry import lookup
from tasks.reporting.card_facts import CardDescriber, Citation
from tasks.train.config import TrainConfig
from tasks.train.objectives import OBJECTIVES


def objective_citation(name: str) -> Citation:
    """(what it does, the papers it comes from) of the objective registered under `name`, as its
    class declares them; ("", ()) for one not registered in this process (the card then says
    "no citation recorded")."""
    objective = lookup(OBJECTIVES, name)
    return ("", ()) if objective is None else (objective.description, tuple(objective.papers))


def full_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """A recorded train config with its defaults filled in; an older artifact's config that no
    longer validates comes back as it was recorded (the card says what it recorded)."""
    try:
        return TrainConfig.model_validate(dict(config)).model_dump(mode="json")
    except ValueError:
        return dict(config)


TRAIN_CARD = CardDescriber(full_config=full_config, objective=objective_citation)
