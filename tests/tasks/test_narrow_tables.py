"""Tables cut to the Prefect UI's content column: every cell kept beside its row's labels."""

from __future__ import annotations

from tasks.reporting.narrow_tables import UI_TABLE_CHARS, narrow_tables, table_width

# evaluate's headline change table, as a report writes it (two metrics, each with its interval)
CHANGE_TABLE = """\
| Benchmark / dataset | Headline | Δ accuracy_mean | 95% interval | Significant | Δ margin_mean | 95% interval | Languages | Items |
|---|---|---:|---:|---|---:|---:|---:|---:|
| retrieval/corpus-dev | all languages | +1.5 | +0.9 to +2.2 | yes | +1.1 | +1.1 to +1.2 | 14 | 2,266 |
| retrieval/corpus-dev | wacse-4 | +1.6 | +0.7 to +2.7 | yes | +1.1 | +1.1 to +1.2 | 4 | 790 |"""


def tables(markdown: str) -> list[list[list[str]]]:
    """Each table's header and body rows as cells (separator rows left out)."""
    found: list[list[list[str]]] = []
    previous = ""
    for line in markdown.splitlines():
        if line.startswith("|") and not set(line) <= set("|-: "):
            if not previous.startswith("|"):
                found.append([])
            found[-1].append([cell.strip() for cell in line.strip("| ").split(" | ")])
        previous = line
    return found


def test_a_wide_table_is_cut_by_column_groups_each_part_repeating_the_row_labels() -> None:
    shown = tables(narrow_tables("Before.\n\n" + CHANGE_TABLE + "\n\n*After.*"))
    assert len(shown) == 2
    assert all(table_width(table) <= UI_TABLE_CHARS for table in shown)
    # a change keeps its interval and significance beside it; the labels start every part
    assert shown[0][0] == ["Benchmark / dataset", "Headline", "Δ accuracy_mean", "95% interval", "Significant"]
    assert shown[1][0] == ["Benchmark / dataset", "Headline", "Δ margin_mean", "95% interval", "Languages", "Items"]
    assert [row[:2] for row in shown[0]] == [row[:2] for row in shown[1]]
    original = tables(CHANGE_TABLE)[0]
    for part in shown:
        for row, whole in zip(part[1:], original[1:]):
            columns = [original[0].index(h) if h != "95% interval" else None for h in part[0]]
            assert all(c is None or row[i] == whole[c] for i, c in enumerate(columns))


def test_text_around_tables_and_tables_that_fit_are_left_as_written() -> None:
    narrow = "# Title\n\n| Group | n |\n|---|---:|\n| wacse-4 | 4 |\n\n*Note | with a bar.*\n"
    assert narrow_tables(narrow) == narrow
    ragged = "| a | b | c |\n|---|---|---|\n| " + " | ".join(["x" * 60] * 4) + " |"  # four cells under three headers
    assert narrow_tables(ragged) == ragged


def test_a_delta_header_beside_its_metric_becomes_delta_as_on_the_html_page() -> None:
    header = "| Language / pair | accuracy_mean | Δ vs untrained base (accuracy_mean) | n |"
    text = header + "\n|---|---:|---:|---:|\n| kaz_Cyrl → eng_Latn | 91.1 | +0.9 | 107 |"
    assert narrow_tables(text).splitlines()[0] == "| Language / pair | accuracy_mean | Δ | n |"
    # not beside its metric: the full header stays, as nothing next to it says what Δ is of
    moved = "| Language / pair | n | Δ vs untrained base (accuracy_mean) |\n|---|---:|---:|\n| kaz_Cyrl | 107 | +0.9 |"
    assert "Δ vs untrained base (accuracy_mean)" in narrow_tables(moved)
