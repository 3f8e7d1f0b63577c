"""Where the package's tests find their fixture trees: the collection's own, in tests/unit/fixtures/ (one place for the
real records, captures and device documents that both test suites read)."""

from pathlib import Path

FIXTURE_ROOT = Path(__file__).resolve().parents[1] / "unit" / "fixtures"
