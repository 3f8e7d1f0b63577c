# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The background counter sampler of an inferlab counter window: the ``sampler`` subcommand of the ledger script.

The ``ledger`` role installs it on each host with the rest of the host files, as ``inferlab_sampler.py`` beside
``inferlab_ledger.py`` (with ``_net_counters`` and ``_sysfs``, the same parser the ``net_counters`` module uses, as
``inferlab_net_counters.py`` and ``inferlab_sysfs.py``); the ``counters`` role records it in the host's change ledger
(kind ``sampler``) before starting it::

    python3 inferlab_ledger.py sampler start --output FILE.jsonl --pidfile FILE.pid --log FILE.log
                                      --interface IF [--interface IF ...] [--interval 1.0] [--max-seconds 3600]
                                      [--sysfs-root /sys] [--procfs-root /proc]
    python3 inferlab_ledger.py sampler run   (the same options; stays in the foreground)
    python3 inferlab_ledger.py sampler textfile --dest DIR/NAME.prom   (the text on stdin; written atomically)

``start`` forks the sampler into its own session (``setsid``; stdin and stdout on ``/dev/null``, stderr appended to
``--log``), waits until it has written its pidfile and its first sample, prints ``{"pid": ..., "start_time": ...,
...}`` (``start_time``: field 22 of ``/proc/PID/stat``, for the ledger) and exits 0.
The sampler writes one JSON object per line to ``--output`` every ``--interval`` seconds::

    {"t_wall": 1796032800.25, "t_mono": 81234.5,
     "interfaces": {"thunderbolt0": {"rx_bytes": ..., ..., "carrier_changes": 4, ...}},
     "tcp": {"RetransSegs": ..., "OutSegs": ..., "InSegs": ..., "InErrs": ...},
     "tcp_ext": {"TCPLostRetransmit": ..., "TCPTimeouts": ...}}

An interface that is gone (a driver reload removes ``thunderbolt0``) is ``null`` in that sample; a counter that
cannot be read is ``null``. Each line is written whole and flushed. It stops by itself after ``--max-seconds``, so
an orphan cannot run forever; on SIGTERM or SIGINT it takes a last sample and exits 0. On the way out it removes its
pidfile (when the pidfile still names it). ``--log`` gets one JSON line per event (``start``, ``error``, ``stop``
with the reason and the number of samples).

Exit codes: 0 success; 1 it failed (the message is on stderr, or in the JSON of ``start``); 2 usage error; 3 refused
(the pidfile names a live process, the destination directory does not exist).

Standard library only, Python 3.8 or later; it imports its siblings under both names, never ``ansible`` (see
``_ledger_core``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import select
import signal
import sys
import time
import traceback

try:
    from ansible_collections.inferlab.distributed.plugins.module_utils import _net_counters as net_counters
except ImportError:  # on a host, installed beside it (see _ledger_core)
    import inferlab_net_counters as net_counters

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_REFUSED = 0, 1, 2, 3

# What each sample carries. Receiver errors first among the reasons this exists: a window that shows rx_crc_errors
# growing beside the model's numbers is the field lesson behind it.
STATISTICS = ('rx_bytes', 'tx_bytes', 'rx_packets', 'tx_packets', 'rx_errors', 'tx_errors', 'rx_dropped',
              'tx_dropped', 'rx_crc_errors', 'rx_over_errors', 'rx_missed_errors', 'rx_length_errors')
TCP = ('RetransSegs', 'OutSegs', 'InSegs', 'InErrs')
TCP_EXT = ('TCPLostRetransmit', 'TCPTimeouts')
# the usage messages name the command as the host runs it
PROG = 'inferlab_ledger.py sampler'


class Sampler:
    """Reads one sample: the listed interface statistics and TCP counters, with both clocks."""

    def __init__(self, counters, interfaces, sysfs_root='/sys', procfs_root='/proc', clock=None):
        self.counters = counters
        self.interfaces = list(dict.fromkeys(interfaces))
        self.sysfs = counters.SysfsReader(sysfs_root)
        self.procfs = counters.SysfsReader(procfs_root)
        self.clock = clock or (lambda: (time.monotonic(), time.time()))
        self.errors = []  # problems of the last sample, in words

    def _interface(self, ifname):
        if not self.sysfs.isdir('class/net', ifname):
            self.errors.append(f'interface {ifname} is gone')
            return None
        values = {}
        for name in STATISTICS:
            try:
                values[name] = self.sysfs.read_int('class/net', ifname, 'statistics', name)
            except self.counters.SysfsError as err:
                self.errors.append(str(err))
                values[name] = None
        try:  # the carrier's transitions: when the link flapped inside the window (None: no such file)
            values.update(self.counters.read_carrier(self.sysfs, ifname))
        except self.counters.SysfsError as err:
            self.errors.append(str(err))
            values.update(dict.fromkeys(self.counters.CARRIER_COUNTERS))
        return values

    def sample(self):
        """One sample as documented at the top of this file; problems are in ``self.errors``."""
        self.errors = []
        monotonic, wall = self.clock()
        interfaces = {ifname: self._interface(ifname) for ifname in self.interfaces}
        try:
            tcp, tcp_ext = self.counters.read_tcp(self.procfs)
        except self.counters.SysfsError as err:
            self.errors.append(str(err))
            tcp, tcp_ext = {}, {}
        return {
            't_wall': round(wall, 6),
            't_mono': round(monotonic, 6),
            'interfaces': interfaces,
            'tcp': {name: tcp.get(name) for name in TCP},
            'tcp_ext': {name: tcp_ext.get(name) for name in TCP_EXT},
        }


class StopSignal:
    """SIGTERM and SIGINT end the sampler; waiting between samples wakes up at once when one comes.

    The handler only notes the signal. ``signal.set_wakeup_fd`` makes the interpreter write to a pipe the moment a
    signal arrives, so ``wait`` (a ``select`` on that pipe) cannot miss one that came just before it started.
    """

    def __init__(self):
        self.reason = None
        self._read_fd, self._write_fd = os.pipe()
        for fd in (self._read_fd, self._write_fd):
            os.set_blocking(fd, False)

    def install(self):
        signal.set_wakeup_fd(self._write_fd)
        signal.signal(signal.SIGTERM, self._note)
        signal.signal(signal.SIGINT, self._note)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)  # it has its own session; a stray hangup must not stop it

    def _note(self, signum, _frame):
        if self.reason is None:
            self.reason = signal.Signals(signum).name

    def wait(self, seconds):
        """Sleep up to ``seconds``; True when a stop signal has come."""
        if self.reason is None and seconds > 0:
            select.select([self._read_fd], [], [], seconds)
        # the pipe is never drained: once a signal came, every later wait returns at once until the handler has run
        return self.reason is not None


def _answer(result):
    """The one JSON line on stdout that ``start`` and ``textfile`` answer with."""
    sys.stdout.write(json.dumps(result) + '\n')


def _log(event, **fields):
    record = {'time': time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime()), 'event': event}
    record.update(fields)
    sys.stderr.write(json.dumps(record, sort_keys=True) + '\n')
    sys.stderr.flush()


def next_deadline(start, now, interval):
    """The first tick ``start + k * interval`` after ``now``; ticks missed (a stalled host) are skipped, not
    caught up in a burst."""
    return start + (math.floor((now - start) / interval) + 1) * interval


def sample_loop(sampler, handle, interval, max_seconds, stop, ready=None, monotonic=time.monotonic):
    """Write samples to ``handle`` until ``max_seconds`` have passed or ``stop`` says so; ``(reason, count)``.

    ``ready`` is called once, after the first sample is written. A stop signal ends it with one last sample, so the
    samples reach the moment the window was closed.
    """
    start = monotonic()
    deadline = start + max_seconds
    count = 0
    reported = set()

    def write_one():
        record = sampler.sample()
        # one write per whole line, flushed: a reader (or a kill) never sees half a line
        handle.write(json.dumps(record, separators=(',', ':')) + '\n')
        handle.flush()
        for error in sampler.errors:
            if error not in reported:  # say each problem once, not once a second
                reported.add(error)
                _log('error', message=error)
        return 1

    count += write_one()
    if ready is not None:
        ready()
    while True:
        now = monotonic()
        if now >= deadline:
            return 'max_seconds', count
        if stop.wait(min(next_deadline(start, now, interval), deadline) - now):
            count += write_one()
            return stop.reason, count
        count += write_one()


def _pid_in_pidfile(pidfile):
    try:
        with open(pidfile, encoding='ascii', errors='replace') as handle:
            text = handle.read().strip()
    except FileNotFoundError:
        return None
    try:
        return int(text.split()[0])
    except (ValueError, IndexError):
        return None


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _write_pidfile(pidfile):
    tmp = f'{pidfile}.tmp{os.getpid()}'
    with open(tmp, 'w', encoding='ascii') as handle:
        handle.write(f'{os.getpid()}\n')
    os.replace(tmp, pidfile)


def _remove_own_pidfile(pidfile):
    if _pid_in_pidfile(pidfile) == os.getpid():
        try:
            os.unlink(pidfile)
        except FileNotFoundError:
            pass


def refuse_reason(args):
    """Why ``start``/``run`` must not go ahead, or None."""
    pid = _pid_in_pidfile(args.pidfile)
    if pid is not None and pid != os.getpid() and _pid_alive(pid):
        return (f'pidfile {args.pidfile} names pid {pid}, which is running: a sampler for this window is already '
                'running (close the window first)')
    for path in (args.output, args.pidfile):
        directory = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(directory):
            return f'directory {directory} does not exist (for {path})'
    return None


def run(args, ready=None):
    """The sampler itself, in this process; returns the exit code."""
    stop = StopSignal()
    stop.install()
    count = 0
    try:
        sampler = Sampler(net_counters, args.interface, sysfs_root=args.sysfs_root, procfs_root=args.procfs_root)
        _write_pidfile(args.pidfile)
        _log('start', pid=os.getpid(), output=args.output, interfaces=sampler.interfaces, interval_s=args.interval,
             max_seconds=args.max_seconds)
        with open(args.output, 'w', encoding='utf-8') as handle:
            reason, count = sample_loop(sampler, handle, args.interval, args.max_seconds, stop, ready=ready)
    except Exception as err:  # pylint: disable=broad-exception-caught
        _log('stop', reason='error', samples=count, message=f'{type(err).__name__}: {err}',
             traceback=traceback.format_exc())
        _remove_own_pidfile(args.pidfile)
        return EXIT_FAILED
    _log('stop', reason=reason, samples=count)
    _remove_own_pidfile(args.pidfile)
    return EXIT_OK


def start(args):
    """Fork the sampler into its own session; print its pid once it has sampled once. Returns the exit code."""
    refused = refuse_reason(args)
    if refused:
        _answer({'failed': True, 'msg': refused})
        return EXIT_REFUSED
    log_dir = os.path.dirname(os.path.abspath(args.log))
    if not os.path.isdir(log_dir):
        _answer({'failed': True, 'msg': f'directory {log_dir} does not exist (for {args.log})'})
        return EXIT_REFUSED
    read_fd, write_fd = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the sampler
        code = EXIT_FAILED
        try:
            os.close(read_fd)
            os.setsid()
            os.chdir('/')
            devnull = os.open(os.devnull, os.O_RDWR)
            log = os.open(args.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.dup2(devnull, 0)
            os.dup2(devnull, 1)
            os.dup2(log, 2)
            os.close(devnull)
            os.close(log)

            def ready():
                os.write(write_fd, b'ready')
                os.close(write_fd)

            code = run(args, ready=ready)
        except BaseException:  # pylint: disable=broad-exception-caught
            traceback.print_exc()
        finally:
            os._exit(code)  # pylint: disable=protected-access
    os.close(write_fd)
    chunks = []
    while True:
        chunk = os.read(read_fd, 4096)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(read_fd)
    result = {'pid': pid, 'pidfile': args.pidfile, 'output': args.output, 'log': args.log,
              'interfaces': args.interface, 'interval_s': args.interval, 'max_seconds': args.max_seconds}
    result['start_time'] = start_time(pid)  # the real /proc: --procfs-root is where the counters are read
    if b''.join(chunks) != b'ready':
        result.update(failed=True, msg=f'the sampler (pid {pid}) exited before its first sample; see {args.log}: '
                                       + _tail(args.log))
        _answer(result)
        return EXIT_FAILED
    _answer(result)
    return EXIT_OK


def start_time(pid, procfs_root='/proc'):
    """Field 22 of ``/proc/PID/stat`` (clock ticks after boot), which the ledger records beside the pid so that
    an undo never signals a process that reused it; None when the process is gone."""
    try:
        with open(os.path.join(procfs_root, str(pid), 'stat'), 'rb') as handle:
            raw = handle.read().decode('utf-8', 'replace')
    except OSError:
        return None
    # field 2 (comm) is in parentheses and may itself contain ') ': split after the last ')'; field N is rest[N - 3]
    rest = raw[raw.rindex(')') + 2:].split()
    return int(rest[19])


def _tail(path, lines=5):
    try:
        with open(path, encoding='utf-8', errors='replace') as handle:
            return ' | '.join(handle.read().splitlines()[-lines:])
    except OSError as err:
        return f'(cannot read it: {err})'


def write_textfile(dest, text):
    """Write ``text`` to ``dest`` atomically: a temporary file in the same directory whose name does not end in
    ``.prom`` (node_exporter's textfile collector never reads it half-written), then a rename. ``(changed, msg)``."""
    directory = os.path.dirname(os.path.abspath(dest))
    if not os.path.isdir(directory):
        raise FileNotFoundError(f'directory {directory} does not exist (set counters_prometheus_textfile_dir to the '
                                "node_exporter textfile collector's directory)")
    try:
        with open(dest, encoding='utf-8') as handle:
            if handle.read() == text:
                return False, f'{dest} is up to date'
    except FileNotFoundError:
        pass
    tmp = os.path.join(directory, f'.{os.path.basename(dest)}.{os.getpid()}.tmp')
    try:
        with open(tmp, 'w', encoding='utf-8') as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, dest)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return True, f'wrote {dest}'


def _positive(text):
    value = float(text)
    if math.isnan(value) or math.isinf(value) or value <= 0:
        raise argparse.ArgumentTypeError(f'expected a positive number of seconds, got {text!r}')
    return value


def build_parser():
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split('\n\n', 1)[0])
    commands = parser.add_subparsers(dest='command')
    commands.required = True
    for name, text in (('start', 'start the sampler in the background and print its pid'),
                       ('run', 'run the sampler in the foreground')):
        sub = commands.add_parser(name, help=text)
        sub.add_argument('--output', required=True, help='the JSON-lines file of samples (truncated)')
        sub.add_argument('--pidfile', required=True)
        sub.add_argument('--log', required=(name == 'start'), help='events and errors (appended)')
        sub.add_argument('--interface', action='append', required=True, help='an interface to sample (repeat)')
        sub.add_argument('--interval', type=_positive, default=1.0, help='seconds between samples')
        sub.add_argument('--max-seconds', type=_positive, default=3600.0, help='stop by itself after this long')
        sub.add_argument('--sysfs-root', default='/sys')
        sub.add_argument('--procfs-root', default='/proc')
    sub = commands.add_parser('textfile', help='write stdin to a file atomically (for node_exporter)')
    sub.add_argument('--dest', required=True)
    return parser


def main(argv=None):
    """The ``sampler`` subcommand, ``argv`` being what follows it; returns the exit code."""
    args = build_parser().parse_args(argv)
    if args.command == 'start':
        return start(args)
    if args.command == 'run':
        refused = refuse_reason(args)
        if refused:
            sys.stderr.write(refused + '\n')
            return EXIT_REFUSED
        return run(args)
    try:
        changed, msg = write_textfile(args.dest, sys.stdin.read())
    except FileNotFoundError as err:
        _answer({'failed': True, 'changed': False, 'msg': str(err)})
        return EXIT_REFUSED
    except OSError as err:
        _answer({'failed': True, 'changed': False, 'msg': f'cannot write {args.dest}: {err}'})
        return EXIT_FAILED
    _answer({'changed': changed, 'msg': msg, 'dest': args.dest})
    return EXIT_OK
