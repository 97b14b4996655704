"""The repository is whole on its own: no file points at a document outside it (the contract lives
in docs/contract.md)."""

from __future__ import annotations

import re
import subprocess
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
