"""The evaluate stage: benchmarks, metrics and the human report."""

from tasks.evaluate.stage import EVALUATE_STAGE

__all__ = ["EVALUATE_STAGE"]
