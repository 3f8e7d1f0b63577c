import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "shared" / "tests"))

from labinfo import lab_host, log_tails  # noqa: E402


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Print the host's service logs under a failing check, so the failure explains itself."""
    outcome = yield
    report = outcome.get_result()
    host = item.funcargs.get("host") if hasattr(item, "funcargs") else None
    if report.when == "call" and report.failed and host is not None:
        report.sections.append(("lab logs", log_tails(lab_host(host))))
