"""The package layering, enforced on the source.

Floors, lowest first: the leaf modules (files, phases) < families < artifacts < runtime <
{correctness, server, aiperf} < session < evidence < report < bench < cli. A module imports only
from its own package or from a lower floor, so nothing runs back up and no package pair can form
a circle; the module-level import graph has no cycle either. On top: families import nothing from
runtime/server/workflow code; runtime reaches families only through the registry, and its parts
import each other as RUNTIME_PARTS says; the server reaches the model only through the Task API
(the `qualflow.runtime` package root); the workflow's rules reach code only through the CLI, and
its DAG parse imports only named light modules (no subprocess of ours, no torch or pandas)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "src" / "qualflow"

FLOORS = {
    "files": 0,
    "phases": 0,
    "lifetime": 0,
    "gitstate": 0,
    "gpus": 0,
    "configs": 0,
    "invocation": 0,
    "roofline": 0,
    "families": 1,
    "artifacts": 2,
    "runtime": 3,
    "workload": 4.5,
    # the workflow's config checks (workload's) and a model's serving settings
    "workflow_config": 4.6,
    "correctness": 4,
    "server": 4,
    "aiperf": 4,
    "session": 5,
    "evidence": 6,
    "report": 7,
    "bench": 7.5,
    "chaos": 7.5,
    "cli": 8,
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


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


def files(sub: str = "") -> list[Path]:
    return sorted((PKG / sub).rglob("*.py"))


def top(mod: str) -> str | None:
    """The first-level package (or leaf module) of a qualflow module name; None for `qualflow`
    itself."""
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "qualflow" else None


def modules() -> set[str]:
    return {module_name(p) for p in files()}


def test_every_package_has_a_floor():
    tops = {top(m) for m in modules()} - {None}
    assert tops == set(FLOORS), (
        f"packages without a floor or floors without a package: {tops ^ set(FLOORS)}"
    )


@pytest.mark.parametrize("path", files(), ids=lambda p: str(p.relative_to(PKG)))
def test_imports_only_down_or_within_the_package(path):
    me = top(module_name(path))
    if me is None:
        return  # qualflow/__init__.py: the version only
    known = modules()
    bad = set()
    for m in imports_of(path):
        other = top(m)
        if other is None or other == me or other not in FLOORS:
            continue
        if m not in known and ".".join(m.split(".")[:-1]) not in known:
            continue
        if FLOORS[other] >= FLOORS[me]:
            bad.add(m)
    assert not bad, (
        f"{path.relative_to(PKG)} (floor {FLOORS[me]}) imports up or sideways: {sorted(bad)}"
    )


def test_no_import_cycle():
    known = modules()
    graph: dict[str, set[str]] = {}
    for p in files():
        me = module_name(p)
        deps = set()
        for m in imports_of(p):
            if m in known:
                deps.add(m)
            elif ".".join(m.split(".")[:-1]) in known:  # `from pkg.mod import name`
                deps.add(".".join(m.split(".")[:-1]))
        # a package's __init__ importing its own submodules is not a cycle through them
        graph[me] = {
            d for d in deps if d != me and not (d.startswith(me + ".") and p.name == "__init__.py")
        }
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> None:
        state[n] = 1
        stack.append(n)
        for d in sorted(graph.get(n, ())):
            if state.get(d) == 1:
                cycle = stack[stack.index(d) :] + [d]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if d not in state:
                visit(d)
        stack.pop()
        state[n] = 2

    for n in sorted(graph):
        if n not in state:
            visit(n)


def test_layering_test_catches_a_cycle(tmp_path, monkeypatch):
    """The cycle check is not vacuous: two modules importing each other are reported."""
    pkg = tmp_path / "qualflow" / "evidence"
    pkg.mkdir(parents=True)
    (tmp_path / "qualflow" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from qualflow.evidence import b\n")
    (pkg / "b.py").write_text("from qualflow.evidence.a import x\n")
    monkeypatch.setattr(sys.modules[__name__], "PKG", tmp_path / "qualflow")
    with pytest.raises(AssertionError, match="import cycle"):
        test_no_import_cycle()


@pytest.mark.parametrize("path", files("families"), ids=lambda p: str(p.relative_to(PKG)))
def test_families_import_no_runtime_server_or_workflow(path):
    bad = {
        m
        for m in imports_of(path)
        if re.match(
            r"qualflow\.(runtime|server|aiperf|evidence|report|session|artifacts|correctness|cli)",
            m,
        )
    }
    assert not bad, f"{path} imports {bad}"


@pytest.mark.parametrize("path", files("runtime"), ids=lambda p: str(p.relative_to(PKG)))
def test_runtime_reaches_families_only_through_the_registry(path):
    bad = {
        m
        for m in imports_of(path)
        if m.startswith("qualflow.families.") and m != "qualflow.families.get_family"
    }
    assert not bad, f"{path} imports {bad}"


# Inside the runtime: each part (a subpackage, or a module at the package root) and what else of
# qualflow.runtime it may import ("engine.loader": that module only). The public types (api) and
# EngineConfig are the shared vocabulary and import nothing else; kernels are tensor code only; the
# engine never reaches up to its callers; the caller side (frontend, process) reaches the engine
# only through its interface and items, and the Task also through its builders (engine.loader in
# this process, process.core in a child, process.core_client to an engine process shared by several
# API processes, engine.synthetic for no model); the package root names the Task API and the shared
# engine process's host (process.core_hub).
RUNTIME_PARTS = {
    "api": set(),
    "config": set(),
    "kernels": set(),
    "engine": {"api", "config", "kernels"},
    "frontend": {"api", "engine.interface", "engine.outputs"},
    "process": {"api", "config", "engine.interface", "engine.outputs"},
    "task": {
        "api",
        "config",
        "engine.interface",
        "engine.loader",
        "engine.outputs",
        "engine.synthetic",
        "frontend",
        "process.core_client",
        "process.core",
        "process.messages",
    },
    "": {"api", "config", "process.core_hub", "task"},  # the package root: the public names
}


def runtime_part(mod: str) -> str:
    """`engine` for qualflow.runtime.engine.scheduler, `task` for qualflow.runtime.task, "" for
    the root."""
    return mod.split(".")[2] if mod.count(".") >= 2 else ""


def runtime_import_violations(path: Path) -> set[str]:
    me = runtime_part(module_name(path))
    allowed = RUNTIME_PARTS[me]
    known = modules()
    bad = set()
    for m in imports_of(path):
        if not m.startswith("qualflow.runtime"):
            continue
        target = m if m in known else ".".join(m.split(".")[:-1])  # `from pkg.mod import name`
        if target not in known or runtime_part(target) == me:
            continue
        part, sub = runtime_part(target), ".".join(target.split(".")[2:4])
        if part not in allowed and sub not in allowed:
            bad.add(target)
    return bad


def test_every_runtime_part_has_a_rule():
    parts = {runtime_part(m) for m in modules() if m.startswith("qualflow.runtime")}
    assert parts == set(RUNTIME_PARTS), (
        f"runtime parts without a rule or rules without a part: {parts ^ set(RUNTIME_PARTS)}"
    )


@pytest.mark.parametrize("path", files("runtime"), ids=lambda p: str(p.relative_to(PKG)))
def test_runtime_parts_import_only_what_their_rule_allows(path):
    bad = runtime_import_violations(path)
    assert not bad, (
        f"{path.relative_to(PKG)} ({runtime_part(module_name(path)) or 'the root'}) imports "
        f"{sorted(bad)}; it may import {sorted(RUNTIME_PARTS[runtime_part(module_name(path))])}"
    )


def test_runtime_rule_catches_a_kernel_importing_the_engine(tmp_path, monkeypatch):
    """The part rule is not vacuous: a kernel importing the engine's scheduler is reported."""
    rt = tmp_path / "qualflow" / "runtime"
    for sub in ("kernels", "engine"):
        (rt / sub).mkdir(parents=True)
        (rt / sub / "__init__.py").write_text("")
    for init in (tmp_path / "qualflow" / "__init__.py", rt / "__init__.py"):
        init.write_text("")
    (rt / "engine" / "scheduler.py").write_text("")
    (rt / "kernels" / "attention.py").write_text("from ..engine.scheduler import Batch\n")
    monkeypatch.setattr(sys.modules[__name__], "PKG", tmp_path / "qualflow")
    assert runtime_import_violations(rt / "kernels" / "attention.py") == {
        "qualflow.runtime.engine.scheduler"
    }


@pytest.mark.parametrize("path", files("server"), ids=lambda p: str(p.relative_to(PKG)))
def test_server_reaches_the_model_only_through_the_task_api(path):
    allowed = re.compile(
        r"qualflow\.runtime($|\.[A-Z]\w*$|\.(load_task|STREAMING|TEXT_GENERATION|SCORING)$)"
    )
    bad = {
        m
        for m in imports_of(path)
        if (m.startswith("qualflow.runtime") and not allowed.match(m))
        or m.startswith(("qualflow.families", "qualflow.artifacts"))
    }
    assert not bad, f"{path} imports {bad}"


# What the Snakefile and common.smk may import while the DAG is parsed: light modules only (the
# workload checks and its points' JSON, the versions that key the rules' params, the compare dir,
# the hook that passes signals on to the jobs, the verdict printed at the end, the bundle's stat
# fingerprint, the config checks and a model's serving settings)
WORKFLOW_IMPORTS = {
    "qualflow.workload",
    "qualflow.session.provenance",
    "qualflow.report.compare_dir",
    "qualflow.lifetime",
    "qualflow.report.verdict",
    "qualflow.files",
    "qualflow.workflow_config",
}
HEAVY = (
    "torch",
    "pandas",
    "pyarrow",
    "numpy",
    "matplotlib",
    "transformers",
    "fastapi",
    "uvicorn",
    "aiperf",
    "openai",
    "httpx",
    "safetensors",
    "tokenizers",
)


def workflow_sources() -> list[Path]:
    return [ROOT / "workflow" / "Snakefile", *sorted((ROOT / "workflow").rglob("*.smk"))]


def test_workflow_reaches_code_through_the_cli_and_named_light_modules():
    sources = workflow_sources()
    assert len(sources) > 1
    for path in sources:
        text = path.read_text()
        mods = set(re.findall(r"^\s*from\s+(qualflow[\w.]*)\s+import", text, re.M)) | set(
            re.findall(r"^\s*import\s+(qualflow[\w.]*)", text, re.M)
        )
        assert mods <= WORKFLOW_IMPORTS, f"{path} imports {sorted(mods - WORKFLOW_IMPORTS)}"
        assert not re.search(
            r"^\s*(import|from)\s+subprocess|\bsubprocess\.|os\.system|os\.popen", text, re.M
        ), f"{path} starts a subprocess"
    shells = re.findall(
        r"shell:\s*\n\s*(?:\"\"\"|\"|')(.*?)(?:\"\"\"|\"|')\s*\n",
        "\n".join(p.read_text() for p in sources),
        re.S,
    )
    assert shells and all("qualflow " in s for s in shells), (
        "every rule's shell calls the qualflow CLI"
    )


def test_the_workflow_imports_are_light():
    """Imported in a fresh interpreter, the modules the DAG parse uses pull in no heavy package."""
    code = (
        "import sys\n"
        + "".join(f"import {m}\n" for m in sorted(WORKFLOW_IMPORTS))
        + f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": str(PKG.parent), "PATH": ""},
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]", f"the workflow's imports load {r.stdout.strip()}"


def test_each_rule_file_maps_to_one_package():
    rule_files = {p.stem for p in (ROOT / "workflow" / "rules").glob("*.smk")} - {"common"}
    owner = {
        "artifacts": "artifacts",
        "correctness": "correctness",
        "workload": "workload",
        "session": "session",
        "evidence": "evidence",
        "report": "report",
        "compare": "report",
    }
    assert rule_files == set(owner), f"rule files changed: {sorted(rule_files)}; update the mapping"
    for rf, pkg in owner.items():
        assert (PKG / pkg / "__init__.py").exists() or (PKG / f"{pkg}.py").exists(), (
            f"workflow/rules/{rf}.smk has no package {pkg}/ (or module {pkg}.py)"
        )
