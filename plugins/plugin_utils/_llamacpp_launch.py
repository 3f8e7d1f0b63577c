# -*- coding: utf-8 -*-
# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The command lines of a llama.cpp RPC ring, and the checks to run before launching it.

Written against the build of roles/llamacpp_engine (llama.cpp ``version: 0.5.0-dev (build 1, commit 0c1e570)``) and
checked against its own ``--help`` (tests/unit/fixtures/llamacpp and tests/engine).

A ring: ``ggml-rpc-server`` on every member but the head, each bound to its direct-link address; ``llama-server`` on
the head, its layers offloaded (``-ngl``) to the members listed in ``--rpc``. llama.cpp's RPC README: the RPC server
is a proof of concept, "fragile and insecure. Never run the RPC server on an open network": so an RPC server's
address must be one address (never every address, ``0.0.0.0`` or ``::``), and ``spec_problems`` says so.

RPC server spec: ``bin_dir`` (str), ``host`` (str), ``port`` (int); optional ``threads`` (int [1]).

Server spec, required: ``bin_dir``, ``model_path``, ``host``, ``port``, ``rpc`` (a list of ``HOST:PORT``, the
members in ring order; may be empty for a head alone). Optional (default in brackets): ``gpu_layers`` [99: every
layer offloaded], ``threads`` [None: llama.cpp's own], ``context_length`` [None: the model's], ``parallel`` [None:
llama.cpp's slots], ``metrics`` [true], ``slot_save_path`` [None; a directory, which also enables the slots'
erase action that empties the slots' prompt cache], ``cache_ram_mib`` [None: llama.cpp's 8,192 MiB; 0 turns off
the prompt cache in host memory, which keeps prompts beyond the slots and which no request can empty], ``draft``
[None, or ``{model_path, max_tokens [4], gpu_layers [99]}``: a draft model for speculative decoding, ``--spec-type
draft-simple``], ``extra_args`` [[]], appended verbatim.
Any other key is an error, so a misspelt option fails instead of being dropped.

Nothing secret on a command line (it shows in ``ps`` and in the start records): ``spec_problems`` refuses
``--api-key`` in ``extra_args`` (``--api-key-file`` or ``LLAMA_API_KEY`` keep the key off it).

Standard library only, Python 3.8+ syntax.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ipaddress
import os

RPC_SERVER, SERVER = "ggml-rpc-server", "llama-server"
SECRET_FLAGS = ("--api-key",)
WILDCARDS = ("0.0.0.0", "::", "", "*")


class SpecError(ValueError):
    """A spec that cannot make a command line (a missing or unknown key, a wrong type)."""


_RPC_KEYS = {"bin_dir": str, "host": str, "port": int, "threads": int}
_RPC_REQUIRED = ("bin_dir", "host", "port")
_SERVER_KEYS = {"bin_dir": str, "model_path": str, "host": str, "port": int, "rpc": list, "gpu_layers": int,
                "threads": int, "context_length": int, "parallel": int, "metrics": bool, "slot_save_path": str,
                "cache_ram_mib": int, "draft": dict, "extra_args": list}
_SERVER_REQUIRED = ("bin_dir", "model_path", "host", "port", "rpc")
_DRAFT_KEYS = {"model_path": str, "max_tokens": int, "gpu_layers": int}


def _checked(spec, keys, required, what):
    if not isinstance(spec, dict):
        raise SpecError("%s must be a dict, got %s" % (what, type(spec).__name__))
    unknown = sorted(set(spec) - set(keys))
    if unknown:
        raise SpecError("%s has unknown keys %s (known: %s)" % (what, unknown, ", ".join(sorted(keys))))
    missing = [key for key in required if spec.get(key) is None]
    if missing:
        raise SpecError("%s lacks %s" % (what, ", ".join(missing)))
    for key, kind in keys.items():
        value = spec.get(key)
        if value is None:
            continue
        if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
            raise SpecError("%s.%s must be an integer, got %r" % (what, key, value))
        if kind is not int and not isinstance(value, kind):
            raise SpecError("%s.%s must be a %s, got %r" % (what, key, kind.__name__, value))
    return spec


def rpc_server_argv(spec):
    """``ggml-rpc-server -H HOST -p PORT -t THREADS``."""
    spec = _checked(spec, _RPC_KEYS, _RPC_REQUIRED, "the RPC server spec")
    return [os.path.join(spec["bin_dir"], RPC_SERVER), "-H", spec["host"], "-p", str(spec["port"]),
            "-t", str(spec.get("threads") or 1)]


def server_argv(spec):
    """``llama-server`` on the head: the model, the RPC members, offload, the HTTP address, metrics, the draft."""
    spec = _checked(spec, _SERVER_KEYS, _SERVER_REQUIRED, "the server spec")
    argv = [os.path.join(spec["bin_dir"], SERVER), "--model", spec["model_path"]]
    if spec["rpc"]:
        argv += ["--rpc", ",".join(str(member) for member in spec["rpc"])]
    argv += ["--n-gpu-layers", str(99 if spec.get("gpu_layers") is None else spec["gpu_layers"]),
             "--host", spec["host"], "--port", str(spec["port"])]
    for flag, key in (("--threads", "threads"), ("--ctx-size", "context_length"), ("--parallel", "parallel")):
        if spec.get(key) is not None:
            argv += [flag, str(spec[key])]
    if spec.get("metrics", True):
        argv.append("--metrics")
    if spec.get("slot_save_path"):
        argv += ["--slot-save-path", spec["slot_save_path"]]
    if spec.get("cache_ram_mib") is not None:
        argv += ["--cache-ram", str(spec["cache_ram_mib"])]
    draft = spec.get("draft")
    if draft:
        draft = _checked(draft, _DRAFT_KEYS, ("model_path",), "the server spec's draft")
        argv += ["--model-draft", draft["model_path"], "--spec-type", "draft-simple",
                 "--spec-draft-n-max", str(draft.get("max_tokens") or 4),
                 "--n-gpu-layers-draft", str(99 if draft.get("gpu_layers") is None else draft["gpu_layers"])]
    return argv + [str(arg) for arg in spec.get("extra_args") or []]


def _address_problem(field, address):
    if address in WILDCARDS:
        return {"field": field, "expected": "one address (the host's direct-link address)", "found": address,
                "message": "%s is %r, every address: llama.cpp's RPC backend is insecure and must never listen on "
                           "an open network; give the host's direct-link address" % (field, address)}
    try:
        ipaddress.ip_address(address)
    except ValueError:
        return {"field": field, "expected": "an IP address", "found": address,
                "message": "%s must be an IP address (the direct link's), found %r" % (field, address)}
    return None


def spec_problems(spec, kind):
    """Well-formed but wrong values of a spec (``kind``: ``rpc_server`` or ``server``), as ``{field, expected, found,
    message}``: a wildcard or non-IP bind address, a port out of range, an RPC member that is not ``IP:PORT`` or
    listens on every address, a secret flag in ``extra_args``, a count below 1."""
    if kind == "rpc_server":
        spec = _checked(spec, _RPC_KEYS, _RPC_REQUIRED, "the RPC server spec")
    else:
        spec = _checked(spec, _SERVER_KEYS, _SERVER_REQUIRED, "the server spec")
    problems = []
    if kind == "rpc_server":
        problem = _address_problem("host", spec["host"])
        if problem:
            problems.append(problem)
    if not 1 <= spec["port"] <= 65535:
        problems.append({"field": "port", "expected": "1-65535", "found": spec["port"],
                         "message": "port must be within 1-65535, found %d" % spec["port"]})
    for field in ("threads", "context_length", "parallel"):
        if spec.get(field) is not None and spec[field] < 1:
            problems.append({"field": field, "expected": ">= 1", "found": spec[field],
                             "message": "%s must be at least 1, found %d" % (field, spec[field])})
    for index, member in enumerate(spec.get("rpc") or []):
        host, _sep, port = str(member).rpartition(":")
        problem = _address_problem("rpc[%d]" % index, host.strip("[]")) if host else None
        if problem:
            problems.append(problem)
        elif not host or not port.isdigit() or not 1 <= int(port) <= 65535:
            problems.append({"field": "rpc[%d]" % index, "expected": "HOST:PORT", "found": member,
                             "message": "rpc[%d] must be HOST:PORT, found %r" % (index, member)})
    for arg in spec.get("extra_args") or []:
        if str(arg).split("=", 1)[0] in SECRET_FLAGS:
            # the flag's name only: its value (or the next argument) is the secret
            problems.append({"field": "extra_args", "expected": "no secret on the command line",
                             "found": str(arg).split("=", 1)[0],
                             "message": "extra_args carries %s: a command line shows in ps and in the start "
                                        "records; pass the key in the environment (LLAMA_API_KEY) or use --api-key-file"
                                        % str(arg).split("=", 1)[0]})
    return problems
