"""benchmarks/run_all.py finds the real-shape benchmarks and skips the model-builder module."""

from __future__ import annotations

from benchmarks.run_all import discover


def test_real_shape_benchmarks_join_the_protocol_and_the_builders_are_not_a_benchmark():
    joined, other = discover()
    joined_names = {p.name for p in joined}
    assert {"translate_throughput.py", "align_throughput.py", "train_shapes.py"} <= joined_names
    assert "shapes.py" not in joined_names | {p.name for p in other}


def test_only_selects_train_shapes():
    joined, other = discover(["train_shapes"])
    assert [p.name for p in joined] == ["train_shapes.py"] and other == []
