"""The translate stages: an NLLB-200 model converted to CTranslate2 (`translate_model`), and
multi-way translation of a corpus's English rows with it (`translate`)."""

from tasks.translate.model_stage import TRANSLATE_MODEL_STAGE
from tasks.translate.stage import TRANSLATE_STAGE

__all__ = ["TRANSLATE_MODEL_STAGE", "TRANSLATE_STAGE"]
