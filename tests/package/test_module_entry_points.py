"""Every `python -m inferlab.…` that the roles, playbooks, molecule, the Makefile and the docs run names a module that
exists and runs as a program: a module that moves takes its callers with it."""

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src"
CALLERS = ("roles", "playbooks", "molecule", "docs", "tests/install", "tests/interrupt", "Makefile")
# `-m inferlab.x` in a shell line, `-m, inferlab.x` in a YAML argv list
RUN_AS_MODULE = re.compile(r"-m,?\s+(inferlab(?:\.\w+)+)")


def called_modules() -> set[str]:
    found = set()
    for caller in CALLERS:
        path = REPO / caller
        for file in [path] if path.is_file() else (p for p in path.rglob("*") if p.is_file()):
            if file.suffix in {".yml", ".yaml", ".j2", ".md", ".py", ".sh", ""}:
                found |= set(RUN_AS_MODULE.findall(file.read_text(errors="replace")))
    return found


def source_of(module: str) -> Path | None:
    base = SRC.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__main__.py"):
        if candidate.is_file():
            return candidate
    return None


def runs_as_main(path: Path) -> bool:
    if path.name == "__main__.py":
        return True
    body = ast.parse(path.read_text()).body
    return any(isinstance(node, ast.If) and "__name__" in ast.unparse(node.test) for node in body)


def test_the_callers_are_found():
    expected = {"inferlab.lab.control", "inferlab.run.strategy", "inferlab.system.liveness", "inferlab.prober"}
    assert expected <= called_modules()


@pytest.mark.parametrize("module", sorted(called_modules()))
def test_each_module_run_by_a_caller_exists_and_runs_as_a_program(module):
    path = source_of(module)
    assert path is not None, f"python -m {module}: no such module under src/"
    assert runs_as_main(path), f"python -m {module}: {path.relative_to(REPO)} has no `if __name__ == \"__main__\"`"


@pytest.mark.parametrize("module", ["inferlab.lab.control", "inferlab.prober"])
def test_the_lab_helper_and_the_prober_answer_help(module):
    done = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True, text=True, check=False)
    assert done.returncode == 0 and done.stdout.startswith("usage:"), done.stderr
