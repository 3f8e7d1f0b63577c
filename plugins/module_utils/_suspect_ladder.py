# -*- coding: utf-8 -*-
# Copyright (c) 2026, inferlab developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The elimination ladder for a suspect host's transmit path: which single-flow iperf3 runs to make, and what each
step shows and does not show.

The ladder's order: the same server receives from the suspect with 1, 2 and 4 flows
(per flow or per host), with the default window and a large one, with the application's message size with Nagle
on and off, with message sizes from 4 KiB to 1 MiB; a control host sends to the same server (the suspect's sender
or the server's receiver), the server sends back to the suspect (its receive path), and the suspect talks to itself
over loopback (its kernel's TCP without the NIC). Each step's verdict is an observation with the figures behind it
and a list of what it does not show; the ladder's summary is a theory, never a diagnosis.

Standard library only, Python 3.8+ syntax.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.inferlab.distributed.plugins.module_utils._link_verdict import (
    LinkVerdictError,
    _rate,
    _threshold,
    flow_limit,
    format_bps,
)

# Who runs each run's iperf3 client and where it sends: the suspect to the server, the suspect asking the server to
# send (-R: the suspect's receive path), the control host to the same server, the suspect to itself over loopback.
RUN_PATHS = ("suspect", "receive", "control", "loopback")
STEPS = ("flows", "window", "nagle", "message_sizes", "control", "loopback")
# A large window that closes less than this share of the gap between one flow and the best of parallel flows
# "helps partly" (observed: an 8 MB window took 3.58 to 6.6 Gb/s where parallel flows reached 8.7, 59 % of the gap).
WINDOW_FULL_SHARE = 0.9


def _bytes_label(size):
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale and size % scale == 0:
            return "%d %s" % (size // scale, unit)
    return "%d B" % size


def _positive_ints(values, what):
    if not isinstance(values, (list, tuple)) or not values:
        raise LinkVerdictError("%s must be a non-empty list of positive integers, got %r" % (what, values))
    out = []
    for value in values:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise LinkVerdictError("%s must be a non-empty list of positive integers, got %r" % (what, values))
        out.append(value)
    return out


def ladder_runs(settings):
    """The ladder's runs, in the order they run: ``[{name, path, args}]`` (``path`` one of RUN_PATHS, ``args`` the
    iperf3 client's arguments after the address and port). ``settings``: ``duration_s``, ``flows`` (1 among them),
    ``window_bytes``, ``message_sizes``, ``nagle_message_bytes``, ``loopback`` (bool)."""
    if not isinstance(settings, dict):
        raise LinkVerdictError("settings must be a dict, got %s" % type(settings).__name__)
    duration = settings.get("duration_s")
    if isinstance(duration, bool) or not isinstance(duration, int) or duration < 1:
        raise LinkVerdictError("duration_s must be a whole number of seconds, 1 or more, got %r" % (duration,))
    flows = _positive_ints(settings.get("flows"), "flows")
    if 1 not in flows or len(flows) < 2:
        raise LinkVerdictError("flows must hold 1 and at least one larger count (per flow or per host), got %r"
                               % (flows,))
    window = _positive_ints([settings.get("window_bytes")], "window_bytes")[0]
    sizes = _positive_ints(settings.get("message_sizes"), "message_sizes")
    nagle = _positive_ints([settings.get("nagle_message_bytes")], "nagle_message_bytes")[0]
    t = ["-t", str(duration)]
    runs = [{"name": "flows_%d" % n, "path": "suspect", "args": ["-P", str(n)] + t} for n in sorted(set(flows))]
    runs.append({"name": "window_large", "path": "suspect", "args": ["-w", str(window)] + t})
    runs += [{"name": "size_%d" % size, "path": "suspect", "args": ["-l", str(size)] + t}
             for size in sorted(set(sizes))]
    runs.append({"name": "nagle_on", "path": "suspect", "args": ["-l", str(nagle)] + t})
    runs.append({"name": "nagle_off", "path": "suspect", "args": ["-l", str(nagle), "-N"] + t})
    runs.append({"name": "receive", "path": "receive", "args": ["-R"] + t})
    runs.append({"name": "control", "path": "control", "args": list(t)})
    if settings.get("loopback", True):
        runs.append({"name": "loopback", "path": "loopback", "args": list(t)})
    return runs


def _compare(measured, reference, threshold):
    """``better``, ``worse`` or ``no clear difference`` for measured against reference; None when either is 0/None."""
    if not measured or not reference:
        return None, None
    ratio = round(max(measured, reference) / min(measured, reference), 2)
    if ratio < threshold:
        return "no clear difference", ratio
    return ("better" if measured > reference else "worse"), ratio


def _step(verdict, text, figures, does_not_show):
    return {"verdict": verdict, "text": text, "figures": figures, "does_not_show": list(does_not_show)}


def _not_measured(what):
    return _step("not measured", "%s: no traffic measured, not judged; re-run the ladder" % what, {}, [])


def _flows_step(rates, flows, threshold):
    limit = flow_limit(dict((n, rates.get("flows_%d" % n)) for n in flows), threshold=threshold)
    verdict = {"per-flow limit": "per flow", "per-host limit": "per host"}.get(limit["kind"], "not measured")
    return _step(verdict, limit["text"], {"points": limit["points"], "ratio": limit["ratio"]}, [
        "why one flow is limited: the NIC, its driver and firmware, the kernel's TCP and the switch port all carry it",
        "whether the application's own connections are limited the same way (leave-one-out measures that)"])


def _window_step(rates, window, best_bps, threshold):
    one, large = rates.get("flows_1"), rates.get("window_large")
    effect, ratio = _compare(large, one, threshold)
    if effect is None:
        return _not_measured("the window step")
    label = _bytes_label(window)
    verdict = {"better": "helps", "worse": "hurts", "no clear difference": "no clear effect"}[effect]
    share = round((large - one) / (best_bps - one), 2) if best_bps and best_bps > one else None
    if verdict == "helps" and share is not None and share < WINDOW_FULL_SHARE:
        verdict = "helps partly"
    text = "one flow with a %s window: %s against %s with the default window (%.2fx, threshold %gx)" % (
        label, format_bps(large), format_bps(one), ratio, threshold)
    if verdict == "helps partly":
        text += "; %d %% of the way to the %s that parallel flows reach" % (round(100 * share), format_bps(best_bps))
    return _step(verdict, "%s: %s" % (verdict, text),
                 {"window_bytes": window, "default_bps": one, "large_bps": large, "ratio": ratio,
                  "share_of_parallel_gap": share}, [
                     "that the window is the cause: a larger window also changes how the sender paces its segments",
                     "whether the window was granted as asked: the kernel caps it at net.core.wmem_max and rmem_max"])


def _nagle_step(rates, size, threshold):
    on, off = rates.get("nagle_on"), rates.get("nagle_off")
    effect, ratio = _compare(off, on, threshold)
    if effect is None:
        return _not_measured("the Nagle step")
    verdict = {"better": "Nagle off helps", "worse": "Nagle off hurts",
               "no clear difference": "no clear effect"}[effect]
    text = "%s messages with Nagle off (TCP_NODELAY): %s against %s with it on (%.2fx, threshold %gx)" % (
        _bytes_label(size), format_bps(off), format_bps(on), ratio, threshold)
    return _step(verdict, "%s: %s" % (verdict, text),
                 {"message_bytes": size, "nagle_on_bps": on, "nagle_off_bps": off, "ratio": ratio}, [
                     "the application's own socket options and write pattern: compare with what it does on the wire",
                     "a per-packet cost as such: fewer, larger segments also change the receiver's work"])


def _sizes_step(rates, sizes, threshold):
    points = [{"bytes": size, "bps": rates.get("size_%d" % size)} for size in sizes]
    measured = [p for p in points if p["bps"]]
    if len(measured) < 2:
        return _not_measured("the message-size step")
    low, high = min(measured, key=lambda p: p["bps"]), max(measured, key=lambda p: p["bps"])
    ratio = round(high["bps"] / low["bps"], 2)
    listing = ", ".join("%s %s" % (_bytes_label(p["bytes"]), format_bps(p["bps"])) for p in points)
    if ratio < threshold:
        verdict, text = "flat", "flat across message sizes (%s; %.2fx, threshold %gx)" % (listing, ratio, threshold)
    else:
        verdict = "grows with size" if high["bytes"] > low["bytes"] else "falls with size"
        text = "%s: %s (%.2fx between %s and %s, threshold %gx)" % (
            verdict, listing, ratio, _bytes_label(low["bytes"]), _bytes_label(high["bytes"]), threshold)
    return _step(verdict, text, {"points": points, "ratio": ratio}, [
        "the application's message sizes: measure them on the wire before reading this step as the application's"])


def _control_step(rates, hosts, threshold):
    suspect, server, control = hosts["suspect"], hosts["server"], hosts["control"]
    sent, by_control, received = rates.get("flows_1"), rates.get("control"), rates.get("receive")
    if not sent or not by_control:
        return _not_measured("the control step")
    control_ratio = round(by_control / sent, 2)
    figures = {"suspect_bps": sent, "control_bps": by_control, "receive_bps": received,
               "control_ratio": control_ratio, "receive_ratio": round(received / sent, 2) if received else None}
    parts = ["control host %s sends %s to %s where %s sends %s (%.2fx, threshold %gx)" % (
        control, format_bps(by_control), server, suspect, format_bps(sent), control_ratio, threshold)]
    if control_ratio >= threshold:
        verdict = "the suspect's sender"
        parts.append("the same server receives faster from another host: %s's transmit path, not %s's receive path"
                     % (suspect, server))
    else:
        verdict = "not the suspect alone"
        parts.append("a control host is as slow against the same server: %s's receive path or the fabric is not "
                     "exonerated" % server)
    if received:
        parts.append("%s receives %s from %s (%.2fx its sending)" % (
            suspect, format_bps(received), server, figures["receive_ratio"]))
    return _step(verdict, "%s: %s" % (verdict, "; ".join(parts)), figures, [
        "which part of %s's transmit path: its NIC, driver, firmware, PCIe slot or its kernel" % suspect,
        "a host fault for certain: one server and one control host are two witnesses, the day-one matrix has more"])


def _loopback_step(rates, suspect, threshold):
    one, loop = rates.get("flows_1"), rates.get("loopback")
    if not one or not loop:
        return _not_measured("the loopback step")
    ratio = round(loop / one, 2)
    if ratio >= threshold:
        verdict = "loopback fast"
        text = ("one flow over %s's loopback (no NIC) reaches %s, %.2fx its one flow on the link (%s): its kernel's "
                "TCP does not hold one flow at the link's rate" % (suspect, format_bps(loop), ratio, format_bps(one)))
    else:
        verdict = "loopback slow too"
        text = ("one flow over %s's loopback (no NIC) reaches only %s, %.2fx its one flow on the link (%s): the host "
                "itself (its CPUs, its kernel) may hold one flow back"
                % (suspect, format_bps(loop), ratio, format_bps(one)))
    return _step(verdict, "%s: %s (threshold %gx)" % (verdict, text, threshold),
                 {"loopback_bps": loop, "link_bps": one, "ratio": ratio}, [
                     "anything about the NIC: loopback leaves it out by construction",
                     "the application talking to itself: its own rate over loopback is the engine's to measure"])


def _theory(steps, hosts):
    """The ladder's summary: what the steps together point at, worded as a theory."""
    suspect = hosts["suspect"]
    found = []
    if steps["flows"]["verdict"] in ("per flow", "per host"):
        found.append("the limit is %s" % steps["flows"]["verdict"])
    if steps["control"]["verdict"] == "the suspect's sender":
        found.append("it is on %s's sending side" % suspect)
    elif steps["control"]["verdict"] == "not the suspect alone":
        found.append("a control host shows it too")
    if steps["window"]["verdict"] in ("helps", "helps partly", "hurts"):
        found.append("a large window %s" % steps["window"]["verdict"])
    if steps["nagle"]["verdict"] in ("Nagle off helps", "Nagle off hurts"):
        found.append(steps["nagle"]["verdict"].replace("Nagle off", "turning Nagle off"))
    if steps["loopback"]["verdict"] == "loopback fast":
        found.append("the host's own TCP over loopback is fast")
    if not found:
        return "nothing characterized: the steps measured no clear effect (see each step)"
    return ("a theory, not a cause: %s; what inside %s causes it was not determined, and leaving it out of the ring "
            "works around it" % ("; ".join(found), suspect))


def ladder_verdict(results, hosts, settings, threshold):
    """Judge the ladder: ``{steps: {STEP: {verdict, text, figures, does_not_show}}, theory, threshold}``.

    ``results``: ``{run name: receiver-side bit/s or None}`` for the runs of ``ladder_runs(settings)``;
    ``hosts``: ``{suspect, server, control}``; ``threshold``: the ratio that counts as an effect (above 1).
    """
    if not isinstance(results, dict):
        raise LinkVerdictError("results must be a dict {run name: bit/s}, got %s" % type(results).__name__)
    if not isinstance(hosts, dict) or any(not isinstance(hosts.get(k), str) or not hosts.get(k)
                                          for k in ("suspect", "server", "control")):
        raise LinkVerdictError("hosts must name the suspect, the server and the control host, got %r" % (hosts,))
    if len({hosts["suspect"], hosts["server"], hosts["control"]}) != 3:
        raise LinkVerdictError("the suspect, the server and the control host must be three hosts, got %r" % (hosts,))
    threshold = _threshold(threshold)
    runs = ladder_runs(settings)
    names = [run["name"] for run in runs]
    unknown = sorted(set(results) - set(names))
    if unknown:
        raise LinkVerdictError("results has runs the ladder does not make: %s (it makes %s)"
                               % (", ".join(unknown), ", ".join(names)))
    rates = dict((name, _rate(results.get(name), "the run %s" % name)) for name in names)
    flows = sorted(set(settings["flows"]))
    best = max([rates["flows_%d" % n] or 0 for n in flows if n > 1] or [0]) or None
    steps = {
        "flows": _flows_step(rates, flows, threshold),
        "window": _window_step(rates, settings["window_bytes"], best, threshold),
        "nagle": _nagle_step(rates, settings["nagle_message_bytes"], threshold),
        "message_sizes": _sizes_step(rates, sorted(set(settings["message_sizes"])), threshold),
        "control": _control_step(rates, hosts, threshold),
        "loopback": _loopback_step(rates, hosts["suspect"], threshold) if "loopback" in names else _step(
            "not run", "the loopback step was not run (link_test_suspect_loopback false)", {}, []),
    }
    return {"steps": steps, "order": list(STEPS), "theory": _theory(steps, hosts), "threshold": threshold}
