"""The repository stands alone: no source, test, rule or doc cites a file outside it (a design page
or reference notes kept beside the checkout)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# spelled in parts, so this file does not match itself
OUTSIDE = re.compile(
    "|".join(
        [
            r"\b" + "sha" + "red/",
            r"\bDES" + "IGN\\.md",
            r"reference/[\w.-]+\.md",
            r"(snakemake-9|aiperf-0\.13|responses-api|runtime-anchors)\.md",
        ]
    )
)
SUFFIXES = {".py", ".md", ".smk", ".yaml", ".yml", ".sh", ".toml", ".html", ".jinja", ""}


def _files():
    for top in ("src", "tests", "workflow", "benchmarks", "config", "scripts", ".ci"):
        for p in sorted((ROOT / top).rglob("*")):
            if (
                p.is_file()
                and p.suffix in SUFFIXES
                and "__pycache__" not in p.parts
                and ".egg-info" not in str(p)
                and "results" not in p.relative_to(ROOT).parts[:2]
            ):
                yield p
    yield ROOT / "README.md"
    yield ROOT / "mkdocs.yml"
    yield from sorted((ROOT / "docs").glob("*.md"))


@pytest.mark.parametrize("path", list(_files()), ids=lambda p: str(p.relative_to(ROOT)))
def test_cites_no_file_outside_the_repository(path):
    text = path.read_text(errors="replace")
    hits = [
        f"{i}: {line.strip()}"
        for i, line in enumerate(text.splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert not hits, f"{path.relative_to(ROOT)} cites files outside the repository:\n" + "\n".join(
        hits
    )


def test_the_layout_page_names_every_module():
    """The docs' code layout page (docs/layout.md) is how a newcomer finds a module: each one is
    named there."""
    layout = (ROOT / "docs" / "layout.md").read_text()
    pkg = ROOT / "src" / "qualflow"
    missing = sorted(
        str(p.relative_to(pkg))
        for p in pkg.rglob("*.py")
        if p.name != "__init__.py" and "__pycache__" not in p.parts and p.name not in layout
    )
    assert not missing, f"modules docs/layout.md does not name: {missing}"
