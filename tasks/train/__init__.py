"""The train stage: one trainer for every objective of the papers (see docs/train.md)."""

from tasks.train.stage import TRAIN_STAGE

__all__ = ["TRAIN_STAGE"]
