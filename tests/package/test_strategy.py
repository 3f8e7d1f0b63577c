"""inferlab.run.strategy: which Ansible strategy a run uses, the environment that selects it, and its refusals."""

import os
import subprocess
import sys

import pytest

from inferlab import cli, exit_codes
from inferlab.run import strategy


def test_the_default_is_mitogen_and_the_environment_or_the_option_overrides_it(monkeypatch):
    monkeypatch.delenv(strategy.ENV_VAR, raising=False)
    assert strategy.chosen() == "mitogen"
    monkeypatch.setenv(strategy.ENV_VAR, "linear")
    assert strategy.chosen() == "linear"
    assert strategy.chosen("mitogen") == "mitogen"


def test_mitogen_names_the_unpinned_strategy_plugin_and_mitogens_own_directory():
    env = strategy.ansible_env("mitogen")
    assert env["ANSIBLE_STRATEGY"] == "inferlab_mitogen_linear"
    assert (strategy.STRATEGY_PLUGINS / "inferlab_mitogen_linear.py").is_file()
    assert (strategy.mitogen_strategy_dir() / "mitogen_linear.py").is_file()
    assert env["ANSIBLE_STRATEGY_PLUGINS"].split(os.pathsep) == [str(strategy.STRATEGY_PLUGINS),
                                                                 str(strategy.mitogen_strategy_dir())]


def test_the_unpinned_strategy_turns_mitogens_cpu_pinning_off():
    """Mitogen pins every controller process but its multiplexer to one CPU on a 2-3 CPU machine; the plugin
    replaces that policy with Mitogen's base policy, which assigns nothing (a fresh interpreter: the replacement is
    process-wide)."""
    plugin = strategy.STRATEGY_PLUGINS / "inferlab_mitogen_linear.py"
    code = (
        "import importlib.util, sys, ansible_mitogen.affinity as a\n"
        "pinned = type(a.policy).__name__\n"
        f"spec = importlib.util.spec_from_file_location('plugin', {str(plugin)!r})\n"
        "plugin = importlib.util.module_from_spec(spec); spec.loader.exec_module(plugin)\n"
        "print(pinned, type(a.policy) is a.Policy, plugin.StrategyModule.__mro__[1].__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["LinuxPolicy", "True", "StrategyMixin"]


def test_linear_overrides_a_callers_mitogen():
    assert strategy.ansible_env("linear") == {"ANSIBLE_STRATEGY": "linear"}


@pytest.mark.parametrize(
    ("value", "env", "message"),
    [
        ("fast", None, "--strategy: expected one of mitogen, linear, found 'fast'"),
        (None, "free", "INFERLAB_STRATEGY: expected one of mitogen, linear, found 'free'"),
    ],
)
def test_an_unknown_strategy_is_refused_with_where_it_came_from(value, env, message, monkeypatch):
    monkeypatch.setenv(strategy.ENV_VAR, env or "")
    with pytest.raises(strategy.StrategyError, match=message):
        strategy.chosen(value)


def test_mitogen_missing_says_what_to_install_or_set(monkeypatch):
    monkeypatch.setattr(strategy.importlib.util, "find_spec", lambda name: None)
    message = "ansible_mitogen package is not installed.*INFERLAB_STRATEGY=linear"
    with pytest.raises(strategy.StrategyError, match=message):
        strategy.ansible_env("mitogen")


def test_inferlab_run_refuses_a_bad_strategy_before_it_makes_a_run_directory(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(cli.runner, "run_playbook", lambda *a, **k: pytest.fail("must not run anything"))
    monkeypatch.setattr(cli.runner, "new_run_dir", lambda *a: pytest.fail("must not make a run directory"))
    monkeypatch.setenv(strategy.ENV_VAR, "turbo")
    assert cli.main(["run", "verify"]) == exit_codes.USAGE
    assert "INFERLAB_STRATEGY: expected one of mitogen, linear, found 'turbo'" in capsys.readouterr().err


def test_the_module_prints_the_environment_for_a_makefile(monkeypatch, capsys):
    monkeypatch.delenv(strategy.ENV_VAR, raising=False)
    assert strategy.main([]) == 0
    assert capsys.readouterr().out.splitlines() == [f"{k}={v}" for k, v in strategy.ansible_env("mitogen").items()]
    assert strategy.main(["sideways"]) == 2
    assert "expected one of mitogen, linear, found 'sideways'" in capsys.readouterr().err
