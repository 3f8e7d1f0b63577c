"""The hosts' redaction by the shape of a value (the inferlab package's copy and its canaries:
tests/package/test_redaction.py)."""

from ansible_collections.inferlab.distributed.plugins.module_utils._redaction import REDACTED, redact_value


def test_a_rank_command_line_keeps_everything_but_its_secrets():
    argv = ["python3", "-m", "sglang.launch_server", "--api-key", "sk-1", "--hf_token=hf-2", "--port", "30000",
            "--api-key-file", "/etc/key", "--dist-init-addr", "http://u:pw@10.0.0.1:5000"]
    assert redact_value(argv) == ["python3", "-m", "sglang.launch_server", "--api-key", REDACTED,
                                  f"--hf_token={REDACTED}", "--port", "30000", "--api-key-file", "/etc/key",
                                  "--dist-init-addr", f"http://{REDACTED}@10.0.0.1:5000"]


def test_mappings_keep_their_names_and_other_values():
    value = {"output_tokens": 5, "cmd": 'serve --token "a b" --port 1', "nested": [{"url": "https://h/x@y"}]}
    assert redact_value(value) == {"output_tokens": 5, "cmd": f"serve --token {REDACTED} --port 1",
                                   "nested": [{"url": "https://h/x@y"}]}
