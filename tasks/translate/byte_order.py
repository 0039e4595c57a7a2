"""Strings put in byte order through fixed-width integer keys (the translate plan's group ids).

Byte order compares the UTF-8 bytes as unsigned numbers, a string before any longer string
it begins: pyarrow's (`pc.sort_indices`), polars' and Python's order of `str` (code points).
A comparison sort of 10M strings reaches for their bytes at every comparison (pyarrow's
took 24x the time of 1M); here each string becomes a uint64 key per 7 bytes, read with numpy
from the Arrow buffers, and numpy sorts the keys:

- a key is 7 bytes, big-endian, zero-padded, then one byte that says how many of the 7 are
  the string's own (0-7), or 8 when the string goes on. Equal keys with a count below 8 are
  the same string (a duplicate); strings whose keys tie with 8 (a run) are sorted by their
  next key, each run in its own place, until none tie;
- the bytes all the strings share (the common prefix of the smallest and the largest), and
  those all the strings of a run share, are skipped before keying.

Ids numbered within one source (`g0001234`) take one argsort; ids of several sources
(`flores200:dev:...`, `tatoeba:...`) one argsort, then one per source after its prefix.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

KEY_BYTES = 7  # string bytes per key; the eighth byte is the count of them that are the string's own
GOES_ON = 8  # that count when the string has more bytes than the key holds
BLOCK = 1 << 16  # strings per block of key building
LARGE_RUN = 1 << 12  # a run of tied strings this large is sorted on its own


def string_buffers(strings: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each string's first byte and length in the data buffer (views of the Arrow buffers)."""
    offset_type = np.int64 if pa.types.is_large_string(strings.type) else np.int32
    _, offsets_buffer, data_buffer = strings.buffers()
    offsets = np.frombuffer(offsets_buffer, dtype=offset_type)[strings.offset : strings.offset + len(strings) + 1]
    data = np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer is not None and data_buffer.size else np.zeros(1, np.uint8)
    return offsets[:-1], np.diff(offsets), data


def common_prefix_length(strings: pa.Array) -> int:
    """Bytes that all `strings` begin with: those the smallest and the largest share."""
    bounds = pc.min_max(strings)
    low, high = bounds["min"].as_py().encode("utf-8"), bounds["max"].as_py().encode("utf-8")
    return next((i for i, (a, b) in enumerate(zip(low, high)) if a != b), min(len(low), len(high)))


def sort_keys(starts: np.ndarray, lengths: np.ndarray, depths: int | np.ndarray, data: np.ndarray) -> np.ndarray:
    """The key of each string at byte `depths` (one for all, or one each): 7 bytes big-endian
    (zero past the string's end), then how many of them are the string's own (GOES_ON when it
    has more). Built a block of strings at a time, so that a block's arrays stay in the CPU
    cache across the 7 bytes."""
    keys = np.empty(len(starts), dtype=np.uint64)
    for begin in range(0, len(starts), BLOCK):
        at = slice(begin, begin + BLOCK)
        depth = depths[at] if isinstance(depths, np.ndarray) else depths
        first, rest = starts[at] + depth, lengths[at] - depth
        block = keys[at]
        block[:] = 0
        position = np.empty(len(first), dtype=first.dtype)
        for j in range(KEY_BYTES):
            np.add(first, j, out=position)
            np.minimum(position, len(data) - 1, out=position)
            byte = data.take(position)
            byte[rest <= j] = 0
            block <<= np.uint64(8)
            block |= byte
        block <<= np.uint64(8)
        block |= np.clip(rest, 0, GOES_ON).astype(np.uint64)
    return keys


def shared_bytes(keys: np.ndarray, rest: np.ndarray, run_starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Per run of strings (contiguous from `run_starts`, with their `keys` and the bytes they
    have left, `rest`): how many of the key's 7 bytes all its strings share and have."""
    differ = np.bitwise_or.reduceat(keys ^ np.repeat(keys[run_starts], sizes), run_starts) >> np.uint64(8)
    shared = np.zeros(len(run_starts), dtype=np.int64)
    same_so_far = np.ones(len(run_starts), dtype=bool)
    for j in range(KEY_BYTES):
        same_so_far &= (differ >> np.uint64(8 * (KEY_BYTES - 1 - j))) & np.uint64(0xFF) == 0
        shared += same_so_far
    return np.minimum(shared, np.minimum.reduceat(rest, run_starts))


def sort_within_runs(keys: np.ndarray, run_starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """The permutation that sorts each run (contiguous) by its keys and leaves it in its place:
    one argsort per large run, one lexsort for all the small ones together."""
    within = np.arange(len(keys), dtype=np.int64)
    for run in np.flatnonzero(sizes >= LARGE_RUN):
        at = slice(run_starts[run], run_starts[run] + sizes[run])
        within[at] = run_starts[run] + np.argsort(keys[at])
    small = sizes < LARGE_RUN
    if small.any():
        run_of = np.repeat(np.arange(len(sizes)), sizes)
        members = np.flatnonzero(small[run_of])
        within[members] = members[np.lexsort((keys[members], run_of[members]))]
    return within


def byte_order(strings: pa.Array) -> tuple[np.ndarray, int | None]:
    """The permutation that puts `strings` (a StringArray or LargeStringArray without nulls)
    in byte order, and None; or, when a string occurs more than once, an unfinished order and
    the index of one such string."""
    if strings.null_count:
        raise ValueError(f"cannot order {strings.null_count} null strings")
    n = len(strings)
    if n < 2:
        return np.arange(n, dtype=np.int64), None
    starts, lengths, data = string_buffers(strings)
    depth = common_prefix_length(strings)
    keys = sort_keys(starts, lengths, depth, data)
    order = np.argsort(keys)  # the first pass sorts every string: one run
    keys.sort()  # = keys[order], in place
    tied = None  # the positions in `order` whose strings are not placed yet (None: all)
    run_starts = np.zeros(1, dtype=np.int64)  # the runs of strings equal so far, in `tied`
    run_depths = np.full(1, depth, dtype=np.int64)  # the byte each run's keys begin at
    while True:
        same = keys[1:] == keys[:-1]  # neighbours still equal
        same[run_starts[1:] - 1] = False
        duplicate = np.flatnonzero(same & ((keys[1:] & np.uint64(0xFF)) < GOES_ON))
        if len(duplicate):
            return order, int(order[duplicate[0] if tied is None else tied[duplicate[0]]])
        goes_on = np.zeros(len(keys), dtype=bool)
        goes_on[1:] |= same
        goes_on[:-1] |= same
        if not goes_on.any():
            return order, None
        new_starts = np.flatnonzero(np.concatenate([[True], ~same]) & goes_on)  # in the old `tied`
        run_depths = run_depths[np.searchsorted(run_starts, new_starts, side="right") - 1] + KEY_BYTES
        run_starts = np.flatnonzero(np.concatenate([[True], ~same])[goes_on])
        tied = np.flatnonzero(goes_on) if tied is None else tied[goes_on]
        sizes = np.diff(np.append(run_starts, len(tied)))
        members = order[tied]
        member_starts, member_lengths = starts[members], lengths[members]
        depths = np.repeat(run_depths, sizes)
        keys = sort_keys(member_starts, member_lengths, depths, data)
        while True:  # skip the bytes all of a run share, and key its strings again after them
            skip = shared_bytes(keys, member_lengths - depths, run_starts, sizes)
            if not skip.any():
                break
            run_depths += skip
            moved = np.flatnonzero(np.repeat(skip > 0, sizes))
            depths[moved] += np.repeat(skip, sizes)[moved]
            keys[moved] = sort_keys(member_starts[moved], member_lengths[moved], depths[moved], data)
        within = sort_within_runs(keys, run_starts, sizes)
        order[tied] = members[within]
        keys = keys[within]
