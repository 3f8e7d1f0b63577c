# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The llama.cpp ring's command lines, each flag checked against the pinned build's own --help (captured in
tests/unit/fixtures/llamacpp; tests/engine checks the live build's), and the checks before a launch."""

from pathlib import Path

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.inferlab.distributed.plugins.filter import llamacpp
from ansible_collections.inferlab.distributed.plugins.module_utils._llamacpp import help_flags

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "llamacpp"
SERVER_FLAGS = help_flags((FIXTURES / "llama-server_help.txt").read_text())
RPC_FLAGS = help_flags((FIXTURES / "ggml-rpc-server_help.txt").read_text())

RPC = {"bin_dir": "/opt/llama.cpp/bin", "host": "169.254.177.2", "port": 50052}
SERVER = {"bin_dir": "/opt/llama.cpp/bin", "model_path": "/srv/models/target.gguf", "host": "169.254.77.1",
          "port": 8080, "rpc": ["169.254.177.2:50052", "169.254.177.3:50052"]}
FULL = dict(SERVER, threads=2, context_length=8192, parallel=4, metrics=True, slot_save_path="/var/lib/x/slots",
            cache_ram_mib=0,
            extra_args=["--no-webui"],
            draft={"model_path": "/srv/models/draft.gguf", "max_tokens": 6, "gpu_layers": 10})


def flags(argv):
    return [arg for arg in argv if arg.startswith("-") and not arg.lstrip("-").isdigit()]


def test_registered():
    assert sorted(llamacpp.FilterModule().filters()) == ["llamacpp_metrics_delta", "llamacpp_rpc_server_argv",
                                                         "llamacpp_server_argv", "llamacpp_spec_problems"]


def test_the_metrics_delta_of_a_window_counts_the_servers_own_drafts():
    """The draft server's capture against the same text with fewer requests: the delta is the difference, and the
    acceptance comes from the server's counters."""
    after = (FIXTURES / "metrics_draft.txt").read_text()
    delta = llamacpp.llamacpp_metrics_delta(after, after)
    assert delta["problems"] == [] and delta["counters"]["tokens_predicted_total"] == 0
    assert delta["speculative"]["acceptance_rate"] is None      # no draft token in the window: no rate, not 0
    empty = "\n".join(line if line.startswith("#") else line.rsplit(" ", 1)[0] + " 0" for line in after.splitlines()
                      if "per_pos" not in line)
    delta = llamacpp.llamacpp_metrics_delta(empty, after)
    assert delta["problems"] == [] and delta["counters"]["tokens_predicted_total"] > 0
    assert 0 < delta["speculative"]["acceptance_rate"] <= 1


def test_a_metrics_delta_that_cannot_be_read_says_why_and_never_fails():
    after = (FIXTURES / "metrics_baseline.txt").read_text()
    assert llamacpp.llamacpp_metrics_delta(None, after) == {
        "problems": ["the window's /metrics were not both read (the server did not answer)"]}
    cut = llamacpp.llamacpp_metrics_delta("<html>proxy error</html>", after)
    assert cut["problems"][0].startswith("/metrics could not be read: line 1 is not a Prometheus sample")
    restarted = llamacpp.llamacpp_metrics_delta(after, after.replace("llamacpp:tokens_predicted_total 64",
                                                                     "llamacpp:tokens_predicted_total 3"))
    assert restarted["problems"] == ["tokens_predicted_total went down from 64 to 3: the server restarted inside "
                                     "the window"]


def test_the_rpc_servers_command_line_uses_its_flags_only():
    argv = llamacpp.llamacpp_rpc_server_argv(RPC)
    assert argv == ["/opt/llama.cpp/bin/ggml-rpc-server", "-H", "169.254.177.2", "-p", "50052", "-t", "1"]
    assert set(flags(argv)) <= RPC_FLAGS


def test_the_heads_command_line_offloads_to_every_member_and_serves_metrics():
    argv = llamacpp.llamacpp_server_argv(SERVER)
    assert argv == ["/opt/llama.cpp/bin/llama-server", "--model", "/srv/models/target.gguf",
                    "--rpc", "169.254.177.2:50052,169.254.177.3:50052", "--n-gpu-layers", "99",
                    "--host", "169.254.77.1", "--port", "8080", "--metrics"]


def test_every_flag_of_a_full_spec_is_one_the_pinned_build_offers():
    argv = llamacpp.llamacpp_server_argv(FULL)
    assert [flag for flag in flags(argv) if flag not in SERVER_FLAGS] == []
    assert argv[argv.index("--model-draft"):argv.index("--model-draft") + 8] == [
        "--model-draft", "/srv/models/draft.gguf", "--spec-type", "draft-simple", "--spec-draft-n-max", "6",
        "--n-gpu-layers-draft", "10"]
    assert argv[-1] == "--no-webui"


def test_a_head_alone_has_no_rpc_flag():
    assert "--rpc" not in llamacpp.llamacpp_server_argv(dict(SERVER, rpc=[]))


@pytest.mark.parametrize("spec, message", [
    ({"bin_dir": "/b", "host": "169.254.1.1"}, "the RPC server spec lacks port"),
    (dict(RPC, threds=2), "the RPC server spec has unknown keys ['threds']"),
    (dict(RPC, port="50052"), "the RPC server spec.port must be an integer, got '50052'"),
    (dict(RPC, port=True), "the RPC server spec.port must be an integer, got True"),
])
def test_a_malformed_rpc_spec_names_the_key(spec, message):
    with pytest.raises(AnsibleFilterError) as error:
        llamacpp.llamacpp_rpc_server_argv(spec)
    assert message in str(error.value)


def test_a_malformed_draft_names_the_key():
    with pytest.raises(AnsibleFilterError) as error:
        llamacpp.llamacpp_server_argv(dict(SERVER, draft={"path": "/d"}))
    assert "the server spec's draft has unknown keys ['path']" in str(error.value)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", ""])
def test_an_rpc_server_on_every_address_is_refused(host):
    (problem,) = llamacpp.llamacpp_spec_problems(dict(RPC, host=host), "rpc_server")
    assert problem["field"] == "host"
    assert "llama.cpp's RPC backend is insecure and must never listen on an open network" in problem["message"]


def test_a_name_is_not_an_address():
    (problem,) = llamacpp.llamacpp_spec_problems(dict(RPC, host="lab-b"), "rpc_server")
    assert problem["message"] == "host must be an IP address (the direct link's), found 'lab-b'"


def test_the_heads_problems_each_name_their_field():
    spec = dict(SERVER, port=70000, threads=0, rpc=["0.0.0.0:50052", "169.254.177.3", "[fe80::1]:50052"],
                extra_args=["--api-key=s3cret"])
    problems = llamacpp.llamacpp_spec_problems(spec, "server")
    assert [p["field"] for p in problems] == ["port", "threads", "rpc[0]", "rpc[1]", "extra_args"]
    assert problems[3]["message"] == "rpc[1] must be HOST:PORT, found '169.254.177.3'"
    assert problems[-1]["message"].startswith("extra_args carries --api-key: a command line shows in ps")
    assert "s3cret" not in str(problems)


def test_a_good_spec_has_no_problem():
    assert llamacpp.llamacpp_spec_problems(FULL, "server") == []
    assert llamacpp.llamacpp_spec_problems(RPC, "rpc_server") == []
