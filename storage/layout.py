"""The folders and files under an artifact root that are not a stage's artifacts.

Every storage module that reads or writes under a root names its folder here, so the store
(which lists stages and must skip these) needs none of the modules that use them.
"""

from __future__ import annotations

from storage.keys import InvalidNameError, check_name

MANIFEST = "manifest.json"  # {root}/{stage}/{key}/manifest.json: the commit marker
REFS_DIR = "refs"  # {root}/refs/{pipeline}/{stage}.json (storage/refs.py)
# a compare-and-swap on a local root holds this file's lock (S3 needs none: conditional PUTs)
REFS_LOCK_FILE = ".lock"
CHECKPOINTS_DIR = "_checkpoints"  # {root}/_checkpoints/{stage}/{key}/ (storage/checkpoint_files.py)
LOCKS_DIR = "_locks"  # {root}/_locks/{stage}/{key}/{holder}.json (storage/build_locks.py)
# a transfer's scratch copies, under a local root, where the next transfer (or gc) finds them
TRANSFER_SCRATCH_DIR = "_scratch"
NOT_STAGES = (REFS_DIR, CHECKPOINTS_DIR, LOCKS_DIR, TRANSFER_SCRATCH_DIR)


def check_stage(stage: str) -> str:
    """`stage` if it is a valid name that is not the refs folder's."""
    check_name(stage, "stage")
    if stage == REFS_DIR:
        raise InvalidNameError(f"{REFS_DIR!r} is reserved and cannot name a stage")
    return stage
