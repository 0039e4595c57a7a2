"""The sentence-encoder interface shared by the evaluate, align and train stages.

Importing this package does not import torch or transformers; `Encoder.load` does.
"""

from tasks.encoders.encoder import Encoder, EncoderLoadError, EncoderSpec
from tasks.encoders.pooling import POOLING_MODES, Pooling, PoolingError

__all__ = ["POOLING_MODES", "Encoder", "EncoderLoadError", "EncoderSpec", "Pooling", "PoolingError"]
