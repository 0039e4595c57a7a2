"""benchmarks/corpus_scale.py: the synthetic corpus is a realistic, noisy, prefix-stable stream,
the real corpus stage runs on it in a capped child process, and the extrapolation states its error."""

from __future__ import annotations

from collections import Counter

import pytest

from benchmarks.corpus_scale import FILTERS, extrapolate, fit, generate, measure
from benchmarks.run_all import discover


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return generate(tmp_path_factory.mktemp("corpus_scale"), [2_000, 5_000])


def lines(path) -> list[str]:
    return path.read_text(encoding="utf-8").split("\n")[:-1]


@pytest.mark.slow
def test_every_size_is_a_prefix_of_the_largest_and_the_sides_are_line_aligned(corpus):
    small, large = corpus[2_000], corpus[5_000]
    for lang in ("en", "kk"):
        assert len(lines(small[lang])) == 2_000 and len(lines(large[lang])) == 5_000
        assert lines(large[lang])[:2_000] == lines(small[lang])


def test_sentences_have_realistic_lengths_and_the_noise_a_crawl_has(corpus):
    english, kazakh = lines(corpus[5_000]["en"]), lines(corpus[5_000]["kk"])
    words = sorted(len(line.split()) for line in english if line)
    assert 12 <= words[len(words) // 2] <= 22  # median words per sentence
    assert 70 <= sum(map(len, english)) / len(english) <= 150  # characters per line
    assert any("а" <= ch <= "я" for ch in kazakh[0])  # the second side is Cyrillic
    pairs = Counter(zip(english, kazakh))
    assert 0.01 < sum(n - 1 for n in pairs.values()) / len(english) < 0.06  # exact duplicate pairs
    assert 0.005 < sum(line.endswith(").") and line[:1].isupper() for line in english) / len(english) < 0.04  # near duplicates
    assert "" in english  # empty lines


@pytest.mark.slow
@pytest.mark.parametrize("near", [False, True])
def test_a_tiny_run_of_the_real_stage_counts_every_row(corpus, tmp_path, near):
    result = measure(corpus[2_000], near, str(tmp_path / "store"), cap_gib=8)
    assert "error" not in result, result.get("error")
    assert result["rows_in"] == 4_000  # two languages
    assert result["rows_out"] + sum(result["dropped"].values()) == result["rows_in"]
    assert result["dropped"]["duplicate"] > 0 and result["dropped"]["length_ratio"] > 0
    assert ("near_duplicate" in result["dropped"]) == near
    assert result["peak_mib"] >= result["imports_mib"] > 0 and result["seconds"] > 0
    assert not (tmp_path / "store").exists()  # the store is removed after each size


def test_a_run_that_cannot_fit_under_the_cap_is_reported_not_raised(corpus, tmp_path):
    result = measure(corpus[2_000], False, str(tmp_path / "store"), cap_gib=0.05)
    assert result["error"].startswith("did not fit under the 0.05 GiB cap")


def test_fit_recovers_a_line_and_states_the_error_of_predicting_the_largest_size():
    slope, at, error = fit([1, 3, 10], [5 + 2 * x for x in (1, 3, 10)], 100)
    assert slope == pytest.approx(2) and at == pytest.approx(205) and error == pytest.approx(0, abs=1e-9)
    # curved growth: the fit through 1 and 3 predicts 10 -> 7 where 10 was measured
    _, _, error = fit([1, 3, 10], [1, 3, 10 + 0.5 * 30], 100)
    assert error == pytest.approx(abs(10 - 25) / 25)
    with pytest.raises(ValueError, match="at least 3 sizes"):
        fit([1, 3], [1, 2], 10)


def test_extrapolation_reports_lines_per_second_and_bytes_per_line():
    sizes = [1_000_000, 3_000_000, 10_000_000]
    results = [{"seconds": 1 + n / 100_000, "peak_mib": 400 + n * 16 / 2**20} for n in sizes]
    e = extrapolate(sizes, results, 100_000_000)
    assert e["seconds"] == pytest.approx(1_001) and e["lines_per_s"] == pytest.approx(1e8 / 1_001)
    assert e["bytes_per_line"] == pytest.approx(16) and e["peak_mib"] == pytest.approx(400 + 1e8 * 16 / 2**20)
    assert e["seconds_error"] == pytest.approx(0, abs=1e-9)


def test_the_script_joins_run_all_and_uses_the_filters_of_a_run_at_scale():
    joined, _ = discover(["corpus_scale"])
    assert [p.name for p in joined] == ["corpus_scale.py"]
    assert FILTERS["dedupe"] and FILTERS["max_length_ratio"] == 3.0
