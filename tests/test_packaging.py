"""pyproject.toml declares ranges and extras, constraints.txt the exact versions; the version is defined once."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tasks.align.backends import ALIGN_BACKENDS
from tasks.extras import EXTRAS, MissingExtraError, require_extra
from tasks.stage import PACKAGE_VERSION

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
OPTIONAL = PROJECT["optional-dependencies"]


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirements(extra: str | None = None) -> list[Requirement]:
    """The requirements of [project].dependencies (or of one extra), without xlembed's own extras."""
    found = [Requirement(text) for text in (PROJECT["dependencies"] if extra is None else OPTIONAL[extra])]
    return [r for r in found if canonical(r.name) != "xlembed"]


def constraint_pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, pinned = line.partition("==")
            assert pinned, f"constraints.txt: {line!r} is not an exact pin"
            pins[canonical(name)] = pinned
    return pins


def self_extras(extra: str) -> set[str]:
    """The extras of xlembed that an extra pulls in (`xlembed[dask,ray]`)."""
    out: set[str] = set()
    for text in OPTIONAL[extra]:
        req = Requirement(text)
        if canonical(req.name) == "xlembed":
            out |= req.extras
    return out


def test_dependencies_are_ranges_and_constraints_pin_every_one():
    pins = constraint_pins()
    for extra in [None, *OPTIONAL]:
        for req in requirements(extra):
            assert not any(spec.operator in ("==", "===") for spec in req.specifier), (
                f"{req} is an exact pin: pin it in constraints.txt"
            )
            assert canonical(req.name) in pins, f"{req.name} has no exact version in constraints.txt"
            assert req.specifier.contains(pins[canonical(req.name)].split("+")[0]), (
                f"constraints.txt pins {req.name} outside {req}"
            )


def test_every_extra_the_code_names_is_declared_and_the_test_extra_pulls_the_ones_tests_use():
    # the table's extras and those the align backends declare themselves
    named = {**EXTRAS, **{extra: modules for cls in ALIGN_BACKENDS.values() for extra, modules in cls.extras.items()}}
    assert set(named) <= set(OPTIONAL)
    assert self_extras("all") == set(named)
    # the tests run every optional part except mteb (its bridge is tested with mteb missing)
    assert self_extras("test") == set(named) - {"mteb"}
    installed = importlib.metadata.packages_distributions()
    for extra, modules in named.items():
        declared = {canonical(r.name) for r in requirements(extra)}
        for module in modules:
            if module in installed:  # the extra installs the package that provides the module
                assert {canonical(d) for d in installed[module]} & declared, f"extra {extra!r} does not install {module}"


def test_version_is_defined_once_in_pyproject():
    assert PACKAGE_VERSION == importlib.metadata.version("xlembed") == PROJECT["version"]
    literal = re.compile(rf"[\"']{re.escape(PROJECT['version'])}[\"']")
    copies = [
        str(p.relative_to(ROOT))
        for d in ("flows", "tasks", "storage")
        for p in (ROOT / d).rglob("*.py")
        if literal.search(p.read_text())
    ]
    assert copies == [], f"the version is written out again in {copies}"


def hide(monkeypatch: pytest.MonkeyPatch, *modules: str) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in modules else real(name, *a))


def test_a_missing_optional_part_names_its_extra(monkeypatch):
    hide(monkeypatch, "prefect_ray", "eflomal", "prefect_dask")
    with pytest.raises(
        MissingExtraError, match=r"^task_runner = 'ray' needs prefect_ray, which is not installed: pip install 'xlembed\[ray\]'$"
    ):
        require_extra("ray", "task_runner = 'ray'")

    from tasks.align.backends.eflomal_backend import EflomalAligner, EflomalSettings

    with pytest.raises(MissingExtraError, match=r"align backend 'eflomal' needs eflomal, .*pip install 'xlembed\[eflomal\]'"):
        EflomalAligner(EflomalSettings())

    from pydantic import ValidationError

    from flows.config import PipelineSettings

    with pytest.raises(ValidationError, match=r"task_runner = 'dask' needs prefect_dask, .*pip install 'xlembed\[dask\]'"):
        PipelineSettings(name="x", task_runner="dask")


def test_a_missing_fasttext_names_its_extra(monkeypatch, tmp_path):
    from tasks.corpus.lid import FastTextIdentifier

    hide(monkeypatch, "fasttext")
    with pytest.raises(MissingExtraError, match=r"lid backend 'fasttext' needs fasttext, .*pip install 'xlembed\[fasttext\]'"):
        FastTextIdentifier(str(tmp_path / "model.bin"))


def make_dry_run(target: str, tmp_path: Path) -> list[str]:
    """The commands `make TARGET` would run on a fresh clone (no .venv yet), from make itself."""
    import subprocess

    out = subprocess.run(
        ["make", "-n", "-C", str(ROOT), target, f"VENV={tmp_path / 'venv'}"], capture_output=True, text=True, check=True
    )
    return out.stdout.splitlines()


def test_make_demo_installs_xlembed_without_extras_and_make_test_adds_the_test_extra(tmp_path):
    demo = make_dry_run("demo", tmp_path)
    installs = [line for line in demo if "pip install" in line and "-c constraints.txt" in line]
    assert len(installs) == 1 and installs[0].endswith("-e ."), demo
    assert not any("[test]" in line for line in demo)
    assert any(line.endswith("xlembed run configs/demo.toml") for line in demo)
    test = make_dry_run("test", tmp_path)
    assert any(line.endswith("-e '.[test]'") for line in test), test
    stamps = {line.split()[-1] for line in demo + test if line.startswith("touch ")}
    assert len(stamps) == 2, f"demo and test installs share a stamp: {stamps}"


@pytest.mark.slow
def test_constraints_pin_public_versions_and_the_license_is_an_spdx_expression():
    from packaging.licenses import canonicalize_license_expression

    local = {name: pinned for name, pinned in constraint_pins().items() if "+" in pinned}
    assert local == {}, f"local version labels ({local}) are not on PyPI: pin the public version"
    assert isinstance(PROJECT["license"], str), "a license table is deprecated: use an SPDX expression"
    assert canonicalize_license_expression(PROJECT["license"]) == PROJECT["license"]
    backend = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    assert any(Requirement(r).name == "setuptools" and not Requirement(r).specifier.contains("76.9") for r in backend)
