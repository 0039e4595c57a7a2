"""A static HTML page over the store: pipelines and their refs, every version of every stage
(rows, size, age), and links to the reports and images artifacts carry as attached files and
to the reports under a reports folder (the sweeps' comparison reports).

The page is one self-contained file (inline CSS, one small inline script) with relative links,
so it works from the store's folder, from a copy of it, or served as static files. Every text
from the store is HTML-escaped and every link is URL-quoted. Ages are computed when the page
is read (the script, from each artifact's ISO creation time); the age at writing time is the
fallback without JavaScript.

Besides reports and images, an artifact's row links its model card (`README.md` of a model
folder, `model-card.md`) and its TensorBoard folder (`tensorboard/`, for `tensorboard --logdir`),
and shows the summary its producer recorded in the manifest's metrics: `headline` (per name:
`metric`, `mean`) and `headline_change` (per row: `label`, `delta`, `low`, `high`, `unit`,
`baseline`), written by the evaluate stage.
"""

from __future__ import annotations

import datetime as dt
import html
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import quote

from storage.manifest import Manifest, Ref
from storage.refs import list_refs
from storage.store import ArtifactStore

INDEX_FILE = "index.html"
# The folder under the root whose reports the index lists: where the sweep reports are written.
REPORTS_DIR = "sweeps"
REPORT_SUFFIXES = ("report.html", "report.md")
IMAGE_SUFFIXES = (".png", ".svg", ".jpg")

CSS = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 2em; }
table { border-collapse: collapse; margin: .5em 0 1em; }
th, td { border-bottom: 1px solid #ddd; padding: .25em .7em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
code { font-size: .92em; } .dim { color: #777; } a { color: #0550ae; }
.scroll { overflow-x: auto; max-width: 100%; }
""".strip()

# Ages when the page is read: each <time class="age" datetime="ISO"> gets "3d", "5h", "12m", "40s".
AGE_SCRIPT = """
for (const el of document.querySelectorAll("time.age")) {
  const s = Math.max(0, (Date.now() - Date.parse(el.getAttribute("datetime"))) / 1000);
  const [unit, size] = [["d", 86400], ["h", 3600], ["m", 60], ["s", 1]].find(([, n]) => s >= n) || ["s", 1];
  el.textContent = Math.floor(s / size) + unit;
}
""".strip()
CARD_NAMES = ("README.md", "model-card.md")
TENSORBOARD_DIR = "tensorboard/"


@dataclass(frozen=True)
class IndexPage:
    html: str
    artifacts: int
    links: list[str]  # every href, relative to the page


def format_age(created_at: str, now: dt.datetime | None = None) -> str:
    """How long ago an ISO timestamp was, in its largest unit: `3d`, `5h`, `12m`, `40s`."""
    now = now if now is not None else dt.datetime.now(dt.timezone.utc)
    created = dt.datetime.fromisoformat(created_at)
    if created.tzinfo is None:
        created = created.replace(tzinfo=dt.timezone.utc)
    seconds = max((now - created).total_seconds(), 0)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


def format_size(n: float) -> str:
    """Bytes in binary units: `812 B`, `13.1 KiB`, `2.4 GiB`."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


class _Page:
    def __init__(self, link_base: str) -> None:
        self.link_base = link_base
        self.links: list[str] = []
        self.parts: list[str] = []

    def link(self, path: str, label: str) -> str:
        href = self.link_base + quote(path)
        self.links.append(href)
        return f'<a href="{_e(href)}">{_e(label)}</a>'

    def age(self, created_at: str, now: dt.datetime) -> str:
        """The age at writing time, recomputed by AGE_SCRIPT when the page is read."""
        return f'<time class="age" datetime="{_e(created_at)}" title="{_e(created_at)}">{_e(format_age(created_at, now))}</time>'

    def table(self, header: Iterable[str], rows: Iterable[Iterable[str]], numeric: Iterable[str] = ()) -> None:
        header = list(header)
        numeric = set(numeric)
        self.parts.append(
            '<div class="scroll"><table><thead><tr>' + "".join(f"<th>{_e(h)}</th>" for h in header) + "</tr></thead><tbody>"
        )
        for row in rows:
            cells = "".join(f'<td class="num">{c}</td>' if h in numeric else f"<td>{c}</td>" for h, c in zip(header, row))
            self.parts.append(f"<tr>{cells}</tr>")
        self.parts.append("</tbody></table></div>")


def _attached_links(page: _Page, m: Manifest) -> str:
    links = []
    tensorboard: set[str] = set()
    for entry in m.attached_files:
        name = entry.path.removeprefix("files/")
        if entry.path.endswith(REPORT_SUFFIXES) or entry.path.lower().endswith(IMAGE_SUFFIXES):
            links.append(page.link(f"{m.stage}/{m.key}/{entry.path}", name))
        elif entry.path.rsplit("/", 1)[-1] in CARD_NAMES:
            links.append(page.link(f"{m.stage}/{m.key}/{entry.path}", f"model card ({name})"))
        elif TENSORBOARD_DIR in entry.path:
            folder = entry.path[: entry.path.index(TENSORBOARD_DIR) + len(TENSORBOARD_DIR)]
            if folder not in tensorboard:
                tensorboard.add(folder)
                links.append(page.link(f"{m.stage}/{m.key}/{folder}", "TensorBoard (tensorboard --logdir)"))
    return " · ".join(links)


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _summary(m: Manifest) -> str:
    """The headline scores and changes the artifact's producer recorded in its metrics (module doc)."""
    parts = []
    changes = m.metrics.get("headline_change")
    if isinstance(changes, list):
        for change in changes:
            if not isinstance(change, dict) or change.get("kind") == "language":
                continue
            delta, low, high = (_number(change.get(k)) for k in ("delta", "low", "high"))
            if delta is None or low is None or high is None:
                continue
            where = f"{change.get('benchmark', '')}/{change.get('dataset', '')} {change.get('label', '')}".strip()
            unit = "pp" if change.get("unit") == "percentage points" else _e(change.get("unit", ""))
            parts.append(
                f"{_e(where)}: <b>{delta:+.1f}</b> [{low:+.1f}, {high:+.1f}] {unit} vs {_e(change.get('baseline', 'baseline'))}"
            )
    headline = m.metrics.get("headline")
    if isinstance(headline, dict):
        for name, value in headline.items():
            mean = _number(value.get("mean")) if isinstance(value, dict) else None
            if mean is not None:
                parts.append(f"{_e(name)}: {_e(value.get('metric', ''))} {mean:.4g}")
    return "<br>".join(parts)


def build_index(
    store: ArtifactStore,
    *,
    link_base: str = "",
    reports_dir: str | None = REPORTS_DIR,
    now: dt.datetime | None = None,
) -> IndexPage:
    """The page's HTML. Links are `link_base` + the path under the root ("" when the page is
    written at the root itself)."""
    now = now or dt.datetime.now(dt.timezone.utc)
    manifests = store.list_manifests()
    refs = list_refs(store, damaged=[])  # a malformed ref is reported by `verify`; the page shows the rest
    by_key = {(m.stage, m.key): m for m in manifests}
    pointing: dict[tuple[str, str], list[str]] = {}
    for ref in refs:
        pointing.setdefault((ref.stage, ref.key), []).append(ref.pipeline)
    page = _Page(link_base)
    title = f"xlembed artifacts in {store.root_uri}"
    page.parts.append(f"<h1>{_e(title)}</h1>")
    page.parts.append(
        f'<p class="dim">{len(manifests)} artifacts, {len(refs)} refs; written {_e(now.isoformat(timespec="seconds"))}. '
        "Every table is plain Parquet under <code>STAGE/KEY/data/</code>: any Parquet reader can open it.</p>"
    )
    _pipelines(page, refs, by_key, now)
    _stages(page, manifests, pointing, now)
    if reports_dir:
        _reports(page, store, reports_dir)
    body = "\n".join(page.parts)
    document = (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{_e(title)}</title>\n<style>\n{CSS}\n</style>\n</head>\n<body>\n{body}\n<script>\n{AGE_SCRIPT}\n</script>\n</body>\n</html>\n"
    )
    return IndexPage(document, len(manifests), page.links)


def write_index(store: ArtifactStore, *, reports_dir: str | None = REPORTS_DIR) -> IndexPage:
    """Build the page and write it whole to `{root}/index.html` (a temporary file renamed over
    it locally, one PUT on S3: a reader never sees half a page)."""
    page = build_index(store, reports_dir=reports_dir)
    store.write_root_file(INDEX_FILE, page.html.encode("utf-8"))
    return page


def index_url(store: ArtifactStore) -> str:
    """Where the page lies, for a link: a file:// URI for a local root, s3://... for a bucket."""
    return store.url(INDEX_FILE)


def _pipelines(page: _Page, refs: list[Ref], by_key: dict[tuple[str, str], Manifest], now: dt.datetime) -> None:
    page.parts.append("<h2>Pipelines</h2>")
    if not refs:
        page.parts.append('<p class="dim">no refs</p>')
        return
    for pipeline in sorted({r.pipeline for r in refs}):
        page.parts.append(f'<h3 id="pipeline-{_e(pipeline)}">{_e(pipeline)}</h3>')
        rows = []
        for ref in (r for r in refs if r.pipeline == pipeline):
            m = by_key.get((ref.stage, ref.key))
            key = f'<code title="{_e(ref.key)}">{_e(ref.key[:12])}</code>'
            if m is None:
                rows.append(
                    [_e(ref.stage), key, "", "", "", str(len(ref.history)), "", '<span class="dim">artifact missing</span>']
                )
                continue
            rows.append(
                [
                    f'<a href="#stage-{_e(ref.stage)}">{_e(ref.stage)}</a>',
                    key,
                    f"{m.rows_out:,}",
                    _e(format_size(m.total_bytes)),
                    page.age(m.created_at, now),
                    str(len(ref.history)),
                    _summary(m),
                    _attached_links(page, m),
                ]
            )
        page.table(
            ["stage", "key", "rows", "size", "age", "versions", "headline", "reports, figures, cards"],
            rows,
            numeric=("rows", "size", "age", "versions"),
        )


def _stages(page: _Page, manifests: list[Manifest], pointing: dict[tuple[str, str], list[str]], now: dt.datetime) -> None:
    page.parts.append("<h2>Stages</h2>")
    if not manifests:
        page.parts.append('<p class="dim">no artifacts</p>')
    for stage in sorted({m.stage for m in manifests}):
        versions = sorted((m for m in manifests if m.stage == stage), key=lambda m: m.created_at, reverse=True)
        count = f"{len(versions)} version" + ("" if len(versions) == 1 else "s")
        page.parts.append(f'<h3 id="stage-{_e(stage)}">{_e(stage)} <span class="dim">({count})</span></h3>')
        rows = []
        for m in versions:
            rows.append(
                [
                    f'<code title="{_e(m.key)}">{_e(m.key[:12])}</code>',
                    f"{m.rows_out:,}",
                    _e(format_size(m.total_bytes)),
                    page.age(m.created_at, now),
                    _e(m.code_version),
                    _e(", ".join(pointing.get((m.stage, m.key), []))),
                    page.link(f"{m.stage}/{m.key}/manifest.json", "manifest"),
                    _summary(m),
                    _attached_links(page, m),
                ]
            )
        page.table(
            ["key", "rows", "size", "age", "code", "refs", "manifest", "headline", "reports, figures, cards"],
            rows,
            numeric=("rows", "size", "age"),
        )


def _reports(page: _Page, store: ArtifactStore, reports_dir: str) -> None:
    base = f"{store.root_path.rstrip('/')}/{reports_dir}"
    found = sorted(p for p in store.backend.find(base) if p.endswith(REPORT_SUFFIXES))
    if not found:
        return
    page.parts.append(f"<h2>{_e(reports_dir.capitalize())}</h2>")
    by_name: dict[str, list[str]] = {}
    for path in found:
        relative = path[len(base) + 1 :]
        by_name.setdefault(relative.rsplit("/", 1)[0] if "/" in relative else "", []).append(relative)
    rows = [
        [_e(name or "(top)"), " · ".join(page.link(f"{reports_dir}/{r}", r.rsplit("/", 1)[-1]) for r in files)]
        for name, files in sorted(by_name.items())
    ]
    page.table(["name", "reports"], rows)
