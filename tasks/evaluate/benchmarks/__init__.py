"""The evaluation benchmarks, one class per file, and their registry (tasks/evaluate/benchmarks/registry.py).

Adding one: write `tasks/evaluate/benchmarks/<name>.py` with a `@register_benchmark` class
(docs/architecture.md, "Extension points") and import it below: that import is its
registration. A benchmark outside the package registers the same way from its own module,
imported before the config is validated.
"""

from tasks.evaluate.benchmarks.registry import (
    BENCHMARKS,
    Benchmark,
    Evaluation,
    headline_metric,
    hub_task_type,
    in_domain,
    item_metric,
    main_metric,
    path_fingerprint,
    register_benchmark,
    validate_benchmark,
)

# The built-in benchmarks: importing a module registers its class (in this order).
from tasks.evaluate.benchmarks.tatoeba import DistractorSource, TatoebaBenchmark  # noqa: I001
from tasks.evaluate.benchmarks.bucc import BuccBenchmark
from tasks.evaluate.benchmarks.sts import StsBenchmark
from tasks.evaluate.benchmarks.stsb_multi_mt import StsbMultiMtBenchmark
from tasks.evaluate.benchmarks.multiway import MultiwayBenchmark
from tasks.evaluate.benchmarks.corpus_dev import CorpusDevBenchmark
from tasks.evaluate.benchmarks.mteb import MtebBenchmark
from tasks.evaluate.benchmarks.xnli import XNLI_LANGUAGES, XnliBenchmark

__all__ = [
    "BENCHMARKS",
    "XNLI_LANGUAGES",
    "Benchmark",
    "BuccBenchmark",
    "CorpusDevBenchmark",
    "DistractorSource",
    "Evaluation",
    "MtebBenchmark",
    "MultiwayBenchmark",
    "StsBenchmark",
    "StsbMultiMtBenchmark",
    "TatoebaBenchmark",
    "XnliBenchmark",
    "headline_metric",
    "hub_task_type",
    "in_domain",
    "item_metric",
    "main_metric",
    "path_fingerprint",
    "register_benchmark",
    "validate_benchmark",
]
