"""Running a sweep: a driver thread per variant walks its plan; each distinct (stage, key) is
computed once, by the first variant to reach it, while the others wait for it.

A variant that starts computing keeps its compute slot until its last step (or until it waits
for a step another variant computes), so variants finish one after another instead of every
training first and every evaluation last: a sweep stopped after an hour leaves whole variants,
and the report has their scores."""

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

    def ensure(self, ident: tuple[str, str], compute: Callable[[], None], before_wait: Callable[[], None] = lambda: None) -> bool:
        """Run `compute` unless another caller did or does; True when this caller ran it.
        `before_wait` runs before waiting for another caller's computation (to give back what
        that caller may need)."""
        with self._lock:
            future = self._futures.get(ident)
            owner = future is None
            if owner:
                future = self._futures[ident] = Future()
        if not owner:
            if not future.done():
                before_wait()
            future.result()  # re-raises the owner's failure
            return False
        try:
            compute()
        except BaseException as exc:
            future.set_exception(exc)
            raise
        future.set_result(None)
        return True


class _ComputeSlots:
    """`max_workers` compute slots handed out in grid order: a slot goes to the first variant
    (lowest index) among those that still have a step to compute and are not waiting for
    another variant's step, so a later variant never starts while an earlier one is between
    two of its steps (committing one, setting refs, about to ask for the next)."""

    def __init__(self, slots: int, contenders: set[int]) -> None:
        self._condition = threading.Condition()
        self._free = slots
        self._contenders = set(contenders)

    def acquire(self, index: int) -> None:
        with self._condition:
            self._contenders.add(index)
            while not (self._free and min(self._contenders) == index):
                self._condition.wait()
            self._contenders.discard(index)
            self._free -= 1
            self._condition.notify_all()  # the next contender may be first now, if slots remain

    def release(self) -> None:
        with self._condition:
            self._free += 1
            self._condition.notify_all()

    def stand_aside(self, index: int) -> None:
        """`index` asks for nothing now (it waits for another variant's step, or is done)."""
        with self._condition:
            self._contenders.discard(index)
            self._condition.notify_all()

    def rejoin(self, index: int) -> None:
        with self._condition:
            self._contenders.add(index)


class _HeldSlot:
    """One variant's hold on a compute slot: taken at its first computed step, kept across the
    next ones, given back when it waits for another variant or ends."""

    def __init__(self, slots: _ComputeSlots, index: int) -> None:
        self._slots, self._index, self._held = slots, index, False

    def take(self) -> None:
        if not self._held:
            self._slots.acquire(self._index)
            self._held = True

    def give_back(self) -> None:
        if self._held:
            self._held = False
            self._slots.release()
        self._slots.stand_aside(self._index)

    def rejoin(self) -> None:
        if not self._held:
            self._slots.rejoin(self._index)


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
    slots = _ComputeSlots(
        max_workers, {i for i, vplan in enumerate(plan.variants) if any(step.action == "compute" for step in vplan.steps)}
    )

    def drive(index: int, vplan: VariantPlan) -> VariantOutcome:
        outcome = VariantOutcome(vplan.variant.name, vplan.pipeline)
        slot = _HeldSlot(slots, index)
        try:
            for position, step in enumerate(vplan.steps):
                if step.action == "skip":
                    continue
                with hold_build_lock(store, step.stage, step.key):  # until the ref moved: gc keeps it
                    if step.action == "compute":
                        raise_if_stopping(f"{vplan.variant.name}: stopped before {step.stage}")
                        if run_step is None:
                            raise RuntimeError(f"{step.stage} {step.key[:12]} is not cached and this run computes nothing")

                        def compute(step: StepPlan = step) -> None:
                            slot.take()
                            log(f"{vplan.variant.name}: computing {step.stage} {step.key[:12]} ({'; '.join(step.reasons)})")
                            run_step(vplan.config, store, step)

                        if once.ensure((step.stage, step.key), compute, before_wait=slot.give_back):
                            outcome.computed.append(step.stage)
                        elif any(later.action == "compute" for later in vplan.steps[position + 1 :]):
                            slot.rejoin()  # waited for another variant; it has steps of its own ahead
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
        finally:
            slot.give_back()
        return outcome

    workers = max(1, min(len(plan.variants), MAX_DRIVERS))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sweep-variant") as pool:
        # each driver runs in a copy of this context, so Prefect tasks it calls join this flow run
        futures = [pool.submit(contextvars.copy_context().run, drive, index, vplan) for index, vplan in enumerate(plan.variants)]
    stopped = [f.exception() for f in futures if isinstance(f.exception(), Interrupted)]
    if stopped:  # Ctrl-C: every driver stopped at its next safe point
        done = sum(1 for f in futures if f.exception() is None and f.result().ok)
        raise Interrupted(
            f"sweep {plan.grid.name}: stopped ({stopped[0]}); {done} of {len(futures)} variants up to date; rerun resumes"
        )
    return {f.result().variant: f.result() for f in futures}
