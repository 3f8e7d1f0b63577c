"""The link profiles' tc logic, which lives once, in the collection (plugins/module_utils/_tc.py): src/ cannot import
the collection package, so it is loaded by file path. Its own module, so that the lab's CLI (control.py) and the link
daemon both read it without importing each other."""

from __future__ import annotations

import functools
import importlib.util

from inferlab.paths import REPO_ROOT

TC_MODULE_UTILS = REPO_ROOT / "plugins" / "module_utils" / "_tc.py"


@functools.cache
def load_tc():
    """``plugins/module_utils/_tc.py`` of this checkout, as a module."""
    spec = importlib.util.spec_from_file_location("inferlab_collection_tc", TC_MODULE_UTILS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
