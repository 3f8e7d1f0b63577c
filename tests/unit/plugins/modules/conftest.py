"""Fixtures shared by the tests of the modules that change a gateway's config for a run (test_gateway_*.py)."""

import pytest

from ansible_collections.inferlab.distributed.tests.unit.plugins.module_utils.gateway_fakes import Gateway, Processes

# gateway_change_helpers checks with asserts: pytest shows their values when one fails, as it does a test's
pytest.register_assert_rewrite("ansible_collections.inferlab.distributed.tests.unit.plugins.modules.gateway_change_helpers")


@pytest.fixture
def gateway(tmp_path):
    """A loopback gateway (gateway_fakes.Gateway); every process it started is killed by its pid at the test's end."""
    made = Gateway(tmp_path, Processes(tmp_path))
    yield made
    made.close()
