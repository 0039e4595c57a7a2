"""What a run would do, per stage: cached, compute (and why), or skip — computing nothing.

Planning hashes the local input files that stages key by content (only those the hash index
does not already know unchanged); the plan reports what that cost.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from flows.config import PipelineConfig
from storage import ArtifactNotFound, ArtifactStore
from storage.content_hash import HashStats, hash_stats
from storage.keys import KEY_SCHEME, KEY_SCHEMES
from storage.lineage import flatten
from storage.manifest import Ref
from storage.refs import current_version, next_attempt, read_ref
from storage.verify import size_problems
from tasks.stage import Stage, source_fingerprints, stage_key
from tasks.stage_config import KeyedConfig, keyed_parts

Action = Literal["cached", "compute", "skip"]


@dataclass(frozen=True)
class StepPlan:
    stage: str
    key: str
    action: Action
    reasons: list[str]
    input_keys: dict[str, str] = field(default_factory=dict)
    fingerprints: dict[str, Any] = field(default_factory=dict)
    forced: bool = False
    # the pipeline's last artifact of this stage was keyed under an older KEY_SCHEME
    rekeyed: bool = False
    # the stage's config as its key sees it, computed once here; the commit writes it into the
    # manifest (None: a step made by hand; the commit computes it)
    keyed: KeyedConfig | None = None
    # the pipeline's ref when planned: the run moves it from this key only (compare-and-swap)
    ref_key: str | None = None
    # a rebuild (forced, or of a damaged version) is built beside the version it replaces, under
    # `key` = attempt_key(rebuild_of, attempt); a first build has rebuild_of None
    rebuild_of: str | None = None
    attempt: int = 0


class Plan(list[StepPlan]):
    """The steps in dependency order, and what planning cost (`hashing`)."""

    def __init__(self, steps: Iterable[StepPlan] = (), hashing: HashStats | None = None) -> None:
        super().__init__(steps)
        self.hashing = hashing if hashing is not None else HashStats()

    def notes(self) -> list[str]:
        """Lines to print once under the plan: a key-scheme change, the hashing cost."""
        return plan_notes(sum(1 for step in self if step.rekeyed and step.action == "compute"), self.hashing)


def plan_notes(rekeyed: int, hashing: HashStats) -> list[str]:
    """The notes of a plan (or of a sweep's plans together): how many artifacts built under an
    older key scheme will be rebuilt, if any, and what hashing the inputs cost."""
    lines = []
    if rekeyed:
        artifacts = "artifact" if rekeyed == 1 else "artifacts"
        lines.append(
            f"key scheme v{KEY_SCHEME} ({KEY_SCHEMES[KEY_SCHEME]}): {rekeyed} {artifacts} built under the old scheme "
            "will be rebuilt (once; see docs/operations.md, 'Content keys')"
        )
    lines.append(hashing.summary())
    return lines


def config_changes(old: Mapping[str, Any], new: Mapping[str, Any], prefix: str) -> list[str]:
    """Human-readable differences between two config sections, one line per changed key."""
    a, b = flatten(old, prefix, keep_empty_tables=False), flatten(new, prefix, keep_empty_tables=False)
    lines = []
    for key in sorted(set(a) | set(b)):
        if key not in a:
            lines.append(f"{key} added: {b[key]!r}")
        elif key not in b:
            lines.append(f"{key} removed (was {a[key]!r})")
        elif a[key] != b[key]:
            lines.append(f"{key}: {a[key]!r} -> {b[key]!r}")
    return lines


def fingerprint_changes(old: Any, new: Any, prefix: str, paths: Mapping[str, str]) -> list[str]:
    """The changed leaves of two fingerprints; a changed content hash names the file now read
    (from `paths`: digest -> a path that had it, as collected while hashing)."""
    if isinstance(old, Mapping) and isinstance(new, Mapping) and not ("sha256" in new and "sha256" in old):
        lines = []
        for name in sorted(set(old) | set(new), key=str):
            where = f"{prefix}.{name}"
            if name not in old:
                lines.append(f"{where} added")
            elif name not in new:
                lines.append(f"{where} removed")
            else:
                lines.extend(fingerprint_changes(old[name], new[name], where, paths))
        return lines
    if old == new:
        return []
    digest = new.get("sha256") if isinstance(new, Mapping) else None
    if digest is not None and digest in paths:
        return [f"{prefix}: {paths[digest]} changed"]
    return [f"{prefix} changed"]


def _why_stale(
    store: ArtifactStore,
    pipeline: str,
    stage: Stage[Any],
    keyed: KeyedConfig,
    input_keys: Mapping[str, str],
    prints: Mapping[str, Any],
    paths: Mapping[str, str],
    ref: Ref | None,
) -> tuple[list[str], bool]:
    """Why the stage must compute, and whether its last artifact predates the key scheme."""
    if ref is None:
        return [f"never built by pipeline {pipeline!r}"], False
    try:
        previous = store.manifest(stage.name, ref.key)
    except ArtifactNotFound:
        return [f"the artifact {ref.key[:12]} that refs/{pipeline}/{stage.name} points to is gone"], False
    if previous.key_scheme != KEY_SCHEME:  # every key changed once: the diff would list paths and old fingerprints
        return [f"key scheme v{previous.key_scheme} -> v{KEY_SCHEME} ({KEY_SCHEMES.get(KEY_SCHEME, '')})"], True
    reasons = config_changes(previous.config, keyed.values, stage.name)
    if previous.code_version != stage.code_version:
        reasons.append(f"code version {previous.code_version} -> {stage.code_version}")
    for name, key in input_keys.items():
        if previous.input_keys.get(name) != key:
            reasons.append(f"input {name} changed")
    for name in sorted(set(prints) | set(previous.source_fingerprints)):
        if name not in prints or name not in previous.source_fingerprints:
            reasons.append(f"source {name} {'added' if name in prints else 'removed'}")
        elif prints[name] != previous.source_fingerprints[name]:
            reasons.extend(fingerprint_changes(previous.source_fingerprints[name], prints[name], f"source {name}", paths))
    return reasons or ["output missing"], False


def downstream_of(stages: Mapping[str, Stage[Any]], start: str) -> set[str]:
    found = {start}
    for name, stage in stages.items():  # dependency order, so one pass suffices
        if any(i in found for i in stage.input_names(stages)):
            found.add(name)
    return found


def upstream_of(stages: Mapping[str, Stage[Any]], targets: Iterable[str]) -> set[str]:
    found: set[str] = set()
    pending = list(targets)
    while pending:
        for name in stages[pending.pop()].input_names(stages):
            if name not in found:
                found.add(name)
                pending.append(name)
    return found


def make_plan(
    config: PipelineConfig,
    store: ArtifactStore,
    stages: Mapping[str, Stage[Any]],
    *,
    only: str | None = None,
    from_stage: str | None = None,
    force: Iterable[str] = (),
) -> Plan:
    """Per configured stage, in dependency order: its key, and whether to compute it and why."""
    configured = {name: stages[name] for name in config.stages}
    force = set(force)
    for option, names in (
        ("--only", [only] if only is not None else []),
        ("--from", [from_stage] if from_stage is not None else []),
        ("--force", force),
    ):
        unknown = [n for n in names if n not in configured]
        if unknown:
            raise ValueError(f"{option}: stage(s) {unknown} not in this pipeline; it has {list(configured)}")
    if only is not None and from_stage is not None:
        raise ValueError("--only and --from cannot be combined")
    if only is not None:
        targets = {only}
    elif from_stage is not None:
        targets = downstream_of(configured, from_stage)
    else:
        targets = set(configured)
    targets |= force
    needed = upstream_of(configured, targets)

    keys: dict[str, str] = {}
    with hash_stats() as hashing:
        plan = Plan(hashing=hashing)
        for name, stage in configured.items():
            plan.append(_plan_step(config, store, configured, stage, keys, name in force, targets, needed, hashing))
    return plan


def _plan_step(
    config: PipelineConfig,
    store: ArtifactStore,
    configured: Mapping[str, Stage[Any]],
    stage: Stage[Any],
    keys: dict[str, str],
    forced: bool,
    targets: set[str],
    needed: set[str],
    hashing: HashStats,
) -> StepPlan:
    name = stage.name
    stage_config = config.stage_configs[name]
    input_keys = {i: keys[i] for i in stage.input_names(keys)}
    prints = source_fingerprints(stage, stage_config)
    keyed = keyed_parts(stage_config)
    config_key = stage_key(stage, stage_config, input_keys, prints, keyed=keyed)
    ref = read_ref(store, config.name, name)
    version = current_version(store, config.name, name, config_key, ref)
    key, rekeyed, attempt = version or config_key, False, 0
    if forced:
        action, reasons = "compute", ["forced (--force)" + (": a new version beside the current one" if version else "")]
        if version is not None:
            key, attempt = next_attempt(store, name, config_key)
    elif name not in targets and name not in needed:
        action, reasons = "skip", ["not selected"]
    elif version is not None and (damage := size_problems(store, name, version)):
        # a cached file was truncated or removed: build a sound version beside it rather than fail downstream
        action, reasons, forced = (
            "compute",
            [f"cached artifact damaged ({damage[0]}{' ...' if len(damage) > 1 else ''}): rebuilding"],
            True,
        )
        key, attempt = next_attempt(store, name, config_key)
    elif version is not None:
        action, reasons = (
            "cached",
            ["up to date"]
            if name in targets
            else [f"input of {', '.join(sorted(t for t in targets if name in upstream_of(configured, [t])))}"],
        )
    else:
        action = "compute"
        reasons, rekeyed = _why_stale(store, config.name, stage, keyed, input_keys, prints, hashing.paths, ref)
        if name not in targets:
            reasons = ["needed as input, not built: " + "; ".join(reasons)]
    keys[name] = key
    return StepPlan(
        name, key, action, reasons, input_keys, prints, forced=forced, rekeyed=rekeyed, keyed=keyed,
        ref_key=ref.key if ref is not None else None, rebuild_of=config_key if attempt else None, attempt=attempt,
    )  # fmt: skip


def check_plan_data(config: PipelineConfig, plan: Iterable[StepPlan], stages: Mapping[str, Stage[Any]]) -> list[str]:
    """The input-data problems of every stage the plan will compute (`Stage.check_sources`),
    all of them, before the first stage runs: `stage: problem` lines (empty: none)."""
    problems = []
    for step in plan:
        stage = stages[step.stage]
        if step.action != "compute" or stage.check_sources is None:
            continue
        problems.extend(f"{step.stage}: {problem}" for problem in stage.check_sources(config.stage_configs[step.stage]))
    return problems
