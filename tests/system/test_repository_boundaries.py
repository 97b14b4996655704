"""The repository is whole on its own: no file points at a document outside it (the contract lives
in docs/contract.md); and its parts keep their boundaries: the tiering job and the Spark reader
share the core, never each other."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUTSIDE = re.compile(r"\.\./shared|SPEC\.md|\bSPEC sections?\b|\bspec section\b|section \d+ of the spec")


def tracked_text_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    return [ROOT / name for name in listed if not name.endswith((".png", ".parquet"))]


def test_no_file_points_outside_the_repository() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in tracked_text_files()
        if path.is_file() and path != Path(__file__)
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert not offenders, "\n".join(offenders)


def test_the_contract_names_every_section_the_code_points_at() -> None:
    headings = set(re.findall(r"^## (.+)$", (ROOT / "docs" / "contract.md").read_text(), re.M))
    pointed = {
        name
        for path in tracked_text_files()
        if path.suffix == ".py" and path.is_file()
        for match in re.finditer(r'docs/contract\.md, ((?:"[^"]+"(?:,| and| or)? ?)+)', path.read_text())
        for name in re.findall(r'"([^"]+)"', match.group(1))
    }
    assert pointed and pointed <= headings, pointed - headings


def imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports, wherever in the file (``from lakelog import spark`` counts as
    ``lakelog.spark``)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def offenders(folder: str, packages: tuple[str, ...], skip: tuple[str, ...] = ()) -> list[str]:
    """Each import in ``folder`` (but its subfolders ``skip``) of a module in ``packages``."""
    return [
        f"{path.relative_to(ROOT)} imports {module}"
        for path in sorted((ROOT / folder).rglob("*.py"))
        if path.relative_to(ROOT / folder).parts[0] not in skip
        for module in sorted(imported_modules(path))
        if any(within(module, package) for package in packages)
    ]


def test_spark_and_tiering_import_neither_each_other() -> None:
    found = offenders("spark", ("lakelog.tiering",)) + offenders("tiering", ("lakelog.spark",))
    assert not found, "\n".join(found)


PARTS = ("lakelog.lake", "lakelog.tiering", "lakelog.spark", "lakelog.spark_runtime")


def test_the_core_the_client_and_the_server_keep_their_layers() -> None:
    """The core imports none of the parts (the CLI on top of everything excepted); the client reaches
    the lake only through the plugin interface and never the server; the server never the client."""
    found = (
        offenders("lakelog", (*PARTS, "lakelog.client", "lakelog.server"), skip=("cli", "__init__.py", "aio.py"))
        + offenders("client", (*PARTS, "lakelog.server"))
        + offenders("server", (*PARTS, "lakelog.client"))
    )
    assert not found, "\n".join(found)


CORE_FOLDERS = {"lakelog": "lakelog", "client": "lakelog.client", "server": "lakelog.server"}
SPARK_SIDE = ("pyspark", "py4j", "lakelog.spark", "lakelog.spark_runtime", "lakelog.tiering")


def core_modules() -> list[str]:
    """Every module of the core folders (the CLI, which starts Spark jobs on demand, is not core)."""
    modules = []
    for folder, package in CORE_FOLDERS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            if parts[0] in {"cli", "__main__"} or parts[-1] == "__main__":
                continue
            modules.append(".".join((package, *(parts[:-1] if parts[-1] == "__init__" else parts))))
    return modules


def test_the_core_loads_no_spark_module_when_imported() -> None:
    script = (
        "import importlib, sys\n"
        f"for name in {core_modules()!r}: importlib.import_module(name)\n"
        f"print('\\n'.join(sorted(m for m in sys.modules if m.startswith({SPARK_SIDE!r}))))\n"
    )
    loaded = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    assert not loaded, loaded
