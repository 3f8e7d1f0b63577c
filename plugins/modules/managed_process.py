#!/usr/bin/python

# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Over 600 lines: about 290 of them are its DOCUMENTATION, EXAMPLES and RETURN (its code is under 400).

from __future__ import annotations

DOCUMENTATION = r"""
module: managed_process
short_description: Start or stop a named process through a process manager, recorded in the change ledger
version_added: 0.1.0
description:
  - Starts every long-running process of an experiment (each rank of a TP deployment, the host-side watchdog, a
    prober) through one of four managers, chosen per host by C(inferlab_process_manager).
  - V(process) spawns a detached child with a pidfile and a log file. It works everywhere, the netns lab included.
    V(systemd) starts a transient service with C(systemd-run) (no unit file is written). V(docker) and V(podman)
    run a container with host networking and IPC.
  - Every start is recorded in the host's change ledger as V(pending) BEFORE it happens, then marked V(applied) with
    the pid and start time, so a standalone restore (C(python3 inferlab_ledger.py undo)) stops it even when the
    controller died. Kinds V(process), V(systemd_unit) and V(container).
  - Every stop is the undo of those ledger entries, the single implementation that the restore playbook and the
    watchdog run too.
  - O(state=started) changes nothing when the process already runs as asked. The V(process) manager compares the
    pidfile's live process with O(argv) (a script started through its C(#!) line matches too) and its environment;
    the other managers compare the running unit or container with the command recorded in its open ledger entry,
    and its environment file with the asked environment.
    Anything else (not running, another command, another environment) is stopped through the ledger and started
    again.
author:
  - inferlab developers (@inferlab)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - inferlab.distributed.ledger
attributes:
  check_mode:
    support: full
    details: The current state is read (pidfile and /proc, C(systemctl show), C(container inspect)); nothing is
      started, stopped or written, not even a ledger line.
  diff_mode:
    support: full
    details: The state, pid and command before and after.
  platform:
    support: full
    platforms: posix
options:
  name:
    description:
      - What the process is, for example V(rank0). It names the container and, by default, the systemd unit, so it
        must match C([A-Za-z0-9][A-Za-z0-9_.-]*).
    type: str
    required: true
  state:
    description:
      - V(started) starts it unless it already runs as asked. V(stopped) undoes this name's open ledger entries.
      - V(status) only reads whether it runs (RV(running)), for health checks between steps; it never starts or
        stops anything.
    type: str
    choices: [started, stopped, status]
    default: started
  manager:
    description:
      - How the process is started and found again.
    type: str
    choices: [process, systemd, docker, podman]
    default: process
  argv:
    description:
      - The command, one list item per argument (no shell). Required to start a V(process) or V(systemd) unit.
      - For a container, the arguments after the image; leave it out to run the image's own command.
    type: list
    elements: str
  environment:
    description:
      - Variables set for the process, added to a clean base. Numbers are written out; quote anything else.
      - V(process) starts from C(PATH) (systemd's default for services,
        C(/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin)), C(LANG=C.UTF-8) and the user's
        C(HOME), never the module's own environment, so the process does not depend on how Ansible reached the
        host. V(systemd) gives a service its own clean environment; a
        container starts from its image's.
      - Under V(systemd), V(docker) and V(podman) the variables reach the process through a file, never its command
        line (where C(ps) would show them to every user) - C(<state_dir>/env/<unit>.env) or
        C(<state_dir>/env/<engine>-<name>.env), mode C(0600) in a C(0700) directory, passed as C(EnvironmentFile=) or
        C(--env-file). It is recorded in the ledger (kind V(file)) before it is written and removed by the same undo
        that stops the process. A container's value may not hold a line break (C(--env-file) cannot carry one).
    type: dict
    default: {}
  secret_environment:
    description:
      - Variables set for the process like O(environment), for values that are secrets (V(HF_TOKEN)). Ansible never
        logs them (C(no_log)) and no result, ledger line or command line shows them. Under V(systemd), V(docker)
        and V(podman) they are in the environment file with O(environment)'s, which only its undo removes.
      - Results show O(environment)'s names, but its values only for C(NCCL_*), C(GLOO_*), C(CUDA_VISIBLE_DEVICES)
        and C(PYTHONPATH); every other value reads C(<redacted>).
    type: dict
    default: {}
  working_dir:
    description:
      - The directory the process runs in (absolute). V(process) and V(systemd) default to C(/).
      - For a container, pass C(--workdir) in O(container_options) instead.
    type: path
  log_path:
    description:
      - File that receives the process's stdout and stderr, appended; its directory is made (mode C(0755)).
        Required for V(process) when O(state=started).
      - V(systemd) appends to it too (C(StandardOutput=append:)), V(podman) writes its C(k8s-file) log there.
        Docker cannot, so with V(docker) it is not used (a warning says so) and the log is read with
        C(docker logs).
    type: path
  pidfile:
    description:
      - The pidfile of a V(process), written atomically once the process runs. Required for V(process).
    type: path
  unit:
    description:
      - The transient unit, for V(systemd). Defaults to C(inferlab-<name>); C(.service) is added when missing.
    type: str
  systemd_properties:
    description:
      - Extra C(NAME=VALUE) unit properties for V(systemd) (C(--property=)), for example V(MemoryMax=100G) or
        V(LimitMEMLOCK=infinity).
      - C(KillMode), C(TimeoutStopSec), C(Environment), C(WorkingDirectory) and, with O(log_path),
        C(StandardOutput) and C(StandardError) are set by this module and refused here.
    type: list
    elements: str
    default: []
  image:
    description:
      - The container image, for V(docker) and V(podman). Required to start a container.
    type: str
  container_options:
    description:
      - Extra options for C(docker run) / C(podman run), placed after the module's own and before the image, for
        example V(--shm-size=32g).
    type: list
    elements: str
    default: []
  container_gpus:
    description:
      - Give the container every GPU. Docker uses C(--gpus all) (the NVIDIA Container Toolkit's runtime hook);
        podman uses the CDI device C(--device nvidia.com/gpu=all), which needs
        C(nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml) on the host (older podman accepts C(--gpus) but
        attaches nothing with it).
    type: bool
    default: true
  volumes:
    description:
      - Container volumes, C(SRC:DST) or C(SRC:DST:OPTIONS), for example V(/models:/models:ro).
    type: list
    elements: str
    default: []
  stop_timeout_s:
    description:
      - Seconds between the polite stop (SIGTERM, C(systemctl stop), C(docker stop)) and SIGKILL. Recorded in the
        ledger entry, so the restore waits as long. Containers round it up to whole seconds.
    type: float
    default: 30
  startup_check_s:
    description:
      - After the start, the process must still run this long, else the module fails quoting the last 40 lines of
        its log (or C(docker logs)). V(0) checks once, at once.
    type: float
    default: 1.0
  run_id:
    description:
      - The run, stamped into the ledger lines; the module fails when another run holds the ledger's lock.
        Required for O(state=started).
    type: str
  log_failure_patterns:
    description:
      - With O(state=status), regular expressions (Python) that a healthy process never logs, for example
        V(CUDA error). The lines of the end of its log that match any come back as RV(failure_lines), so that one
        call says whether it runs and whether it failed while running.
      - The log is O(log_path) (V(process), V(systemd), V(podman)) or C(docker logs) (V(docker)).
    type: list
    elements: str
    default: []
  log_scan_lines:
    description:
      - How many of the log's last lines O(log_failure_patterns) are matched against (at most the last 16 MiB).
    type: int
    default: 20000
  procfs_root:
    description:
      - Where procfs is mounted; pids, start times, command lines and environments are read below it.
    type: path
    default: /proc
notes:
  - The V(process) manager needs no daemon. The started process gets a session of its own, C(/dev/null) as stdin
    and the log file as stdout and stderr, so it outlives the module over SSH with pipelining.
  - A process, unit or container that runs under this name without an open ledger entry is not ours to restart or
    stop. The module fails and names it, since a restore could not stop it.
  - V(stopped) stops only what the ledger holds for this name. A stop that fails leaves the entry V(undo_failed), and
    the module fails with the reason.
seealso:
  - module: inferlab.distributed.change_ledger
"""

EXAMPLES = r"""
- name: Start rank 0 of the TP2 server
  inferlab.distributed.managed_process:
    name: rank0
    manager: "{{ inferlab_process_manager }}"
    argv: [/opt/sglang/bin/python, -m, sglang.launch_server, --model-path, /models/m, --tp, "2", --nnodes, "2",
           --node-rank, "0", --dist-init-addr, "169.254.77.1:5000", --host, 127.0.0.1, --port, "30000"]
    environment:
      NCCL_SOCKET_IFNAME: "=thunderbolt0"
      GLOO_SOCKET_IFNAME: thunderbolt0
      NCCL_IB_DISABLE: 1
    log_path: /var/lib/inferlab/logs/rank0.log
    pidfile: /var/lib/inferlab/run/rank0.pid
    image: lmsysorg/sglang:v0.5.6
    volumes: [/models:/models:ro]
    startup_check_s: 5
    ledger_dir: /var/lib/inferlab/ledger
    ledger_host: "{{ inventory_hostname }}"
    run_id: "{{ inferlab_run_dir | basename }}"

- name: Stop it (the undo of its ledger entries)
  inferlab.distributed.managed_process:
    name: rank0
    state: stopped
    manager: "{{ inferlab_process_manager }}"
    pidfile: /var/lib/inferlab/run/rank0.pid
    ledger_dir: /var/lib/inferlab/ledger
    ledger_host: "{{ inventory_hostname }}"
"""

RETURN = r"""
state:
  description: The state asked for, reached (or, in check mode, that would be).
  returned: success
  type: str
  sample: started
running:
  description: Whether the process runs now, for O(state=status).
  returned: when O(state=status)
  type: bool
  sample: true
pid:
  description: The pid of the process (for a unit its main pid, for a container its init process on the host);
    null when stopped or not known in check mode. With O(state=status), a process that died reports the pid its
    ledger entry recorded.
  returned: success
  type: int
  sample: 48213
start_time:
  description: Its start time, field 22 of C(/proc/PID/stat) (clock ticks after boot); with the pid it identifies
    the process even after the pid is reused.
  returned: success
  type: int
  sample: 81234567
command:
  description: The argv that starts it, as run (or that would run) - the C(systemd-run) or C(docker run) argv, or
    the plain argv for V(process).
  returned: when O(state=started)
  type: list
  elements: str
  sample: [/usr/bin/systemd-run, --unit=inferlab-rank0.service, --collect, --property=KillMode=control-group,
           --property=TimeoutStopSec=30s, --setenv=NCCL_IB_DISABLE=1, --, /opt/sglang/bin/python, -m,
           sglang.launch_server]
unit_text:
  description: The transient unit as C(systemctl cat) would show it (equivalent, for the record).
  returned: when O(manager=systemd) and O(state=started)
  type: str
  sample: "# /run/systemd/transient/inferlab-rank0.service\n...\n[Service]\nKillMode=control-group\n..."
entry_id:
  description: The ledger entry of the running process (the new one after a start); null when stopped.
  returned: success
  type: str
  sample: 20261130T101502Z-process-3fa9
undone:
  description: The ledger entries undone (or that would be, in check mode), newest first - by O(state=stopped), or
    to replace a process that ran with another command.
  returned: success
  type: list
  elements: str
  sample: [20261130T101502Z-process-3fa9]
log_path:
  description: Where the process's output goes; null for docker, whose log is read with C(docker logs).
  returned: success
  type: str
  sample: /var/lib/inferlab/logs/rank0.log
failure_lines:
  description: The lines of the end of its log that match O(log_failure_patterns) (at most 10; a traceback's first
    line carries its exception).
  returned: when O(state=status) and O(log_failure_patterns) is not empty
  type: list
  elements: str
  sample: ["Traceback (most recent call last): ... RuntimeError: NCCL error"]
log_tail:
  description: The last lines of the log, when the process did not survive O(startup_check_s).
  returned: failure, when the process exited during the startup check
  type: list
  elements: str
  sample: ["Traceback (most recent call last):", "RuntimeError: CUDA out of memory"]
"""

import os  # noqa: E402 - after the docs, as in community.general
import time  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

from ansible_collections.inferlab.distributed.plugins.module_utils import (  # noqa: E402
    _acceptance,
    _ledger_core,
    _ledger_proc,
    _ledger_undo,
    _module_base,
)
from ansible_collections.inferlab.distributed.plugins.module_utils import _process_manager as pm  # noqa: E402

LOG_TAIL_LINES = 40
LOG_SCAN_MAX_BYTES = 16 * 1024 * 1024


class ManagedProcess(_module_base.StateModule):
    expected_errors = (pm.ProcessManagerError, _ledger_core.LedgerError)

    def __init__(self, module):
        super().__init__(module)
        self.manager = self.params['manager']
        self.procfs_root = self.params['procfs_root']
        self.started = self.params['state'] == 'started'
        self.undone = []
        self.command = None
        # what results echo of the arguments: environment values redacted, secret_environment's names only (Ansible
        # masks its values too, no_log)
        secret = self.params['secret_environment'] or {}
        self.result_extras['invocation'] = {'module_args': dict(
            self.params, environment=_ledger_core.redact_environment(self.params['environment'] or {}),
            secret_environment={k: _ledger_core.REDACTED for k in secret})}

    def shown_command(self):
        """The start command as results show it: environment values redacted."""
        return _ledger_core.redact_command(self.command) if self.command else self.command

    # -- options, commands and what names this process ---------------------------------------------------------

    def prepare(self):
        params = self.params
        self.name = pm.check_name(params['name'])
        for option in ('stop_timeout_s', 'startup_check_s'):
            pm.check_seconds(option, params[option])
        self.environment = pm.check_environment(params['environment'])
        secret = pm.check_environment(params['secret_environment'])
        both = sorted(set(self.environment) & set(secret))
        if both:
            self.fail(f'{", ".join(both)} set in both environment and secret_environment; set each in one')
        self.environment.update(secret)
        self.argv = pm.check_argv(params['argv']) if params['argv'] else None
        self.log_path = params['log_path']
        if self.manager == 'docker' and self.log_path and self.started:
            self.module.warn(f'docker keeps a container log itself; log_path {self.log_path} is not used (read it '
                             f'with: docker logs {self.name})')
            self.log_path = None
        self.unit = pm.service_unit(params['unit'] or f'inferlab-{self.name}') if self.manager == 'systemd' else None
        if self.started:
            missing = [o for o, needed in (('argv', self.manager in ('process', 'systemd')),
                                           ('log_path', self.manager == 'process'),
                                           ('image', self.manager in ('docker', 'podman'))) if needed and not params[o]]
            if missing:
                self.fail(f'manager={self.manager} state=started needs {", ".join(missing)}')
        self.binary = None
        if self.manager == 'systemd':
            self.binary = self.module.get_bin_path('systemctl', required=True)
        elif self.manager in ('docker', 'podman'):
            self.binary = self.module.get_bin_path(self.manager, required=True)
        # systemd and the container engines get the environment from a 0600 file beside the ledger, recorded in it
        # (kind file) before it is written and removed by the same undo that stops the process
        self.env_path = (None if self.manager == 'process'
                         else pm.env_file_path(self.ledger_dir, self.manager, name=self.name, unit=self.unit))
        self.env_file = self.env_path if self.environment else None  # what the start command names
        if self.env_file:
            self.env_text = pm.env_file_text(self.manager, self.environment)
        self.command = self.build_command() if self.started else None
        self.identity = pm.identity_params(self.manager, name=self.name, pidfile=params['pidfile'], unit=self.unit)

    def build_command(self):
        params = self.params
        if self.manager == 'process':
            return self.argv
        if self.manager == 'systemd':
            return pm.systemd_run_argv(self.unit, self.argv, self.env_file, params['working_dir'],
                                       params['systemd_properties'], self.log_path, params['stop_timeout_s'],
                                       systemd_run=self.module.get_bin_path('systemd-run', required=True))
        return pm.container_run_argv(self.manager, self.name, params['image'], self.argv, self.env_file,
                                     params['container_options'], params['volumes'], self.log_path,
                                     gpus=params['container_gpus'], binary=self.binary)

    def describe(self):
        if self.manager == 'process':
            return f'process {self.name} (pidfile {self.params["pidfile"]})'
        if self.manager == 'systemd':
            return f'unit {self.unit}'
        return f'{self.manager} container {self.name}'

    # -- reading the current state -----------------------------------------------------------------------------

    def status(self, entries):
        """``{running, pid, start_time, exists, environment_matches}`` of this name now."""
        if self.manager == 'process':
            # to stop, the command recorded in the ledger tells our process from whatever reused the pid
            argv = self.argv or (entries[-1]['params'].get('cmdline') if entries else None)
            if not isinstance(argv, list):
                return {'running': False, 'pid': None, 'start_time': None, 'environment_matches': None}
            return pm.process_status(self.params['pidfile'], argv,
                                     self.environment if self.started else None, self.procfs_root)
        if self.manager == 'systemd':
            out = self.checked_command(pm.systemctl_status_argv(self.unit, self.binary), f'cannot read {self.unit}')
            shown = pm.parse_systemctl_show(out)
            pid = shown['main_pid']
            return {'running': shown['running'], 'pid': pid, 'start_time': self.start_time(pid),
                    'active_state': shown['active_state']}
        rc, out, err = self.run_command(pm.container_status_argv(self.manager, self.name, self.binary))
        try:
            state = pm.parse_container_status(rc, out, err)
        except pm.ProcessManagerError as exc:
            self.fail(f'cannot read {self.describe()}: {exc}', rc=rc, stdout=out, stderr=err)
        state['start_time'] = self.start_time(state['pid'])
        return state

    def start_time(self, pid):
        identity = _ledger_proc.process_identity(pid, self.procfs_root) if pid else None
        return identity['start_time'] if identity else None

    def own_entries(self):
        """This process's open entries, and before them those of its environment file (older: it is recorded and
        written before the start), so that one undo stops the process first and then removes the file."""
        found = pm.open_entries(self.ledger_dir, self.host, self.manager, self.identity)
        if not self.env_path:
            return found
        files = self.open_entries(lambda e: e['kind'] == 'file'
                                  and os.path.normpath(str(e['params'].get('path'))) == self.env_path)
        return files + found

    def process_entries(self, entries):
        return [e for e in entries if e['kind'] != 'file']

    def runs_as_asked(self, status, entry):
        if self.manager == 'process':
            return status['environment_matches'] is not False
        # the binary's path is left out: where get_bin_path found it is not part of what runs
        recorded = entry['params'].get('command') or []
        return recorded[1:] == self.command[1:] and self.env_file_as_asked()

    def env_file_as_asked(self):
        """Whether the environment file holds exactly the asked environment (none asked: nothing to hold)."""
        if not self.env_file:
            return True
        try:
            with open(self.env_file, encoding='utf-8') as handle:
                return handle.read() == self.env_text
        except (OSError, UnicodeDecodeError):
            return False

    def not_ours(self, status):
        hint = {'process': f'kill {status["pid"]}', 'systemd': f'systemctl stop {self.unit}',
                'docker': f'docker rm -f {self.name}', 'podman': f'podman rm -f {self.name}'}[self.manager]
        self.fail(
            f'{self.describe()} runs (pid {status["pid"]}) but has no open entry in the ledger of {self.host}, '
            f'so it was not started by inferlab (or its entry was closed) and a restore could not stop it; stop '
            f'it yourself ({hint}) or pick another name', pid=status['pid'])

    # -- stopping: always the undo of the ledger entries -------------------------------------------------------

    def stop_through_ledger(self, ids):
        ctx = _ledger_undo.UndoContext(
            procfs_root=self.procfs_root,
            systemctl_command=[self.binary] if self.manager == 'systemd' else None,
            container_commands={self.manager: [self.binary]} if self.manager in ('docker', 'podman') else None,
            run_command=self.undo_command)
        result = self.undo(ids, ctx, run_id=self.params['run_id'])
        self.undone += result['undone']
        if result['failed']:
            self.fail(f'could not stop {self.describe()}: {result["message"]}',
                      failures=result['failed'], details=result['details'], undone=self.undone)
        return result

    def state_stopped(self):
        entries = self.own_entries()
        status = self.status(self.process_entries(entries))
        if not entries:
            if status['running']:
                self.not_ours(status)
            return self.result(False, status, None)
        ids = [e['id'] for e in entries]
        if self.check_mode:
            self.undone = list(reversed(ids))
            return self.result(True, status, None)
        result = self.stop_through_ledger(ids)
        return self.result(result['changed'], status, None)

    # -- reading only ------------------------------------------------------------------------------------------

    def state_status(self):
        """state=status: whether this name runs now. A process that died keeps the pid of its open ledger entry in
        the result, so a health check can name it."""
        entries = self.process_entries(self.own_entries())
        status = self.status(entries)
        recorded_pid = entries[-1]['params'].get('pid') if entries else None
        result = self.result(False, status, status, entry_id=entries[-1]['id'] if entries else None)
        result.update(running=bool(status['running']), pid=status['pid'] or recorded_pid)
        if self.params['log_failure_patterns']:
            try:
                result['failure_lines'] = _acceptance.log_failure_lines(
                    self.log_end(), self.params['log_failure_patterns'])
            except _acceptance.AcceptanceError as err:
                self.fail(f'log_failure_patterns: {err}')
        return result

    def container_log(self, lines):
        """``(argv, text)`` of ``docker logs``/``podman logs`` for its last ``lines`` lines, both streams."""
        argv = pm.container_logs_argv(self.manager, self.name, lines, self.binary)
        _rc, out, err = self.run_command(argv)
        return argv, '\n'.join(t for t in (out.rstrip('\n'), err.rstrip('\n')) if t)

    def log_end(self):
        """The last log_scan_lines lines of its log: the log file, or, under docker, ``docker logs`` (both
        streams)."""
        lines = self.params['log_scan_lines']
        if self.manager == 'docker':
            return self.container_log(lines)[1]
        if not self.log_path:
            self.fail(f'log_failure_patterns needs the log of {self.describe()}: set log_path')
        return pm.log_tail(self.log_path, lines, max_bytes=LOG_SCAN_MAX_BYTES)

    # -- starting ----------------------------------------------------------------------------------------------

    def state_started(self):
        entries = self.own_entries()
        processes = self.process_entries(entries)
        status = self.status(processes)
        if status['running']:
            if not processes:
                self.not_ours(status)
            current = next((e for e in reversed(processes) if e['params'].get('pid') == status['pid']),
                           processes[-1])
            if self.runs_as_asked(status, current):
                return self.result(False, status, status, entry_id=current['id'])
        elif status.get('exists') and not processes:
            self.fail(f'a stopped {self.describe()} exists and is not in the ledger of {self.host}; '
                      f'remove it ({self.manager} rm {self.name}) or pick another name')
        if self.check_mode:
            self.undone = [e['id'] for e in reversed(entries)]
            return self.result(True, status, {'running': True, 'pid': None, 'start_time': None})
        if entries:
            # what runs (or ran, or was left pending) under this name goes first, through its undo
            self.stop_through_ledger([e['id'] for e in entries])
            if self.manager == 'process':
                left = self.status([])
                if left['running']:
                    self.not_ours(left)  # the pidfile's process was none of the entries undone
        if self.env_file:
            self.write_env_file()
        line = _ledger_core.record(self.ledger_dir, self.host, pm.LEDGER_KINDS[self.manager],
                                   pm.ledger_params(self.manager, name=self.name, pidfile=self.params['pidfile'],
                                                    argv=self.argv, unit=self.unit, command=self.command,
                                                    stop_timeout=self.params['stop_timeout_s']),
                                   run_id=self.params['run_id'])
        entry_id = line['id']
        log_start = pm.log_size(self.log_path) if self.log_path else 0
        if self.manager == 'process':
            after = self.spawn(entry_id)
        else:
            after = self.launch(entry_id)
        if not after['running']:
            self.startup_failed(entry_id, after, log_start)
        return self.result(True, status, after, entry_id=entry_id)

    def write_env_file(self):
        """Record the environment file (it did not exist), then write it 0600: what the undo removes after it stops
        the process. One left by nobody's entry is not this module's to overwrite."""
        if os.path.lexists(self.env_file):
            self.fail(f'{self.env_file} exists but no open entry in the ledger of {self.host} records it, so it '
                      f'was not written by inferlab for {self.describe()}; remove it or pick another name')
        with _ledger_undo.change(self.ledger_dir, self.host, 'file', {'path': self.env_file, 'existed': False},
                                 run_id=self.params['run_id'], undo_on_error=False):
            pm.write_env_file(self.env_file, self.env_text)

    def spawn(self, entry_id):
        params = self.params
        try:
            pid = pm.spawn_detached(self.argv, self.environment, self.log_path, params['pidfile'],
                                    params['working_dir'])
        except pm.ProcessManagerError as err:
            self.fail(f'{err}; ledger entry {entry_id} stays pending for the restore, which finds '
                      'nothing to stop', entry_id=entry_id, command=self.shown_command())
        start_time = self.start_time(pid)
        self.mark_applied(entry_id, pid, start_time)
        running = pm.wait_alive(pid, params['startup_check_s'], self.procfs_root)
        return {'running': running, 'pid': pid, 'start_time': start_time, 'how': pm.exit_status(pid)}

    def launch(self, entry_id):
        """systemd-run or docker/podman run, then the startup check."""
        if self.log_path:
            _ledger_proc.make_parent_dir(self.log_path)
        self.checked_command(self.command, f'cannot start {self.describe()}', shown=self.shown_command(),
                             entry_id=entry_id, command=self.shown_command())
        time.sleep(self.params['startup_check_s'])
        after = self.status([])
        self.mark_applied(entry_id, after['pid'], after['start_time'])
        after['how'] = f'ActiveState={after["active_state"]}' if self.manager == 'systemd' else 'the container exited'
        return after

    def mark_applied(self, entry_id, pid, start_time):
        known = {'pid': pid, 'start_time': start_time} if pid and start_time is not None else None
        _ledger_core.mark(self.ledger_dir, self.host, entry_id, 'applied', params=known, run_id=self.params['run_id'])

    def startup_failed(self, entry_id, after, log_start):
        if self.manager in ('docker', 'podman'):
            argv, tail = self.container_log(LOG_TAIL_LINES)
            source = ' '.join(argv)
        elif self.log_path:
            tail = pm.log_tail(self.log_path, LOG_TAIL_LINES, start=log_start)
            source = self.log_path
        else:
            tail, source = '', f'no log_path; see journalctl -u {self.unit}'
        lines = tail.splitlines()[-LOG_TAIL_LINES:]
        quoted = '\n'.join(lines) if lines else '(nothing)'
        self.fail(
            f'{self.describe()} did not stay up for {self.params["startup_check_s"]}s after its start '
            f'({after.get("how") or "it exited"}); its ledger entry {entry_id} stays open for the restore. Last '
            f'lines of its output ({source}):\n{quoted}',
            entry_id=entry_id, pid=after['pid'], command=self.shown_command(), log_path=self.log_path,
            log_tail=lines)

    # -- the result --------------------------------------------------------------------------------------------

    def result(self, changed, before, after, entry_id=None):
        after = after or {'running': False, 'pid': None, 'start_time': None}
        result = dict(changed=changed, state=self.params['state'], pid=after['pid'], start_time=after['start_time'],
                      entry_id=entry_id, undone=self.undone, log_path=self.log_path)
        if self.started:
            result['command'] = self.shown_command()
            if self.manager == 'systemd':
                params = self.params
                result['unit_text'] = pm.systemd_unit_text(self.unit, self.argv, self.env_file,
                                                           params['working_dir'], params['systemd_properties'],
                                                           self.log_path, params['stop_timeout_s'])
        if self.module._diff:
            result['diff'] = dict(
                before={'state': 'started' if before['running'] else 'stopped', 'pid': before['pid']},
                after={'state': 'started' if after['running'] else 'stopped', 'pid': after['pid'],
                       'command': self.shown_command()})
        return result


def build_module():
    return AnsibleModule(
        argument_spec=_module_base.ledger_argument_spec(
            name=dict(type='str', required=True),
            state=dict(type='str', choices=['started', 'stopped', 'status'], default='started'),
            manager=dict(type='str', choices=list(pm.MANAGERS), default='process'),
            argv=dict(type='list', elements='str'),
            environment=dict(type='dict', default={}),
            secret_environment=dict(type='dict', default={}, no_log=True),
            working_dir=dict(type='path'),
            log_path=dict(type='path'),
            pidfile=dict(type='path'),
            unit=dict(type='str'),
            systemd_properties=dict(type='list', elements='str', default=[]),
            image=dict(type='str'),
            container_options=dict(type='list', elements='str', default=[]),
            container_gpus=dict(type='bool', default=True),
            volumes=dict(type='list', elements='str', default=[]),
            stop_timeout_s=dict(type='float', default=30),
            startup_check_s=dict(type='float', default=1.0),
            log_failure_patterns=dict(type='list', elements='str', default=[]),
            log_scan_lines=dict(type='int', default=20000),
            procfs_root=dict(type='path', default='/proc'),
        ),
        required_if=[
            ('state', 'started', ['run_id']),
            ('manager', 'process', ['pidfile']),
        ],
        supports_check_mode=True,
    )


def main():
    ManagedProcess(build_module()).run()


if __name__ == '__main__':
    main()
