"""Lineage: the tree of artifacts an artifact was built from, read from manifests alone.

Every manifest records the keys of its input artifacts, the config section that went into
its key, the fingerprints of the external sources it read, where it read them (`locations`,
since key scheme 2; before that the paths were in the config), its code version and when it
was committed. Following `input_keys` from one artifact gives its whole upstream tree; an
input that is no longer in the store (collected by `gc`) is a leaf marked missing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from storage.manifest import Manifest
from storage.store import ArtifactNotFound, ArtifactStore

# Config keys whose values name external files or locations (a path, a URL, a model folder or
# name, a `{lang: path}` table): the places the recorded source fingerprints were taken of.
SOURCE_KEYS = frozenset({"path", "paths", "files", "url", "urls", "model", "train_file"})


@dataclass
class LineageNode:
    """One artifact of the tree; `manifest` is None when it is missing from the store."""

    stage: str
    key: str
    uri: str
    manifest: Manifest | None
    inputs: dict[str, LineageNode] = field(default_factory=dict)

    @property
    def missing(self) -> bool:
        return self.manifest is None

    def walk(self) -> list[LineageNode]:
        """This node and every node upstream, depth first, each (stage, key) once."""
        seen: dict[tuple[str, str], LineageNode] = {}

        def visit(node: LineageNode) -> None:
            if (node.stage, node.key) in seen:
                return
            seen[(node.stage, node.key)] = node
            for child in node.inputs.values():
                visit(child)

        visit(self)
        return list(seen.values())


def lineage(store: ArtifactStore, stage: str, key: str) -> LineageNode:
    """The upstream tree of `stage/key` (the artifact itself must exist). An artifact read by
    two others (a corpus read by translate and align) is one node object in both places."""
    nodes: dict[tuple[str, str], LineageNode] = {}

    def build(name: str, full: str, required: bool) -> LineageNode:
        if (name, full) in nodes:
            return nodes[(name, full)]
        try:
            manifest = store.manifest(name, full)
        except ArtifactNotFound:
            if required:
                raise
            manifest = None
        node = LineageNode(name, full, store.uri(name, full), manifest)
        nodes[(name, full)] = node
        if manifest is not None:
            node.inputs = {
                input_name: build(input_name, input_key, False) for input_name, input_key in sorted(manifest.input_keys.items())
            }
        return node

    return build(stage, key, True)


def source_locations(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """The config entries that name external sources (see SOURCE_KEYS), by dotted key; list
    items are named by their `name` field when they have one (`sources[cldr-english].files`)."""
    found: dict[str, Any] = {}
    for name, value in config.items():
        dotted = f"{prefix}.{name}" if prefix else str(name)
        if name in SOURCE_KEYS and value not in (None, "", [], {}):
            found[dotted] = value
        elif isinstance(value, Mapping):
            found.update(source_locations(value, dotted))
        elif isinstance(value, list):
            for index, item in enumerate(value):
                if isinstance(item, Mapping):
                    label = item.get("name", index)
                    found.update(source_locations(item, f"{dotted}[{label}]"))
    return found


def recorded_locations(manifest: Manifest) -> dict[str, Any]:
    """Where an artifact's sources were read from, by dotted key: the manifest's `locations`
    (key scheme 2 keeps content-keyed paths out of the config) and the config entries that
    still name places (a hub model id; every path of a manifest from before `locations`).
    List items are named as in `source_locations` (`sources[0]` -> `sources[pairs]`)."""
    found = source_locations(manifest.config)
    for dotted, value in manifest.locations.items():
        found[_named_items(dotted, manifest.config)] = value
    return found


_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def _named_items(dotted: str, config: Mapping[str, Any]) -> str:
    """`sources[0].files` -> `sources[pairs].files` where the config's item 0 has a `name`."""
    out, node = "", config
    for name, index in _PART.findall(dotted):
        if name:
            out += f".{name}" if out else name
            node = node.get(name) if isinstance(node, Mapping) else None
        else:
            item = node[int(index)] if isinstance(node, list) and int(index) < len(node) else None
            out += f"[{item.get('name', index) if isinstance(item, Mapping) else index}]"
            node = item
    return out


def flatten(value: Any, prefix: str = "", *, keep_empty_tables: bool = True) -> dict[str, Any]:
    """Nested dicts as dotted keys; lists of tables as `key[i]`. An empty table is kept as its
    own entry (lineage shows it), or dropped (`xlembed plan`'s config changes)."""
    if isinstance(value, Mapping):
        if not value and prefix and keep_empty_tables:
            return {prefix: {}}
        out: dict[str, Any] = {}
        for name, item in value.items():
            out.update(flatten(item, f"{prefix}.{name}" if prefix else str(name), keep_empty_tables=keep_empty_tables))
        return out
    if isinstance(value, list) and value and all(isinstance(item, Mapping) for item in value):
        out = {}
        for index, item in enumerate(value):
            out.update(flatten(item, f"{prefix}[{index}]", keep_empty_tables=keep_empty_tables))
        return out
    return {prefix: value}


def node_record(node: LineageNode, compare: Mapping[str, Mapping[str, Any] | None] | None = None) -> dict[str, Any]:
    """The node as JSON-able data, inputs nested. `compare` maps stage -> the keyed config it
    would have now (None: not in that pipeline); then each node carries `config_changes`."""
    record: dict[str, Any] = {"stage": node.stage, "key": node.key, "uri": node.uri}
    m = node.manifest
    if m is None:
        record["missing"] = True
        return record
    record.update(
        created_at=m.created_at,
        code_version=m.code_version,
        key_scheme=m.key_scheme,
        package_version=m.package_version,
        rows_out=m.rows_out,
        bytes=m.total_bytes,
        config=m.config,
        sources={"locations": recorded_locations(m), "fingerprints": m.source_fingerprints},
    )
    if compare is not None:
        record["config_changes"] = config_differences(m.config, compare.get(node.stage)) if node.stage in compare else None
    record["inputs"] = {name: node_record(child, compare) for name, child in node.inputs.items()}
    return record


def config_differences(recorded: Mapping[str, Any], current: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    """Dotted key -> {"recorded": ..., "current": ...} for every key whose value differs (a key
    absent on one side shows as absent there). `current` None: the stage is not configured now."""
    if current is None:
        return {}
    a, b = flatten(recorded), flatten(current)
    changes: dict[str, dict[str, Any]] = {}
    for name in sorted(set(a) | set(b)):
        if a.get(name, _ABSENT) != b.get(name, _ABSENT):
            changes[name] = {
                k: v for k, v in (("recorded", a.get(name, _ABSENT)), ("current", b.get(name, _ABSENT))) if v is not _ABSENT
            }
    return changes


_ABSENT: Any = object()
