"""Shared fixtures of the align tests: a tiny random WSPAlign model, FLORES rows, the gold set."""

from __future__ import annotations

from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
FLORES = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "flores200-dev"


def flores_rows(code: str, n: int, start: int = 0) -> list[str]:
    if not FLORES.is_dir():
        pytest.skip(f"FLORES-200 dev data not found at {FLORES} (../shared/data is absent)")
    return (FLORES / f"{code}.dev").read_text(encoding="utf-8").splitlines()[start : start + n]


@pytest.fixture(scope="session")
def tiny_wspalign_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tasks.tiny_models import build_tiny_wspalign

    return build_tiny_wspalign(tmp_path_factory.mktemp("tiny-wspalign"), seed=0)


@pytest.fixture(scope="session")
def wsp_aligner(tiny_wspalign_dir: Path):
    from tasks.align.backends.wspalign import WspAligner, WspalignSettings

    settings = WspalignSettings(
        source="local", model=str(tiny_wspalign_dir), combine="union", threshold=0.0, batch_tokens=4096, device="cpu"
    )
    return WspAligner.load(settings)


@pytest.fixture(scope="session")
def tiny_encoder_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tasks.tiny_models import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-encoder"))
