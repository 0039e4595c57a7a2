"""The align stage: word alignments of translation pairs (WSPAlign, SimAlign, eflomal)."""

from tasks.align.stage import ALIGN_STAGE

__all__ = ["ALIGN_STAGE"]
