"""The collection and the package meet only through the package's commands: no role, playbook, template or plugin
reaches into the package's source tree by path (PYTHONPATH, role_path/../../src, a glob of src/), and the package
reads no collection file by path (KNOWN_PACKAGE_TO_COLLECTION is empty: what the package needs of the collection, the
collection installs, as the lab role installs _tc.py into the lab's tree)."""

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
# The package's files that may read a collection file by path, each with its reason: none. (The lab's link daemon and
# status once loaded plugins/module_utils/_tc.py from the checkout, src/inferlab/lab/collection_tc.py; they now load
# the copy the lab role installs, lab.json's tc_module.)
KNOWN_PACKAGE_TO_COLLECTION: set[str] = set()


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


def reaching_into_collection(root: Path) -> set[str]:
    """The package's files under ``root``/src/inferlab whose code names a collection file by path."""
    return {str(path.relative_to(root)) for path in sorted((root / "src" / "inferlab").rglob("*.py"))
            if any(INTO_COLLECTION.search(line) for _number, line in code_lines(path))}


def test_the_package_reads_no_collection_file_by_path():
    assert reaching_into_collection(ROOT) == KNOWN_PACKAGE_TO_COLLECTION == set()


def test_a_path_into_the_collection_is_found_again(tmp_path):
    """The check itself: the loader this package once had is found, one that only names the file in prose is not."""
    lab = tmp_path / "src" / "inferlab" / "lab"
    lab.mkdir(parents=True)
    (lab / "collection_tc.py").write_text(
        '"""Loads plugins/module_utils/_tc.py by file path."""\n'
        "from inferlab.paths import REPO_ROOT\n"
        'TC_MODULE_UTILS = REPO_ROOT / "plugins" / "module_utils" / "_tc.py"\n')
    (lab / "tc_module.py").write_text('"""The lab\'s copy of plugins/module_utils/_tc.py."""\n'
                                      "def lab_tc(record):\n    return load_tc(record['tc_module'])\n")
    assert reaching_into_collection(tmp_path) == {"src/inferlab/lab/collection_tc.py"}


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
    assert not INTO_COLLECTION.search('return load_tc(record["tc_module"])')  # the lab's own copy
    assert not INTO_COLLECTION.search('return Path(spec.origin).parent / "plugins" / "strategy"')  # Mitogen's
