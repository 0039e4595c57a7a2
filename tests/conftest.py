"""Settings every test shares: the content-hash index lives in a temporary folder, not in the
developer's ~/.cache (subprocesses inherit it through the environment)."""

from __future__ import annotations

import os
import tempfile

os.environ.setdefault("XLEMBED_HASH_INDEX", os.path.join(tempfile.mkdtemp(prefix="xlembed-hash-index-"), "hash-index.sqlite"))
