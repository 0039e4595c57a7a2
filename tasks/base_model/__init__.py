"""The base-model stage: the starting encoder as a transformers/sentence-transformers directory."""
