"""The model card says only what the lineage and the stored numbers show: the pipeline it names,
the items behind each `n`, the training logs, and one language tag per language shared with the
dataset card. Rendered from facts and tables built here (no training: each test is fast)."""

from __future__ import annotations

import re
from types import SimpleNamespace
from typing import Any

import pyarrow as pa

from tasks.evaluate.groups import WACSE_4, group_average_rows, group_languages, rows_table
from tasks.languages import FLORES200_CODES
from tasks.reporting.card_facts import CardFacts
from tasks.reporting.card_results import EvaluationResults
from tasks.reporting.model_card import front_matter, render_model_card
from tasks.train.card import TRAIN_CARD

LANGS = ["eng_Latn", "kaz_Cyrl", "swh_Latn", "zsm_Latn"]


def manifest(key: str, rows: int = 0, **config: Any) -> Any:
    """The parts of a Manifest the card reads."""
    return SimpleNamespace(key=key, config=config, metrics={}, rows_out=rows, locations={})


def facts(inputs: dict[str, Any], curves: pa.Table | None = None, **metrics: Any) -> CardFacts:
    return CardFacts.from_manifests(
        "t" * 64,
        {"steps": 6, "max_length": 16},
        {"languages": LANGS, "objectives": {"translation_ranking": 1.0, "multiway_supcon": 0.5}, **metrics},
        {"corpus": manifest("c" * 64, 100), "base_model": manifest("b" * 64, source="local"), **inputs},
        curves,
        TRAIN_CARD,
    )


def pipeline_line(card: str) -> str:
    return next(line for line in card.splitlines() if line.startswith("- **Pipeline:**"))


def test_the_pipeline_and_lineage_name_only_the_stages_the_model_came_from():
    plain = render_model_card(facts({}))
    assert pipeline_line(plain) == "- **Pipeline:** xlembed (corpus -> train), see Lineage below"
    assert "translate artifact" not in plain and "align artifact" not in plain and "machine-translated" not in plain

    full = facts({"translate": manifest("x" * 64, 300, model="nllb-200-distilled-600M"), "align": manifest("a" * 64, 50)})
    card = render_model_card(full)
    assert pipeline_line(card) == "- **Pipeline:** xlembed (corpus -> translate -> align -> train), see Lineage below"
    lineage = card.split("## Lineage", 1)[1].split("##", 1)[0]
    assert f"- translate artifact `{'x' * 64}`" in lineage and f"- align artifact `{'a' * 64}`" in lineage

    # an input gc collected is still part of the lineage: named, and said to be gone
    gone = render_model_card(facts({"translate": None}))
    assert pipeline_line(gone) == "- **Pipeline:** xlembed (corpus -> translate -> train), see Lineage below"
    assert "- a translate artifact no longer in the store" in gone

    # with an evaluation, the evaluate stage joins the pipeline
    results = EvaluationResults.from_tables("e" * 64, rows_table(metric_rows()), {"max_length": 32}, main_metric=lambda b: None)
    assert pipeline_line(render_model_card(facts({}), results)).startswith(
        "- **Pipeline:** xlembed (corpus -> train -> evaluate)"
    )


def metric_rows() -> list[dict[str, Any]]:
    n = {"kaz_Cyrl": 200, "tel_Telu": 150, "jav_Latn": 90}
    rows = [
        {"benchmark": "tatoeba", "dataset": "tatoeba", "src_lang": lang, "tgt_lang": "eng_Latn", "metric": "accuracy_mean",
         "value": 0.5 + i / 10, "n": items}
        for i, (lang, items) in enumerate(n.items())
    ]  # fmt: skip
    return group_average_rows(rows, [WACSE_4])


def test_a_group_rows_n_is_its_members_items_as_the_card_defines_n():
    rows = metric_rows()
    group = next(r for r in rows if r["src_lang"] == "group:wacse-4")
    assert group["n"] == 3  # the metrics table counts the members present

    results = EvaluationResults.from_tables(
        "e" * 64, rows_table(rows), {"max_length": 32}, main_metric=lambda b: None, group_members=group_languages
    )
    card = render_model_card(facts({}), results)
    assert "`n` is the number of items" in card
    assert f"| tatoeba | tatoeba | group:wacse-4 - eng_Latn | accuracy_mean | {group['value']:.4f} | 440 |" in card
    assert "| tatoeba | tatoeba | kaz_Cyrl - eng_Latn | accuracy_mean | 0.5000 | 200 |" in card
    # a group the callers do not define (an MTEB subset, whose n already counts items) keeps its n
    mteb = {**group, "src_lang": "group:STS22:de-en", "n": 321}
    results = EvaluationResults.from_tables(
        None, rows_table([*rows, mteb]), {"max_length": 32}, main_metric=lambda b: None, group_members=group_languages
    )
    assert any(r["src_lang"] == "group:STS22:de-en" and r["n"] == 321 for r in results.rows)


def curves(steps: int, log_every: int = 1) -> pa.Table:
    points = [{"step": 0, "metric": "dev_accuracy", "value": 0.25}]
    for step in range(1, steps + 1):
        if step % log_every and step != 1 and step != steps:
            continue
        points += [
            {"step": step, "metric": "loss", "value": 3.0 / step},
            {"step": step, "metric": "loss/translation_ranking", "value": 2.0 / step},
            {"step": step, "metric": "loss/multiway_supcon", "value": 2.0 / step},
            {"step": step, "metric": "lr", "value": 1e-4},
        ]
        if step % 3 == 0:
            points.append({"step": step, "metric": "dev_accuracy", "value": 0.5 + step / 100})
    return pa.Table.from_pylist(points)


def test_the_training_logs_table_gives_each_logged_steps_losses_and_dev_accuracy():
    card = render_model_card(facts({}, curves(6), best_step=6, dev={"kaz_Cyrl": 0.56, "mean": 0.56}, dev_groups=20))
    logs = card.split("### Training Logs", 1)[1].split("###", 1)[0]
    lines = [line for line in logs.splitlines() if line.startswith("|")]
    assert lines[0] == "| step | training loss | multiway_supcon loss | translation_ranking loss | dev accuracy |"
    assert lines[2] == "| 0 | - | - | - | 0.2500 |"  # the base, before any update
    assert lines[3] == "| 1 | 3.0000 | 2.0000 | 2.0000 | - |"
    assert lines[5] == "| 3 | 1.0000 | 0.6667 | 0.6667 | 0.5300 |"
    assert lines[-1] == "| **6** | **0.5000** | **0.3333** | **0.3333** | **0.5600** |"  # the checkpoint kept, bold
    assert len(lines) == 2 + 7  # a row per logged step and the base's dev point
    assert "The bold row is the checkpoint kept (step 6)." in logs

    # a long run: at most 20 rows, evenly spaced, the first, the last and the chosen step kept
    long = render_model_card(facts({}, curves(1000, log_every=10), best_step=510))
    steps = [int(m) for m in re.findall(r"^\| \**(\d+)\**", long.split("### Training Logs", 1)[1], re.M)]
    assert steps[0] == 0 and steps[-1] == 1000 and 510 in steps and len(steps) <= 21 and steps == sorted(steps)

    # no curves recorded (an artifact older than them): no table, no empty heading
    assert "### Training Logs" not in render_model_card(facts({}))


def test_the_model_card_and_the_dataset_card_tag_a_language_alike():
    from tasks.publish import dataset_card as dataset
    from tasks.reporting import model_card

    assert {code: dataset.hub_language(code) for code in FLORES200_CODES} == {
        code: model_card.hub_language(code) for code in FLORES200_CODES
    }
    assert [dataset.hub_language(c) for c in ("swh_Latn", "zsm_Latn", "pes_Arab", "ast_Latn")] == ["sw", "ms", "fa", "ast"]
    assert front_matter(render_model_card(facts({})))["language"] == ["en", "kk", "ms", "sw"]
