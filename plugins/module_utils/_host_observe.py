# -*- coding: utf-8 -*-
# Copyright (c) 2026, inferlab developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Everything host_verify observes on a ring host, read in one call: the host_observe module's work, here so that
it can be tested without Ansible.

One call instead of eight tasks: each task on ansible-core's own strategy (the restore's) is a round trip and a
Python start on the host, 1-2 s each on the lab. The ping runs while the rest is read and the services answer."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shutil
import subprocess
import time

from ansible_collections.inferlab.distributed.plugins.module_utils import _identity, _net_counters, _nic, _nvml, _tbnet

PING_INTERVAL_S = '0.2'
LINK_KINDS = ('thunderbolt', 'ethernet')
# what of an Ethernet NIC goes into the host's identity (inferlab matrix groups hosts by it)
NIC_IDENTITY = ('interface', 'driver', 'driver_version', 'firmware_version', 'speed_mbps')
PING_WAIT_S = '1'
# Pauses between a service's tries while it starts: the first, then doubled up to the longest.
READY_FIRST_PAUSE_S = 1.0
READY_LONGEST_PAUSE_S = 10.0


def ping_argv(interface, peer_address, count):
    return ['ping', '-n', '-c', str(int(count)), '-i', PING_INTERVAL_S, '-W', PING_WAIT_S, '-I', interface,
            peer_address]


def start_ping(interface, peer_address, count, popen=subprocess.Popen):
    """The ping, started now and collected by finish_ping; the OSError when ping cannot run."""
    environment = dict(os.environ, LC_ALL='C')
    try:
        return popen(ping_argv(interface, peer_address, count), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                     stdin=subprocess.DEVNULL, env=environment, universal_newlines=True)
    except OSError as err:
        return err


def finish_ping(started):
    """``{rc, stdout, stderr}`` as the ping command left them."""
    if isinstance(started, OSError):
        return {'rc': None, 'stdout': '', 'stderr': 'ping could not run: %s' % started}
    out, err = started.communicate()
    return {'rc': started.returncode, 'stdout': out, 'stderr': err}


def link_addresses(interface, run=subprocess.run):
    """The output of ``ip -j -4 addr show dev IF`` (JSON text; empty when ip failed, as for a missing interface)."""
    try:
        done = run(['ip', '-j', '-4', 'addr', 'show', 'dev', interface], stdout=subprocess.PIPE,
                   stderr=subprocess.PIPE, universal_newlines=True, env=dict(os.environ, LC_ALL='C'), check=False)
    except OSError:
        return ''
    return done.stdout if done.returncode == 0 else ''


TC_DIRS = ('/usr/sbin', '/sbin')


def link_qdiscs(interface, run=subprocess.run):
    """The output of ``tc -j qdisc show dev IF`` (JSON text), or None when tc failed or is missing: the link's
    queueing disciplines, which the known-good snapshot and the restore's proof compare."""
    tc = shutil.which('tc') or shutil.which('tc', path=os.pathsep.join(TC_DIRS)) or 'tc'
    try:
        done = run([tc, '-j', 'qdisc', 'show', 'dev', interface], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                   universal_newlines=True, env=dict(os.environ, LC_ALL='C'), check=False)
    except OSError:
        return None
    return done.stdout if done.returncode == 0 else None


def storage(model_path):
    """Whether the model path exists and the space free to an unprivileged user on its filesystem (df's avail)."""
    exists = os.path.exists(model_path)
    try:
        stat = os.statvfs(model_path)
    except OSError:
        free = None
    else:
        free = stat.f_bavail * stat.f_frsize
    return {'model_path': model_path, 'exists': exists, 'disk_free_bytes': free}


def ask_service(service, prompt, max_tokens, timeout_s, post):
    """One real chat completion from an original service: ``{service, status, json, msg}``.

    ``post(url, body, timeout_s)`` returns ``(status, text)`` or raises ``OSError`` (refused, timed out)."""
    url = service['url'].rstrip('/') + '/chat/completions'
    body = {'model': service['model'], 'messages': [{'role': 'user', 'content': prompt}],
            'max_tokens': int(max_tokens)}
    try:
        status, text = post(url, body, timeout_s)
    except OSError as err:
        return {'service': service, 'status': None, 'json': None, 'msg': 'no answer from %s: %s' % (url, err)}
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    message = None if status == 200 else 'HTTP %s from %s: %s' % (status, url, (text or '')[:300])
    if status == 200 and not isinstance(parsed, dict):
        message = 'HTTP 200 from %s but the body is not a JSON object: %r' % (url, (text or '')[:300])
    return {'service': service, 'status': status, 'json': parsed if isinstance(parsed, dict) else None,
            'msg': message}


def serves(answer):
    """Whether an answer of ask_service is a completion (HTTP 200 with a JSON body): what a started service is
    waited for. Its content is judged later (host_verify_state)."""
    return answer['status'] == 200 and answer['json'] is not None


def ready_timeout(service, default_s):
    """A service's seconds to serve after a restart: its own ``ready_timeout_s``, else ``default_s``; 0 (ask once)
    where ``default_s`` is None (no restart to wait for)."""
    if default_s is None:
        return 0.0
    own = service.get('ready_timeout_s')
    return float(default_s if own in (None, '') else own)


def wait_until_serving(service, prompt, max_tokens, timeout_s, ready_timeout_s, post, started,
                       clock=time.monotonic, sleep=time.sleep):
    """Ask a service until it answers a real completion, the last time at ``ready_timeout_s`` seconds after
    ``started`` (0: once), each request with ``timeout_s``. A real model's server takes minutes to serve after a
    start: it refuses connections, then answers 503, while it loads. The answer gets ``wait``: ``{ready_timeout_s,
    waited_s, attempts}``."""
    deadline = started + max(float(ready_timeout_s), 0.0)
    pause = READY_FIRST_PAUSE_S
    attempts = 0
    while True:
        attempts += 1
        answer = ask_service(service, prompt, max_tokens, timeout_s, post)
        left = deadline - clock()
        if serves(answer) or left <= 0:
            break
        sleep(min(pause, left))
        pause = min(pause * 2, READY_LONGEST_PAUSE_S)
    answer['wait'] = {'ready_timeout_s': float(ready_timeout_s), 'waited_s': round(clock() - started, 1),
                      'attempts': attempts}
    return answer


def nic_identity(nic):
    """An Ethernet NIC as the identity records it: what tells one host's NIC from another's."""
    return dict({key: nic.get(key) for key in NIC_IDENTITY}, pci_id=(nic.get('pci') or {}).get('id'))


def observe(link_interface, peer_address, model_path, services, post, ping_count=3, prompt='', max_tokens=16,
            request_timeout_s=30.0, tbnet_sysfs_root='/sys', nvml_snapshot=None, sysfs_root='/sys',
            procfs_root='/proc', popen=subprocess.Popen, run=subprocess.run, import_pynvml=_nvml.import_pynvml,
            link_kind='thunderbolt', which_ethtool=_nic.ethtool_path, service_ready_timeout_s=None,
            clock=time.monotonic, sleep=time.sleep):
    """The observed document host_verify judges (see the host_verify_state filter); raises the readers' own errors
    (``SysfsError``, ``NvmlError``) for what cannot be read at all. An Ethernet link (``link_kind``) adds ``nic``
    (``_nic.read_nic``, through the real sysfs: a NIC is no fixture) and the NIC in the identity.

    Each service is asked once; with ``service_ready_timeout_s`` (after a restart), until it serves, for up to its
    own ``ready_timeout_s`` (an entry's key) or else that many seconds, counted from this call's start."""
    if link_kind not in LINK_KINDS:
        raise ValueError('link_kind must be one of %s, got %r' % (', '.join(LINK_KINDS), link_kind))
    pinging = start_ping(link_interface, peer_address, ping_count, popen=popen)
    try:
        started = clock()
        answers = [wait_until_serving(s, prompt, max_tokens, request_timeout_s,
                                      ready_timeout(s, service_ready_timeout_s), post, started,
                                      clock=clock, sleep=sleep) for s in services]
        tbnet = _tbnet.collect(sysfs_root=tbnet_sysfs_root, procfs_root=procfs_root)
        counters, missing = _net_counters.collect([link_interface], sysfs_root=sysfs_root, procfs_root=procfs_root,
                                                  fail_on_missing=False)
        counters['missing'] = missing
        observed = {
            'tbnet': tbnet,
            'identity': _identity.read_identity(sysfs_root=tbnet_sysfs_root, procfs_root=procfs_root),
            'net': counters,
            'addresses': link_addresses(link_interface, run=run),
            'qdiscs': link_qdiscs(link_interface, run=run),
            'nvml': _nvml.read(nvml_snapshot, procfs_root=procfs_root, import_pynvml=import_pynvml),
            'storage': storage(model_path),
            'services': answers,
        }
        if link_kind == 'ethernet':
            observed['nic'] = _nic.read_nic(link_interface, sysfs_root=sysfs_root, run=run, which=which_ethtool)
            observed['identity']['nic'] = nic_identity(observed['nic'])
    finally:
        ping = finish_ping(pinging)
    observed['ping'] = ping
    return observed
