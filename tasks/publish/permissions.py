"""One file mode for everything an export writes.

Libraries write some files through private temporary files (safetensors' `save_file` leaves
`model.safetensors` at 0600 while every other file is 0644), so an exported folder copied to a
shared disk or a container would be half unreadable to other users. Exports end with this."""

from __future__ import annotations

import os
from pathlib import Path

FILE_MODE = 0o644  # what `git`, `pip` and `huggingface_hub` downloads leave: readable by all, written by the owner
FOLDER_MODE = 0o755


def readable_by_all(folder: Path) -> None:
    """Give every file under `folder` FILE_MODE and every folder (itself included) FOLDER_MODE."""
    os.chmod(folder, FOLDER_MODE)
    for root, dirs, files in os.walk(folder):
        for name in dirs:
            os.chmod(Path(root) / name, FOLDER_MODE)
        for name in files:
            os.chmod(Path(root) / name, FILE_MODE)
