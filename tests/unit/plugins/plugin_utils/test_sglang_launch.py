# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

import copy
import json
import re
from pathlib import Path

import pytest

from ansible_collections.inferlab.distributed.plugins.plugin_utils import _sglang_launch as launch
from ansible_collections.inferlab.distributed.plugins.plugin_utils._sglang_launch import (
    SpecError,
    launch_argv,
    launch_environment,
    spec_problems,
    split_host_port,
)

REPO_ROOT = Path(__file__).resolve().parents[4]
MODULE = REPO_ROOT / "plugins" / "plugin_utils" / "_sglang_launch.py"
TABLE = json.loads((REPO_ROOT / "tests" / "unit" / "fixtures" / "sglang" / "specs.json").read_text())
CASES = {case["name"]: case for case in TABLE["cases"]}
RING = TABLE["ring"]


def ring_for(case):
    return None if case["ring_host"] is None else dict(RING, host=case["ring_host"])


def spec(name="tp2_rank0", **changes):
    """A deep copy of a fixture case's spec with keys changed (None removes a key)."""
    result = copy.deepcopy(CASES[name]["spec"])
    for key, value in changes.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = value
    return result


def problems_of(spec_, ring=RING, host="lab-a"):
    ring = None if ring is None else dict(ring, host=host)
    return [(p["field"], p["expected"], p["found"], p["message"]) for p in spec_problems(spec_, ring)]


# --- argv and environment: the shared table ------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(CASES))
def test_argv(name):
    assert launch_argv(CASES[name]["spec"]) == CASES[name]["argv"]


@pytest.mark.parametrize("name", list(CASES))
def test_environment_in_order(name):
    assert list(launch_environment(CASES[name]["spec"]).items()) == list(CASES[name]["environment"].items())


@pytest.mark.parametrize("name", list(CASES))
def test_table_specs_have_no_problems(name):
    assert spec_problems(CASES[name]["spec"], ring_for(CASES[name])) == []


def test_table_covers_every_flag_and_option():
    emitted = {arg for case in TABLE["cases"] for arg in case["argv"] if arg.startswith("--")}
    assert set(launch.OWN_FLAGS) <= emitted
    assert {key for case in TABLE["cases"] for key in case["spec"]} == set(launch._SPEC_SCHEMA)


def test_flags_are_long_and_in_canonical_order():
    argv = CASES["every_option"]["argv"]
    own = [arg for arg in argv[3:] if arg in launch.OWN_FLAGS]
    assert own == sorted(own, key=launch.OWN_FLAGS.index)
    assert all(re.match(r"^--[a-z0-9]+(-[a-z0-9]+)*$", flag) for flag in launch.OWN_FLAGS)


def test_values_are_strings_and_input_is_not_changed():
    given = spec("every_option")
    before = copy.deepcopy(given)
    argv = launch_argv(given)
    assert {type(arg) for arg in argv} == {str}
    assert given == before
    assert launch_environment(given)["OMP_NUM_THREADS"] == "4"


def test_speculative_flags_only_with_speculation():
    assert not [arg for arg in launch_argv(spec()) if arg.startswith("--speculative")]
    argv = launch_argv(spec(speculative={"algorithm": "NEXTN", "num_steps": 2, "eagle_topk": 1,
                                         "num_draft_tokens": 3}))
    start = argv.index("--speculative-algorithm")
    assert argv[start:start + 8] == ["--speculative-algorithm", "NEXTN", "--speculative-num-steps", "2",
                                     "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "3"]


def test_unset_and_null_options_are_left_out():
    argv = launch_argv(spec("replica", served_model_name=None, context_length=None, cuda_graph={"disable": False},
                            environment={}, speculative=None, extra_args=[]))
    assert argv == CASES["replica"]["argv"]
    nulls = {key: None for key in ("served_model_name", "dist_init_addr", "context_length", "quantization",
                                   "kv_cache_dtype", "mem_fraction_static", "chunked_prefill_size",
                                   "max_running_requests", "cuda_graph", "speculative", "link_interface",
                                   "nccl_debug", "environment")}
    explicit = dict(CASES["replica"]["spec"], **nulls)
    assert launch_argv(explicit) == CASES["replica"]["argv"]
    assert launch_environment(explicit) == {}


def test_environment_wins_over_ours_and_no_secret_is_in_argv():
    env = launch_environment(spec(environment={"NCCL_DEBUG": "TRACE", "NCCL_IB_DISABLE": "0"}))
    assert env == {"NCCL_SOCKET_IFNAME": "=thunderbolt0", "GLOO_SOCKET_IFNAME": "thunderbolt0",
                   "NCCL_IB_DISABLE": "0", "NCCL_DEBUG": "TRACE"}
    assert not set(launch.SECRET_FLAGS) & set(launch.OWN_FLAGS)


def test_a_roce_site_lets_nccl_use_rdma_and_an_environment_that_disagrees_is_a_problem():
    """nccl_ib_disable false (a RoCE site): NCCL_IB_DISABLE=0, on the same interface; the default keeps sockets. An
    environment entry that says otherwise than the spec is named, as for the interface."""
    assert launch_environment(spec(nccl_ib_disable=False))["NCCL_IB_DISABLE"] == "0"
    assert launch_environment(spec())["NCCL_IB_DISABLE"] == "1"
    problems = spec_problems(spec(nccl_ib_disable=False, environment={"NCCL_IB_DISABLE": "1"}))
    assert [p["field"] for p in problems] == ["environment.NCCL_IB_DISABLE"]
    assert "overrides what link_interface thunderbolt0 sets (0)" in problems[0]["message"]


# --- spec_problems -------------------------------------------------------------------------------------------------

NEXTN = {"algorithm": "NEXTN", "num_steps": 3, "eagle_topk": 1, "num_draft_tokens": 4}
SPEC_MESSAGE = "with speculative decoding SGLang 0.5.23 silently caps max_running_requests at 48 when it is unset; " \
               "set it explicitly, and to the same value in the run without speculation you compare against"
MAX_RUNNING = ("max_running_requests", "an integer (48 keeps SGLang's choice)", None, SPEC_MESSAGE)


def nextn(**changes):
    return spec("tp2_nextn_rank0", speculative=dict(NEXTN, **changes))


PROBLEMS = [
    ("tp_size_not_ring", spec(tp_size=1), [
        ("tp_size", "2 (nnodes 2 x gpus_per_node 1)", 1,
         "tp_size is 1 but nnodes x gpus_per_node is 2 x 1 = 2: tensor parallelism across nodes uses every GPU of "
         "every node once")]),
    ("nnodes_not_ring", spec(nnodes=1, tp_size=1), [
        ("nnodes", "2 (the ring size)", 1,
         "nnodes is 1 but the ring has 2 hosts (lab-a, lab-b): one SGLang node per ring host")]),
    ("two_gpus_per_node", spec(gpus_per_node=2), [
        ("tp_size", "4 (nnodes 2 x gpus_per_node 2)", 2,
         "tp_size is 2 but nnodes x gpus_per_node is 2 x 2 = 4: tensor parallelism across nodes uses every GPU of "
         "every node once")]),
    ("zero_gpus", spec(gpus_per_node=0, tp_size=0), [
        ("gpus_per_node", "at least 1", 0, "gpus_per_node must be at least 1")]),
    ("zero_nodes", spec("replica", nnodes=0, tp_size=0), [
        ("nnodes", "at least 1", 0, "nnodes must be at least 1"),
        ("nnodes", "2 (the ring size)", 0,
         "nnodes is 0 but the ring has 2 hosts (lab-a, lab-b): one SGLang node per ring host")]),
    ("node_rank_out_of_range", spec(node_rank=2), [
        ("node_rank", "0 to 1", 2, "node_rank 2 is out of range for nnodes 2")]),
    ("negative_node_rank", spec(node_rank=-1), [
        ("node_rank", "0 to 1", -1, "node_rank -1 is out of range for nnodes 2")]),
    ("node_rank_not_host_place", spec("tp2_rank1"), [
        ("node_rank", "0 (place of lab-a in the ring)", 1,
         "lab-a is ring host number 0 (the first is rank 0), so its node_rank is 0, not 1")]),
    ("port_zero", spec(port=0), [("port", "1 to 65535", 0, "port 0 is not a TCP port number")]),
    ("port_too_big", spec(port=70000), [("port", "1 to 65535", 70000, "port 70000 is not a TCP port number")]),
    ("no_dist_init_addr", spec(dist_init_addr=None), [
        ("dist_init_addr", "HOST:PORT on rank 0's direct-link address", None,
         "dist_init_addr is required with nnodes > 1: every rank meets rank 0 there")]),
    ("dist_init_addr_no_port", spec(dist_init_addr="169.254.177.1"), [
        ("dist_init_addr", "HOST:PORT (or [IPV6]:PORT)", "169.254.177.1",
         "dist_init_addr '169.254.177.1' is not HOST:PORT (IPv6 addresses go in brackets: [fe80::1]:50000)")]),
    ("dist_init_addr_bare_ipv6", spec(dist_init_addr="fd00::1:50000"), [
        ("dist_init_addr", "HOST:PORT (or [IPV6]:PORT)", "fd00::1:50000",
         "dist_init_addr 'fd00::1:50000' is not HOST:PORT (IPv6 addresses go in brackets: [fe80::1]:50000)")]),
    ("dist_init_addr_bad_port", spec(dist_init_addr="169.254.177.1:0"), [
        ("dist_init_addr", "a port from 1 to 65535", "169.254.177.1:0",
         "dist_init_addr port 0 is not a TCP port number")]),
    ("dist_init_addr_not_rank0", spec(dist_init_addr="169.254.77.1:50000"), [
        ("dist_init_addr", "169.254.177.1:50000 (rank 0's direct-link address)", "169.254.77.1:50000",
         "dist_init_addr points at 169.254.77.1, not at rank 0's direct-link address 169.254.177.1: every rank must "
         "meet rank 0 over the direct link")]),
    ("dist_init_addr_own_link_address", spec(dist_init_addr="169.254.177.2:50000"), [
        ("dist_init_addr", "169.254.177.1:50000 (rank 0's direct-link address)", "169.254.177.2:50000",
         "dist_init_addr points at 169.254.177.2 (that is lab-b's link address), not at rank 0's direct-link "
         "address 169.254.177.1: every rank must meet rank 0 over the direct link")]),
    ("dist_init_addr_reuses_http_port", spec(host="169.254.177.1", dist_init_addr="169.254.177.1:30000"), [
        ("dist_init_addr", "a port other than the HTTP port 30000", "169.254.177.1:30000",
         "rank 0 would listen on port 30000 twice: for HTTP on 169.254.177.1 and for the distributed init on "
         "169.254.177.1")]),
    ("dist_init_addr_reuses_port_on_any", spec(host="0.0.0.0", dist_init_addr="169.254.177.1:30000"), [
        ("dist_init_addr", "a port other than the HTTP port 30000", "169.254.177.1:30000",
         "rank 0 would listen on port 30000 twice: for HTTP on 0.0.0.0 and for the distributed init on "
         "169.254.177.1")]),
    ("quantization_nvfp4", spec(quantization="nvfp4"), [
        ("quantization", "one of SGLang 0.5.23's quantization choices", "nvfp4",
         "nvfp4 is not a quantization method in SGLang 0.5.23, it is a KV-cache dtype: set kv_cache_dtype: nvfp4 "
         "for an NVFP4 KV cache; an NVFP4 checkpoint from ModelOpt is quantization: modelopt_fp4")]),
    ("quantization_unknown", spec(quantization="int3"), [
        ("quantization", "one of SGLang 0.5.23's quantization choices", "int3",
         "SGLang 0.5.23 rejects --quantization int3; its choices: " + ", ".join(launch.QUANTIZATION_CHOICES))]),
    ("kv_cache_dtype_unknown", spec(kv_cache_dtype="fp8"), [
        ("kv_cache_dtype", "one of auto, fp8_e5m2, fp8_e4m3, mxfp8, bf16, bfloat16, nvfp4, fp4_mx_block16", "fp8",
         "SGLang 0.5.23 rejects --kv-cache-dtype fp8; its choices: auto, fp8_e5m2, fp8_e4m3, mxfp8, bf16, bfloat16, "
         "nvfp4, fp4_mx_block16")]),
    ("mem_fraction_one", spec(mem_fraction_static=1), [
        ("mem_fraction_static", "between 0 and 1 (exclusive)", 1,
         "mem_fraction_static is the share of GPU memory for weights and KV cache: more than 0, less than 1")]),
    ("mem_fraction_zero", spec(mem_fraction_static=0.0), [
        ("mem_fraction_static", "between 0 and 1 (exclusive)", 0.0,
         "mem_fraction_static is the share of GPU memory for weights and KV cache: more than 0, less than 1")]),
    ("context_length_zero", spec(context_length=0), [
        ("context_length", "at least 1", 0, "context_length must be at least 1")]),
    ("max_running_requests_zero", spec(max_running_requests=0), [
        ("max_running_requests", "at least 1", 0, "max_running_requests must be at least 1")]),
    ("chunked_prefill_zero", spec(chunked_prefill_size=0), [
        ("chunked_prefill_size", "at least 1, or -1 (no chunking)", 0,
         "chunked_prefill_size must be a positive token count, or -1 to turn chunked prefill off")]),
    ("chunked_prefill_minus_two", spec(chunked_prefill_size=-2), [
        ("chunked_prefill_size", "at least 1, or -1 (no chunking)", -2,
         "chunked_prefill_size must be a positive token count, or -1 to turn chunked prefill off")]),
    ("cuda_graph_max_bs_when_disabled", spec(cuda_graph={"disable": True, "max_bs": 8}), [
        ("cuda_graph.max_bs", "null when cuda_graph.disable is true", 8,
         "cuda_graph.max_bs has no effect when the CUDA graphs are disabled; leave it unset")]),
    ("cuda_graph_max_bs_zero", spec(cuda_graph={"max_bs": 0}), [
        ("cuda_graph.max_bs", "at least 1", 0, "cuda_graph.max_bs must be at least 1")]),
    ("speculative_mtp", nextn(algorithm="MTP"), [
        ("speculative.algorithm", "one of EAGLE, EAGLE3, NEXTN, STANDALONE", "MTP",
         "SGLang 0.5.23 rejects --speculative-algorithm MTP (Unknown speculative algorithm name); "
         "multi-token-prediction (MTP) checkpoints run as NEXTN")]),
    ("speculative_unknown", nextn(algorithm="MEDUSA"), [
        ("speculative.algorithm", "one of EAGLE, EAGLE3, NEXTN, STANDALONE", "MEDUSA",
         "SGLang 0.5.23 rejects --speculative-algorithm MEDUSA (Unknown speculative algorithm name)")]),
    ("speculative_lower_case", nextn(algorithm="nextn"), [
        ("speculative.algorithm", "NEXTN", "nextn",
         "write the algorithm in capitals (NEXTN): SGLang upper-cases it, but only after some of its checks "
         "compared the name as given")]),
    ("speculative_none", nextn(algorithm="NONE"), [
        ("speculative.algorithm", "one of EAGLE, EAGLE3, NEXTN, STANDALONE", "NONE",
         "speculative algorithm NONE turns speculation off; set speculative to null instead")]),
    ("speculative_dflash", nextn(algorithm="dflash"), [
        ("speculative.algorithm", "one of EAGLE, EAGLE3, NEXTN, STANDALONE", "dflash",
         "DFLASH is a valid SGLang algorithm, but it resolves its draft settings in its own way, which these "
         "pre-launch checks do not model; supported here: EAGLE, EAGLE3, NEXTN, STANDALONE")]),
    ("speculative_draft_tokens_adjusted", nextn(num_draft_tokens=5), [
        ("speculative.num_draft_tokens", "4 (num_steps + 1 with eagle_topk 1)", 5,
         "with eagle_topk 1 SGLang 0.5.23 silently changes num_draft_tokens 5 to num_steps + 1 = 4; set it to 4")]),
    ("speculative_draft_tokens_too_many_for_tree", nextn(num_steps=2, eagle_topk=2, num_draft_tokens=8), [
        ("speculative.num_draft_tokens", "at most 7", 8,
         "2 draft steps with eagle_topk 2 propose 6 candidate tokens, so num_draft_tokens can be at most 7; "
         "SGLang fails at the first decode step otherwise")]),
    ("speculative_unset_values", spec("tp2_nextn_rank0", speculative={"algorithm": "EAGLE", "num_steps": 3}), [
        ("speculative.eagle_topk", "an integer of at least 1", None,
         "speculative.eagle_topk is unset: SGLang would choose num_steps, eagle_topk and num_draft_tokens from the "
         "model architecture (and fail if only some are set); give all three, e.g. NEXTN 3/1/4"),
        ("speculative.num_draft_tokens", "an integer of at least 1", None,
         "speculative.num_draft_tokens is unset: SGLang would choose num_steps, eagle_topk and num_draft_tokens "
         "from the model architecture (and fail if only some are set); give all three, e.g. NEXTN 3/1/4")]),
    ("speculative_too_small", nextn(num_steps=0, eagle_topk=0, num_draft_tokens=1), [
        ("speculative.num_steps", "at least 1", 0, "speculative.num_steps must be at least 1"),
        ("speculative.eagle_topk", "at least 1", 0, "speculative.eagle_topk must be at least 1"),
        ("speculative.num_draft_tokens", "at least 2", 1, "speculative.num_draft_tokens must be at least 2")]),
    ("speculative_eagle3_without_draft", nextn(algorithm="EAGLE3"), [
        ("speculative.draft_model_path", "the draft model's path", None,
         "EAGLE3 runs a separate draft model: set speculative.draft_model_path")]),
    ("speculative_without_max_running_requests", spec(speculative=NEXTN), [MAX_RUNNING]),
    ("secret_in_extra_args", spec(extra_args=["--api-key=s3cret", "--ssl-keyfile-password", "x"]), [
        ("extra_args", "no secret on the command line", "--api-key",
         "--api-key carries a secret, and a command line shows in ps and in the start records; pass secrets "
         "another way"),
        ("extra_args", "no secret on the command line", "--ssl-keyfile-password",
         "--ssl-keyfile-password carries a secret, and a command line shows in ps and in the start records; "
         "pass secrets another way")]),
    ("own_flag_in_extra_args", spec(extra_args=["--tp-size", "4", "--tensor-parallel-size=4",
                                                "--disable-cuda-graph"]), [
        ("extra_args", "no flag the spec already sets", "--tp-size",
         "--tp-size in extra_args would override --tp-size, which the spec sets; set it through the spec"),
        ("extra_args", "no flag the spec already sets", "--tensor-parallel-size",
         "--tensor-parallel-size in extra_args would override --tp-size, which the spec sets; set it through the "
         "spec"),
        ("extra_args", "no flag the spec already sets", "--disable-cuda-graph",
         "--disable-cuda-graph in extra_args would override --disable-decode-cuda-graph, which the spec sets; set "
         "it through the spec")]),
    ("abbreviation_in_extra_args", spec(extra_args=["--tp", "2", "--cuda-graph-max-bs", "8", "-h", "--"]), [
        ("extra_args", "full flag names", "--tp", "--tp is only an abbreviation (of --tp-size): write flags in full"),
        ("extra_args", "full flag names", "--cuda-graph-max-bs",
         "--cuda-graph-max-bs is only an abbreviation (of --cuda-graph-max-bs-decode): write flags in full")]),
    ("no_link_interface", spec(link_interface=None), [
        ("link_interface", "the direct-link interface, e.g. thunderbolt0", None,
         "link_interface is required with nnodes > 1: without it NCCL and Gloo pick an interface themselves, often "
         "not the direct link")]),
    ("link_interface_with_nccl_syntax", spec(link_interface="=thunderbolt0"), [
        ("link_interface", "an interface name of 2 to 15 letters, digits, '_', '.', '@' or '-'", "=thunderbolt0",
         "'=thunderbolt0' is not an interface name NCCL and Gloo can both select exactly")]),
    ("link_interface_list", spec(link_interface="tb0,tb1"), [
        ("link_interface", "an interface name of 2 to 15 letters, digits, '_', '.', '@' or '-'", "tb0,tb1",
         "'tb0,tb1' is not an interface name NCCL and Gloo can both select exactly")]),
    ("link_interface_one_character", spec(link_interface="t"), [
        ("link_interface", "an interface name of 2 to 15 letters, digits, '_', '.', '@' or '-'", "t",
         "'t' is not an interface name NCCL and Gloo can both select exactly")]),
    ("link_interface_too_long", spec(link_interface="thunderbolt0123456"), [
        ("link_interface", "an interface name of 2 to 15 letters, digits, '_', '.', '@' or '-'",
         "thunderbolt0123456", "'thunderbolt0123456' is not an interface name NCCL and Gloo can both select "
         "exactly")]),
    ("nccl_debug_lower_case", spec(nccl_debug="info"), [
        ("nccl_debug", "one of VERSION, WARN, INFO, TRACE", "info", "NCCL_DEBUG takes VERSION, WARN, INFO, TRACE")]),
    ("nccl_collectives_without_info", spec(nccl_debug="WARN", nccl_collectives=True), [
        ("nccl_collectives", "nccl_debug INFO or TRACE", "WARN",
         "NCCL writes its COLL lines at INFO: nccl_collectives needs nccl_debug INFO or TRACE, found WARN")]),
    ("nccl_collectives_without_nccl_debug", spec(nccl_debug=None, nccl_collectives=True), [
        ("nccl_collectives", "nccl_debug INFO or TRACE", None,
         "NCCL writes its COLL lines at INFO: nccl_collectives needs nccl_debug INFO or TRACE, found unset")]),
    ("nccl_inspector_relative_paths", spec(nccl_inspector={"plugin": "libnccl-profiler-inspector.so",
                                                           "dump_dir": "logs"}), [
        ("nccl_inspector.plugin", "an absolute path", "libnccl-profiler-inspector.so",
         "nccl_inspector.plugin must be an absolute path, found 'libnccl-profiler-inspector.so'"),
        ("nccl_inspector.dump_dir", "an absolute path", "logs",
         "nccl_inspector.dump_dir must be an absolute path, found 'logs'")]),
    ("environment_moves_nccl", spec(environment={"NCCL_SOCKET_IFNAME": "eth0", "NCCL_IB_DISABLE": "1"}), [
        ("environment.NCCL_SOCKET_IFNAME", "=thunderbolt0", "eth0",
         "environment.NCCL_SOCKET_IFNAME overrides what link_interface thunderbolt0 sets (=thunderbolt0); the "
         "record would name one interface while NCCL used another: set link_interface instead")]),
]


@pytest.mark.parametrize(("spec_", "expected"), [(s, e) for _n, s, e in PROBLEMS], ids=[n for n, _s, _e in PROBLEMS])
def test_problem(spec_, expected):
    assert problems_of(spec_) == expected


def test_problem_table_covers_every_field_checked():
    fields = {field for _n, _s, expected in PROBLEMS for field, *_rest in expected}
    source = MODULE.read_text()
    checked = set(re.findall(r'_problem\(problems, "([a-z_.]+)"', source))
    checked |= {"speculative." + key for key in ("num_steps", "eagle_topk", "num_draft_tokens")}
    checked.add("environment.NCCL_SOCKET_IFNAME")
    assert checked - {"speculative.", "environment.", "nccl_inspector."} <= fields


def test_several_problems_at_once_in_check_order():
    broken = spec(tp_size=3, port=0, quantization="nvfp4", speculative=dict(NEXTN, num_draft_tokens=6),
                  extra_args=["--api-key", "k"], link_interface=None)
    assert [field for field, *_rest in problems_of(broken)] == [
        "tp_size", "port", "quantization", "speculative.num_draft_tokens", "max_running_requests", "extra_args",
        "link_interface"]


def test_problems_are_plain_json():
    broken = spec(tp_size=3, speculative=NEXTN, dist_init_addr="x")
    problems = spec_problems(broken, dict(RING, host="lab-a"))
    assert json.loads(json.dumps(problems)) == problems
    assert all(set(problem) == {"field", "expected", "found", "message"} for problem in problems)


def test_ring_checks_need_a_ring():
    replica_like = spec(dist_init_addr="10.0.0.9:50000", tp_size=2, nnodes=2)
    assert problems_of(replica_like, ring=None) == []
    assert [p[0] for p in problems_of(replica_like)] == ["dist_init_addr"]


def test_ring_without_host_skips_the_place_check():
    assert spec_problems(CASES["tp2_rank1"]["spec"], RING) == []


def test_ring_by_size_and_rank0_address():
    """The sglang_tp role's ring: no order, so no place check, but the size and rank 0's address."""
    ring = {"size": 2, "rank0_link_address": "169.254.177.1", "link_addresses": RING["link_addresses"]}
    assert spec_problems(CASES["tp2_rank1"]["spec"], ring) == []
    assert [(p["field"], p["message"]) for p in spec_problems(spec(nnodes=3, tp_size=3), ring)] == [
        ("nnodes", "nnodes is 3 but the ring has 2 hosts: one SGLang node per ring host")]
    assert [p["message"] for p in spec_problems(spec(dist_init_addr="169.254.177.2:50000"),
                                                {"size": 2, "rank0_link_address": "169.254.177.1"})] == [
        "dist_init_addr points at 169.254.177.2, not at rank 0's direct-link address 169.254.177.1: every rank must "
        "meet rank 0 over the direct link"]


def test_host_outside_the_ring():
    assert problems_of(spec(), host="lab-c") == [
        ("node_rank", "a ring host", "lab-c", "lab-c is not in the ring (lab-a, lab-b)")]


def test_ipv6_ring():
    ring = {"hosts": ["a", "b"], "link_addresses": {"a": "fd00:177::1", "b": "fd00:177::2"}, "host": "b"}
    ok = spec("tp2_rank1", dist_init_addr="[fd00:177:0::1]:50000", host="fd00:77::2")
    assert spec_problems(ok, ring) == []
    assert [p["field"] for p in spec_problems(spec("tp2_rank1", dist_init_addr="[fd00:177::2]:50000"), ring)] == [
        "dist_init_addr"]


def test_eagle_topk_above_one_within_the_tree_is_fine():
    for steps, topk, draft in ((1, 4, 5), (3, 4, 37), (2, 2, 7), (5, 8, 64)):
        assert problems_of(nextn(num_steps=steps, eagle_topk=topk, num_draft_tokens=draft)) == []


@pytest.mark.parametrize("algorithm", ["EAGLE", "NEXTN", "EAGLE3", "STANDALONE"])
def test_eagle_family_accepted(algorithm):
    assert problems_of(nextn(algorithm=algorithm, draft_model_path="/models/draft")) == []


def test_constants_have_no_duplicates():
    for constant in (launch.QUANTIZATION_CHOICES, launch.KV_CACHE_DTYPE_CHOICES, launch.SPECULATIVE_ALGORITHMS,
                     launch.OWN_FLAGS):
        assert len(set(constant)) == len(constant)
    assert "nvfp4" not in launch.QUANTIZATION_CHOICES and "nvfp4" in launch.KV_CACHE_DTYPE_CHOICES
    assert set(launch.EAGLE_FAMILY) <= set(launch.SPECULATIVE_ALGORITHMS) and "MTP" not in launch.SPECULATIVE_ALGORITHMS


# --- split_host_port -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "expected"), [
    ("169.254.177.1:50000", ("169.254.177.1", 50000)),
    ("lab-a:1", ("lab-a", 1)),
    ("[fd00::1]:50000", ("fd00::1", 50000)),
    ("[::1]:99999", ("::1", 99999)),          # the range is the caller's check
    ("169.254.177.1", None),
    ("169.254.177.1:", None),
    (":50000", None),
    ("fd00::1:50000", None),
    ("[fd00::1]50000", None),
    ("[fd00::1", None),
    ("[]:50000", None),
    ("host:5x", None),
    ("host:-1", None),
    ("host:123456", None),
    ("host:\u0665", None),                    # a non-ASCII digit
    ("", None),
])
def test_split_host_port(text, expected):
    assert split_host_port(text) == expected


# --- malformed specs -----------------------------------------------------------------------------------------------

MALFORMED = [
    ("not_a_dict", ["--tp-size", "2"], "spec must be a dict, got list"),
    ("missing_model_path", spec(model_path=None), "spec is missing the required key model_path"),
    ("missing_launcher", spec(launcher=None), "spec is missing the required key launcher"),
    ("empty_launcher", spec(launcher=[]), "launcher must be a non-empty list of strings"),
    ("launcher_string", spec(launcher="python3 -m sglang.launch_server"),
     "launcher must be a list of strings, got 'python3 -m sglang.launch_server'"),
    ("tp_size_string", spec(tp_size="2"), "tp_size must be an integer, got '2'"),
    ("tp_size_bool", spec(tp_size=True), "tp_size must be an integer, got True"),
    ("port_float", spec(port=30000.0), "port must be an integer, got 30000.0"),
    ("empty_host", spec(host=""), "host must be a non-empty string, got ''"),
    ("context_length_text", spec(context_length="200k"), "context_length must be an integer or null, got '200k'"),
    ("mem_fraction_text", spec(mem_fraction_static="0.8"), "mem_fraction_static must be a number or null, got '0.8'"),
    ("metrics_string", spec(enable_metrics="yes"), "enable_metrics must be true or false, got 'yes'"),
    ("extra_args_string", spec(extra_args="--log-level debug"), "extra_args must be a list of strings"),
    ("extra_args_number", spec(extra_args=["--watchdog-timeout", 600]), "extra_args must be a list of strings"),
    ("unknown_key", spec(kv_cache_type="fp8_e4m3"), "spec has unknown keys kv_cache_type; known keys: launcher,"),
    ("api_key", spec(api_key="s3cret"), "spec has unknown keys api_key"),
    ("cuda_graph_list", spec(cuda_graph=[True]), "cuda_graph must be a dict, got list"),
    ("cuda_graph_unknown", spec(cuda_graph={"max_batch": 8}), "cuda_graph has unknown keys max_batch"),
    ("cuda_graph_disable_string", spec(cuda_graph={"disable": "true"}),
     "cuda_graph.disable must be true or false, got 'true'"),
    ("speculative_string", spec(speculative="NEXTN"), "speculative must be a dict, got str"),
    ("speculative_no_algorithm", spec(speculative={"num_steps": 3}),
     "speculative is missing the required key algorithm"),
    ("speculative_steps_string", spec(speculative=dict(NEXTN, num_steps="3")),
     "speculative.num_steps must be an integer or null, got '3'"),
    ("environment_list", spec(environment=["A=1"]), "environment must be a dict of NAME: value, got list"),
    ("environment_bad_name", spec(environment={"NCCL DEBUG": "INFO"}),
     "environment: 'NCCL DEBUG' is not a valid variable name"),
    ("environment_bool", spec(environment={"NCCL_DEBUG": True}),
     "environment.NCCL_DEBUG must be a string or an integer, got True"),
    ("environment_none", spec(environment={"NCCL_DEBUG": None}),
     "environment.NCCL_DEBUG must be a string or an integer, got None"),
]


@pytest.mark.parametrize(("spec_", "message"), [(s, m) for _n, s, m in MALFORMED], ids=[n for n, _s, _m in MALFORMED])
@pytest.mark.parametrize("function", [launch_argv, launch_environment, spec_problems])
def test_malformed_spec(function, spec_, message):
    with pytest.raises(SpecError) as caught:
        function(spec_)
    assert str(caught.value).startswith(message)


@pytest.mark.parametrize(("ring", "message"), [
    (["lab-a", "lab-b"], "ring must be a dict, got list"),
    ({"hosts": ["lab-a"]}, "ring needs rank0_link_address, or hosts and link_addresses with rank 0's entry"),
    ({"size": 2}, "ring needs rank0_link_address, or hosts and link_addresses with rank 0's entry"),
    ({"rank0_link_address": "169.254.177.1"}, "ring needs size (at least 1) or hosts"),
    ({"size": 0, "rank0_link_address": "169.254.177.1"}, "ring needs size (at least 1) or hosts"),
    ({"size": "2", "rank0_link_address": "169.254.177.1"}, "ring.size must be an integer or null, got '2'"),
    ({"hosts": [], "link_addresses": {}}, "ring.hosts must be a non-empty list of distinct host names"),
    ({"hosts": ["a", "a"], "link_addresses": {"a": "x"}}, "ring.hosts must be a non-empty list of distinct host names"),
    ({"hosts": "lab-a", "link_addresses": {}}, "ring.hosts must be a list of strings or null, got 'lab-a'"),
    ({"hosts": ["lab-a", "lab-b"], "link_addresses": {"lab-b": "169.254.177.2"}},
     "ring needs rank0_link_address, or hosts and link_addresses with rank 0's entry"),
    ({"hosts": ["lab-a"], "link_addresses": ["169.254.177.1"]}, "ring.link_addresses must be a dict of host: address"),
    ({"hosts": ["lab-a"], "link_addresses": {"lab-a": ""}}, "ring.link_addresses must be a dict of host: address"),
    (dict(RING, size=3), "ring.size is 3 but ring.hosts has 2 hosts"),
    (dict(RING, rank0_link_address="169.254.177.2"),
     "ring.rank0_link_address 169.254.177.2 is not ring.link_addresses[lab-a] 169.254.177.1"),
    ({"size": 2, "rank0_link_address": "169.254.177.1", "host": "lab-a"},
     "ring.host needs ring.hosts, the ordered ring, to find its place"),
    (dict(RING, hosts_order=["lab-a"]), "ring has unknown keys hosts_order"),
    (dict(RING, host=0), "ring.host must be a non-empty string or null, got 0"),
])
def test_malformed_ring(ring, message):
    with pytest.raises(SpecError) as caught:
        spec_problems(spec(), ring)
    assert str(caught.value).startswith(message)


# --- standard library only (the contract test loads the file alone in SGLang's own venv) ----------------------------

def test_module_imports_nothing_but_the_standard_library():
    imports = re.findall(r"^\s*(?:from|import)\s+([\w.]+)", MODULE.read_text(), re.MULTILINE)
    assert set(imports) == {"__future__", "ipaddress", "re"}
