import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "shared" / "tests"))

from labinfo import pytest_runtest_makereport  # noqa: E402  (prints lab logs under failing checks)

__all__ = ["pytest_runtest_makereport"]
