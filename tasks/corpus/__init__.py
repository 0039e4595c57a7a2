"""The corpus stage: source text in, long-format multi-way groups out."""

from tasks.corpus.stage import CORPUS_STAGE

__all__ = ["CORPUS_STAGE"]
