# -*- coding: utf-8 -*-
# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The SGLang launch command line and environment of one rank, and the checks to run before launching it.

Over 600 lines on purpose: tests/contract loads this one file alone in SGLang's own venv (no Ansible), and its spec
reading, argv and checks share one schema and one set of SGLang 0.5.23 facts.

Written against SGLang 0.5.23 and proved against it by tests/contract (its own parser, choice lists and speculative
handling). Independent of the process manager: callers get an argv list and an environment dict.

Rank spec: a dict, one per ring host (the sglang_tp role builds it from inventory variables). Required keys:
  launcher              argv prefix, a non-empty list of strings: ["python3", "-m", "sglang.launch_server"], or
                        ["python3", "-m", "inferlab.lab.server"] for the lab's stand-in server
  model_path            str
  tp_size, nnodes, node_rank   int
  host, port            where the HTTP server listens (str, int)
Optional keys (default in brackets):
  served_model_name     str [None: SGLang serves the model path as the name]
  gpus_per_node         int [1]; only used by the checks: tp_size must be nnodes * gpus_per_node
  dist_init_addr        "HOST:PORT" or "[IPV6]:PORT" [None]; needed when nnodes > 1, HOST = rank 0's link address
  context_length        int [None]      quantization      str [None]      kv_cache_dtype   str [None]
  mem_fraction_static   number [None]   chunked_prefill_size  int [None]  (-1 turns chunked prefill off)
  max_running_requests  int [None]; needed with speculation (see _check_speculative)
  cuda_graph            {disable: bool [false], max_bs: int [None]} [None]; disable turns off the decode and prefill
                        graphs, max_bs is the decode graph's largest batch (SGLang 0.5.23 has no --cuda-graph-max-bs
                        any more: argparse would call that abbreviation ambiguous)
  disable_flashinfer_autotune, enable_metrics, enable_cache_report   bool [false]
  speculative           None, or {algorithm: str, num_steps: int, eagle_topk: int, num_draft_tokens: int,
                        draft_model_path: str [None]} [None]
  extra_args            list of str [[]], appended verbatim after ours
  link_interface        str [None]: the direct-link interface NCCL and Gloo must use (needed when nnodes > 1)
  nccl_debug            VERSION | WARN | INFO | TRACE [None]
  nccl_collectives      bool [false]: NCCL logs a timestamped COLL line per collective call (needs nccl_debug INFO or
                        TRACE); see COLLECTIVE_TRACE_ENVIRONMENT
  nccl_inspector        None, or {plugin: str, dump_dir: str} [None]: NCCL Inspector (the profiler plugin at the
                        absolute path plugin) dumping each collective's timing to dump_dir (absolute); see
                        inspector_environment
  environment           {NAME: str or int} [{}], laid over the variables built here
Any other key is an error, so a misspelt option fails instead of being dropped.

Ring (for spec_problems; None for a single-host replica), a dict of:
  size                  the number of ring hosts (may be left out when hosts is given)
  rank0_link_address    rank 0's address on the direct link (may be left out when hosts and link_addresses are given)
  link_addresses        optional {host: its address on the direct link}: names the host a wrong address belongs to
  hosts                 optional: the inventory group `ring`, in order (the first is rank 0)
  host                  optional, with hosts: the ring host this spec is for (its node_rank must be its place)

No secrets in argv: anything on a command line shows in `ps` and in the process manager's start records, so this
builder has no api_key option, and spec_problems refuses SGLang's secret-carrying flags in extra_args
(--api-key, --admin-api-key, --ssl-keyfile-password, --watermark-config). Pass a key through the environment or a
file if one is ever needed; the sglang_tp role passes nothing secret.

Malformed input (a missing required key, a wrong type, an unknown key) raises SpecError. Values that are well-formed
but wrong (a TP size that does not match the ring, a quantization SGLang rejects, speculative settings SGLang would
silently change) are returned by spec_problems as {field, expected, found, message}: the caller maps `field` (a spec
key, dotted for nested ones) to the variable the operator should set.

Standard library only, Python 3.8+ syntax: this file may run on managed hosts.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ipaddress
import re

SGLANG_VERSION = "0.5.23"

# sglang 0.5.23, sglang/srt/arg_groups/choices.py QUANTIZATION_CHOICES (re-exported by sglang/srt/server_args.py),
# in SGLang's order. tests/contract proves it equals SGLang's list and the --quantization choices.
QUANTIZATION_CHOICES = (
    "awq", "fp8", "mxfp8", "gptq", "gptq_marlin", "awq_marlin", "bitsandbytes", "gguf", "modelopt", "modelopt_fp8",
    "modelopt_fp4", "nvfp4_online", "modelopt_mixed", "petit_nvfp4", "w8a8_int8", "w8a8_fp8", "moe_wna16", "w4afp8",
    "mxfp4", "auto-round", "auto-round-int8", "compressed-tensors", "modelslim", "mxfp_w4a8", "quark",
    "quark_int4fp8_moe", "quark_mxfp4", "mlx_q4", "mlx_q8", "unquant", "humming",
)

# sglang 0.5.23, sglang/srt/arg_groups/fields/model.py: the choices of the kv_cache_dtype field (--kv-cache-dtype).
KV_CACHE_DTYPE_CHOICES = ("auto", "fp8_e5m2", "fp8_e4m3", "mxfp8", "bf16", "bfloat16", "nvfp4", "fp4_mx_block16")

# sglang 0.5.23: the names SpeculativeAlgorithm.from_string accepts (sglang/srt/speculative/spec_info.py, after
# upper-casing): the enum members, and NEXTN, an alias of EAGLE (spec_registry._RESERVED_ALIASES). MTP is not one.
SPECULATIVE_ALGORITHMS = ("DFLASH", "UNO", "DSPARK", "EAGLE", "EAGLE3", "FROZEN_KV_MTP", "STANDALONE", "NGRAM", "NONE",
                          "NEXTN")

# The algorithms SGLang 0.5.23 resolves in _handle_eagle_family (sglang/srt/arg_groups/speculative_hook.py): the
# only ones whose adjustments spec_problems models. The others resolve num_steps, eagle_topk and num_draft_tokens
# their own way (DFLASH forces num_steps to 1, for one), so they are refused rather than launched unchecked.
EAGLE_FAMILY = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE")

# EAGLE3 and STANDALONE always run a separate draft model; EAGLE/NEXTN read the draft layers from the target
# checkpoint only for the architectures SGLang lists in _handle_eagle_family.
NEEDS_DRAFT_MODEL = ("EAGLE3", "STANDALONE")

# What SGLang 0.5.23 sets max_running_requests to for EAGLE-family speculation when it is unset.
SGLANG_SPECULATIVE_MAX_RUNNING_REQUESTS = 48

NCCL_DEBUG_LEVELS = ("VERSION", "WARN", "INFO", "TRACE")

# SGLang 0.5.23 flags that carry a secret (its ServerArgs repr hides the watermark ones).
SECRET_FLAGS = ("--api-key", "--admin-api-key", "--ssl-keyfile-password", "--watermark-config")

# Every flag launch_argv may emit, in its canonical order.
OWN_FLAGS = (
    "--model-path", "--served-model-name", "--tp-size", "--nnodes", "--node-rank", "--dist-init-addr", "--host",
    "--port", "--context-length", "--quantization", "--kv-cache-dtype", "--mem-fraction-static",
    "--chunked-prefill-size", "--max-running-requests", "--disable-decode-cuda-graph", "--disable-prefill-cuda-graph",
    "--cuda-graph-max-bs-decode", "--disable-flashinfer-autotune", "--speculative-algorithm",
    "--speculative-num-steps", "--speculative-eagle-topk", "--speculative-num-draft-tokens",
    "--speculative-draft-model-path", "--enable-metrics", "--enable-cache-report",
)

# SGLang 0.5.23 spellings that set the same option as one of ours, so they would override it from extra_args.
OVERRIDING_FLAGS = {
    "--model": "--model-path",
    "--tensor-parallel-size": "--tp-size",
    "--nccl-init-addr": "--dist-init-addr",
    "--speculative-draft-model": "--speculative-draft-model-path",
    "--disable-cuda-graph": "--disable-decode-cuda-graph",
    "--cuda-graph-backend-decode": "--disable-decode-cuda-graph",
    "--cuda-graph-backend-prefill": "--disable-prefill-cuda-graph",
    "--cuda-graph-config": "--cuda-graph-max-bs-decode",
}

# Linux interface names: at most IFNAMSIZ - 1 = 15 bytes, no '/', ':' or whitespace. NCCL reads ',' as a list
# separator and a leading '=' or '^' as match syntax; Gloo (torch 2.13) splits on ',' and ignores a one-character
# value altogether, falling back to the hostname's interface.
_IFNAME = re.compile(r"^[A-Za-z0-9_.@-]{2,15}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PORT = re.compile(r"^[0-9]{1,5}$")

_NOT_GIVEN = object()


class SpecError(ValueError):
    """The rank spec or the ring is malformed: a missing key, a wrong type or an unknown key."""


# --- reading the spec ---------------------------------------------------------------------------------------------

def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _check_type(value, kind, where):
    """Raise SpecError unless value is of kind: str, int, number, bool, strlist; "kind?" also allows None."""
    optional = kind.endswith("?")
    kind = kind.rstrip("?")
    if value is None and optional:
        return value
    ok = {
        "str": isinstance(value, str) and value != "",
        "int": _is_int(value),
        "number": _is_int(value) or isinstance(value, float),
        "bool": isinstance(value, bool),
        "strlist": isinstance(value, list) and all(isinstance(item, str) for item in value),
    }[kind]
    if not ok:
        wanted = {"str": "a non-empty string", "int": "an integer", "number": "a number", "bool": "true or false",
                  "strlist": "a list of strings"}[kind]
        raise SpecError("%s must be %s%s, got %r" % (where, wanted, " or null" if optional else "", value))
    return value


def _read(mapping, schema, where):
    """The mapping checked against schema {key: (kind, default)}; default _NOT_GIVEN means required.

    Kind None leaves the value to the caller (nested dicts).
    """
    if not isinstance(mapping, dict):
        raise SpecError("%s must be a dict, got %s" % (where, type(mapping).__name__))
    unknown = sorted(str(key) for key in mapping if key not in schema)
    if unknown:
        raise SpecError("%s has unknown keys %s; known keys: %s" % (where, ", ".join(unknown), ", ".join(schema)))
    result = {}
    for key, (kind, default) in schema.items():
        if key not in mapping:
            if default is _NOT_GIVEN:
                raise SpecError("%s is missing the required key %s" % (where, key))
            result[key] = default
        elif kind is None:
            result[key] = mapping[key]
        else:
            result[key] = _check_type(mapping[key], kind, key if where == "spec" else "%s.%s" % (where, key))
    return result


_SPEC_SCHEMA = {
    "launcher": ("strlist", _NOT_GIVEN),
    "model_path": ("str", _NOT_GIVEN),
    "served_model_name": ("str?", None),
    "tp_size": ("int", _NOT_GIVEN),
    "nnodes": ("int", _NOT_GIVEN),
    "node_rank": ("int", _NOT_GIVEN),
    "gpus_per_node": ("int", 1),
    "dist_init_addr": ("str?", None),
    "host": ("str", _NOT_GIVEN),
    "port": ("int", _NOT_GIVEN),
    "context_length": ("int?", None),
    "quantization": ("str?", None),
    "kv_cache_dtype": ("str?", None),
    "mem_fraction_static": ("number?", None),
    "chunked_prefill_size": ("int?", None),
    "max_running_requests": ("int?", None),
    "cuda_graph": (None, None),
    "disable_flashinfer_autotune": ("bool", False),
    "speculative": (None, None),
    "enable_metrics": ("bool", False),
    "enable_cache_report": ("bool", False),
    "extra_args": ("strlist", []),
    "link_interface": ("str?", None),
    "nccl_debug": ("str?", None),
    # NCCL_IB_DISABLE=1 (sockets over link_interface); false lets NCCL use an RDMA device (a RoCE site)
    "nccl_ib_disable": ("bool", True),
    "nccl_collectives": ("bool", False),
    "nccl_inspector": (None, None),
    "environment": (None, None),
}
_INSPECTOR_SCHEMA = {"plugin": ("str", _NOT_GIVEN), "dump_dir": ("str", _NOT_GIVEN)}
_CUDA_GRAPH_SCHEMA = {"disable": ("bool", False), "max_bs": ("int?", None)}
_SPECULATIVE_SCHEMA = {
    "algorithm": ("str", _NOT_GIVEN),
    "num_steps": ("int?", None),
    "eagle_topk": ("int?", None),
    "num_draft_tokens": ("int?", None),
    "draft_model_path": ("str?", None),
}
_RING_SCHEMA = {
    "size": ("int?", None),
    "rank0_link_address": ("str?", None),
    "link_addresses": (None, None),
    "hosts": ("strlist?", None),
    "host": ("str?", None),
}


def _read_spec(spec):
    """The spec with defaults filled in; SpecError when it is malformed."""
    result = _read(spec, _SPEC_SCHEMA, "spec")
    if not result["launcher"]:
        raise SpecError("launcher must be a non-empty list of strings, e.g. [python3, -m, sglang.launch_server]")
    graph = result["cuda_graph"]
    result["cuda_graph"] = _read({} if graph is None else graph, _CUDA_GRAPH_SCHEMA, "cuda_graph")
    if result["speculative"] is not None:
        result["speculative"] = _read(result["speculative"], _SPECULATIVE_SCHEMA, "speculative")
    if result["nccl_inspector"] is not None:
        result["nccl_inspector"] = _read(result["nccl_inspector"], _INSPECTOR_SCHEMA, "nccl_inspector")
    environment = {} if result["environment"] is None else result["environment"]
    if not isinstance(environment, dict):
        raise SpecError("environment must be a dict of NAME: value, got %s" % type(environment).__name__)
    result["environment"] = {}
    for name, value in environment.items():
        if not isinstance(name, str) or not _ENV_NAME.match(name):
            raise SpecError("environment: %r is not a valid variable name" % (name,))
        if not isinstance(value, str) and not _is_int(value):
            raise SpecError("environment.%s must be a string or an integer, got %r" % (name, value))
        result["environment"][name] = str(value)
    return result


def _read_ring(ring):
    """The ring with size and rank 0's link address filled in; None stays None (a single-host replica)."""
    if ring is None:
        return None
    result = _read(ring, _RING_SCHEMA, "ring")
    hosts, addresses = result["hosts"], result["link_addresses"]
    if addresses is None:
        addresses = result["link_addresses"] = {}
    if not isinstance(addresses, dict) or not all(isinstance(v, str) and v for v in addresses.values()):
        raise SpecError("ring.link_addresses must be a dict of host: address, got %r" % (addresses,))
    if hosts is not None:
        if not hosts or len(set(hosts)) != len(hosts):
            raise SpecError("ring.hosts must be a non-empty list of distinct host names (the ring group), got %r"
                            % hosts)
        if result["size"] is None:
            result["size"] = len(hosts)
        elif result["size"] != len(hosts):
            raise SpecError("ring.size is %d but ring.hosts has %d hosts" % (result["size"], len(hosts)))
        if hosts[0] in addresses:
            if result["rank0_link_address"] is None:
                result["rank0_link_address"] = addresses[hosts[0]]
            elif not _same_address(result["rank0_link_address"], addresses[hosts[0]]):
                raise SpecError("ring.rank0_link_address %s is not ring.link_addresses[%s] %s"
                                % (result["rank0_link_address"], hosts[0], addresses[hosts[0]]))
    elif result["host"] is not None:
        raise SpecError("ring.host needs ring.hosts, the ordered ring, to find its place")
    if result["size"] is None or result["size"] < 1:
        raise SpecError("ring needs size (at least 1) or hosts, got %r" % (ring,))
    if result["rank0_link_address"] is None:
        raise SpecError("ring needs rank0_link_address, or hosts and link_addresses with rank 0's entry")
    return result


def _link_environment(interface, ib_disable=True):
    """NCCL and Gloo pinned to exactly this interface (see launch_environment)."""
    return {"NCCL_SOCKET_IFNAME": "=" + interface, "GLOO_SOCKET_IFNAME": interface,
            "NCCL_IB_DISABLE": "1" if ib_disable else "0"}


# --- argv and environment -----------------------------------------------------------------------------------------

def launch_argv(spec):
    """The launch command line of one rank: the launcher, then SGLang's long flags in one canonical order.

    Only full flag names (SGLang's parser would also take a prefix such as --tp, which breaks as soon as a new flag
    shares the prefix). Options left unset are left out, so SGLang applies its own default.
    """
    spec = _read_spec(spec)
    argv = list(spec["launcher"])

    def add(flag, value):
        if value is not None:
            argv.extend([flag, str(value)])

    add("--model-path", spec["model_path"])
    add("--served-model-name", spec["served_model_name"])
    add("--tp-size", spec["tp_size"])
    add("--nnodes", spec["nnodes"])
    add("--node-rank", spec["node_rank"])
    add("--dist-init-addr", spec["dist_init_addr"])
    add("--host", spec["host"])
    add("--port", spec["port"])
    add("--context-length", spec["context_length"])
    add("--quantization", spec["quantization"])
    add("--kv-cache-dtype", spec["kv_cache_dtype"])
    add("--mem-fraction-static", spec["mem_fraction_static"])
    add("--chunked-prefill-size", spec["chunked_prefill_size"])
    add("--max-running-requests", spec["max_running_requests"])
    if spec["cuda_graph"]["disable"]:
        argv.extend(["--disable-decode-cuda-graph", "--disable-prefill-cuda-graph"])
    add("--cuda-graph-max-bs-decode", spec["cuda_graph"]["max_bs"])
    if spec["disable_flashinfer_autotune"]:
        argv.append("--disable-flashinfer-autotune")
    speculative = spec["speculative"]
    if speculative is not None:
        add("--speculative-algorithm", speculative["algorithm"])
        add("--speculative-num-steps", speculative["num_steps"])
        add("--speculative-eagle-topk", speculative["eagle_topk"])
        add("--speculative-num-draft-tokens", speculative["num_draft_tokens"])
        add("--speculative-draft-model-path", speculative["draft_model_path"])
    if spec["enable_metrics"]:
        argv.append("--enable-metrics")
    if spec["enable_cache_report"]:
        argv.append("--enable-cache-report")
    argv.extend(spec["extra_args"])
    return argv


# What nccl_collectives adds: NCCL's default subsystems plus COLL (one INFO line per collective call), and a
# timestamp with microseconds on INFO lines as on WARN ones (NCCL 2.26.2 and later; older NCCL ignores both
# timestamp settings and its COLL lines are untimed). Each line costs the rank a write: the record says it was on.
COLLECTIVE_TRACE_ENVIRONMENT = {
    "NCCL_DEBUG_SUBSYS": "INIT,BOOTSTRAP,ENV,COLL",
    "NCCL_DEBUG_TIMESTAMP_LEVELS": "WARN,INFO",
    "NCCL_DEBUG_TIMESTAMP_FORMAT": "[%F %T.%6f] ",
}


def inspector_environment(inspector):
    """NCCL Inspector on (NCCL 2.28.3 and later): the plugin, and a dump of every completed collective's timing to
    dump_dir, continuously (NCCL 2.30's default interval, -1, dumps only when the communicator is destroyed, so a rank
    that is killed would leave nothing)."""
    return {"NCCL_PROFILER_PLUGIN": inspector["plugin"], "NCCL_INSPECTOR_ENABLE": "1",
            "NCCL_INSPECTOR_DUMP_DIR": inspector["dump_dir"], "NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS": "0"}


def launch_environment(spec):
    """The variables to add to the rank's environment, spec.environment last so that it wins.

    NCCL_SOCKET_IFNAME takes a prefix unless the name starts with '=' (so "thunderbolt0" would also match a
    "thunderbolt01"); '=' makes it exact. Gloo (torch.distributed's CPU side, which SGLang also opens) has no such
    syntax: it wants the bare name and fails with "Unable to find address for: =thunderbolt0" otherwise.
    NCCL_IB_DISABLE=1 keeps NCCL on sockets over that interface even where an RDMA device exists; a RoCE site sets
    nccl_ib_disable false (NCCL_IB_DISABLE=0), and NCCL may then carry its traffic over the RDMA device.
    """
    spec = _read_spec(spec)
    environment = ({} if spec["link_interface"] is None
                   else _link_environment(spec["link_interface"], spec["nccl_ib_disable"]))
    if spec["nccl_debug"] is not None:
        environment["NCCL_DEBUG"] = spec["nccl_debug"]
    if spec["nccl_collectives"]:
        environment.update(COLLECTIVE_TRACE_ENVIRONMENT)
    if spec["nccl_inspector"] is not None:
        environment.update(inspector_environment(spec["nccl_inspector"]))
    environment.update(spec["environment"])
    return environment


# --- checks -------------------------------------------------------------------------------------------------------

def split_host_port(text):
    """(host, port) from SGLang's HOST:PORT or [IPV6]:PORT form, or None when the text has neither form."""
    if text.startswith("["):
        close = text.find("]")
        if close == -1 or not text[close + 1:].startswith(":"):
            return None
        host, port = text[1:close], text[close + 2:]
    else:
        if ":" not in text:
            return None
        host, port = text.rsplit(":", 1)
        if ":" in host:
            return None
    if not host or not _PORT.match(port):
        return None
    return host, int(port)


def _same_address(left, right):
    try:
        return ipaddress.ip_address(left) == ipaddress.ip_address(right)
    except ValueError:
        return left == right


def _problem(problems, field, expected, found, message):
    problems.append({"field": field, "expected": expected, "found": found, "message": message})


def _check_topology(spec, ring, problems):
    tp_size, nnodes, node_rank, gpus = spec["tp_size"], spec["nnodes"], spec["node_rank"], spec["gpus_per_node"]
    if gpus < 1:
        _problem(problems, "gpus_per_node", "at least 1", gpus, "gpus_per_node must be at least 1")
    if nnodes < 1:
        _problem(problems, "nnodes", "at least 1", nnodes, "nnodes must be at least 1")
    if ring is not None and nnodes != ring["size"]:
        names = " (%s)" % ", ".join(ring["hosts"]) if ring["hosts"] else ""
        _problem(problems, "nnodes", "%d (the ring size)" % ring["size"], nnodes,
                 "nnodes is %d but the ring has %d hosts%s: one SGLang node per ring host"
                 % (nnodes, ring["size"], names))
    if tp_size != nnodes * gpus:
        _problem(problems, "tp_size", "%d (nnodes %d x gpus_per_node %d)" % (nnodes * gpus, nnodes, gpus), tp_size,
                 "tp_size is %d but nnodes x gpus_per_node is %d x %d = %d: tensor parallelism across nodes uses "
                 "every GPU of every node once" % (tp_size, nnodes, gpus, nnodes * gpus))
    if not 0 <= node_rank < max(nnodes, 1):
        _problem(problems, "node_rank", "0 to %d" % (max(nnodes, 1) - 1), node_rank,
                 "node_rank %d is out of range for nnodes %d" % (node_rank, nnodes))
    elif ring is not None and ring["host"] is not None:
        if ring["host"] not in ring["hosts"]:
            _problem(problems, "node_rank", "a ring host", ring["host"],
                     "%s is not in the ring (%s)" % (ring["host"], ", ".join(ring["hosts"])))
        elif ring["hosts"].index(ring["host"]) != node_rank:
            rank = ring["hosts"].index(ring["host"])
            _problem(problems, "node_rank", "%d (place of %s in the ring)" % (rank, ring["host"]), node_rank,
                     "%s is ring host number %d (the first is rank 0), so its node_rank is %d, not %d"
                     % (ring["host"], rank, rank, node_rank))


def _check_addresses(spec, ring, problems):
    port = spec["port"]
    if not 1 <= port <= 65535:
        _problem(problems, "port", "1 to 65535", port, "port %d is not a TCP port number" % port)
    address = spec["dist_init_addr"]
    if address is None:
        if spec["nnodes"] > 1:
            _problem(problems, "dist_init_addr", "HOST:PORT on rank 0's direct-link address", None,
                     "dist_init_addr is required with nnodes > 1: every rank meets rank 0 there")
        return
    parsed = split_host_port(address)
    if parsed is None:
        _problem(problems, "dist_init_addr", "HOST:PORT (or [IPV6]:PORT)", address,
                 "dist_init_addr %r is not HOST:PORT (IPv6 addresses go in brackets: [fe80::1]:50000)" % address)
        return
    host, dist_port = parsed
    if not 1 <= dist_port <= 65535:
        _problem(problems, "dist_init_addr", "a port from 1 to 65535", address,
                 "dist_init_addr port %d is not a TCP port number" % dist_port)
    elif spec["node_rank"] == 0 and dist_port == port and (
            _same_address(host, spec["host"]) or spec["host"] in ("0.0.0.0", "::")):
        _problem(problems, "dist_init_addr", "a port other than the HTTP port %d" % port, address,
                 "rank 0 would listen on port %d twice: for HTTP on %s and for the distributed init on %s"
                 % (port, spec["host"], host))
    if ring is not None and not _same_address(host, ring["rank0_link_address"]):
        owners = sorted(name for name, other in ring["link_addresses"].items() if _same_address(host, other))
        owner = " (that is %s's link address)" % owners[0] if owners else ""
        expected = "%s:%d (rank 0's direct-link address)" % (ring["rank0_link_address"], dist_port)
        _problem(problems, "dist_init_addr", expected, address,
                 "dist_init_addr points at %s%s, not at rank 0's direct-link address %s: every rank must meet "
                 "rank 0 over the direct link" % (host, owner, ring["rank0_link_address"]))


def _check_model_options(spec, problems):
    quantization = spec["quantization"]
    if quantization is not None and quantization not in QUANTIZATION_CHOICES:
        if quantization.lower() == "nvfp4":
            message = ("nvfp4 is not a quantization method in SGLang %s, it is a KV-cache dtype: set "
                       "kv_cache_dtype: nvfp4 for an NVFP4 KV cache; an NVFP4 checkpoint from ModelOpt is "
                       "quantization: modelopt_fp4" % SGLANG_VERSION)
        else:
            message = "SGLang %s rejects --quantization %s; its choices: %s" % (
                SGLANG_VERSION, quantization, ", ".join(QUANTIZATION_CHOICES))
        _problem(problems, "quantization", "one of SGLang %s's quantization choices" % SGLANG_VERSION,
                 quantization, message)
    dtype = spec["kv_cache_dtype"]
    if dtype is not None and dtype not in KV_CACHE_DTYPE_CHOICES:
        _problem(problems, "kv_cache_dtype", "one of %s" % ", ".join(KV_CACHE_DTYPE_CHOICES), dtype,
                 "SGLang %s rejects --kv-cache-dtype %s; its choices: %s" % (
                     SGLANG_VERSION, dtype, ", ".join(KV_CACHE_DTYPE_CHOICES)))
    fraction = spec["mem_fraction_static"]
    if fraction is not None and not 0 < fraction < 1:
        _problem(problems, "mem_fraction_static", "between 0 and 1 (exclusive)", fraction,
                 "mem_fraction_static is the share of GPU memory for weights and KV cache: more than 0, less than 1")
    for key in ("context_length", "max_running_requests"):
        if spec[key] is not None and spec[key] < 1:
            _problem(problems, key, "at least 1", spec[key], "%s must be at least 1" % key)
    chunk = spec["chunked_prefill_size"]
    if chunk is not None and chunk != -1 and chunk < 1:
        _problem(problems, "chunked_prefill_size", "at least 1, or -1 (no chunking)", chunk,
                 "chunked_prefill_size must be a positive token count, or -1 to turn chunked prefill off")
    graph = spec["cuda_graph"]
    if graph["max_bs"] is not None:
        if graph["disable"]:
            _problem(problems, "cuda_graph.max_bs", "null when cuda_graph.disable is true", graph["max_bs"],
                     "cuda_graph.max_bs has no effect when the CUDA graphs are disabled; leave it unset")
        elif graph["max_bs"] < 1:
            _problem(problems, "cuda_graph.max_bs", "at least 1", graph["max_bs"],
                     "cuda_graph.max_bs must be at least 1")


def _check_speculative(spec, problems):
    """Everything SGLang 0.5.23 would reject or silently change in an EAGLE-family speculative setup.

    What SGLang does for EAGLE/EAGLE3/NEXTN/STANDALONE (sglang/srt/arg_groups/speculative_hook.py,
    handle_speculative_decoding and _handle_eagle_family), and what is checked here:
    - upper-cases the algorithm: lower-case names are refused, since some hooks compare the raw value first;
    - NEXTN becomes EAGLE (an alias: nothing changes), or FROZEN_KV_MTP for a Gemma 4 assistant draft (read from the
      draft checkpoint; not checked here);
    - max_running_requests unset -> 48: refused, so that a baseline without speculation and a run with it admit the
      same number of requests (one layer changed at a time);
    - num_steps unset -> all three chosen from the model architecture (an assertion error if only some are set):
      refused, all three must be given;
    - eagle_topk 1 and num_draft_tokens != num_steps + 1 -> num_draft_tokens is changed to num_steps + 1 (a
      warning in the log): refused;
    - DeepSeek V3/V3.2/V4, GLM-4 MoE, Bailing, Mistral Large 3, Qwen4-Exp and a few more: draft_model_path unset ->
      the target checkpoint (nothing changes for the run);
    - a draft model path -> draft revision "main" when unset (we never set one);
    - CPU only: overlap scheduling off; mixed chunked prefill off for STANDALONE (we never turn it on); ROCm:
      rejection sampling on. Not our hardware or options, so not checked;
    - eagle_topk > 1 with the trtllm_mha attention backend, or with page_size > 1 on backends other than flashinfer,
      fa3 and triton, is rejected; SGLang chooses the backend from the GPU, so this is not checked here.
    Beyond the argument handling, the EAGLE draft step ranks topk + (num_steps - 1) * topk^2 candidates and keeps
    num_draft_tokens - 1 of them (sglang/srt/speculative/eagle_utils.py organize_draft_results): more fails at the
    first decode step, so that is refused too.
    """
    speculative = spec["speculative"]
    if speculative is None:
        return
    given = speculative["algorithm"]
    algorithm = given.upper()
    if algorithm not in SPECULATIVE_ALGORITHMS:
        hint = "; multi-token-prediction (MTP) checkpoints run as NEXTN" if algorithm == "MTP" else ""
        _problem(problems, "speculative.algorithm", "one of %s" % ", ".join(EAGLE_FAMILY), given,
                 "SGLang %s rejects --speculative-algorithm %s (Unknown speculative algorithm name)%s"
                 % (SGLANG_VERSION, given, hint))
        return
    if algorithm == "NONE":
        _problem(problems, "speculative.algorithm", "one of %s" % ", ".join(EAGLE_FAMILY), given,
                 "speculative algorithm NONE turns speculation off; set speculative to null instead")
        return
    if algorithm not in EAGLE_FAMILY:
        _problem(problems, "speculative.algorithm", "one of %s" % ", ".join(EAGLE_FAMILY), given,
                 "%s is a valid SGLang algorithm, but it resolves its draft settings in its own way, which these "
                 "pre-launch checks do not model; supported here: %s" % (algorithm, ", ".join(EAGLE_FAMILY)))
        return
    if given != algorithm:
        _problem(problems, "speculative.algorithm", algorithm, given,
                 "write the algorithm in capitals (%s): SGLang upper-cases it, but only after some of its checks "
                 "compared the name as given" % algorithm)

    steps, topk, draft = speculative["num_steps"], speculative["eagle_topk"], speculative["num_draft_tokens"]
    missing = [key for key in ("num_steps", "eagle_topk", "num_draft_tokens") if speculative[key] is None]
    for key in missing:
        _problem(problems, "speculative." + key, "an integer of at least 1", None,
                 "speculative.%s is unset: SGLang would choose num_steps, eagle_topk and num_draft_tokens from the "
                 "model architecture (and fail if only some are set); give all three, e.g. NEXTN 3/1/4" % key)
    small = [key for key in ("num_steps", "eagle_topk") if speculative[key] is not None and speculative[key] < 1]
    if draft is not None and draft < 2:
        small.append("num_draft_tokens")
    for key in small:
        minimum = 2 if key == "num_draft_tokens" else 1
        _problem(problems, "speculative." + key, "at least %d" % minimum, speculative[key],
                 "speculative.%s must be at least %d" % (key, minimum))
    if not missing and not small:
        if topk == 1 and draft != steps + 1:
            _problem(problems, "speculative.num_draft_tokens", "%d (num_steps + 1 with eagle_topk 1)" % (steps + 1),
                     draft, "with eagle_topk 1 SGLang %s silently changes num_draft_tokens %d to num_steps + 1 = %d; "
                     "set it to %d" % (SGLANG_VERSION, draft, steps + 1, steps + 1))
        elif topk > 1 and draft - 1 > topk + (steps - 1) * topk * topk:
            limit = topk + (steps - 1) * topk * topk + 1
            _problem(problems, "speculative.num_draft_tokens", "at most %d" % limit, draft,
                     "%d draft steps with eagle_topk %d propose %d candidate tokens, so num_draft_tokens can be at "
                     "most %d; SGLang fails at the first decode step otherwise" % (steps, topk, limit - 1, limit))
    if algorithm in NEEDS_DRAFT_MODEL and speculative["draft_model_path"] is None:
        _problem(problems, "speculative.draft_model_path", "the draft model's path", None,
                 "%s runs a separate draft model: set speculative.draft_model_path" % algorithm)
    if spec["max_running_requests"] is None:
        _problem(problems, "max_running_requests", "an integer (%d keeps SGLang's choice)"
                 % SGLANG_SPECULATIVE_MAX_RUNNING_REQUESTS, None,
                 "with speculative decoding SGLang %s silently caps max_running_requests at %d when it is unset; "
                 "set it explicitly, and to the same value in the run without speculation you compare against"
                 % (SGLANG_VERSION, SGLANG_SPECULATIVE_MAX_RUNNING_REQUESTS))


def _check_extra_args(spec, problems):
    for arg in spec["extra_args"]:
        if not arg.startswith("--") or arg == "--":
            continue
        flag = arg.split("=", 1)[0]
        if flag in SECRET_FLAGS:
            _problem(problems, "extra_args", "no secret on the command line", flag,
                     "%s carries a secret, and a command line shows in ps and in the start records; pass secrets "
                     "another way" % flag)
        elif flag in OWN_FLAGS or flag in OVERRIDING_FLAGS:
            _problem(problems, "extra_args", "no flag the spec already sets", flag,
                     "%s in extra_args would override %s, which the spec sets; set it through the spec"
                     % (flag, OVERRIDING_FLAGS.get(flag, flag)))
        else:
            longer = [own for own in OWN_FLAGS if own.startswith(flag)]
            if longer:
                _problem(problems, "extra_args", "full flag names", flag,
                         "%s is only an abbreviation (of %s): write flags in full" % (flag, " or ".join(longer)))


def _check_environment(spec, problems):
    interface = spec["link_interface"]
    if interface is None:
        if spec["nnodes"] > 1:
            _problem(problems, "link_interface", "the direct-link interface, e.g. thunderbolt0", None,
                     "link_interface is required with nnodes > 1: without it NCCL and Gloo pick an interface "
                     "themselves, often not the direct link")
    elif not _IFNAME.match(interface):
        _problem(problems, "link_interface", "an interface name of 2 to 15 letters, digits, '_', '.', '@' or '-'",
                 interface, "%r is not an interface name NCCL and Gloo can both select exactly" % interface)
    if spec["nccl_debug"] is not None and spec["nccl_debug"] not in NCCL_DEBUG_LEVELS:
        _problem(problems, "nccl_debug", "one of %s" % ", ".join(NCCL_DEBUG_LEVELS), spec["nccl_debug"],
                 "NCCL_DEBUG takes %s" % ", ".join(NCCL_DEBUG_LEVELS))
    inspector = spec["nccl_inspector"]
    for key in ("plugin", "dump_dir") if inspector is not None else ():
        if not inspector[key].startswith("/"):
            _problem(problems, "nccl_inspector." + key, "an absolute path", inspector[key],
                     "nccl_inspector.%s must be an absolute path, found %r" % (key, inspector[key]))
    if spec["nccl_collectives"] and spec["nccl_debug"] not in ("INFO", "TRACE"):
        _problem(problems, "nccl_collectives", "nccl_debug INFO or TRACE", spec["nccl_debug"],
                 "NCCL writes its COLL lines at INFO: nccl_collectives needs nccl_debug INFO or TRACE, found %s"
                 % (spec["nccl_debug"] or "unset"))
    if interface is not None:
        ours = _link_environment(interface, spec["nccl_ib_disable"])
        for name in ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "NCCL_IB_DISABLE"):
            if name in spec["environment"] and spec["environment"][name] != ours[name]:
                _problem(problems, "environment." + name, ours[name], spec["environment"][name],
                         "environment.%s overrides what link_interface %s sets (%s); the record would name one "
                         "interface while NCCL used another: set link_interface instead" % (
                             name, interface, ours[name]))


def spec_problems(spec, ring=None):
    """Everything wrong with a rank spec that can be known before launch, as a list of problem dicts.

    An empty list means: SGLang will run this spec as written. SpecError when the spec or the ring is malformed.
    """
    spec = _read_spec(spec)
    ring = _read_ring(ring)
    problems = []
    _check_topology(spec, ring, problems)
    _check_addresses(spec, ring, problems)
    _check_model_options(spec, problems)
    _check_speculative(spec, problems)
    _check_extra_args(spec, problems)
    _check_environment(spec, problems)
    return problems
