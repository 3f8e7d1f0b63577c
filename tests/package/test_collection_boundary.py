"""The collection and the package meet only through the package's commands: no role, playbook, template or plugin
reaches into the package's source tree by path (PYTHONPATH, role_path/../../src, a glob of src/), and the package
reads no collection file by path but the one named in KNOWN_PACKAGE_TO_COLLECTION, with its reason."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COLLECTION_PARTS = ["roles", "playbooks", "plugins", "meta"]
COLLECTION_SUFFIXES = {".yml", ".yaml", ".j2", ".py", ".sh", ".cfg"}
# a path into the package's source: ../src, role_path's parent's src, PYTHONPATH naming src
INTO_SOURCE = re.compile(r"\.\./src\b|\bsrc/inferlab\b|PYTHONPATH[^\n]*\bsrc\b")
# a path into the collection's files from the package's code
COLLECTION_DIRS = "module_utils|plugin_utils|modules|filter|action|lookup|doc_fragments"
INTO_COLLECTION = re.compile(rf"""["']plugins["']\s*/\s*["']({COLLECTION_DIRS})["']"""
                             rf"""|\bplugins/({COLLECTION_DIRS})/\w+\.py""")
# The lab's link daemon applies a link profile with the collection's own tc logic (plugins/module_utils/_tc.py), so
# that the lab's emulated link and a real host take one code path; the package loads that one file by path from a
# checkout (the lab runs only there).
KNOWN_PACKAGE_TO_COLLECTION = {"src/inferlab/lab/collection_tc.py"}


def code_lines(path: Path):
    """The lines of ``path`` that are not comments (YAML, shell and Python ``#`` comments, Jinja ``{# #}`` blocks)
    nor Python docstrings' prose: what runs."""
    text = path.read_text()
    text = re.sub(r"\{#.*?#\}", "", text, flags=re.S)
    if path.suffix == ".py":
        text = re.sub(r'"""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\'', "", text)
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.split(" #", 1)[0] if path.suffix != ".py" else line
        if not stripped.lstrip().startswith("#"):
            yield number, stripped


def collection_files():
    for part in COLLECTION_PARTS:
        for path in sorted((ROOT / part).rglob("*")):
            if path.is_file() and path.suffix in COLLECTION_SUFFIXES:
                yield path


def test_no_collection_file_reaches_into_the_package_source():
    found = [f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
             for path in collection_files() for number, line in code_lines(path)
             # a task's name may say where a daemon lives; only what runs counts
             if INTO_SOURCE.search(line) and not re.match(r"\s*-?\s*name:", line)]
    assert found == [], "the collection reaches the package's source by path:\n" + "\n".join(found)


def test_the_package_reads_no_collection_file_by_path_but_the_known_one():
    found = {str(path.relative_to(ROOT)) for path in sorted((ROOT / "src" / "inferlab").rglob("*.py"))
             if any(INTO_COLLECTION.search(line) for _number, line in code_lines(path))}
    assert found == KNOWN_PACKAGE_TO_COLLECTION


@pytest.mark.parametrize("line, reaches", [
    ('  PYTHONPATH: "{{ role_path }}/../../src"', True),
    ("__lab_src: \"{{ role_path }}/../../src/inferlab\"", True),
    ("    argv: [python, -m, inferlab.prober, run]", False),
])
def test_the_source_pattern(line, reaches):
    assert bool(INTO_SOURCE.search(line)) is reaches


def test_the_collection_pattern():
    assert INTO_COLLECTION.search('TC = REPO_ROOT / "plugins" / "module_utils" / "_tc.py"')
    assert INTO_COLLECTION.search("load('plugins/filter/counters.py')")
    assert not INTO_COLLECTION.search("from inferlab.lab import collection_tc")
    assert not INTO_COLLECTION.search('return Path(spec.origin).parent / "plugins" / "strategy"')  # Mitogen's
