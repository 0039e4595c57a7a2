"""The sentence-encoder interface shared by the evaluate, align and train stages.

Importing this package does not import torch or transformers; `Encoder.load` does.
"""

from tasks.encoders.encoder import POOLING_MODES, Encoder, EncoderLoadError, EncoderSpec, Pooling

__all__ = ["POOLING_MODES", "Encoder", "EncoderLoadError", "EncoderSpec", "Pooling"]
