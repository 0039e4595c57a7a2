"""Every reason a stage drops rows for, with what it means: the one table the manifests'
`dropped` counts, the kept rejects (`xlembed artifacts head STAGE --rejects --reason NAME`) and
the reports name. `ShardContext.drop` and `ShardContext.reject` take only a reason in it; a
plug-in that drops for a reason of its own registers it first (`register_drop_reason`)."""

from __future__ import annotations

DROP_REASONS: dict[str, str] = {
    # corpus: reading
    "invalid_utf8": "a line of a text file that is not valid UTF-8",
    "missing": "a table cell (or a group's language) without a text",
    "malformed_row": "a row of a source file that cannot be parsed (each of its languages counted)",
    # corpus: row filters (tasks/corpus/filters.py)
    "empty": "a text that is empty once whitespace is stripped",
    "too_short": "a text under the minimum length (characters or words)",
    "too_long": "a text over the maximum length (characters or words)",
    "length_ratio": "a text whose length is too far from its pivot's (corpus) or its source's (translate)",
    "control_characters": "a text holding a control character (NUL, escape, a line break, ...)",
    "copy_of_pivot": "a text that is a copy of its group's pivot text",
    "lid_mismatch": "language identification names another language",
    "lid_low_confidence": "language identification is not confident enough of the text's language",
    # corpus: whole groups and rows
    "group_incomplete": "a row of a group left with fewer rows (languages) than the minimum",
    "duplicate": "a group whose texts repeat an earlier group's",
    "near_duplicate": "a group whose texts nearly repeat an earlier group's",
    "not_sampled": "a row beyond the sample the corpus keeps",
    # translate: quality filters (tasks/translate/filters.py)
    "empty_translation": "a translation with no text",
    "identical_to_source": "a translation that copies its source text",
    "repetition": "a translation that repeats a span over and over",
    "wrong_script": "a translation mostly outside its target language's script",
    # align
    "duplicate_language": "a second row of one language in a group",
    "empty_sentence": "a sentence with no text to align",
    "no_words": "a sentence that splits into no words",
    "too_many_words": "a sentence over the aligner's maximum word count",
    "no_partner": "a sentence with no other sentence of its group to align with",
    "pair_too_long_for_model": "a sentence pair longer than the aligner's model takes",
    # train: the data a trainer reads
    "alignment_outside_training_rows": "a word alignment of a group or language the training data does not hold",
    "alignment_without_text": "a word alignment whose sentence has no text in the corpus",
    "alignment_words_mismatch": "a word alignment whose word count differs from its sentence's",
    "word_pair_without_tokens": "an aligned word pair with a word that maps to no token",
    "word_pair_not_one_to_one": "an aligned word pair whose words have other partners",
    # evaluate: benchmark items left out
    "sts_pair_beyond_max_pairs": "an STS pair beyond the benchmark's max_pairs",
    "sts_pair_outside_subset": "an STS pair outside the languages chosen",
    "sts_unscored_pair": "an STS pair without a gold score",
    "tatoeba_pair_beyond_max_pairs": "a Tatoeba pair beyond the benchmark's max_pairs",
    "tatoeba_pair_outside_subset": "a Tatoeba pair outside the languages chosen",
    "tatoeba_distractor_repeated": "a distractor sentence offered twice",
    "tatoeba_distractor_equals_tatoeba_sentence": "a distractor sentence that is also one of Tatoeba's",
    "xnli_no_gold_label": "an XNLI item without a gold label",
    "bucc_duplicate_gold_line": "a repeated line of a BUCC gold file",
    "corpus_dev_pair_too_small": "a language pair of the corpus dev split with too few rows to score",
}


def drop_reason(name: str) -> str:
    """`name`, which must be in DROP_REASONS (a ValueError naming the table otherwise)."""
    if name not in DROP_REASONS:
        raise ValueError(
            f"drop reason {name!r} is not in DROP_REASONS (tasks/drop_reasons.py): add it there with its meaning, "
            "or, from a plug-in, call register_drop_reason first"
        )
    return name


def register_drop_reason(name: str, description: str) -> str:
    """Add a plug-in's own reason (the same name again with the same meaning is fine)."""
    known = DROP_REASONS.get(name)
    if known is not None and known != description:
        raise ValueError(f"drop reason {name!r} is already registered as {known!r}")
    if not name.isidentifier() or not description.strip():
        raise ValueError(f"a drop reason is a lower_case name with a description, not {name!r}: {description!r}")
    DROP_REASONS[name] = description
    return name
