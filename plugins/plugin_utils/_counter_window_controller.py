# -*- coding: utf-8 -*-
# Copyright (c) 2026, inferlab developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The controller's half of a counter window edge (the counter_window action plugin's work), without Ansible.

The host takes the snapshot and starts or stops the sampler (the counter_window module, its logic in
module_utils/_counter_window_host.py); the controller keeps the snapshot with its own UTC time, works out the skew
between the hosts' snapshots, the deltas, the link's events and the notes, and writes the evidence into the run
directory. This used to be about twenty tasks per window."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re
from datetime import datetime, timezone

from ansible_collections.inferlab.distributed.plugins.plugin_utils._counter_deltas import counter_delta, link_events

# Fields of net/snmp's Tcp: line that are settings or gauges, not counters: a connection closing makes CurrEstab
# go down, which counter_delta would report as a reset. They are left out of the deltas.
TCP_NOT_COUNTERS = ("RtoAlgorithm", "RtoMin", "RtoMax", "MaxConn", "CurrEstab")
# The link state compared between opening and closing: a change is a retrain inside the window.
LINK_KEYS = ("rx_speed_gbps", "tx_speed_gbps", "rx_lanes", "tx_lanes")
WINDOW_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class EdgeError(ValueError):
    """Arguments an edge cannot be taken with, or a result it cannot be measured from; the message says which."""


def controller_time():
    """The controller's UTC time as the fragments write it."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _names_its_run(window, run_id, run_dir):
    """Whether an edge has a usable window name, the run's id and the run directory: both edges need them."""
    return bool(isinstance(window, str) and WINDOW_NAME.match(window) and run_id and run_dir)


def check_opening(window, run_id, run_dir, interfaces, interval_s, max_s):
    """Refuse an opening without a usable name, run, interface or sampler bounds, before anything starts."""
    if not (_names_its_run(window, run_id, run_dir) and interfaces and interval_s > 0 and max_s > 0):
        raise EdgeError(
            "Opening a counter window needs a name made of letters, digits, '.', '_' and '-' (counters_window, found "
            "'%s'), the run's id (counters_run_id, found '%s': run through `inferlab run` or pass -e "
            "inferlab_run_dir=DIR), at least one interface (counters_interfaces, found %s: set "
            "inferlab_link_interface) and a positive counters_sample_interval_s (found %s) and counters_sampler_max_s "
            "(found %s)." % (window, run_id, interfaces, interval_s, max_s))


def check_closing(window, run_id, run_dir):
    if not _names_its_run(window, run_id, run_dir):
        raise EdgeError(
            "Closing a counter window needs the name it was opened with (counters_window, found '%s') and the run's "
            "id (counters_run_id, found '%s': run through `inferlab run` or pass -e inferlab_run_dir=DIR)."
            % (window, run_id))


def snapshot(edge, window, host, phase, link_interface, at):
    """One host's snapshot as it is kept: the counters, the link's speed, lanes and state, the GPUs.

    ``edge`` is the counter_window module's result; ``at`` the controller's UTC time right after it. The link's
    peer is the XDomain device behind the link interface, none when the link is not Thunderbolt (an Ethernet cable)."""
    tbnet = edge.get("tbnet") or {}
    peer_device = ((tbnet.get("interfaces") or {}).get(link_interface) or {}).get("peer") or ""
    peer = next((p for p in tbnet.get("peers") or [] if p.get("device") == peer_device), {})
    link = (edge["counters"].get("interfaces") or {}).get(link_interface) or {}
    return {
        "window": window, "host": host, "phase": phase, "at": at,
        "counters": edge["counters"], "missing": edge.get("missing", []),
        "link": {"interface": link_interface, "peer": peer.get("device"),
                 "rx_speed_gbps": peer.get("rx_speed_gbps"), "tx_speed_gbps": peer.get("tx_speed_gbps"),
                 "rx_lanes": peer.get("rx_lanes"), "tx_lanes": peer.get("tx_lanes"),
                 "operstate": link.get("operstate"), "mtu": link.get("mtu")},
        "nvml": edge.get("nvml"),
    }


def opening(run_id, open_snapshot, sampler, files, interval_s, max_s):
    """What a host remembers of an open window until its closing (and writes as the opening's evidence)."""
    return {"run_id": run_id, "opened_at": open_snapshot["at"], "open": open_snapshot,
            "sampler": {"started": sampler.get("pid") is not None, "pid": sampler.get("pid"),
                        "entry_id": sampler.get("entry_id"), "output": files[0], "log": files[1],
                        "interval_s": float(interval_s), "max_s": float(max_s)}}


def skew(snapshots):
    """``(seconds, hosts)``: max - min of the hosts' snapshot wall clocks (their clock offset included)."""
    walls = [float(s["counters"]["time"]["wall"]) for s in snapshots]
    return (round(max(walls) - min(walls), 6) if walls else None), [s["host"] for s in snapshots]


def _counters_only(counters):
    return dict(counters, tcp={k: v for k, v in (counters.get("tcp") or {}).items() if k not in TCP_NOT_COUNTERS})


def _stop_event(log_text):
    stops = [json.loads(line) for line in log_text.splitlines() if line.startswith('{"event": "stop"')]
    return stops[-1] if stops else {}


def window_result(window, host, opened, close_snapshot, sampler_entries, samples_rel, samples_text, log_text,
                  link_interface, interfaces, check_mode):
    """The window's deltas on one host, less the skews (the closing's skew needs every host's closing)."""
    open_snapshot = opened["open"]
    try:
        delta = counter_delta(_counters_only(open_snapshot["counters"]), _counters_only(close_snapshot["counters"]))
        lines = samples_text.strip().splitlines() if samples_text is not None else []
        events = link_events(lines, link_interface, strict=False) if link_interface in interfaces else []
        stop = _stop_event(log_text) if log_text is not None else {}
    except ValueError as exc:  # the deltas' CounterDataError, or a log line that is not JSON
        raise EdgeError("window %s on %s cannot be measured: %s" % (window, host, exc)) from exc
    before = [open_snapshot["link"].get(k) for k in LINK_KEYS]
    after = [close_snapshot["link"].get(k) for k in LINK_KEYS]
    sampler = opened["sampler"]
    notes = []
    if check_mode:
        notes.append("Check mode: no sampler ran in this window.")
    elif not sampler_entries:
        notes.append("No sampler ran in this window (its opening did not start one).")
    if stop.get("reason") == "max_seconds":
        notes.append("The sampler stopped by itself after counters_sampler_max_s (%s s), before the window closed: "
                     "the samples end early." % sampler["max_s"])
    if stop.get("reason") == "error":
        notes.append("The sampler failed: %s; see %s.log" % (stop.get("message", ""), samples_rel))
    if before != after:
        notes.append("The link %s changed speed or lanes during the window: %s -> %s (rx/tx Gb/s per lane, rx/tx "
                     "lanes)." % (link_interface, "/".join(str(v) for v in before),
                                  "/".join(str(v) for v in after)))
    return {
        "window": window, "host": host, "run_id": opened["run_id"],
        "opened_at": opened["opened_at"], "closed_at": close_snapshot["at"],
        "opened_wall": open_snapshot["counters"]["time"]["wall"],
        "closed_wall": close_snapshot["counters"]["time"]["wall"],
        "elapsed_s": delta["elapsed_s"], "skew_open_s": None, "skew_close_s": None, "skew_hosts": [],
        "interfaces": delta["interfaces"], "tcp": delta["tcp"], "tcp_ext": delta["tcp_ext"],
        "resets": delta["resets"], "missing": delta["missing"],
        "link_before": open_snapshot["link"], "link_after": close_snapshot["link"],
        "link_retrained": before != after, "link_events": events,
        "nvml_before": open_snapshot["nvml"], "nvml_after": close_snapshot["nvml"],
        "samples": {"path": samples_rel + ".jsonl" if samples_text is not None else None, "count": len(lines),
                    "interval_s": sampler["interval_s"],
                    "log": samples_rel + ".log" if log_text is not None else None,
                    "stop_reason": stop.get("reason")},
        "notes": notes,
    }
