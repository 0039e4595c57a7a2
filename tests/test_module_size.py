"""No module of flows/, tasks/ or storage/ is over MAX_LINES lines: a module that grows past it
holds more than one concern and is split by concern (docs/architecture.md, "The floors")."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("flows", "tasks", "storage")
MAX_LINES = 600


def module_lines(root: Path = REPO) -> dict[str, int]:
    """Lines of every .py file under the packages, by path relative to `root`."""
    return {
        path.relative_to(root).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
        for package in PACKAGES
        for path in sorted((root / package).rglob("*.py"))
    }


def test_the_count_reads_every_module_of_the_packages(tmp_path: Path) -> None:
    (tmp_path / "tasks" / "sub").mkdir(parents=True)
    (tmp_path / "tasks" / "sub" / "big.py").write_text("x = 1\n" * (MAX_LINES + 1), encoding="utf-8")
    (tmp_path / "storage").mkdir()
    (tmp_path / "storage" / "small.py").write_text("y = 2\n", encoding="utf-8")
    assert module_lines(tmp_path) == {"tasks/sub/big.py": MAX_LINES + 1, "storage/small.py": 1}
    assert len(module_lines()) > 100 and "tasks/stage.py" in module_lines()


def test_no_module_is_over_the_limit() -> None:
    over = {path: lines for path, lines in module_lines().items() if lines > MAX_LINES}
    assert over == {}, f"split by concern: {over}"
