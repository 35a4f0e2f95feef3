"""The lock files: they cover pyproject.toml, carry hashes, agree, and are what is installed.

requirements/app.txt is what the image installs, requirements/dev.txt what `make install`
puts in .venv (for `make run`, `make test` and CI), requirements/build.txt what builds the
wheel. A dependency added to pyproject.toml without `make lock` fails here, naming it.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.support import ROOT

LOCKS = ROOT / "requirements"


@dataclass(frozen=True)
class Pin:
    name: str
    version: str
    applies: bool  # its environment marker holds here
    hashes: tuple[str, ...]


def pins(lock: str) -> dict[str, Pin]:
    """The pins of a lock file, by canonical name."""
    text = (LOCKS / lock).read_text()
    result = {}
    for entry in re.sub(r"\\\n", " ", text).splitlines():
        entry = entry.split("#", 1)[0].strip()
        if not entry:
            continue
        spec, *hashes = (part.strip() for part in entry.split("--hash="))
        requirement = Requirement(spec)
        pinned = [s.version for s in requirement.specifier if s.operator == "=="]
        assert len(pinned) == 1, f"{lock}: {spec!r} is not pinned to one version"
        applies = requirement.marker is None or requirement.marker.evaluate()
        name = canonicalize_name(requirement.name)
        result[name] = Pin(name, pinned[0], applies, tuple(hashes))
    return result


def project_requirements(extra: str | None = None) -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    lines = project["optional-dependencies"][extra] if extra else project["dependencies"]
    return [Requirement(line) for line in lines]


@pytest.mark.parametrize("lock", ["app.txt", "dev.txt", "build.txt"])
def test_every_pin_has_hashes(lock: str) -> None:
    unhashed = [p.name for p in pins(lock).values() if not p.hashes]
    assert not unhashed, f"requirements/{lock} pins without --hash: {unhashed} (`make lock`)"
    assert all(h.startswith("sha256:") for p in pins(lock).values() for h in p.hashes)


@pytest.mark.parametrize(
    ("lock", "requirements"),
    [
        ("app.txt", project_requirements()),
        ("dev.txt", project_requirements() + project_requirements("dev")),
    ],
    ids=["app", "dev"],
)
def test_the_lock_satisfies_pyproject(lock: str, requirements: list[Requirement]) -> None:
    locked = pins(lock)
    for requirement in requirements:
        pin = locked.get(canonicalize_name(requirement.name))
        assert pin is not None, f"{requirement} is not in requirements/{lock}: run `make lock`"
        assert requirement.specifier.contains(pin.version, prereleases=True), (
            f"requirements/{lock} pins {pin.name}=={pin.version}, outside {requirement}: "
            "run `make lock`"
        )


def test_development_uses_the_applications_versions() -> None:
    dev = pins("dev.txt")
    differing = {
        name: (pin.version, dev[name].version if name in dev else None)
        for name, pin in pins("app.txt").items()
        if name not in dev or dev[name].version != pin.version
    }
    assert not differing, f"app.txt and dev.txt disagree (app, dev): {differing}"


def test_the_installed_packages_are_the_locked_ones() -> None:
    """What `make test` runs with is the lock, not whatever was newest when .venv was made."""
    wrong = {}
    for pin in pins("dev.txt").values():
        if not pin.applies:
            continue
        try:
            installed = version(pin.name)
        except PackageNotFoundError:
            installed = None
        if installed != pin.version:
            wrong[pin.name] = (pin.version, installed)
    assert not wrong, (
        f"installed versions differ from requirements/dev.txt (locked, installed): {wrong}"
    )
