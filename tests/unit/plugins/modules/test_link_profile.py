"""Tests of the link_profile module through main(): every tc call is mocked with recorded argv, rc and output.

The cases are in test_link_profile.yaml (community.general's test_cpanm.yaml style); outputs named by
``out_fixture`` are real `tc -j qdisc show` captures from tests/unit/fixtures/tc/.
"""

from pathlib import Path

import pytest
import yaml
from ansible.module_utils import basic

from ansible_collections.inferlab.distributed.plugins.modules import link_profile
from ansible_collections.inferlab.distributed.tests.unit.plugins.modules.utils import run_module, set_module_args

HERE = Path(__file__).resolve().parent
FIXTURES = HERE.parents[1] / "fixtures" / "tc"
CASES = yaml.safe_load((HERE / "test_link_profile.yaml").read_text())


class RunCommandMock:
    """Answers each run_command call with the next recorded one, checking its argv and LC_ALL=C."""

    def __init__(self, calls):
        self.calls = list(calls)
        self.made = []

    def __call__(self, module, args, check_rc=False, environ_update=None, **kwargs):
        self.made.append(list(args))
        assert self.calls, f"unexpected call {args}"
        call = self.calls.pop(0)
        assert list(args) == call["command"]
        assert (environ_update or {}).get("LC_ALL") == "C", "tc must run with LC_ALL=C"
        out = call.get("out", "")
        if "out_fixture" in call:
            out = (FIXTURES / f"{call['out_fixture']}.json").read_text()
        return call["rc"], out, call.get("err", "")


def install(monkeypatch, calls):
    mock = RunCommandMock(calls)

    def run_command(module, args, **kwargs):  # a plain function, so that it binds as a method
        return mock(module, args, **kwargs)

    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    return mock


@pytest.fixture
def tc_path(monkeypatch):
    def get_bin_path(module, arg, required=False, opt_dirs=None):
        assert arg == "tc" and required
        return "/usr/sbin/tc"
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", get_bin_path)


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_module(case, tc_path, monkeypatch):
    mock = install(monkeypatch, case["mocks"]["run_command"])
    failed, result = run_module(link_profile.main, case["input"])
    expected = dict(case["output"])
    assert failed == expected.pop("failed", False), result
    contains = expected.pop("msg_contains", None)
    if contains:
        assert contains in result["msg"], result["msg"]
    for key, value in expected.items():
        assert result[key] == value, (key, result)
    assert not mock.calls, f"calls expected but not made: {mock.calls}"
    if not failed:
        assert set(result) >= {"changed", "profile", "parameters", "wanted", "previous", "qdiscs", "commands"}


def test_qdiscs_are_returned_parsed(tc_path, monkeypatch):
    install(monkeypatch, [
        {"command": ["/usr/sbin/tc", "-j", "qdisc", "show", "dev", "tb0"], "rc": 0, "out_fixture": "lossy"}])
    failed, result = run_module(link_profile.main, {"interface": "tb0", "profile": "lossy"})
    assert not failed and result["changed"] is False
    assert result["qdiscs"] == [
        {"kind": "tbf", "handle": "1ab:", "parent": None, "root": True,
         "options": {"rate": 125000000, "burst": 65500, "lat": 50000}},
        {"kind": "pfifo", "handle": "1ac:", "parent": "1ab:1", "root": False, "options": {"limit": 10}},
    ]
    assert result["previous"]["reason"] == "tbf 1ab: with pfifo 1ac: limit 10"


def test_required_options():
    failed, result = run_module(link_profile.main, {"interface": "tb0"})
    assert failed and "missing required arguments: profile" in result["msg"]
    failed, result = run_module(link_profile.main, {"interface": "tb0", "profile": "netem"})
    assert failed and "value of profile must be one of: clean, tx_cliff, lossy" in result["msg"]


def test_argument_spec_matches_documentation():
    options = yaml.safe_load(link_profile.DOCUMENTATION)["options"]
    with set_module_args({"interface": "tb0", "profile": "clean"}):
        spec = link_profile.build_module().argument_spec

    def shape(opts):
        return {name: (o["type"], o.get("default"), o.get("required", False), tuple(o.get("choices", ())))
                for name, o in opts.items()}

    assert shape(options) == shape(spec)


def test_documentation_parses_and_every_return_says_when():
    yaml.safe_load(link_profile.EXAMPLES)
    returns = yaml.safe_load(link_profile.RETURN)
    assert set(returns) == {"profile", "parameters", "wanted", "previous", "previous_tree", "restorable", "qdiscs",
                            "commands"}
    assert all("returned" in r for r in returns.values())
