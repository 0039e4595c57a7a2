"""A paper as a card cites it (BibTeX and a short "Authors (year), *title*"): the training
objectives name theirs (tasks/train/papers.py), the model card adds its base model's and
Sentence-BERT's (tasks/reporting/model_card.py)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Paper:
    key: str  # BibTeX key
    title: str
    authors: str  # "First Last and First Last"
    year: int
    venue: str

    def bibtex(self) -> str:
        return (
            f"@inproceedings{{{self.key},\n  title = {{{self.title}}},\n  author = {{{self.authors}}},\n"
            f"  booktitle = {{{self.venue}}},\n  year = {{{self.year}}}\n}}"
        )

    def short(self) -> str:
        names = [a.split()[-1] for a in self.authors.split(" and ")]
        who = " and ".join(names) if len(names) <= 2 else f"{names[0]} et al."
        return f"{who} ({self.year}), *{self.title}*"
