# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The lab server's parts in process: tokenizer and generator, prefix cache, metrics text, NCCL's interface rules,
the TP handshake check, and request validation."""

from __future__ import annotations

import pytest

from inferlab.lab.server import request_checks, tokens
from inferlab.lab.server.cache import PrefixCache
from inferlab.lab.server.metrics import Metrics
from inferlab.lab.server.tp import (
    check_gloo_interface,
    handshake_mismatches,
    ipv4_interfaces,
    match_interfaces,
    select_interface,
)

MODEL = "lab-qwen-small"

# --------------------------------------------------------------------------------------------------------------------
# tokenizer, template, generator


def test_tokenizer_and_template():
    assert tokens.tokenize("Hello, lab-a!") == ["Hello", ",", "lab", "-", "a", "!"]
    assert tokens.tokenize("") == [] and tokens.tokenize(None) == []
    messages = [{"role": "system", "content": [{"type": "text", "text": "be brief"}]},
                {"role": "assistant", "content": None}, {"role": "user", "content": "hi"}]
    assert tokens.render_chat(messages) == "system: be brief\nassistant: \nuser: hi\nassistant:"


def test_generator_is_deterministic_exact_and_prompt_dependent():
    first = tokens.generate(MODEL, "hello", 300)
    assert len(first) == 300 and first == tokens.generate(MODEL, "hello", 300)
    assert tokens.generate(MODEL, "hello", 7) == first[:7]
    assert tokens.generate(MODEL, "something else", 300) != first
    assert tokens.generate("other-model", "hello", 300) != first
    natural = tokens.generate(MODEL, "hello", None)
    assert natural[-1] == "." and 5 < len(natural) < 80 and natural[0][0].isupper()


def test_pieces_rebuild_the_text_and_ids_are_stable():
    pieces = tokens.pieces(["The", "link", "holds", ",", "again", "."])
    assert pieces == ["The", " link", " holds", ",", " again", "."]
    assert "".join(pieces) == "The link holds, again."
    assert tokens.tokenize("".join(pieces)) == [p.strip() for p in pieces]
    assert tokens.token_id(".") == tokens.FIRST_WORD_ID
    assert tokens.token_id("zebra") == tokens.token_id("zebra") >= tokens.UNKNOWN_ID_BASE
    assert len({tokens.token_id(t) for t in tokens.VOCAB}) == len(tokens.VOCAB)


def test_stop_strings():
    pieces = ["The", " link", " holds", " the", " lantern", "."]
    assert tokens.apply_stop(pieces, []) == (pieces, None)
    assert tokens.apply_stop(pieces, ["absent"]) == (pieces, None)
    assert tokens.apply_stop(pieces, ["holds", "link"]) == (["The"], "link")
    assert tokens.apply_stop(pieces, ["ntern"]) == (["The", " link", " holds", " the", " la"], "ntern")
    assert tokens.apply_stop(pieces, ["The"]) == ([], "The")
    assert tokens.apply_stop(pieces, [""]) == (pieces, None)


# --------------------------------------------------------------------------------------------------------------------
# prefix cache


def test_prefix_cache_matches_longest_prefix_and_flushes():
    cache = PrefixCache(budget_tokens=100)
    assert cache.match(["a", "b"]) == 0
    cache.insert(["a", "b", "c", "d"])
    assert len(cache) == 4
    assert cache.match(["a", "b", "c", "d", "e"]) == 4
    assert cache.match(["a", "b", "x"]) == 2
    assert cache.match(["b"]) == 0
    assert cache.match([1, 2]) == 0
    cache.insert([1, 2, 3])
    assert cache.match([1, 2, 3]) == 3
    cache.clear()
    assert len(cache) == 0 and cache.match(["a"]) == 0


def test_prefix_cache_evicts_least_recent_tails_first():
    cache = PrefixCache(budget_tokens=6)
    cache.insert(["a", "b", "c", "d"])        # old
    cache.insert(["x", "y"])                  # newer
    cache.match(["x", "y"])
    cache.insert(["p", "q"])                  # 8 entries > 6: two go, the tail of the oldest sequence
    assert len(cache) == 6
    assert cache.match(["a", "b", "c", "d"]) == 2
    assert cache.match(["x", "y"]) == 2 and cache.match(["p", "q"]) == 2


# --------------------------------------------------------------------------------------------------------------------
# metrics text


def test_metrics_render():
    metrics = Metrics('lab "m"')
    metrics.observe_finished(streaming=True, prompt_tokens=10, completion_tokens=512, cached_tokens=9,
                             e2e_latency=0.5, ttft=0.15, spec_verify_ct=0)
    metrics.observe_finished(streaming=False, prompt_tokens=3, completion_tokens=7, cached_tokens=0,
                             e2e_latency=3.0, ttft=0.05, spec_verify_ct=2)
    metrics.observe_inter_token(0.012, 3)
    metrics.set_gauges(num_running_reqs=2, gen_throughput=123.5)
    lines = metrics.render().splitlines()
    req = 'model_name="lab \\"m\\"",engine_type="unified"'
    assert f'sglang:generation_tokens_total{{{req},is_streaming="true"}} 512.0' in lines
    assert f'sglang:generation_tokens_total{{{req},is_streaming="false"}} 7.0' in lines
    assert f'sglang:prompt_tokens_total{{{req},is_streaming="true"}} 10.0' in lines
    assert f'sglang:cached_tokens_total{{{req},cache_source="device"}} 9.0' in lines
    assert f'sglang:num_requests_total{{{req},is_streaming="false"}} 1.0' in lines
    assert f'sglang:spec_verify_calls_total{{{req}}} 2.0' in lines
    sched = f'{req},tp_rank="0",pp_rank="0",moe_ep_rank="0"'
    assert f"sglang:num_running_reqs{{{sched}}} 2.0" in lines
    assert f"sglang:gen_throughput{{{sched}}} 123.5" in lines
    assert "# TYPE sglang:time_to_first_token_seconds histogram" in lines
    assert f'sglang:time_to_first_token_seconds_bucket{{{req},is_streaming="true",le="0.1"}} 0.0' in lines
    assert f'sglang:time_to_first_token_seconds_bucket{{{req},is_streaming="true",le="0.2"}} 1.0' in lines
    assert f'sglang:time_to_first_token_seconds_bucket{{{req},is_streaming="true",le="+Inf"}} 1.0' in lines
    assert f'sglang:e2e_request_latency_seconds_count{{{req},is_streaming="false"}} 1.0' in lines
    assert f'sglang:inter_token_latency_seconds_bucket{{{req},le="0.004"}} 3.0' in lines
    assert f"sglang:inter_token_latency_seconds_sum{{{req}}} 0.012" in lines


# --------------------------------------------------------------------------------------------------------------------
# NCCL's interface rules and the TP handshake

IFACES = [("lo", "127.0.0.1"), ("eth0", "192.0.2.2"), ("docker0", "172.17.0.1"), ("thunderbolt0", "169.254.177.1"),
          ("thunderbolt10", "169.254.9.1")]
NAMES = [name for name, _addr in IFACES]


@pytest.mark.parametrize("spec, expected", [
    ("thunderbolt", ["thunderbolt0", "thunderbolt10"]),       # a prefix
    ("thunderbolt0", ["thunderbolt0"]),
    ("=thunderbolt0", ["thunderbolt0"]),                      # exact
    ("=lo", ["lo"]),
    ("^docker,lo", ["eth0", "thunderbolt0", "thunderbolt10"]),
    ("^=thunderbolt0", ["lo", "eth0", "docker0", "thunderbolt10"]),
    ("eth,thunder", ["eth0", "thunderbolt0", "thunderbolt10"]),
    ("eth0:5000", ["eth0"]),                                  # NCCL allows a :port
    ("ib", []),
    ("", NAMES),
])
def test_nccl_socket_ifname_rules(spec, expected):
    assert match_interfaces(spec, NAMES) == expected


def test_ipv4_interfaces_reads_this_host():
    assert ("lo", "127.0.0.1") in ipv4_interfaces()


def test_select_interface():
    assert select_interface({"NCCL_SOCKET_IFNAME": "=thunderbolt0"}, IFACES) == ("thunderbolt0", "169.254.177.1")
    assert select_interface({}, IFACES) == ("eth0", "192.0.2.2")            # not docker, not lo
    assert select_interface({}, [("lo", "127.0.0.1"), ("docker0", "x")]) == ("docker0", "x")
    assert select_interface({}, [("lo", "127.0.0.1")]) == ("lo", "127.0.0.1")
    assert select_interface({"NCCL_SOCKET_IFNAME": "thunderbolt9"}, IFACES) is None
    assert select_interface({}, []) is None


def test_gloo_interface_check():
    assert check_gloo_interface({}, IFACES) is None
    assert check_gloo_interface({"GLOO_SOCKET_IFNAME": "thunderbolt0"}, IFACES) is None
    assert "Unable to find address for: tb9" in check_gloo_interface({"GLOO_SOCKET_IFNAME": "tb9"}, IFACES)


def test_handshake_mismatches():
    rank0 = {"rank": 0, "tp_size": 2, "model_config": {"hidden_size": 896}, "speculative": {"algorithm": "EAGLE"}}
    assert handshake_mismatches(rank0, {**rank0, "rank": 1}) == []
    problems = handshake_mismatches(rank0, {**rank0, "rank": 1, "speculative": None, "tp_size": 4})
    assert problems == ["speculative: this rank has {'algorithm': 'EAGLE'}, rank 1 has None",
                        "tp_size: this rank has 2, rank 1 has 4"]
    assert handshake_mismatches(rank0, dict(rank0)) == ["both ranks are rank 0 (check --node-rank)"]


# --------------------------------------------------------------------------------------------------------------------
# request validation

USER = [{"role": "user", "content": "x"}]


@pytest.mark.parametrize("body, status, param", [
    ([], 400, None),
    ({"messages": USER}, 400, "model"),
    ({"model": "gpt-4", "messages": USER}, 404, None),
    ({"model": MODEL}, 400, "messages"),
    ({"model": MODEL, "messages": []}, 400, "messages"),
    ({"model": MODEL, "messages": [{"content": "x"}]}, 400, "messages.[0].role"),
    ({"model": MODEL, "messages": [{"role": "user", "content": 5}]}, 400, "messages.[0].content"),
    ({"model": MODEL, "messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, 400,
     "messages.[0].content"),
    ({"model": MODEL, "messages": USER, "max_tokens": 0}, 400, "max_tokens"),
    ({"model": MODEL, "messages": USER, "max_tokens": True}, 400, "max_tokens"),
    ({"model": MODEL, "messages": USER, "max_completion_tokens": "9"}, 400, "max_completion_tokens"),
    ({"model": MODEL, "messages": USER, "n": 2}, 400, "n"),
    ({"model": MODEL, "messages": USER, "stop": 3}, 400, "stop"),
    ({"model": MODEL, "messages": USER, "stop": ["a", 1]}, 400, "stop"),
    ({"model": MODEL, "messages": USER, "stream": "yes"}, 400, "stream"),
    ({"model": MODEL, "messages": USER, "stream_options": []}, 400, "stream_options"),
])
def test_chat_validation(body, status, param):
    with pytest.raises(request_checks.RequestError) as exc:
        request_checks.validate_chat(body, MODEL)
    assert (exc.value.status, exc.value.param) == (status, param)
    assert set(exc.value.body()["error"]) == {"message", "type", "param", "code"}


def test_chat_validation_accepts():
    fields = request_checks.validate_chat({"model": MODEL, "messages": USER, "max_completion_tokens": 5,
                                           "max_tokens": 9, "stop": "x", "stream": True,
                                           "stream_options": {"include_usage": True}}, MODEL)
    assert (fields["limit"], fields["stop"], fields["stream"], fields["include_usage"]) == (5, ["x"], True, True)
    assert request_checks.validate_chat({"model": MODEL, "messages": USER}, MODEL)["limit"] is None


@pytest.mark.parametrize("body, param", [
    ("text", None),
    ({}, None),
    ({"text": "a", "input_ids": [1]}, None),
    ({"text": ["a", "b"]}, "text"),
    ({"input_ids": []}, "input_ids"),
    ({"input_ids": [[1, 2]]}, "input_ids"),
    ({"input_ids": [1, -2]}, "input_ids"),
    ({"text": "a", "sampling_params": []}, "sampling_params"),
    ({"text": "a", "sampling_params": {"max_new_tokens": -1}}, "max_new_tokens"),
    ({"text": "a", "sampling_params": {"max_new_tokens": 1.5}}, "max_new_tokens"),
    ({"text": "a", "sampling_params": {"ignore_eos": "yes"}}, "ignore_eos"),
    ({"text": "a", "sampling_params": {"stop": {"a": 1}}}, "stop"),
    ({"text": "a", "stream": 1}, "stream"),
    ({"text": "a", "rid": 7}, "rid"),
])
def test_generate_validation(body, param):
    with pytest.raises(request_checks.RequestError) as exc:
        request_checks.validate_generate(body)
    assert (exc.value.status, exc.value.param) == (400, param)


def test_generate_validation_accepts():
    fields = request_checks.validate_generate({"input_ids": [5, 6, 7], "sampling_params": {"max_new_tokens": 0}})
    assert (fields["prompt_tokens"], fields["prompt_key"], fields["limit"]) == ([5, 6, 7], "ids:5,6,7", 0)
    assert request_checks.validate_generate({"text": "a b", "sampling_params": {"ignore_eos": True}})["limit"] == 128
    assert request_checks.validate_generate({"text": "a b"})["limit"] is None


def test_the_lab_server_accepts_exactly_the_choices_the_launch_checks_know():
    """The lab server stays standalone (it runs on the hosts' own Python), so it keeps its own copy of SGLang
    0.5.23's choice lists; the contract test proves _sglang_launch's against SGLang itself, this keeps the two equal."""
    from ansible_collections.inferlab.distributed.plugins.plugin_utils import _sglang_launch
    from inferlab.lab.server import args as labserver_args

    assert tuple(labserver_args.QUANTIZATION_CHOICES) == tuple(_sglang_launch.QUANTIZATION_CHOICES)
    assert tuple(labserver_args.KV_CACHE_DTYPE_CHOICES) == tuple(_sglang_launch.KV_CACHE_DTYPE_CHOICES)
