# -*- coding: utf-8 -*-
# Copyright (c) 2026, inferlab developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Action plugin of inferlab.distributed.counter_window: one task per host per edge of a counter window.

The module takes the host's snapshot and starts or stops the sampler through the ledger; this plugin does the rest
on the controller, in the same task: the snapshot kept with the controller's time, the opening's evidence, the
samples written into the run directory (the module returns them, so there is no fetch), the deltas and notes. The
skews need every host's snapshot, so a third step, O(action=finish), runs on the controller only, once the closing
task has run on every host: it reads the hosts' openings and closings from hostvars, and writes the fragments."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.plugins.action import ActionBase

from ansible_collections.inferlab.distributed.plugins.plugin_utils import _counter_window_controller
from ansible_collections.inferlab.distributed.plugins.plugin_utils._plain import plain
from ansible_collections.inferlab.distributed.plugins.plugin_utils._run_fragment import (
    FragmentError,
    run_file_path,
    write_fragment,
    write_run_file,
)

MODULE = "inferlab.distributed.counter_window"
# the options only this plugin reads (documented with the module's); the rest go to the module
CONTROLLER_SPEC = {
    "run_dir": {"type": "str", "required": True},
    "link_interface": {"type": "str", "required": True},
    "sample_interval_s": {"type": "float", "default": 1.0},
    "sampler_max_s": {"type": "float", "default": 3600.0},
    "opening": {"type": "dict"},
    "hosts": {"type": "list", "elements": "str", "default": []},
}


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        module_args = dict(self._task.args)
        given = {name: module_args.pop(name) for name in CONTROLLER_SPEC if name in module_args}
        checked = ArgumentSpecValidator(CONTROLLER_SPEC).validate(given)
        if checked.error_messages:
            raise AnsibleActionFail("counter_window: %s" % "; ".join(checked.error_messages))
        ctl = plain(checked.validated_parameters)
        edge = module_args.get("action")
        try:
            if edge == "open":
                result.update(self._open(module_args, ctl, task_vars))
            elif edge == "close":
                result.update(self._close(module_args, ctl, task_vars))
            elif edge == "finish":
                result.update(self._finish(module_args, ctl, task_vars))
            else:
                raise _counter_window_controller.EdgeError(
                    "action must be one of open, close, finish (found %r)" % (edge,))
        except (_counter_window_controller.EdgeError, FragmentError, OSError) as exc:
            result.update(failed=True, msg=str(exc))
        return result

    def _module(self, module_args, task_vars):
        return self._execute_module(module_name=MODULE, module_args=module_args, task_vars=task_vars)

    def _open(self, module_args, ctl, task_vars):
        window, host = module_args.get("window"), module_args.get("host")
        _counter_window_controller.check_opening(window, module_args.get("run_id"), ctl["run_dir"],
                                                 module_args.get("interfaces"), ctl["sample_interval_s"],
                                                 ctl["sampler_max_s"])
        files = module_args.get("files") or []
        if len(files) != 2:
            raise _counter_window_controller.EdgeError(
                "files must name the sampler's output and its log (found %r)" % (files,))
        edge = self._module(module_args, task_vars)
        if edge.get("failed"):
            return edge
        at = _counter_window_controller.controller_time()
        snapshot = _counter_window_controller.snapshot(plain(edge), window, host, "open", ctl["link_interface"], at)
        opened = _counter_window_controller.opening(module_args["run_id"], snapshot, edge.get("sampler") or {}, files,
                                                    ctl["sample_interval_s"], ctl["sampler_max_s"])
        try:
            write_fragment(ctl["run_dir"], "windows/%s/open" % window, host,
                           dict(opened, window=window, host=host, phase="open"))
        except (FragmentError, OSError) as exc:
            raise _counter_window_controller.EdgeError(
                "window %s was opened on %s but its opening could not be written on the controller (%s); close it "
                "(its sampler is in the ledger and stops with the closing or the restore)"
                % (window, host, exc)) from exc
        out = {"changed": edge.get("changed", False), "sampler": edge.get("sampler"), "opened": opened}
        if "msg" in edge:
            out["msg"] = edge["msg"]
        return out

    def _close(self, module_args, ctl, task_vars):
        window, host = module_args.get("window"), module_args.get("host")
        _counter_window_controller.check_closing(window, module_args.get("run_id"), ctl["run_dir"])
        edge = self._module(dict(module_args, read_files=True), task_vars)
        texts = edge.pop("file_texts", None) or {}
        if edge.get("failed"):
            return edge
        edge = plain(edge)
        ids = edge.get("sampler_entries") or []
        out = {"changed": edge.get("changed", False), "window": window, "run_id": module_args["run_id"],
               "sampler_entries": ids, "window_result": None,
               "close": _counter_window_controller.snapshot(edge, window, host, "close", ctl["link_interface"],
                                                            _counter_window_controller.controller_time())}
        opened = ctl["opening"]
        if not isinstance(opened, dict) or "open" not in opened:
            out["msg"] = ("Window %s has no opening snapshot on %s (its opening failed or was not run here): no "
                          "deltas are written. %s" % (window, host, "Its sampler was stopped through the ledger."
                                                      if ids else "No sampler of it was recorded in the ledger."))
            return out
        # controller-side evidence, kept in check mode too, never reported as changed
        samples_dir = "windows/%s/samples" % window
        kept = {}
        for suffix, path in ((".jsonl", opened["sampler"]["output"]), (".log", opened["sampler"]["log"])):
            if ids and texts.get(path) is not None:
                write_run_file(run_file_path(ctl["run_dir"], samples_dir, host, suffix), texts[path])
                kept[suffix] = texts[path]
        out["window_result"] = _counter_window_controller.window_result(
            window, host, opened, out["close"], ids, "%s/%s" % (samples_dir, host), kept.get(".jsonl"),
            kept.get(".log"), ctl["link_interface"], module_args.get("interfaces") or [], bool(self._task.check_mode))
        return out

    def _finish(self, module_args, ctl, task_vars):
        window, host = module_args.get("window"), module_args.get("host")
        hostvars = task_vars.get("hostvars") or {}

        def fact(name, key):
            return plain((hostvars[name] if name in hostvars else {}).get(key) or {})

        openings, closings = [], []
        for name in ctl["hosts"]:
            opened = fact(name, "__counters_windows").get(window)
            closing = fact(name, "__counters_closing")
            if isinstance(opened, dict) and "open" in opened:
                openings.append(opened["open"])
            if closing.get("window") == window and closing.get("close"):
                closings.append(closing["close"])
        mine = fact(host, "__counters_closing")
        if mine.get("window") != window:
            raise _counter_window_controller.EdgeError(
                "window %s was not closed on %s: run action=close on every host first" % (window, host))
        skew_open = _counter_window_controller.skew(openings)[0]
        skew_close, close_hosts = _counter_window_controller.skew(closings)
        measured = mine.get("window_result")
        if not measured:
            return {"changed": False, "window_result": None}
        write_fragment(ctl["run_dir"], "windows/%s/close" % window, host, {
            "window": window, "host": host, "phase": "close", "run_id": mine["run_id"],
            "closed_at": mine["close"]["at"], "skew_close_s": skew_close, "skew_close_hosts": close_hosts,
            "close": mine["close"], "sampler_entries": mine["sampler_entries"]})
        measured = dict(measured, skew_open_s=skew_open, skew_close_s=skew_close,
                        skew_hosts=close_hosts)
        write_fragment(ctl["run_dir"], "fragments/window_%s" % window, host, measured)
        return {"changed": False, "window_result": measured}
