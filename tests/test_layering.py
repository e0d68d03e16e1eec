"""DESIGN.md layering, enforced on the source: families import nothing from runtime/server/workflow;
runtime reaches families only through the registry; the server reaches the model only through the
Task API; the workflow reaches code only through the CLI."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "src" / "qualflow"


def imports_of(path: Path) -> set[str]:
    """Absolute module names imported by a file (relative imports resolved)."""
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    else:
        parts = parts[:-1]  # the containing package
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = parts[: len(parts) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.add(mod)
            out |= {f"{mod}.{a.name}" for a in node.names}
    return out


def files(sub: str) -> list[Path]:
    return sorted((PKG / sub).rglob("*.py"))


@pytest.mark.parametrize("path", files("families"), ids=lambda p: str(p.relative_to(PKG)))
def test_families_import_no_runtime_server_or_workflow(path):
    bad = {m for m in imports_of(path) if re.match(r"qualflow\.(runtime|server|aiperf|evidence|report|session|cli)", m)}
    assert not bad, f"{path} imports {bad}"


@pytest.mark.parametrize("path", files("runtime"), ids=lambda p: str(p.relative_to(PKG)))
def test_runtime_reaches_families_only_through_the_registry(path):
    bad = {m for m in imports_of(path) if m.startswith("qualflow.families.") and m != "qualflow.families.get_family"}
    assert not bad, f"{path} imports {bad}"


@pytest.mark.parametrize("path", files("server"), ids=lambda p: str(p.relative_to(PKG)))
def test_server_reaches_the_model_only_through_the_task_api(path):
    allowed = re.compile(r"qualflow\.runtime($|\.task|\.api|\.(load_task|Task|[A-Z]\w*|STREAMING|TEXT_GENERATION|SCORING)$)")
    bad = {m for m in imports_of(path) if (m.startswith("qualflow.runtime") and not allowed.match(m))
           or m.startswith("qualflow.families")}
    assert not bad, f"{path} imports {bad}"


def test_workflow_reaches_code_only_through_the_cli():
    sources = [ROOT / "Snakefile", *sorted((ROOT / "workflow").rglob("*.smk"))]
    assert len(sources) > 1
    for path in sources:
        text = path.read_text()
        assert not re.search(r"^\s*(from|import)\s+qualflow", text, re.M), f"{path} imports qualflow"
    shells = re.findall(r"shell:\s*\n\s*(?:\"\"\"|\"|')(.*?)(?:\"\"\"|\"|')\s*\n", "\n".join(p.read_text() for p in sources), re.S)
    assert shells and all("qualflow " in s for s in shells), "every rule's shell calls the qualflow CLI"
