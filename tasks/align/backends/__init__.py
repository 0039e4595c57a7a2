"""Word aligners: one file per backend, one interface (`base.py`), one registry.

    aligner.align(sentences, langs, pairs)  ->  per pair: (src int32, tgt int32, score float32) or None

A backend is its settings class (`AlignerSettings`) in its own file, decorated with
`@register_backend`; importing the file registers it. The built-in backends are imported below, one line each (docs/architecture.md,
"Extension points").
"""

from __future__ import annotations

from tasks.align.backends.base import (
    ALIGN_BACKENDS,
    AlignBackend,
    AlignerSettings,
    ParallelText,
    Progress,
    WordAligner,
    register_backend,
    word_of_tokens,
)
from tasks.align.backends import wspalign  # noqa: E402, F401 - registers "wspalign"
from tasks.align.backends import simalign  # noqa: E402, F401 - registers "simalign"
from tasks.align.backends import eflomal_backend  # noqa: E402, F401 - registers "eflomal"

__all__ = [
    "ALIGN_BACKENDS",
    "AlignBackend",
    "AlignerSettings",
    "ParallelText",
    "Progress",
    "WordAligner",
    "register_backend",
    "word_of_tokens",
]
