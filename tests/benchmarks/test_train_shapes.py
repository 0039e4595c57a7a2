"""benchmarks/train_shapes.py: each case in a capped child process, failures named, the memory extrapolation."""

from __future__ import annotations

import pytest

import benchmarks.train_shapes as train_shapes
from benchmarks.shapes import rss_bytes
from benchmarks.train_shapes import (
    activation_per_token,
    build_base,
    classify_failure,
    fits_in_memory,
    peak_address_space_bytes,
    run_case,
)


def test_an_allocation_error_did_not_fit_under_the_cap():
    stderr = (
        "Traceback (most recent call last):\n  ...\nRuntimeError: [enforce fail at alloc_cpu.cpp:121] data. "
        "DefaultCPUAllocator: can't allocate memory: you tried to allocate 805306368 bytes.\n"
    )
    assert classify_failure(1, stderr, 12) == "did not fit under 12 GiB"
    assert classify_failure(1, "Traceback ...\nMemoryError\n", 6.5) == "did not fit under 6.5 GiB"
    stderr = "ImportError: libtorch_cpu.so: failed to map segment from shared object\n"
    assert classify_failure(1, stderr, 0.25) == "did not fit under 0.25 GiB"


def test_a_child_killed_from_outside_is_not_blamed_on_the_cap():
    # the kernel's OOM killer sends SIGKILL when the machine runs short, whatever the cap
    assert classify_failure(-9, "", 12).startswith("killed by signal 9 (not the cap")
    assert "did not fit" not in classify_failure(-9, "MemoryError", 12)


def test_any_other_failure_is_reported_with_its_last_error_line():
    stderr = "Traceback (most recent call last):\n  File x\nValueError: batch_size must be positive\n\n"
    assert classify_failure(1, stderr, 12) == "failed (exit 1): ValueError: batch_size must be positive"
    assert classify_failure(2, "", 12) == "failed (exit 2): no error output"


def test_activation_per_token_is_the_line_through_the_two_smallest_plain_measurements():
    plain = {
        256: {"padded_tokens": 8192, "step_gib": 3.4},
        64: {"padded_tokens": 2048, "step_gib": 1.6},
        1024: {"padded_tokens": 32768, "step_gib": 100.0},  # not used: only the two smallest
    }
    slope, intercept, used = activation_per_token(plain)
    assert used == [64, 256]
    assert slope == pytest.approx(1.8 / 6144)
    assert intercept == pytest.approx(1.6 - 2048 * 1.8 / 6144)


def test_activation_per_token_needs_two_distinct_measurements():
    with pytest.raises(ValueError, match="two plain measurements"):
        activation_per_token({64: {"padded_tokens": 2048, "step_gib": 1.6}})
    with pytest.raises(ValueError, match="same padded tokens"):
        activation_per_token({64: {"padded_tokens": 2048, "step_gib": 1.6}, 65: {"padded_tokens": 2048, "step_gib": 1.7}})


def test_fits_in_memory_leaves_room_for_weights_gradients_and_adamw():
    # 1 GiB of parameter state (2**26 params x 16 bytes), 1 MiB a token, 64 tokens a row:
    # 9 GiB free / 64 MiB a row = 144 rows
    assert fits_in_memory(10.0, params=2**26, per_token_gib=1 / 1024, tokens_per_row=64) == 144
    # half the activation memory (bf16 activations): twice the rows
    assert fits_in_memory(10.0, params=2**26, per_token_gib=0.5 / 1024, tokens_per_row=64) == 288
    assert fits_in_memory(0.5, params=2**26, per_token_gib=1 / 1024, tokens_per_row=64) == 0


@pytest.mark.slow
def test_a_case_runs_in_a_child_process_under_the_cap_and_reports_instead_of_raising(tmp_path):
    base = build_base("tiny", tmp_path / "base")
    config = {"max_length": 16, "eval_every": 0, "checkpoint_every": 10**6, "objectives": {"translation_ranking": {"weight": 1.0}},
              "batch_size": 8, "views": 2, "torch_threads": 1, "freeze_word_embeddings": False}  # fmt: skip
    case = {"base": str(base), "rows": 8, "config": config, "mode": "memory", "repeat": 1, "threads": 1}
    result = run_case(case, cap_gib=8)
    assert set(result) == {
        "seconds",
        "before_gib",
        "step_gib",
        "with_optimizer_gib",
        "address_space_gib",
        "tokens",
        "padded_tokens",
        "params",
    }
    assert 8 > result["address_space_gib"] >= result["before_gib"]  # what the cap limits: at least the RSS, under the cap
    assert result["padded_tokens"] >= result["tokens"] > 0
    assert result["before_gib"] > 0 and result["params"] > 0
    assert result["with_optimizer_gib"] >= result["step_gib"]
    # the same case under a cap too small to load torch: reported, not raised here
    starved = run_case(case, cap_gib=0.25)
    assert starved["error"] == "did not fit under 0.25 GiB"
    assert "failed to map segment" in starved["detail"]


def test_peak_address_space_is_what_the_cap_limits_at_least_the_resident_set():
    assert peak_address_space_bytes() >= rss_bytes() > 0


def _memory_cases(monkeypatch, tmp_path, *args: str) -> list[tuple[str, int, float]]:
    """(setting, rows, cap) of each memory case main() would run; the children replaced by a fake result."""
    (tmp_path / "base").mkdir(parents=True)
    (tmp_path / "base" / "config.json").write_text("{}")  # an existing base: main() builds none
    calls = []

    def fake_run_case(case: dict, cap_gib: float, timeout: float | None = None) -> dict:
        calls.append(("gradcache" if "grad_cache_chunk" in case["config"] else "plain", case["rows"], cap_gib))
        return {"seconds": 1.0, "before_gib": 3.6, "step_gib": 0.5 + case["rows"] / 100, "with_optimizer_gib": 4.0, "address_space_gib": 9.0,
                "tokens": 60 * case["rows"], "padded_tokens": 64 * case["rows"], "params": 278_000_000}  # fmt: skip

    monkeypatch.setattr(train_shapes, "run_case", fake_run_case)
    train_shapes.main(["--skip-timing", "--base", str(tmp_path / "base"), "--chunk", "32", *args])
    return calls


def test_settings_gradcache_runs_gradcache_alone_under_its_own_cap(monkeypatch, tmp_path):
    calls = _memory_cases(
        monkeypatch, tmp_path, "--settings", "gradcache", "--memory-rows", "512,1024", "--gradcache-cap-gib", "10"
    )
    assert calls == [("gradcache", 512, 10.0), ("gradcache", 1024, 10.0)]


def test_by_default_both_settings_run_and_gradcache_shares_the_cap(monkeypatch, tmp_path):
    calls = _memory_cases(monkeypatch, tmp_path, "--memory-rows", "32,64", "--cap-gib", "12")
    # GradCache needs more rows than one chunk: at 32 rows only plain runs
    assert calls == [("plain", 32, 12.0), ("plain", 64, 12.0), ("gradcache", 64, 12.0)]
    calls = _memory_cases(monkeypatch, tmp_path / "again", "--memory-rows", "64", "--cap-gib", "12", "--gradcache-cap-gib", "10")
    assert calls == [("plain", 64, 12.0), ("gradcache", 64, 10.0)]


@pytest.mark.parametrize("settings", ["plain,adam", ","])
def test_an_unknown_setting_is_refused_naming_the_flag(settings, capsys):
    with pytest.raises(SystemExit):
        train_shapes.main(["--skip-timing", "--settings", settings])
    assert "--settings" in (err := capsys.readouterr().err) and "expected plain, gradcache or both" in err
