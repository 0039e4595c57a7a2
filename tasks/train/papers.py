"""The papers the training objectives come from, as the model card cites them (an objective
names its own in `papers`; tasks/train/objectives)."""

from __future__ import annotations

from tasks.reporting.papers import Paper

__all__ = ["Paper"]  # objectives import it from here, beside the papers they cite

# Titles and authors as the papers print them (shared/seeds); DuEAM's seed text lacks its title
# page: its entry is the ACL Anthology's record of the EMNLP 2021 paper (2021.emnlp-main.716).
WACSE = Paper(
    "miao2024wacse",
    "Enhancing Cross-lingual Sentence Embedding for Low-resource Languages with Word Alignment",
    "Zhongtao Miao and Qiyu Wu and Kaiyan Zhao and Zilong Wu and Yoshimasa Tsuruoka",
    2024,
    "Findings of the Association for Computational Linguistics: NAACL 2024",
)
MULTIWAY = Paper(
    "fazili2025multiway",
    "Enhancing Multilingual Embeddings via Multi-Way Parallel Text Alignment",
    "Barah Fazili and Koustava Goswami",
    2025,
    "arXiv preprint",
)
DAP = Paper(
    "li2023dap",
    "Dual-Alignment Pre-training for Cross-lingual Sentence Embedding",
    "Ziheng Li and Shaohan Huang and Zihan Zhang and Zhi-Hong Deng and Qiang Lou and Haizhen Huang and Jian Jiao "
    "and Furu Wei and Weiwei Deng and Qi Zhang",
    2023,
    "Proceedings of the 61st Annual Meeting of the Association for Computational Linguistics (ACL 2023)",
)
DUEAM = Paper(
    "goswami2021dueam",
    "Cross-lingual Sentence Embedding using Multi-Task Learning",
    "Koustava Goswami and Sourav Dutta and Haytham Assem and Theodorus Fransen and John P. McCrae",
    2021,
    "Proceedings of the 2021 Conference on Empirical Methods in Natural Language Processing (EMNLP 2021)",
)
