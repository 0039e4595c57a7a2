"""The corpus sources, one class per input format and file, and their registry
(tasks/corpus/sources/registry.py).

Adding one: write `tasks/corpus/sources/<kind>.py` with a `@register_source` class
(docs/architecture.md, "Extension points") and import it below: that import is its
registration. A source outside the package registers the same way from its own module,
imported before the config is validated.
"""

from tasks.corpus.sources.registry import (
    SOURCES,
    DataSet,
    Licence,
    Source,
    SourceIO,
    check_line_aligned,
    is_local,
    register_source,
    validate_source,
)

# The built-in sources: importing a module registers its class (in this order).
from tasks.corpus.sources.text import TextSource  # noqa: I001
from tasks.corpus.sources.tsv import TsvSource
from tasks.corpus.sources.parquet import ParquetSource
from tasks.corpus.sources.opus_moses import OpusMosesSource
from tasks.corpus.sources.multiway_dir import MultiwayDirSource
from tasks.corpus.sources.tatoeba import TatoebaSource
from tasks.corpus.sources.cldr import CldrSource

__all__ = [
    "SOURCES",
    "CldrSource",
    "DataSet",
    "Licence",
    "MultiwayDirSource",
    "OpusMosesSource",
    "ParquetSource",
    "Source",
    "SourceIO",
    "TatoebaSource",
    "TextSource",
    "TsvSource",
    "check_line_aligned",
    "is_local",
    "register_source",
    "validate_source",
]
