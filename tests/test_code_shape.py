"""Functions read in one screen: none in src/qualflow over 80 lines or 10 parameters (self/cls not
counted), Triton kernels aside (their signature is the kernel's argument list)."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "src" / "qualflow"
MAX_LINES, MAX_PARAMS = 80, 10


def _is_kernel(fn: ast.AST) -> bool:
    return any("jit" in ast.unparse(d) for d in fn.decorator_list)


def _params(fn) -> int:
    a = fn.args
    names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]
    n = len(names) + (a.vararg is not None) + (a.kwarg is not None)
    return n - (1 if names[:1] in (["self"], ["cls"]) else 0)


def _offenders() -> list[str]:
    out = []
    for path in sorted(PKG.rglob("*.py")):
        for fn in ast.walk(ast.parse(path.read_text())):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or _is_kernel(fn):
                continue
            lines = fn.end_lineno - fn.lineno + 1
            if lines > MAX_LINES or _params(fn) > MAX_PARAMS:
                out.append(
                    f"{path.relative_to(PKG)}:{fn.lineno} {fn.name}: "
                    f"{lines} lines, {_params(fn)} params"
                )
    return out


def test_no_function_over_80_lines_or_10_parameters():
    assert not _offenders(), "\n".join(_offenders())
