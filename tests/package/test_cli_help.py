"""`inferlab --help` and `--version`: help text on every argument and subcommand, the exit codes listed from their one
place (exit_codes.MEANING), and both versions."""

import argparse
import json
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
import yaml

from inferlab import cli, exit_codes, paths

REPO_ROOT = Path(__file__).resolve().parents[2]


def every_parser(parser: argparse.ArgumentParser, path: tuple[str, ...] = ("inferlab",)):
    """(command path, parser) for the top-level parser and every subparser under it, depth first."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, subparser in action.choices.items():
                yield from every_parser(subparser, (*path, name))


def missing_help(parser: argparse.ArgumentParser) -> list[str]:
    """The arguments and subcommands of one parser that have no help text."""
    missing = []
    for action in parser._actions:
        name = "/".join(action.option_strings) or action.metavar or action.dest
        if not (action.help or "").strip() or action.help == argparse.SUPPRESS:
            missing.append(name)
        if isinstance(action, argparse._SubParsersAction):
            # argparse keeps a subcommand's help in _choices_actions, and leaves out one added without help
            helped = {choice.dest for choice in action._choices_actions if (choice.help or "").strip()}
            missing += [f"subcommand {name}" for name in action.choices if name not in helped]
    return missing


def test_every_argument_and_subcommand_has_help():
    parsers = list(every_parser(cli.build_parser(paths.Settings.resolve())))
    assert {path[-1] for path, _parser in parsers} >= {"inferlab", "run", "lab", "report", "compare", "query", "runs"}
    missing = {" ".join(path): names for path, parser in parsers if (names := missing_help(parser))}
    assert missing == {}


def test_the_walk_would_catch_an_argument_without_help():
    parser = cli.build_parser(paths.Settings.resolve())
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    bare = sub.add_parser("bare")
    bare.add_argument("thing")
    parsers = dict(every_parser(parser))
    assert missing_help(parsers[("inferlab", "bare")]) == ["thing"]
    assert missing_help(parser) == ["subcommand bare"]


def test_help_lists_every_exit_code_with_its_meaning(capsys):
    assert cli.main(["--help"]) == exit_codes.SUCCESS
    out = capsys.readouterr().out
    listed = dict(re.findall(r"^ +(\d+)  (.+)$", out.split("exit codes:\n", 1)[1], flags=re.M))
    assert {int(code): meaning for code, meaning in listed.items()} == exit_codes.MEANING


def test_the_exit_codes_are_written_down_once():
    """cli.py builds the list from exit_codes.MEANING; none of the meanings is spelled out there again."""
    source = (REPO_ROOT / "src" / "inferlab" / "cli.py").read_text()
    assert [meaning for meaning in exit_codes.MEANING.values() if meaning in source and meaning != "success"] == []


def test_the_readme_exit_code_table_matches_exit_codes():
    """The README shows the codes to a reader who has not installed anything; this keeps it from drifting."""
    readme = (REPO_ROOT / "README.md").read_text()
    table = readme.split("| code | meaning |\n| --- | --- |\n", 1)[1].split("\n\n", 1)[0]
    rows = dict(re.findall(r"^\| (\d+) \| (.+) \|$", table, flags=re.M))
    assert {int(code): meaning for code, meaning in rows.items()} == exit_codes.MEANING


@pytest.mark.parametrize("command", ["run", "lab", "report", "compare", "reverify", "query", "runs"])
def test_each_subcommand_help_exits_0(command, capsys):
    assert cli.main([command, "--help"]) == exit_codes.SUCCESS
    assert capsys.readouterr().out.startswith(f"usage: inferlab {command}")


def test_version_prints_the_package_and_the_collection_and_exits_0():
    galaxy = yaml.safe_load((REPO_ROOT / "galaxy.yml").read_text())
    done = subprocess.run(
        [sys.executable, "-m", "inferlab.cli", "--version"], capture_output=True, text=True, check=False
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines() == [
        f"inferlab {metadata.version('inferlab')}",
        f"inferlab.distributed {galaxy['version']}",
    ]


def test_version_of_a_source_tree_not_installed_is_pyprojects(monkeypatch):
    def not_installed(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(cli.metadata, "version", not_installed)
    pyproject = (REPO_ROOT / "pyproject.toml").read_text()
    assert f'version = "{cli.package_version(REPO_ROOT)}"' in pyproject


def test_version_of_an_installed_collection_is_its_manifests(tmp_path, monkeypatch):
    (tmp_path / "MANIFEST.json").write_text(json.dumps({"collection_info": {"version": "1.2.3"}}))
    assert cli.collection_version(tmp_path) == "1.2.3"


def test_version_says_what_it_could_not_find(tmp_path, monkeypatch):
    assert cli.collection_version(tmp_path) == f"unknown (neither {tmp_path}/galaxy.yml nor {tmp_path}/MANIFEST.json)"

    def not_installed(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(cli.metadata, "version", not_installed)
    assert cli.package_version(tmp_path).startswith(
        f"unknown (not installed, and no version in {tmp_path}/pyproject.toml")
    (tmp_path / "galaxy.yml").write_text("namespace: inferlab\n")
    assert cli.collection_version(tmp_path).startswith("unknown (KeyError reading")
