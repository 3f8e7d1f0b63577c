"""Redaction by name and by the shape of a value (inferlab.record.redaction), and its agreement with the hosts' copy of
the shape rule (plugins/module_utils/_redaction.py)."""

import json

import pytest

from ansible_collections.inferlab.distributed.plugins.module_utils import _redaction as host_redaction
from inferlab.record import redaction

CANARY = "canary-5f1e9c"

# where a secret can hide in extra vars -> extra vars that hide CANARY there
PLACES = {
    "url_userinfo": {"inferlab_router_url": f"https://admin:{CANARY}@router.example:8443/v1"},
    "url_user_only": {"mirror": f"https://{CANARY}@git.example/models.git"},
    "url_inside_a_longer_string": {"note": f"clone from git+https://bot:{CANARY}@git.example/x.git then run"},
    "url_password_with_an_at": {"db": f"postgres://app:p@{CANARY}@db:5432/app"},
    "flag_value_in_a_list": {"inferlab_sglang_extra_args": ["--port", "30000", "--api-key", CANARY]},
    "flag_with_underscore_in_a_list": {"args": ["--API_KEY", CANARY]},
    "flag_equals_value_in_a_list": {"args": [f"--hf-token={CANARY}"]},
    "flag_equals_value_in_a_string": {"command": f"python3 -m sglang.launch_server --api-key={CANARY} --port 1"},
    "flag_space_value_in_a_string": {"command": f"litellm --master-key  {CANARY} --port 4000"},
    "flag_quoted_value_in_a_string": {"command": f"serve --password 'x {CANARY} y' --port 1"},
    "nested_dict_and_list": {"ranks": [{"launch": {"argv": [["--token", CANARY]], "env": [f"--auth={CANARY}"]}}]},
    "key_name": {"gateway_api_token": CANARY},
    "key_name_nested": {"services": [{"name": "a", "password": {"value": CANARY}}]},
}


@pytest.mark.parametrize("extravars", PLACES.values(), ids=PLACES.keys())
def test_a_canary_is_nowhere_in_the_output(extravars):
    shown = redaction.redact_vars(extravars)
    assert CANARY not in json.dumps(shown)
    assert redaction.REDACTED in json.dumps(shown)


def test_what_is_no_secret_is_kept():
    extravars = {
        "inferlab_router_url": "http://169.254.77.1:8000/v1",
        "path_with_an_at": "https://host.example/users/@me?x=a@b",
        "args": ["--api-key-file", "/etc/inferlab/key", "--port", "30000", "--tokenizer-path", "/m"],
        "command": "serve --tokens 5 --api-key-file=/etc/key --auth-mode open",
        "api_key_file": "/etc/inferlab/key",
        "count": 3,
        "enabled": True,
        "nothing": None,
    }
    assert redaction.redact_vars(extravars) == extravars


def test_the_shapes_are_redacted_where_they_are():
    assert redaction.redact_vars({"url": "https://u:p@h/x", "args": ["a", "--token", "t", "b"],
                                  "cmd": "x --api-key=k --port 1"}) == {
        "url": "https://<redacted>@h/x", "args": ["a", "--token", "<redacted>", "b"],
        "cmd": "x --api-key=<redacted> --port 1"}


def test_names_are_redacted_as_before():
    recorded = redaction.redact_vars({"fail_early": "true", "gateway_api_token": "x",
                                      "nested": {"password": "y", "api_key_file": "/etc/key"}})
    assert recorded == {"fail_early": "true", "gateway_api_token": "<redacted>",
                        "nested": {"password": "<redacted>", "api_key_file": "/etc/key"}}


def test_redact_value_goes_by_shape_only():
    record = {"output_tokens": 12, "argv": ["sglang", "--api-key", CANARY], "url": f"http://u:{CANARY}@h"}
    shown = redaction.redact_value(record)
    assert shown["output_tokens"] == 12 and shown["argv"][:2] == ["sglang", "--api-key"]
    assert CANARY not in json.dumps(shown)


def test_the_hosts_copy_of_the_shape_rule_is_the_same():
    for name in ("REDACTED", "SECRET_FLAGS"):
        assert getattr(host_redaction, name) == getattr(redaction, name), name
    for name in ("URL_USERINFO_RE", "FLAG_VALUE_RE"):
        ours, theirs = getattr(redaction, name), getattr(host_redaction, name)
        assert (ours.pattern, ours.flags) == (theirs.pattern, theirs.flags), name
    samples = [{k: v for k, v in place.items() if not redaction.is_secret_name(k)} for place in PLACES.values()]
    assert [host_redaction.redact_value(s) for s in samples] == [redaction.redact_value(s) for s in samples]


def test_a_secret_in_a_fragment_is_redacted_in_the_record(tmp_path):
    """A rank's argv as sglang_tp records it, with the site's extra args: the flag's value never reaches record.json."""
    from inferlab.record import record

    canary = "sk-canary-" + "record"
    stage = tmp_path / "fragments" / "serve"
    stage.mkdir(parents=True)
    (stage / "lab-a.json").write_text(json.dumps({"argv": ["python", "-m", "sglang.launch_server", "--api-key", canary],
                                                  "url": f"http://user:{canary}@127.0.0.1:30000/v1"}))
    run = {"id": "r", "playbook": "p", "inventory": "i", "started": "2026-12-06T00:00:00Z",
           "finished": "2026-12-06T00:00:01Z", "status": "successful", "exit_code": 0, "exit_meaning": "success",
           "extravars": {}}
    path = record.write(tmp_path, run)
    assert canary not in path.read_text()
    assert json.loads(path.read_text())["stages"]["serve"]["lab-a"]["argv"][-1] == "<redacted>"
