"""The floors pyproject.toml states work: a fresh venv with exactly the lowest versions it admits
(client and ``[server]`` extra) imports lakelog, runs a server and a produce/scan round trip; and a
base install answers ``lakelog server`` with the extra to install, not a traceback.

Packages come from pip's cache after the first run, so this stays a part of the normal suite."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
NOT_SOURCE = shutil.ignore_patterns(".venv", ".git", "data", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache", ".hypothesis")
FLOOR = re.compile(r"([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?>=([\w.]+)")


def floors(requirements: list[str]) -> dict[str, str]:
    """Each requirement's lowest admitted version; a requirement without a ``>=`` floor is skipped."""
    return {match[1]: match[2] for match in map(FLOOR.fullmatch, requirements) if match}


@pytest.mark.floors
@pytest.mark.timeout(600)
def test_the_lowest_admitted_versions_import_and_run(tmp_path: Path) -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    project = pyproject["project"]
    runtime = floors([*project["dependencies"], *project["optional-dependencies"]["server"]])
    assert {"grpcio", "protobuf", "pyarrow", "pyyaml", "grpcio-reflection"} <= set(runtime)
    constraints = tmp_path / "floors.txt"
    constraints.write_text("".join(f"{name}=={floor}\n" for name, floor in runtime.items()))
    build_constraints = tmp_path / "build-floors.txt"
    build_constraints.write_text("".join(f"{name}=={floor}\n" for name, floor in floors(pyproject["build-system"]["requires"]).items()))
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, ignore=NOT_SOURCE)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"

    def pip_install(requirement: str) -> None:
        result = subprocess.run(
            [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--disable-pip-version-check",
             "--constraint", str(constraints), "--build-constraint", str(build_constraints), requirement],
            capture_output=True, text=True,
        )
        assert result.returncode == 0, result.stderr

    pip_install(str(source))
    base = subprocess.run([venv / "bin" / "lakelog", "server", "--data-dir", str(tmp_path / "data"), "--port", "0"],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert base.returncode == 1
    assert re.fullmatch(r"lakelog: this command needs \w+, which is not installed: pip install 'lakelog\[server\]'\n", base.stderr)

    pip_install(f"{source}[server]")
    run = subprocess.run([python, ROOT / "tests" / "harness" / "install_floors_smoke.py", *runtime],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout.splitlines()[-1])
    assert report["records"] == 3
    installed = {name: Version(text) for name, text in report["versions"].items()}
    assert installed == {name: Version(floor) for name, floor in runtime.items()}, "pip installed exactly the floors"
    assert report["lakelog"] == project["version"]
