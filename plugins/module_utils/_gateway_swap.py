# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Apply a LiteLLM proxy config (the gateway's) by a rolling restart with an explicit drain, losing no request.

Over 600 lines on purpose: installed alone on hosts as ``inferlab_gateway_swap.py`` (the ledger role's files), and
its sections (validation, HTTP, the upstream file, /proc, instances, the rolling restart, the undo) are one subject.

A LiteLLM proxy configured from a file reads that file only at start, so adding or removing a general fallback
means a restart; restarting the only instance drops the requests that arrive meanwhile (a 1-2 s stop plus a 6-8 s
start). The gateway therefore runs as N LiteLLM instances behind nginx (the "front"), and a config is applied one
instance at a time (``rolling_restart``):

1. mark the instance ``down`` in the front's upstream file and reload nginx (SIGHUP to its master);
2. wait until every OLD nginx worker has exited: ``nginx -s reload`` returns before the switch, and an old worker
   still sends new requests to the instance until it has finished its in-flight ones and exits;
3. stop the instance with SIGTERM, which lets LiteLLM finish its in-flight requests (SIGKILL only after a timeout);
4. start it again (it reads the new config) and wait for ``/health/readiness``;
5. send one real chat request (the warm-up) and read ``GET /fallback/<role>``, which shows the fallbacks the
   instance actually loaded (readable without a database);
6. put it back in the upstream file (the original bytes) and reload nginx.

Why the explicit drain: relying on nginx's own retries (``proxy_next_upstream``) is not enough,
because nginx marks an upstream that refused a connection while restarting as unavailable for ``fail_timeout`` and
the requests meanwhile pile onto the remaining instance's failures; restarts without the drain lost 7-17 requests
per swap, with it 0 of ~350 probes at 200 ms (streaming and 1.5 s replies included), ~20-26 s per swap.

With a single instance and no front this is the plain restart, a brief outage that the caller measures.

Everything here is standard library only (plus the ledger's modules, for starting processes and reading /proc) and
compiles on Python 3.8: the change ledger's undo of a ``gateway_config`` entry runs it on the gateway host without a
controller, as ``inferlab_gateway_swap.py`` beside the ledger's modules.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import re
import signal
import time
import urllib.error
import urllib.parse
import urllib.request

try:
    from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_base, _ledger_proc
except ImportError:  # on a host, installed beside the ledger's modules (see _ledger_core)
    import inferlab_ledger_base as _ledger_base
    import inferlab_ledger_proc as _ledger_proc

MANAGERS = ('process', 'systemd')
FRONT_KINDS = ('nginx',)
BODY_MAX_CHARS = 4000
SHORT_BODY_CHARS = 300
POLL_S = _ledger_proc.POLL_S
KILL_WAIT_S = _ledger_proc.KILL_WAIT_S
# how long a systemctl command may take beyond the stop timeout it was given
COMMAND_GRACE_S = 60.0
WARMUP_PROMPT = 'inferlab gateway warm-up'
USER_AGENT = 'inferlab-gateway-swap/1'
# a unit name as systemd spells it, template instances (``@``) and systemd-escape's ``\x2d`` included
UNIT_RE = re.compile(r'^[A-Za-z0-9][-A-Za-z0-9:_.@\\]*$')
NO_FALLBACK_RE = re.compile(r'\bno\b.*\bfallbacks configured\b', re.IGNORECASE)
# one `server ADDRESS [params];` statement in the code part of a line (the part before any '#'): at the line's start
# or right after another statement or a brace
SERVER_RE = re.compile(r'(?:^|(?<=[;{}]))[ \t]*server[ \t]+(?P<address>[^\s;#{}]+)(?P<params>[^;#{}]*);')
INSTANCE_KEYS = {
    'common': ('name', 'url', 'manager', 'upstream_server'),
    'process': ('pidfile', 'start_argv', 'log', 'match'),
    'systemd': ('unit',),
}
FRONT_KEYS = ('kind', 'upstream_file', 'pidfile')


class GatewayError(Exception):
    """The gateway swap cannot go on: bad input, a refused or failed request, a process or front that misbehaves.

    ``rolling_restart`` attaches ``steps`` (the step dicts so far, the failed one last) and ``restore`` (what became
    of the front's upstream file: None when it was never changed, else a sentence)."""

    def __init__(self, message, steps=None, restore=None):
        super().__init__(message)
        self.steps = steps
        self.restore = restore


# ---------------------------------------------------------------------------------------------------------------
# validation


def _absolute(value, what):
    if not isinstance(value, str) or not os.path.isabs(value) or '\0' in value:
        raise GatewayError(f'{what} must be an absolute path, got {value!r}')
    return value


def _text(value, what):
    if not isinstance(value, str) or not value.strip():
        raise GatewayError(f'{what} must be a non-empty string, got {value!r}')
    return value


def _split_url(url, what):
    """``(normalised url, host, port)`` of an http(s) base URL without a path (a trailing / is dropped)."""
    if not isinstance(url, str):
        raise GatewayError(f'{what} must be a string like http://HOST:PORT, got {url!r}')
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ('http', 'https') or not parts.hostname:
        raise GatewayError(f'{what} must be an http:// or https:// URL like http://HOST:PORT, got {url!r}')
    if parts.path not in ('', '/') or parts.query or parts.fragment or parts.username or parts.password:
        raise GatewayError(f'{what} must be the base URL of the instance, without a path (no /v1), query or '
                           f'credentials, got {url!r}')
    try:
        port = parts.port or (443 if parts.scheme == 'https' else 80)
    except ValueError:
        raise GatewayError(f'{what} has an invalid port: {url!r}') from None
    return url.rstrip('/'), parts.hostname, port


def _unknown_keys(given, known, what):
    unknown = sorted(str(k) for k in given if k not in known)
    if unknown:
        raise GatewayError(f'{what} has unknown keys {", ".join(unknown)}; known keys are {", ".join(known)}')


def check_instance(instance):
    """Validate one gateway instance and return a normalised copy: ``url`` without a trailing ``/``,
    ``upstream_server`` filled with the URL's ``host:port`` when absent, only the keys of its manager.

    Keys of the other manager are accepted only when empty (None), as an Ansible option list leaves them."""
    if not isinstance(instance, dict):
        raise GatewayError(f'a gateway instance must be a mapping, got {type(instance).__name__}')
    name = instance.get('name')
    if not isinstance(name, str) or not name.strip():
        raise GatewayError(f'a gateway instance needs "name", a non-empty string, got {name!r}')
    what = f'gateway instance {name}'
    manager = instance.get('manager')
    if manager not in MANAGERS:
        raise GatewayError(f'{what}: "manager" must be one of {", ".join(MANAGERS)}, got {manager!r}')
    known = INSTANCE_KEYS['common'] + INSTANCE_KEYS['process'] + INSTANCE_KEYS['systemd']
    _unknown_keys(instance, known, what)
    own = INSTANCE_KEYS['common'] + INSTANCE_KEYS[manager]
    foreign = sorted(k for k in instance if k not in own and instance[k] is not None)
    if foreign:
        raise GatewayError(f'{what}: {", ".join(foreign)} belong to another manager than {manager}; leave them out')
    if 'url' not in instance:
        raise GatewayError(f'{what} needs "url", the base URL of the instance (http://HOST:PORT, no /v1)')
    url, host, port = _split_url(instance['url'], f'{what}: "url"')
    checked = {'name': name, 'url': url, 'manager': manager}
    if manager == 'process':
        checked['pidfile'] = _absolute(instance.get('pidfile'), f'{what}: "pidfile"')
        argv = instance.get('start_argv')
        if not isinstance(argv, (list, tuple)) or not argv or not all(isinstance(a, str) for a in argv) \
                or not argv[0] or any('\0' in a for a in argv):
            raise GatewayError(f'{what}: "start_argv" must be a non-empty list of strings (the command that starts '
                               f'the instance), got {argv!r}')
        checked['start_argv'] = list(argv)
        checked['log'] = _absolute(instance.get('log'), f'{what}: "log"')
        checked['match'] = _text(instance.get('match'), f'{what}: "match" (a substring of its command line)')
    else:
        unit = instance.get('unit')
        if not isinstance(unit, str) or not UNIT_RE.match(unit):
            raise GatewayError(f'{what}: "unit" must be a systemd unit name (letters, digits, ":", "_", ".", "@", '
                               f'"-", starting with a letter or digit), got {unit!r}')
        checked['unit'] = unit
    server = instance.get('upstream_server')
    if server is None:
        server = f'[{host}]:{port}' if ':' in host else f'{host}:{port}'
    elif not isinstance(server, str) or not server or re.search(r'[\s;#{}]', server):
        raise GatewayError(f'{what}: "upstream_server" must be the address as the upstream file names it '
                           f'(HOST:PORT, no spaces, ";", "#" or braces), got {server!r}')
    checked['upstream_server'] = server
    return checked


def check_front(front):
    """Validate the front: ``{}`` (or None) for none, else ``{kind: nginx, upstream_file, pidfile}``."""
    if front is None or (isinstance(front, dict) and all(v is None for v in front.values())):
        return {}
    if not isinstance(front, dict):
        raise GatewayError(f'the front must be a mapping ({{}} for none), got {type(front).__name__}')
    _unknown_keys(front, FRONT_KEYS, 'the front')
    if front.get('kind') not in FRONT_KINDS:
        raise GatewayError(f'the front\'s "kind" must be one of {", ".join(FRONT_KINDS)} (or give {{}} for no '
                           f'front), got {front.get("kind")!r}')
    return {'kind': front['kind'],
            'upstream_file': _absolute(front.get('upstream_file'), 'the front\'s "upstream_file"'),
            'pidfile': _absolute(front.get('pidfile'), 'the front\'s "pidfile" (the nginx master\'s)')}


# ---------------------------------------------------------------------------------------------------------------
# HTTP (urllib, never through a proxy)


def http_request(method, url, key=None, body=None, timeout=10.0):
    """One HTTP request, never through a proxy (whatever ``http_proxy`` says).

    ``body``: a dict or list is sent as JSON, a str or bytes as is. ``key``, when given, is sent as
    ``Authorization: Bearer KEY``. Returns ``{status, headers (names lowercased), body (the first 4000 characters),
    elapsed_s}``; an HTTP error status is a normal result. A connection error or timeout raises GatewayError naming
    the URL and the reason (never the key)."""
    if not isinstance(url, str) or urllib.parse.urlsplit(url).scheme not in ('http', 'https'):
        raise GatewayError(f'only http:// and https:// URLs are requested, got {url!r}')
    headers = {'User-Agent': USER_AGENT, 'Accept': 'application/json'}
    data = None
    if body is not None:
        if isinstance(body, (dict, list)):
            data = json.dumps(body).encode('utf-8')
            headers['Content-Type'] = 'application/json'
        elif isinstance(body, str):
            data = body.encode('utf-8')
        elif isinstance(body, bytes):
            data = body
        else:
            raise GatewayError(f'a request body must be a dict, list, str or bytes, got {type(body).__name__}')
    if key:
        headers['Authorization'] = f'Bearer {key}'
    request = urllib.request.Request(url, data=data, headers=headers, method=method)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    started = time.monotonic()
    try:
        try:
            response = opener.open(request, timeout=timeout)
        except urllib.error.HTTPError as exc:
            response = exc
        try:
            status = response.getcode()
            got_headers = {}
            for name, value in (response.headers.items() if response.headers is not None else ()):
                name = name.lower()
                got_headers[name] = f'{got_headers[name]}, {value}' if name in got_headers else value
            raw = response.read()
        finally:
            response.close()
    except urllib.error.URLError as exc:
        raise GatewayError(f'{method} {url} failed: {exc.reason}') from None
    except (OSError, ValueError, http.client.HTTPException) as exc:  # timeouts, resets, a cut or garbled answer
        raise GatewayError(f'{method} {url} failed: {type(exc).__name__}: {exc}') from None
    return {'status': int(status), 'headers': got_headers,
            'body': (raw or b'').decode('utf-8', 'replace')[:BODY_MAX_CHARS],
            'elapsed_s': round(time.monotonic() - started, 6)}


def short_body(body, key=None):
    """A body for an error message: one line, cut short, with the key (should a server echo it) blanked out."""
    text = ' '.join((body or '').split())
    if key:
        text = text.replace(key, '<key>')
    return text if len(text) <= SHORT_BODY_CHARS else text[:SHORT_BODY_CHARS] + '...'


def read_key(path):
    """The API key in the first line of ``path``, stripped. Errors name the file, never its content."""
    try:
        with open(path, encoding='utf-8') as handle:
            first = handle.readline()
    except (OSError, UnicodeDecodeError, TypeError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise GatewayError(f'cannot read the API key file {path}: {reason}') from None
    key = first.strip()
    if not key:
        raise GatewayError(f'the API key file {path} is empty (the key is expected on its first line)')
    return key


def wait_ready(url, timeout_s, poll_s=0.25, failed=None):
    """Poll ``GET <url>/health/readiness`` until it answers 200; return the seconds it took.

    ``failed``: an optional callable, asked between polls, returning None while waiting makes sense or a sentence
    saying why it does not (the instance's process exited). GatewayError on timeout, quoting the last answer."""
    probe = url.rstrip('/') + '/health/readiness'
    started = time.monotonic()
    deadline = started + float(timeout_s)
    last = 'no answer yet'
    while True:
        remaining = deadline - time.monotonic()
        try:
            answer = http_request('GET', probe, timeout=max(0.5, min(5.0, remaining)))
        except GatewayError as exc:
            last = str(exc)
        else:
            if answer['status'] == 200:
                return round(time.monotonic() - started, 3)
            last = f'HTTP {answer["status"]}: {short_body(answer["body"])}'
        reason = failed() if failed else None
        if reason:
            raise GatewayError(f'{probe} will not become ready: {reason} (last answer: {last})')
        if time.monotonic() + poll_s > deadline:
            raise GatewayError(f'{probe} did not answer 200 within {float(timeout_s):g}s; last answer: {last}')
        time.sleep(poll_s)


def fallback_models(url, role, key, timeout=10.0):
    """The general fallbacks the instance at ``url`` has loaded for model group ``role``: ``GET /fallback/<role>``.

    LiteLLM 1.108.7 answers 200 ``{"model", "fallback_models": [...], "fallback_type": "general"}``, or 404
    ``{"detail": {"error": "No general fallbacks configured for model 'ROLE'"}}`` when there are none (returned as
    ``[]``). Anything else (401, 400, 500, another 404, a body that is not that JSON) raises GatewayError."""
    probe = f'{url.rstrip("/")}/fallback/{urllib.parse.quote(role, safe="")}'
    answer = http_request('GET', probe, key=key, timeout=timeout)
    status, body = answer['status'], answer['body']
    try:
        payload = json.loads(body)
    except ValueError:
        payload = None
    if status == 404:
        detail = payload.get('detail') if isinstance(payload, dict) else None
        error = detail.get('error') if isinstance(detail, dict) else None
        if isinstance(error, str) and NO_FALLBACK_RE.search(error):
            return []
        raise GatewayError(f'GET {probe} answered 404, not LiteLLM\'s "no general fallbacks configured" (is this '
                           f'LiteLLM with the fallback endpoints, >= 1.108?): {short_body(body, key)}')
    if status != 200:
        hint = ' (wrong API key?)' if status in (401, 403) else ''
        raise GatewayError(f'GET {probe} answered HTTP {status}{hint}: {short_body(body, key)}')
    found = payload.get('fallback_models') if isinstance(payload, dict) else None
    if not isinstance(found, list) or not all(isinstance(m, str) for m in found):
        raise GatewayError(f'GET {probe} answered 200 without a "fallback_models" list of model names: '
                           f'{short_body(body, key)}')
    return found


def listed_models(url, key, timeout=10.0):
    """The model roles the instance at ``url`` serves now, as ``GET /v1/models`` lists them for ``key`` (the admin
    key sees every role). Raises GatewayError on anything but 200 with an OpenAI model list."""
    probe = f'{url.rstrip("/")}/v1/models'
    answer = http_request('GET', probe, key=key, timeout=timeout)
    if answer['status'] != 200:
        hint = ' (wrong API key?)' if answer['status'] in (401, 403) else ''
        raise GatewayError(f'GET {probe} answered HTTP {answer["status"]}{hint}: {short_body(answer["body"], key)}')
    return model_ids(answer, probe, key)


def model_ids(answer, probe, key=None):
    """The model ids of a 200 answer to ``GET <probe>`` (``/v1/models``); GatewayError when it is not an OpenAI
    model list."""
    try:
        return [model['id'] for model in json.loads(answer['body'])['data']]
    except (ValueError, KeyError, TypeError):
        raise GatewayError(f'GET {probe} answered 200 without an OpenAI model list: '
                           f'{short_body(answer["body"], key)}') from None


def warm_up(url, model, key, timeout_s, interval_s=1.0, chat=None):
    """One real chat request through a freshly started instance, repeated while it answers a server error (5xx, or
    no answer) and ``timeout_s`` lasts: right after a restore the backend behind the role may still be coming back
    (a router whose circuit breakers are open for a few seconds answers 503). Returns ``(last answer, attempts)``."""
    chat = chat or chat_once
    deadline = time.monotonic() + timeout_s
    attempts = 0
    while True:
        attempts += 1
        answer = chat(url, model, key)
        status = answer['status']
        if (status is not None and status < 500) or time.monotonic() + interval_s > deadline:
            return answer, attempts
        time.sleep(interval_s)


def chat_once(url, model, key, timeout=30.0):
    """One small real chat request, ``POST <url>/v1/chat/completions``; the ``http_request`` result."""
    body = {'model': model, 'messages': [{'role': 'user', 'content': WARMUP_PROMPT}], 'max_tokens': 4}
    return http_request('POST', url.rstrip('/') + '/v1/chat/completions', key=key, body=body, timeout=timeout)


# ---------------------------------------------------------------------------------------------------------------
# the front's upstream file


def _server_statements(text):
    """Every ``server`` statement outside comments: a list of ``(address, params, end)`` where ``end`` is the
    offset in ``text`` of the statement's ``;``."""
    found = []
    offset = 0
    for line in text.split('\n'):
        code = line.split('#', 1)[0]
        for match in SERVER_RE.finditer(code):
            found.append((match.group('address'), match.group('params'), offset + match.end('params')))
        offset += len(line) + 1
    return found


def mark_down(text, server):
    """``text`` (an upstream file) with the one ``server SERVER ...;`` statement gaining `` down`` before its ``;``.

    The address must match as a whole token (followed by whitespace or ``;``). Commented-out lines do not count.
    GatewayError when there is no such statement, more than one, or it is already ``down``; no other byte
    changes."""
    if not isinstance(server, str) or not server:
        raise GatewayError(f'the server to mark down must be a non-empty address, got {server!r}')
    matches = [s for s in _server_statements(text) if s[0] == server]
    if not matches:
        raise GatewayError(f'no "server {server} ...;" line in the upstream file (a server statement must sit on '
                           'one line and end with ";")')
    if len(matches) > 1:
        raise GatewayError(f'{len(matches)} "server {server}" lines in the upstream file; expected exactly one')
    address, params, end = matches[0]
    if 'down' in params.split():
        raise GatewayError(f'server {address} is already marked down in the upstream file (a previous swap was '
                           'interrupted? put the file back first)')
    return text[:end] + ' down' + text[end:]


def _servers_up(text):
    return [address for address, params, _end in _server_statements(text)
            if not {'down', 'backup'} & set(params.split())]


# ---------------------------------------------------------------------------------------------------------------
# /proc


def _proc_stat(pid, procfs_root):
    """``_ledger_proc.read_proc_stat`` (``{state, ppid, pgrp, start_time}``, or None when there is no such process),
    with a stat file cut short (a process vanishing while it is read) taken for no process."""
    try:
        return _ledger_proc.read_proc_stat(pid, procfs_root)
    except (ValueError, IndexError):
        return None


def _cmdline_text(pid, procfs_root):
    cmdline = _ledger_proc.read_proc_cmdline(pid, procfs_root)
    return ' '.join(cmdline) if cmdline else ''


def front_workers(master_pid, procfs_root='/proc'):
    """The live (not zombie) pids whose parent (field 4 of /proc/PID/stat) is ``master_pid``."""
    workers = set()
    try:
        names = os.listdir(procfs_root)
    except OSError as exc:
        raise GatewayError(f'cannot list {procfs_root}: {exc}') from None
    for name in names:
        if name.isdigit():
            stat = _proc_stat(name, procfs_root)
            if _ledger_proc.is_live(stat) and stat['ppid'] == int(master_pid):
                workers.add(int(name))
    return workers


def _read_pidfile(pidfile, what):
    """The pid in ``pidfile`` (``_ledger_proc.read_pidfile``), or None when it is absent or empty."""
    try:
        pid = _ledger_proc.read_pidfile(pidfile)
    except _ledger_proc.PidfileError as exc:
        if exc.os_error is not None:
            raise GatewayError(f'cannot read the pidfile of {what}, {pidfile}: '
                               f'{exc.os_error.strerror or exc.os_error}') from None
        raise GatewayError(f'the pidfile of {what}, {pidfile}, does not hold a pid: {exc.text[:40]!r}') from None
    if pid is not None and pid <= 0:
        raise GatewayError(f'the pidfile of {what}, {pidfile}, holds an invalid pid {pid}')
    return pid


def _send(pid, signum, what, group=False):
    """Signal ``pid`` (its process group when ``group``); False when it is gone already."""
    try:
        return _ledger_proc.send_signal(pid, signum, group)
    except PermissionError as exc:
        raise GatewayError(f'not allowed to signal {what} (pid {pid}): {exc}; run as the user that runs it, or as '
                           'root') from None


def reload_front(front, timeout_s=30.0, procfs_root='/proc'):
    """Reload nginx (SIGHUP to its master) and wait until the switch is complete: every old worker has exited
    (having finished its in-flight requests) and at least one new worker runs.

    Returns ``{master_pid, old_workers, new_workers, seconds}``. GatewayError when the master does not run (or is
    not nginx), or on timeout, naming the old workers still alive: nginx keeps its old workers when it rejects the
    new configuration, so look at its error log then."""
    front = check_front(front)
    if not front:
        raise GatewayError('there is no front to reload')
    master = _read_pidfile(front['pidfile'], 'the nginx master')
    if master is None:
        raise GatewayError(f'the nginx pidfile {front["pidfile"]} is absent or empty: nginx does not run')
    master_stat = _proc_stat(master, procfs_root)
    if not _ledger_proc.is_live(master_stat):
        raise GatewayError(f'the nginx master (pid {master}, from {front["pidfile"]}) does not run')
    if 'nginx' not in _cmdline_text(master, procfs_root):
        raise GatewayError(f'pid {master} from {front["pidfile"]} runs "{_cmdline_text(master, procfs_root)}", not '
                           'nginx; not signalling it')
    old = {pid: (_proc_stat(pid, procfs_root) or {}).get('start_time') for pid in front_workers(master, procfs_root)}
    started = time.monotonic()
    deadline = started + float(timeout_s)
    if not _send(master, signal.SIGHUP, 'the nginx master'):
        raise GatewayError(f'the nginx master (pid {master}) exited before it could be reloaded')

    def still_old(pid):
        stat = _proc_stat(pid, procfs_root)
        return _ledger_proc.is_live(stat) and stat['start_time'] == old[pid]

    while True:
        alive = sorted(pid for pid in old if still_old(pid))
        new = sorted(pid for pid in front_workers(master, procfs_root) if pid not in old or not still_old(pid))
        if not alive and new:
            return {'master_pid': master, 'old_workers': sorted(old), 'new_workers': new,
                    'seconds': round(time.monotonic() - started, 3)}
        if not _ledger_proc.is_live(_proc_stat(master, procfs_root)):
            raise GatewayError(f'the nginx master (pid {master}) exited during the reload')
        if time.monotonic() >= deadline:
            if alive:
                raise GatewayError(f'nginx (master {master}) still runs old workers {", ".join(map(str, alive))} '
                                   f'{float(timeout_s):g}s after the reload: they are finishing long requests, or '
                                   'nginx rejected the new configuration (see its error log)')
            raise GatewayError(f'nginx (master {master}) has no new worker {float(timeout_s):g}s after the reload')
        time.sleep(POLL_S)


# ---------------------------------------------------------------------------------------------------------------
# stopping and starting an instance


def _systemctl(systemctl, verb, unit, timeout):
    argv = [systemctl, verb, unit]
    try:
        rc, out, err = _ledger_proc.run_bounded(argv, timeout)
    except (OSError, _ledger_proc.CommandTimedOut) as exc:
        raise GatewayError(f'{" ".join(argv)} could not run: {exc}') from None
    if rc != 0:
        said = ' '.join((err.strip() or out.strip()).split()) or 'no output'
        raise GatewayError(f'{" ".join(argv)} exited {rc}: {said}')
    return f'{verb} {unit}: done ({" ".join(argv)})'


def _running_instance(instance, procfs_root):
    """``(pid, state)`` of a process instance: state is ``absent`` (no pidfile), ``dead``, ``ours`` (a live pid
    whose cmdline contains ``match``) or ``foreign``."""
    pid = _read_pidfile(instance['pidfile'], f'instance {instance["name"]}')
    if pid is None:
        return None, 'absent'
    _ledger_proc.spawned_returncode(pid)  # reaps it
    if not _ledger_proc.is_live(_proc_stat(pid, procfs_root)):
        return pid, 'dead'
    return pid, ('ours' if instance['match'] in _cmdline_text(pid, procfs_root) else 'foreign')


def stop_instance(instance, timeout_s=30.0, procfs_root='/proc', systemctl='systemctl'):
    """Stop one instance and say how.

    ``process``: the pid in its pidfile gets SIGTERM (LiteLLM finishes its in-flight requests), SIGKILL after
    ``timeout_s``; the whole process group when the pid leads one (``spawn_detached`` makes it so). A pid whose
    command line lacks ``match`` is never signalled (GatewayError). ``systemd``: ``systemctl stop UNIT``."""
    instance = check_instance(instance)
    name = instance['name']
    if instance['manager'] == 'systemd':
        return _systemctl(systemctl, 'stop', instance['unit'], float(timeout_s) + COMMAND_GRACE_S)
    pidfile = instance['pidfile']
    pid, state = _running_instance(instance, procfs_root)
    if state == 'absent':
        return f'{name} already stopped: pidfile {pidfile} is absent or empty'
    if state == 'dead':
        _remove_pidfile(pidfile, pid)
        return f'{name} already stopped: pid {pid} from {pidfile} does not run'
    if state == 'foreign':
        raise GatewayError(f'pid {pid} from {pidfile} runs "{_cmdline_text(pid, procfs_root)}", which does not '
                           f'contain "{instance["match"]}": not signalling it. Check that {name} runs, and fix '
                           f'or remove the stale pidfile')
    stat = _proc_stat(pid, procfs_root)
    if not _ledger_proc.is_live(stat):
        _remove_pidfile(pidfile, pid)
        return f'{name} already stopped: pid {pid} exited before it was signalled'
    group = _ledger_proc.leads_group(pid, procfs_root)
    what = f'{name} (process group {pid})' if group else f'{name} (pid {pid})'

    def alive():
        _ledger_proc.spawned_returncode(pid)  # reaps it
        if group:
            return bool(_ledger_proc.group_members(pid, procfs_root))
        current = _proc_stat(pid, procfs_root)
        return _ledger_proc.is_live(current) and current['start_time'] == stat['start_time']

    started = time.monotonic()
    if not _send(pid, signal.SIGTERM, what, group):
        _remove_pidfile(pidfile, pid)
        return f'{name} already stopped: pid {pid} exited before it was signalled'
    if _ledger_proc.wait_gone(alive, timeout_s):
        _ledger_proc.spawned_returncode(pid)  # reaps it
        _remove_pidfile(pidfile, pid)
        return f'stopped {what} with SIGTERM in {time.monotonic() - started:.1f}s'
    _send(pid, signal.SIGKILL, what, group)
    if _ledger_proc.wait_gone(alive, KILL_WAIT_S):
        _ledger_proc.spawned_returncode(pid)  # reaps it
        _remove_pidfile(pidfile, pid)
        return f'stopped {what} with SIGKILL: still running {float(timeout_s):g}s after SIGTERM'
    raise GatewayError(f'{what} is still alive after SIGTERM and SIGKILL (stuck in the kernel, state D?); stop it '
                       'by hand')


def _remove_pidfile(pidfile, pid):
    """Remove a pidfile that still names ``pid`` (stopped), so that a later reader never meets a reused pid."""
    try:
        if _read_pidfile(pidfile, 'the instance') == pid:
            os.unlink(pidfile)
    except (GatewayError, OSError):
        pass


def start_instance(instance, systemctl='systemctl'):
    """Start one instance and say how.

    ``process``: ``start_argv`` spawned detached (``_ledger_proc.spawn_detached``: own session, stdout and stderr
    appended to ``log``, its pid written to ``pidfile``) with a clean environment, PATH (systemd's default),
    LANG=C.UTF-8 and HOME; the start command brings its own settings (the config, the key file). Refused when the
    pidfile names a live process that is this instance. ``systemd``: ``systemctl start UNIT``."""
    instance = check_instance(instance)
    name = instance['name']
    if instance['manager'] == 'systemd':
        return _systemctl(systemctl, 'start', instance['unit'], COMMAND_GRACE_S)
    pid, state = _running_instance(instance, '/proc')
    if state == 'ours':
        raise GatewayError(f'{name} already runs as pid {pid} (from {instance["pidfile"]}); stop it first')
    try:
        pid = _ledger_proc.spawn_detached(instance['start_argv'], _ledger_proc.service_environment(), instance['log'],
                                          instance['pidfile'])
    except OSError as exc:
        raise GatewayError(f'cannot start {name} ({instance["start_argv"][0]}): {exc}') from None
    return f'started {name} as pid {pid} (log {instance["log"]})'


def _exit_reason(instance, procfs_root):
    """For ``wait_ready``: why waiting for a process instance is pointless (it exited), else None."""
    if instance['manager'] != 'process':
        return None
    try:
        pid, state = _running_instance(instance, procfs_root)
    except GatewayError as exc:
        return str(exc)
    # 'absent': the start command may be rewriting its own pidfile right now (a shell's `echo $$ > FILE` truncates
    # first); the readiness timeout still ends the wait
    if state in ('ours', 'foreign', 'absent'):
        return None
    # polled, not returncode: an exited child stays a zombie, its status unread, until someone reaps it
    code = _ledger_proc.spawned_returncode(pid) if pid else None
    how = ''
    if code is not None:
        how = f' (killed by signal {-code})' if code < 0 else f' (exit status {code})'
    return f'{instance["name"]} (pid {pid}) exited{how}; see its log {instance["log"]}'


# ---------------------------------------------------------------------------------------------------------------
# the rolling restart


def _check_expect(expect_fallback):
    if not isinstance(expect_fallback, (list, tuple)) or not all(isinstance(m, str) for m in expect_fallback):
        raise GatewayError(f'expect_fallback must be a list of model names ([] for no general fallback), got '
                           f'{expect_fallback!r}')
    return list(expect_fallback)


def drain_plan(instances, front):
    """Check, before anything changes, that the front can drain every instance in turn: ``(original upstream bytes,
    {instance name: the upstream bytes with that instance marked down})``. GatewayError when the upstream file
    cannot be read, lacks an instance's server line (or has it twice, or already down), or when marking one down would
    leave no server up."""
    front = check_front(front)
    try:
        with open(front['upstream_file'], 'rb') as handle:
            original = handle.read()
        text = original.decode('utf-8')
    except OSError as exc:
        raise GatewayError(f'cannot read the upstream file {front["upstream_file"]}: {exc}') from None
    except UnicodeDecodeError as exc:
        raise GatewayError(f'the upstream file {front["upstream_file"]} is not UTF-8: {exc}') from None
    marked = {}
    for instance in instances:
        try:
            marked[instance['name']] = mark_down(text, instance['upstream_server']).encode('utf-8')
        except GatewayError as exc:
            raise GatewayError(f'instance {instance["name"]}: {exc} ({front["upstream_file"]})') from None
        if not _servers_up(marked[instance['name']].decode('utf-8')):
            raise GatewayError(f'marking {instance["name"]} ({instance["upstream_server"]}) down would leave no '
                               f'server up in {front["upstream_file"]}; a drained restart needs another '
                               'instance to serve meanwhile')
    return original, marked


def rolling_restart(instances, front, key, public_model, expect_fallback, ready_timeout_s=60.0,
                    drain_timeout_s=30.0, procfs_root='/proc', systemctl='systemctl', log=None):
    """Restart every instance in turn, drained through the front when there is one (see the module docstring), and
    prove each one came back with the expected general fallbacks for ``public_model``.

    Returns one step dict per instance: ``{instance, drained, stopped, started, ready_s, warmup_status, fallbacks,
    seconds}``. On any error the front's upstream file gets its original bytes back and nginx is reloaded (best
    effort) before the error is raised; a GatewayError then carries ``steps`` and ``restore``."""
    if not isinstance(instances, (list, tuple)) or not instances:
        raise GatewayError('rolling_restart needs a non-empty list of instances')
    instances = [check_instance(i) for i in instances]
    front = check_front(front)
    expect = _check_expect(expect_fallback)
    _text(public_model, 'public_model')
    for field in ('name', 'upstream_server'):
        values = [i[field] for i in instances]
        duplicates = sorted({v for v in values if values.count(v) > 1})
        if duplicates:
            raise GatewayError(f'two instances share the {field} {", ".join(duplicates)}')
    say = log or (lambda line: None)
    original, marked = drain_plan(instances, front) if front else (None, {})
    steps = []
    touched = False
    try:
        for instance in instances:
            name, url = instance['name'], instance['url']
            step = {'instance': name, 'drained': False, 'stopped': None, 'started': None, 'ready_s': None,
                    'warmup_status': None, 'warmup_attempts': 0, 'fallbacks': None, 'seconds': None}
            steps.append(step)
            began = time.monotonic()
            if front:
                touched = True
                _write_upstream(front, marked[name])
                reload = reload_front(front, drain_timeout_s, procfs_root)
                step['drained'] = True
                say(f'{name}: marked down in {front["upstream_file"]}; nginx reloaded, old workers '
                    f'{reload["old_workers"]} gone in {reload["seconds"]}s')
            step['stopped'] = stop_instance(instance, drain_timeout_s, procfs_root, systemctl)
            say(f'{name}: {step["stopped"]}')
            step['started'] = start_instance(instance, systemctl)
            say(f'{name}: {step["started"]}')
            step['ready_s'] = wait_ready(url, ready_timeout_s,
                                         failed=lambda inst=instance: _exit_reason(inst, procfs_root))
            say(f'{name}: ready after {step["ready_s"]}s')
            warmup, step['warmup_attempts'] = warm_up(url, public_model, key, ready_timeout_s)
            step['warmup_status'] = warmup['status']
            if warmup['status'] != 200:
                raise GatewayError(f'instance {name}: the warm-up request for {public_model} answered HTTP '
                                   f'{warmup["status"]}: {short_body(warmup["body"], key)}')
            found = fallback_models(url, public_model, key)
            step['fallbacks'] = found
            if found != expect:
                raise GatewayError(f'instance {name} carries fallbacks {found}, expected {expect} (for '
                                   f'{public_model}: did it read the intended config?)')
            say(f'{name}: warm-up answered 200; fallbacks for {public_model}: {found}')
            if front:
                _write_upstream(front, original)
                reload = reload_front(front, drain_timeout_s, procfs_root)
                say(f'{name}: back in {front["upstream_file"]}; nginx reloaded in {reload["seconds"]}s')
            step['seconds'] = round(time.monotonic() - began, 3)
    except BaseException as exc:
        restore = _restore_front(front, original, drain_timeout_s, procfs_root) if touched else None
        if restore:
            say(f'after the error: {restore}')
        if isinstance(exc, GatewayError):
            message = str(exc) + (f' [{restore}]' if restore and not restore.startswith('restored') else '')
            raise GatewayError(message, steps=steps, restore=restore) from exc
        raise
    return steps


def _write_upstream(front, data):
    try:
        _ledger_base.write_atomic(front['upstream_file'], data)
    except OSError as exc:
        raise GatewayError(f'cannot write the upstream file {front["upstream_file"]}: {exc}') from None


def _restore_front(front, original, drain_timeout_s, procfs_root):
    """Best effort: the upstream file's original bytes back and nginx reloaded. Returns a sentence."""
    try:
        _write_upstream(front, original)
    except GatewayError as exc:
        return (f'restoring the upstream file {front["upstream_file"]} failed: {exc}; put its original content back '
                'by hand and reload nginx')
    try:
        reload_front(front, drain_timeout_s, procfs_root)
    except Exception as exc:
        return (f'restored the upstream file {front["upstream_file"]}, but reloading nginx failed: {exc}; reload '
                'it by hand (nginx -s reload)')
    return f'restored the upstream file {front["upstream_file"]} and reloaded nginx'


# ---------------------------------------------------------------------------------------------------------------
# the change ledger's gateway_config kind: a temporary gateway config, and its undo


CHANGE_KEYS = ('kind', 'config_path', 'original_sha256', 'backup_path', 'instances', 'front', 'admin_key_file',
               'public_model', 'original_fallbacks', 'original_models', 'ready_timeout_s', 'drain_timeout_s',
               'front_backup_path', 'front_original_sha256')
SHA256_RE = re.compile(r'^[0-9a-f]{64}$')


def check_change_params(params):
    """Validate the params of a ``gateway_config`` ledger entry (raises GatewayError): the config and its backup,
    the original's sha256, the instances and front to apply it through, and how to check an instance."""
    unknown = sorted(set(params) - set(CHANGE_KEYS))
    if unknown:
        raise GatewayError(f'unknown params for a gateway_config entry: {", ".join(unknown)}')
    if params.get('kind') != 'litellm':
        raise GatewayError(f'gateway kind must be "litellm", got {params.get("kind")!r}')
    for name in ('config_path', 'backup_path', 'admin_key_file'):
        _absolute(params.get(name), name)
    _text(params.get('public_model'), 'public_model')
    for name in ('original_sha256', 'front_original_sha256'):
        if (name in params or name == 'original_sha256') and not SHA256_RE.match(str(params.get(name))):
            raise GatewayError(f'"{name}" must be a hex sha256, got {params.get(name)!r}')
    if not isinstance(params.get('instances'), list) or not params['instances']:
        raise GatewayError('"instances" must be a non-empty list')
    params['instances'] = [check_instance(i) for i in params['instances']]
    params['front'] = check_front(params.get('front') or {})
    if params['front']:
        _absolute(params.get('front_backup_path'), 'front_backup_path')
        if 'front_original_sha256' not in params:
            raise GatewayError('a gateway_config entry with a front needs "front_original_sha256"')
    params['original_fallbacks'] = _check_expect(params.get('original_fallbacks', []))
    if 'original_models' in params:
        models = params['original_models']
        if not isinstance(models, list) or not models or not all(isinstance(m, str) and m for m in models):
            raise GatewayError(f'"original_models" must be a non-empty list of model roles, got {models!r}')
    for name in ('ready_timeout_s', 'drain_timeout_s'):
        try:
            params[name] = float(params.get(name, 60.0))
        except (TypeError, ValueError):
            raise GatewayError(f'"{name}" must be a number of seconds, got {params.get(name)!r}') from None
    return params


def _put_back(path, backup, original_sha256, what):
    """``path`` gets the bytes of ``backup`` when it differs from the original; returns ``(restored, sentence)``."""
    try:
        current = _ledger_base.sha256_file(path)
        found = f'sha256 {current}'
    except OSError as exc:
        current = None
        found = f'cannot read it: {exc.strerror or exc}'
    if current == original_sha256:
        return False, f'{what} {path} is the original'
    if not os.path.exists(backup):
        raise GatewayError(f'{what} {path} is not the original ({found}) and its backup {backup} is gone: put the '
                           'original back by hand')
    with open(backup, 'rb') as handle:
        data = handle.read()
    if hashlib.sha256(data).hexdigest() != original_sha256:
        raise GatewayError(f'the backup {backup} of {what} {path} does not match the recorded sha256 '
                           f'{original_sha256}: put the original back by hand')
    _ledger_base.write_atomic(path, data)
    return True, f'{what} {path} restored from {backup}'


def undo_change(params, procfs_root='/proc', systemctl='systemctl'):
    """The undo of a ``gateway_config`` entry: the original config (and the front's upstream file) back from their
    backups, then a rolling restart of every instance that does not run the original, proven instance by instance
    (readiness, a warm-up request, its general fallbacks for the public role as in the original). Safe when the
    change never happened and when it is run twice: an instance that already reports the original fallbacks and
    answers is left alone. Returns a one-line description; raises GatewayError when it cannot prove the original."""
    said = [_put_back(params['config_path'], params['backup_path'], params['original_sha256'], 'the config')[1]]
    front = params['front']
    if front:
        restored, sentence = _put_back(front['upstream_file'], params['front_backup_path'],
                                       params['front_original_sha256'], 'the upstream file')
        said.append(sentence)
        if restored:  # nginx may still run the drained upstream of an interrupted swap
            reload_front(front, params['drain_timeout_s'], procfs_root)
    key = read_key(params['admin_key_file'])
    expect = params['original_fallbacks']
    # A change that added roles leaves the fallbacks as they were: an entry that recorded the original's roles is
    # judged by those too, so an instance still serving an added role is restarted.
    models = params.get('original_models')
    stale = []
    for instance in params['instances']:
        try:
            if fallback_models(instance['url'], params['public_model'], key) == expect and (
                    models is None or sorted(listed_models(instance['url'], key)) == sorted(models)):
                continue
        except GatewayError:
            pass  # not answering: restart it too
        stale.append(instance)
    if stale:
        rolling_restart(stale, front, key, params['public_model'], expect, params['ready_timeout_s'],
                        params['drain_timeout_s'], procfs_root, systemctl)
        said.append('restarted ' + ', '.join(i['name'] for i in stale) + ' with it')
    else:
        said.append('every instance already runs it')
    if _ledger_base.sha256_file(params['config_path']) != params['original_sha256']:
        raise GatewayError(f'the config {params["config_path"]} changed again during the restore')
    return '; '.join(said)
