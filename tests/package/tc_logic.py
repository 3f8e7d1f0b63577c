"""The collection's link-profile logic (plugins/module_utils/_tc.py) for the package's tests. The package never reads
the collection's files (a lab loads the copy its role installed, lab.json's tc_module); its tests may, so that they
need no lab."""

from pathlib import Path

from inferlab.lab.tc_module import load_tc

COLLECTION_TC = Path(__file__).resolve().parents[2] / "plugins" / "module_utils" / "_tc.py"


def collection_tc():
    """The collection's _tc.py, loaded as the lab loads its copy."""
    return load_tc(COLLECTION_TC)
