"""The content-hash index: a file is read again only when its stat signature changed."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from storage import content_hash
from storage.content_hash import file_sha256, hash_stats


@pytest.fixture(autouse=True)
def own_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    index = tmp_path / "cache" / "hash-index.sqlite"
    monkeypatch.setenv("XLEMBED_HASH_INDEX", str(index))
    monkeypatch.setattr(content_hash, "RACY_NS", 0)  # files written a moment ago count as settled
    return index


def write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_hash_is_the_files_sha256_and_is_read_once(tmp_path: Path) -> None:
    path = write(tmp_path / "a.txt", b"hello\n")
    with hash_stats() as first:
        assert file_sha256(path) == hashlib.sha256(b"hello\n").hexdigest()
    assert (first.hashed_files, first.hashed_bytes, first.from_index) == (1, 6, 0)
    with hash_stats() as second:
        assert file_sha256(str(path)) == hashlib.sha256(b"hello\n").hexdigest()
    assert (second.hashed_files, second.from_index) == (0, 1)
    assert second.paths == {hashlib.sha256(b"hello\n").hexdigest(): str(path.resolve())}
    assert second.summary() == "hashed 0 files (0.0 MB) in 0.00 s; 1 unchanged from the index"


def test_an_edit_with_the_old_size_and_mtime_is_seen(tmp_path: Path) -> None:
    path = write(tmp_path / "a.txt", b"aaaa")
    file_sha256(path)
    stat = path.stat()
    write(path, b"bbbb")  # `cp -p` over the file: same size, mtime set back, same inode
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert path.stat().st_ino == stat.st_ino
    assert file_sha256(path) == hashlib.sha256(b"bbbb").hexdigest()  # ctime moved


def test_racily_clean_entries_are_hashed_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(content_hash, "RACY_NS", 10**12)
    path = write(tmp_path / "a.txt", b"fresh")
    file_sha256(path)
    with hash_stats() as stats:
        file_sha256(path)
    assert stats.hashed_files == 1  # modified too close to when it was hashed to trust the index


def test_a_missing_file_raises(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        file_sha256(tmp_path / "nope")


def test_an_unusable_index_falls_back_to_hashing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = write(tmp_path / "not-a-folder", b"")
    monkeypatch.setenv("XLEMBED_HASH_INDEX", str(blocker / "hash-index.sqlite"))
    path = write(tmp_path / "a.txt", b"x")
    for _ in range(2):
        with hash_stats() as stats:
            assert file_sha256(path) == hashlib.sha256(b"x").hexdigest()
        assert stats.hashed_files == 1
    assert "unusable" in caplog.text
    monkeypatch.setenv("XLEMBED_HASH_INDEX", "off")
    assert file_sha256(path) == hashlib.sha256(b"x").hexdigest()


def test_default_location_follows_xdg_cache_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("XLEMBED_HASH_INDEX")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert content_hash.default_index_path() == tmp_path / "xlembed" / "hash-index.sqlite"


@pytest.mark.slow
def test_threads_and_processes_share_the_index(tmp_path: Path, own_index: Path) -> None:
    files = [write(tmp_path / f"f{i}", str(i).encode() * 1000) for i in range(40)]
    expected = [hashlib.sha256(p.read_bytes()).hexdigest() for p in files]
    code = "import sys; from storage import content_hash as c; c.RACY_NS = 0; [c.file_sha256(p) for p in sys.argv[1:]]"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    children = [subprocess.Popen([sys.executable, "-c", code, *map(str, files)], env=env) for _ in range(3)]
    with ThreadPoolExecutor(8) as pool:
        for _ in range(3):
            assert list(pool.map(file_sha256, files)) == expected
    assert all(child.wait(timeout=120) == 0 for child in children)
    with hash_stats() as stats:
        assert [file_sha256(p) for p in files] == expected
    assert stats.from_index == len(files)
