# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The collection's plugins import one another only down its layers (docs/ARCHITECTURE.md): modules and module_utils
import module_utils alone (they run on hosts), plugin_utils imports plugin_utils and module_utils, never a filter or
an action plugin, which import it. Read from the source, top level and inside functions."""

from __future__ import annotations

import ast
from pathlib import Path

PLUGINS = Path(__file__).resolve().parents[3] / "plugins"
COLLECTION = "ansible_collections.inferlab.distributed.plugins"

# What each kind of plugin may import of the collection's plugins, by its directory under plugins/.
MAY_IMPORT = {
    "module_utils": {"module_utils"},
    "modules": {"module_utils"},
    "plugin_utils": {"module_utils", "plugin_utils"},
    "action": {"module_utils", "plugin_utils"},
    "filter": {"module_utils", "plugin_utils"},
    "lookup": {"module_utils", "plugin_utils"},
}


def imported_kinds(source: str) -> set[str]:
    """The directories under plugins/ that a source imports from, e.g. `module_utils`."""
    names = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names += [f"{node.module}.{alias.name}" for alias in node.names]
    return {name[len(COLLECTION) + 1:].split(".")[0] for name in names if name.startswith(COLLECTION + ".")}


def test_the_imports_are_read_from_the_source():
    assert imported_kinds("from ansible_collections.inferlab.distributed.plugins.filter.counters import x\n"
                          "def f():\n    from ansible_collections.inferlab.distributed.plugins import plugin_utils\n"
                          ) == {"filter", "plugin_utils"}


def test_each_kind_of_plugin_imports_only_the_layers_below_it():
    wrong = []
    for kind, allowed in MAY_IMPORT.items():
        for path in sorted((PLUGINS / kind).glob("*.py")):
            wrong += [f"plugins/{kind}/{path.name} imports plugins/{dep}"
                      for dep in sorted(imported_kinds(path.read_text()) - allowed)]
    assert wrong == []
