"""The CLI's usage errors exit 13 with a message and start nothing."""

import pytest

from inferlab import cli, exit_codes


def test_extravars_accept_a_json_object():
    assert cli.parse_extravars(['{"experiment_stages": ["verify"], "n": 3}', "a=b"]) == {
        "experiment_stages": ["verify"], "n": 3, "a": "b"}


@pytest.mark.parametrize(
    ("pair", "message"),
    [("{not json", "not a JSON object"), ('{"a": 1', "not a JSON object")],
)
def test_extravars_refuse_malformed_json(pair, message):
    with pytest.raises(cli.UsageError, match=message):
        cli.parse_extravars([pair])


def test_extravars_parse_like_ansible():
    assert cli.parse_extravars(["a=1", "b=x=y", "c="]) == {"a": "1", "b": "x=y", "c": ""}


def test_extravars_from_a_file_keep_their_types(tmp_path):
    path = tmp_path / "vars.yml"
    path.write_text("front: {}\ninstances:\n  - {name: a, port: 4001}\n")
    assert cli.parse_extravars(["a=1", f"@{path}", "front=x"]) == {
        "a": "1", "front": "x", "instances": [{"name": "a", "port": 4001}]}


@pytest.mark.parametrize(("content", "message"), [
    (None, "cannot read it: No such file or directory"),
    ("a: [", "not YAML or JSON"),
    ("- a\n", "expected a mapping of variables, found list"),
])
def test_extravars_file_errors(tmp_path, content, message):
    path = tmp_path / "vars.yml"
    if content is not None:
        path.write_text(content)
    with pytest.raises(cli.UsageError, match=message):
        cli.parse_extravars([f"@{path}"])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run", "no_such_playbook"], "playbook 'no_such_playbook' not found"),
        (["run", "verify", "-e", "novalue"], "-e expects KEY=VALUE, got 'novalue'"),
        (["run", "verify", "-i", "/nonexistent/inventory"], "inventory /nonexistent/inventory does not exist"),
        (["report", "/nonexistent/run"], "is /nonexistent/run a run directory?"),
    ],
)
def test_usage_errors(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(cli.runner, "run_playbook", lambda *a, **k: pytest.fail("must not run anything"))
    assert cli.main(argv) == exit_codes.USAGE
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "record.json is not valid JSON"),
        ('{"schema_version": 1}', "record.json does not match record.schema.json"),
    ],
)
def test_report_refuses_a_malformed_record_and_renders_nothing(content, message, capsys, tmp_path):
    (tmp_path / "record.json").write_text(content)
    assert cli.main(["report", str(tmp_path)]) == exit_codes.USAGE
    assert message in capsys.readouterr().err
    assert not (tmp_path / "report.md").exists() and not (tmp_path / "plots").exists()


def test_argparse_errors_map_to_usage(capsys):
    assert cli.main(["frobnicate"]) == exit_codes.USAGE
    assert cli.main(["lab", "sideways"]) == exit_codes.USAGE
