"""Running a sweep: a driver thread per variant walks its plan; each distinct (stage, key) is
computed once, by the first variant to reach it, while the others wait for it."""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from flows.config import PipelineConfig
from flows.plan import StepPlan
from flows.sweep.plan import SweepPlan, VariantPlan
from storage import ArtifactStore
from storage.build_locks import hold_build_lock
from storage.refs import set_ref
from tasks.stop import Interrupted, raise_if_stopping

MAX_DRIVERS = 32


@dataclass
class VariantOutcome:
    variant: str
    pipeline: str
    keys: dict[str, str] = field(default_factory=dict)  # stage -> key of the steps that finished
    computed: list[str] = field(default_factory=list)  # stages this variant's driver computed itself
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


class _ComputeOnce:
    """(stage, key) -> the one computation of it; later callers wait for the first."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._futures: dict[tuple[str, str], Future[None]] = {}

    def ensure(self, ident: tuple[str, str], compute: Callable[[], None]) -> bool:
        """Run `compute` unless another caller did or does; True when this caller ran it."""
        with self._lock:
            future = self._futures.get(ident)
            owner = future is None
            if owner:
                future = self._futures[ident] = Future()
        if not owner:
            future.result()  # re-raises the owner's failure
            return False
        try:
            compute()
        except BaseException as exc:
            future.set_exception(exc)
            raise
        future.set_result(None)
        return True


RunStep = Callable[[PipelineConfig, ArtifactStore, StepPlan], None]


def run_variants(
    plan: SweepPlan, store: ArtifactStore, run_step: RunStep | None, *, log: Callable[[str], None] = lambda _: None
) -> dict[str, VariantOutcome]:
    """Bring every variant up to date, computing each distinct (stage, key) once; set the refs.

    `run_step` builds one stale step (flows.pipeline.run_step inside the flow); None means
    nothing may compute (every step must be cached). A failed variant does not stop the others.
    """
    once = _ComputeOnce()
    # Variants are driven at once so that shared steps wait for each other, but distinct stage
    # runs are bounded by the pipeline's `max_workers` (a grid cannot change it): two trainings
    # side by side on 2 cores take longer than one after the other, and each its own share of RAM.
    max_workers = plan.variants[0].config.settings.max_workers if plan.variants else 1
    computing = threading.BoundedSemaphore(max_workers)

    def drive(vplan: VariantPlan) -> VariantOutcome:
        outcome = VariantOutcome(vplan.variant.name, vplan.pipeline)
        try:
            for step in vplan.steps:
                if step.action == "skip":
                    continue
                with hold_build_lock(store, step.stage, step.key):  # until the ref moved: gc keeps it
                    if step.action == "compute":
                        raise_if_stopping(f"{vplan.variant.name}: stopped before {step.stage}")
                        if run_step is None:
                            raise RuntimeError(f"{step.stage} {step.key[:12]} is not cached and this run computes nothing")

                        def compute(step: StepPlan = step) -> None:
                            with computing:
                                log(f"{vplan.variant.name}: computing {step.stage} {step.key[:12]} ({'; '.join(step.reasons)})")
                                run_step(vplan.config, store, step)

                        if once.ensure((step.stage, step.key), compute):
                            outcome.computed.append(step.stage)
                    set_ref(
                        store,
                        vplan.pipeline,
                        step.stage,
                        step.key,
                        note=f"sweep {plan.grid.name}: {'; '.join(step.reasons)}",
                        expected=step.ref_key,
                    )
                outcome.keys[step.stage] = step.key
        except Interrupted:
            raise
        except Exception as exc:  # noqa: BLE001 - reported per variant; the flow fails at the end
            outcome.error = f"{type(exc).__name__}: {exc}"
            log(f"{vplan.variant.name}: failed: {outcome.error}")
        return outcome

    workers = max(1, min(len(plan.variants), MAX_DRIVERS))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sweep-variant") as pool:
        # each driver runs in a copy of this context, so Prefect tasks it calls join this flow run
        futures = [pool.submit(contextvars.copy_context().run, drive, vplan) for vplan in plan.variants]
    stopped = [f.exception() for f in futures if isinstance(f.exception(), Interrupted)]
    if stopped:  # Ctrl-C: every driver stopped at its next safe point
        done = sum(1 for f in futures if f.exception() is None and f.result().ok)
        raise Interrupted(
            f"sweep {plan.grid.name}: stopped ({stopped[0]}); {done} of {len(futures)} variants up to date; rerun resumes"
        )
    return {f.result().variant: f.result() for f in futures}
