"""`xlembed export`: a trained model (`model`) or a corpus/translate artifact (`dataset`) out of
the store as a folder the Hugging Face libraries load, and onto the hub. This package sits above
the stages: it reads their artifacts and imports their code; no stage imports it."""

from __future__ import annotations

from tasks.stage import DataError


class ExportError(DataError):
    """The artifact cannot be exported as asked, or the folder cannot take it; the message says
    why and what to do."""
