"""The base-model stage: the encoder a pipeline starts from, imported once as an artifact."""

from tasks.base_model.stage import BASE_MODEL_STAGE

__all__ = ["BASE_MODEL_STAGE"]
