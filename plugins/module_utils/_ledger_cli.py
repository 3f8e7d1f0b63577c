# Copyright (c) 2026, inferlab developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The command line of the change ledger, installed on each host as ``<inferlab_state_dir>/bin/inferlab_ledger.py``
beside the rest of the ledger's modules (see ``_ledger_core``)::

    python3 inferlab_ledger.py undo   --ledger-dir DIR --host NAME [--id ID ...] [--run-id RUN] [--check] [--json]
                                      [--procfs-root DIR] [--tc TC] [--systemctl SYSTEMCTL] [--docker DOCKER]
                                      [--podman PODMAN]
    python3 inferlab_ledger.py status --ledger-dir DIR --host NAME [--json]
    python3 inferlab_ledger.py unlock --ledger-dir DIR --host NAME (--run-id RUN | --force) [--json]
    python3 inferlab_ledger.py watch-link --ledger-dir DIR --host NAME --id ID --interface IF --peer ADDR
                                      [--deadline SECONDS] [--load-timeout SECONDS] [--loader-pid PID
                                      --loader-start-time TICKS] [--poll SECONDS] [--ping PING] [--json]
    python3 inferlab_ledger.py deadman --ledger-dir DIR --host NAME --renew-file PATH --deadline SECONDS
                                      [--poll SECONDS] [--run-id RUN] [--self-id ID] [--json]
    python3 inferlab_ledger.py renew --renew-file PATH [--json]
    python3 inferlab_ledger.py heartbeat --watch-pid PID --watch-start-time TICKS --interval SECONDS
                                      --child JSON [--child JSON ...] [--status-file PATH] [--run-id RUN]
                                      [--journal-dir DIR --journal-stall SECONDS] [--procfs-root DIR] [--json]
    python3 inferlab_ledger.py sampler start|run|textfile ...   (the counter sampler: see ``_sampler``)
    python3 inferlab_ledger.py version [--json]

``undo`` is the host's part of the restore; ``status`` and ``unlock`` serve the restore playbook. ``watch-link`` and
``deadman`` are the watchdogs of ``_ledger_watch``. ``watch-link``, started before a candidate load, puts the stock
driver back when the load does not complete (its loader gone, or past the load timeout), when the direct link does not
carry traffic within the deadline after it, or when the link stalls for the deadline while the candidate is loaded;
with ``--json`` it prints a JSON line when the link is back, and one at its end. ``deadman`` is the dead man's switch
of a run that borrows production: the controller renews it by touching PATH and disarms it by creating ``PATH.disarm``
(SIGTERM, the undo of its process entry, disarms it too); when PATH goes unrenewed past the deadline it undoes every
open entry but its own (``--self-id``, then marked undone), newest first, as ``--run-id``: the lock of that run does
not stop it, the lock of another run does. ``renew`` and ``heartbeat`` keep the switches renewed while the
controller's playbook lives (``_ledger_heartbeat``): ``renew`` touches PATH for each line on its input and answers
each with a line on stdout; ``heartbeat``, on the controller, writes those lines to one ``renew`` per host (each
``--child`` is ``{"name": HOST, "argv": [...]}``) while the watched process runs (and, with ``--journal-dir``, while
the run's journal moves), counting the answers and keeping each host's last renewal and last error in
``--status-file``. ``sampler`` is the counter window's sampler, with its own options, output and exit codes
(``_sampler``); it is imported only for that subcommand, so the undo never depends on it. ``version`` prints the
stamp the ``ledger`` role writes beside the files it installs (``inferlab_host.json``: the collection, its version and
the files), so a host says which collection's code it runs.

Exit codes: 0 success (for ``deadman``: disarmed, or fired and every undo succeeded); 1 at least one undo failed; 2
usage error; 3 the ledger or its lock refused the request (locked by another run, unknown id, unreadable file); 4 an
unexpected error (a bug: the traceback is in the output). With ``--json`` stdout is one JSON object for 0, 1, 3 and 4.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import traceback

# No .pyc for the modules below: CPython does not check that a bytecode file was written whole, and one cut short by a
# full disk or a file-size limit would make every later run of this script, the restore's undo included, fail to import.
sys.dont_write_bytecode = True
try:
    from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_core as core
    from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_heartbeat as heartbeat
    from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_undo as undo
    from ansible_collections.inferlab.distributed.plugins.module_utils import _ledger_watch as watch
except ImportError:  # on a host: `python3 -I` leaves this script's directory, where the others are, off sys.path
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import inferlab_ledger_core as core
    import inferlab_ledger_heartbeat as heartbeat
    import inferlab_ledger_undo as undo
    import inferlab_ledger_watch as watch

EXIT_OK = 0
EXIT_UNDO_FAILED = 1
EXIT_USAGE = 2
EXIT_REFUSED = 3
EXIT_CRASHED = 4
# the version stamp beside the installed files (roles/ledger/tasks/install_once.yml)
HOST_STAMP = 'inferlab_host.json'


def _parser():
    parser = argparse.ArgumentParser(
        prog='inferlab_ledger.py',
        description='The inferlab change ledger on this host: undo recorded changes, show the ledger, release its '
                    'lock, watch the direct link after a candidate driver load, run the dead man\'s switch of a run, '
                    'sample the counters of a counter window. '
                    'Exit codes: 0 success, 1 an undo failed, 2 usage error, 3 refused (lock held by another run, '
                    'unknown id, unreadable ledger), 4 unexpected error.')
    sub = parser.add_subparsers(dest='command', metavar='COMMAND')
    sub.required = True

    def common(p):
        p.add_argument('--ledger-dir', required=True, help='the ledger directory (<inferlab_state_dir>/ledger)')
        p.add_argument('--host', required=True, help='whose ledger: <ledger-dir>/<host>.jsonl')
        p.add_argument('--json', action='store_true', help='print one JSON object instead of text')

    p_undo = sub.add_parser('undo', help='undo every open entry, newest first')
    common(p_undo)
    p_undo.add_argument('--id', action='append', dest='ids', metavar='ID', help='undo only this entry (repeatable)')
    p_undo.add_argument('--run-id', help='the run doing the undo: refuse if another run holds the lock')
    p_undo.add_argument('--check', action='store_true', help='only say what would be undone')
    p_undo.add_argument('--procfs-root', default='/proc', help='where procfs is mounted (default /proc)')
    p_undo.add_argument('--tc', dest='tc_command', help='the tc binary for tc_profile entries (default: tc from '
                        'PATH or /usr/sbin, /sbin)')
    p_undo.add_argument('--systemctl', help='the systemctl binary for systemd_unit and service_pause entries (default: '
                        'from PATH)')
    p_undo.add_argument('--docker', help='the docker binary for docker container and service_pause entries (default: '
                        'from PATH)')
    p_undo.add_argument('--podman', help='the podman binary for podman container and service_pause entries (default: '
                        'from PATH)')
    p_watch = sub.add_parser('watch-link', help='armed before a candidate driver load: undo it when the load does not '
                             'complete, when the direct link carries no traffic (no ping to the peer answered) within '
                             'the deadline after it, or when it stalls for the deadline while the candidate is loaded')
    common(p_watch)
    p_watch.add_argument('--id', required=True, help='the kernel_module entry of the candidate load')
    p_watch.add_argument('--interface', required=True, help='the direct-link interface')
    p_watch.add_argument('--peer', required=True, help="the peer's address on the direct link")
    p_watch.add_argument('--deadline', type=_seconds, default=30.0, help='seconds the link gets to come back after '
                         'the load, and the longest stall it may have while the candidate is loaded (default 30)')
    p_watch.add_argument('--load-timeout', type=_seconds, help='seconds the load may stay pending (default: no bound '
                         'but the loader\'s life)')
    p_watch.add_argument('--loader-pid', type=int, help='the process loading the candidate: its death with the load '
                         'pending undoes it')
    p_watch.add_argument('--loader-start-time', type=int, help='its start time (field 22 of /proc/PID/stat)')
    p_watch.add_argument('--poll', type=_seconds, default=1.0, help='seconds between pings while the candidate is '
                         'loaded (default 1)')
    p_watch.add_argument('--ping', help='the ping binary (default: from the sbin/bin directories)')
    p_deadman = sub.add_parser('deadman', help="the dead man's switch: wait while the controller renews the renew "
                               'file; when it is not renewed within the deadline, undo every open entry (all but '
                               '--self-id), newest first. <renew-file>.disarm or SIGTERM disarms it')
    common(p_deadman)
    p_deadman.add_argument('--renew-file', required=True, help='the file the controller touches to renew it')
    p_deadman.add_argument('--deadline', required=True, type=_seconds, help='seconds without a renewal before it '
                           'fires')
    p_deadman.add_argument('--poll', type=_seconds, default=1.0, help='seconds between looks (default 1)')
    p_deadman.add_argument('--run-id', help='the run that armed it: its lock does not stop the undo, the lock of '
                           'another run does (without it, any lock does)')
    p_deadman.add_argument('--self-id', help='its own process entry: not undone, marked undone once it fires')
    p_renew = sub.add_parser('renew', help="touch the dead man's switch's renew file for each line read on stdin, "
                             f'answering each with a line on stdout ({heartbeat.ACK_RENEWED!r}, or '
                             f'{heartbeat.ACK_NO_RENEW_FILE!r}), until end of input (the far end of the controller\'s '
                             'heartbeat)')
    p_renew.add_argument('--renew-file', required=True, help='the renew file of this host\'s switch')
    p_renew.add_argument('--json', action='store_true', help='print one JSON object instead of text')
    p_beat = sub.add_parser('heartbeat', help='on the controller: while the watched process lives, write a line '
                            'every interval to a renew process per host, counting the renewals they confirm')
    p_beat.add_argument('--watch-pid', required=True, type=int, help='the ansible-playbook process of the run')
    p_beat.add_argument('--watch-start-time', required=True, type=int,
                        help='its start time (field 22 of /proc/PID/stat)')
    p_beat.add_argument('--interval', required=True, type=_seconds, help='seconds between two lines')
    p_beat.add_argument('--child', action='append', required=True, type=_child, dest='children', metavar='JSON',
                        help='a renew process: {"name": HOST, "argv": [...]} (repeatable)')
    p_beat.add_argument('--status-file', help="where to keep each host's last confirmed renewal and last error "
                        '(JSON, written whole then renamed)')
    p_beat.add_argument('--run-id', help='the run it renews for, written in the status file')
    p_beat.add_argument('--journal-dir', help="the run's journal directory: stop once nothing in it changed for "
                        '--journal-stall seconds (a controller alive but hung)')
    p_beat.add_argument('--journal-stall', type=_seconds, help='see --journal-dir (the longest stage)')
    p_beat.add_argument('--procfs-root', default='/proc', help='where procfs is mounted (default /proc)')
    p_beat.add_argument('--json', action='store_true', help='print one JSON object instead of text')
    # listed for --help only: main hands everything after `sampler` to _sampler, which parses it
    sub.add_parser('sampler', add_help=False, help='the counter sampler of a counter window: sampler start|run|'
                   'textfile (see sampler --help; its own exit codes)')
    p_version = sub.add_parser('version', help='print the version stamp of the files installed beside this script '
                               f'({HOST_STAMP})')
    p_version.add_argument('--json', action='store_true', help='print one JSON object instead of text')
    p_status = sub.add_parser('status', help='show the entries, the open ones, the lock and any problems')
    common(p_status)
    p_unlock = sub.add_parser('unlock', help='release the lock')
    common(p_unlock)
    holder = p_unlock.add_mutually_exclusive_group(required=True)
    holder.add_argument('--run-id', help='the run that holds the lock')
    holder.add_argument('--force', action='store_true', help='release it whoever holds it (the holder must be dead)')
    return parser


def _seconds(text):
    """argparse type: a positive number of seconds."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f'not a number of seconds: {text!r}') from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f'must be a positive number of seconds, got {text!r}')
    return value


def _child(text):
    """argparse type: ``{"name": HOST, "argv": [program, ...]}``."""
    try:
        child = json.loads(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f'not JSON: {text!r}') from None
    if not (isinstance(child, dict) and isinstance(child.get('name'), str) and isinstance(child.get('argv'), list)
            and child['argv'] and all(isinstance(a, str) for a in child['argv'])):
        raise argparse.ArgumentTypeError(f'expected {{"name": HOST, "argv": [program, ...]}}, got {text!r}')
    return child


def _status_text(result):
    lines = [f'ledger {result["ledger"]}: {len(result["entries"])} entries, {len(result["open"])} open']
    lines += [f'{e["state"]} {e["id"]} {json.dumps(e["params"], sort_keys=True)}' for e in result['entries']]
    if result['lock']:
        lines.append(f'lock: held by {core.describe_holder(result["lock"])}')
    else:
        lines.append('lock: malformed' if result['lock'] == {} else 'lock: free')
    lines += [f'problem: {p}' for p in result['problems']]
    return lines


def _emit(result, as_json):
    """A line before the end (the link watchdog's verdict on the link while it goes on watching)."""
    sys.stdout.write((json.dumps(result, sort_keys=True) if as_json else result['message']) + '\n')
    sys.stdout.flush()


def _acknowledge(answer):
    """``renew``'s answer to one line: what the heartbeat counts."""
    sys.stdout.write(answer + '\n')
    sys.stdout.flush()


def host_stamp(folder):
    """The version stamp in ``folder``, with a message in words."""
    path = os.path.join(folder, HOST_STAMP)
    try:
        with open(path, encoding='utf-8') as handle:
            stamp = json.load(handle)
    except (OSError, ValueError) as exc:
        raise core.LedgerError(f'cannot read the version stamp {path}: {exc}') from None
    if not (isinstance(stamp, dict) and isinstance(stamp.get('files'), list)):
        raise core.LedgerError(f'malformed version stamp {path}: expected an object with a list of files')
    count = len(stamp['files'])
    return dict(stamp, changed=False, message=f'{stamp.get("collection")} {stamp.get("version")}: '
                                              f'{count} file{"" if count == 1 else "s"} in {folder}')


def _sampler():
    """The counter sampler's module, imported only for its subcommand."""
    # pylint: disable=import-outside-toplevel
    try:
        from ansible_collections.inferlab.distributed.plugins.module_utils import _sampler as sampler
    except ImportError:  # on a host, installed beside this script
        import inferlab_sampler as sampler
    return sampler


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ['sampler']:
        return _sampler().main(argv[1:])
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == 'watch-link' and (args.loader_pid is None) != (args.loader_start_time is None):
        parser.error('--loader-pid and --loader-start-time go together')
    if args.command == 'heartbeat' and (args.journal_dir is None) != (args.journal_stall is None):
        parser.error('--journal-dir and --journal-stall go together')
    try:
        if args.command == 'undo':
            result = undo.undo(args.ledger_dir, args.host, ids=args.ids, run_id=args.run_id,
                               ctx=undo.UndoContext(procfs_root=args.procfs_root,
                                                    tc_command=[args.tc_command] if args.tc_command else None,
                                                    systemctl_command=[args.systemctl] if args.systemctl else None,
                                                    container_commands={
                                                        'docker': [args.docker] if args.docker else None,
                                                        'podman': [args.podman] if args.podman else None}),
                               check_mode=args.check)
            rc = EXIT_UNDO_FAILED if result['failed'] else EXIT_OK
            text = [result['message']] + [f'{d["result"]} {d["id"]}: {d["message"]}' for d in result['details']]
        elif args.command == 'watch-link':
            loader = {'pid': args.loader_pid, 'start_time': args.loader_start_time} if args.loader_pid else None
            result = watch.watch_link(args.ledger_dir, args.host, args.id, args.interface, args.peer, args.deadline,
                                      [args.ping] if args.ping else None, loader=loader,
                                      load_timeout_s=args.load_timeout, poll_s=args.poll,
                                      emit=lambda verdict: _emit(verdict, args.json))
            rc = EXIT_UNDO_FAILED if result.get('failed') else EXIT_OK
            text = [result['message']]
        elif args.command == 'deadman':
            result = watch.deadman(args.ledger_dir, args.host, args.renew_file, args.deadline, poll_s=args.poll,
                                   run_id=args.run_id, self_id=args.self_id)
            if result.get('refused'):
                rc = EXIT_REFUSED
            else:
                rc = EXIT_UNDO_FAILED if result.get('failed') else EXIT_OK
            text = [result['message']]
            if result.get('undo'):
                text += [f'{d["result"]} {d["id"]}: {d["message"]}' for d in result['undo']['details']]
        elif args.command == 'renew':
            result = heartbeat.renew_on_input(args.renew_file, sys.stdin, acknowledge=_acknowledge)
            rc, text = EXIT_OK, [result['message']]
        elif args.command == 'heartbeat':
            result = heartbeat.heartbeat(args.watch_pid, args.watch_start_time, args.children, args.interval,
                                         status_file=args.status_file, run_id=args.run_id,
                                         journal_dir=args.journal_dir, journal_stall_s=args.journal_stall,
                                         procfs_root=args.procfs_root)
            rc, text = EXIT_OK, [result['message']]
        elif args.command == 'version':
            result = host_stamp(os.path.dirname(os.path.abspath(__file__)))
            rc, text = EXIT_OK, [result['message']]
        elif args.command == 'status':
            result = core.status(args.ledger_dir, args.host)
            text = _status_text(result)
            result.update(changed=False, message=text[0])
            rc = EXIT_OK
        else:
            result = core.release_lock(args.ledger_dir, args.host, run_id=args.run_id, force=args.force)
            text = [result['message']]
            rc = EXIT_OK
    except core.LedgerError as exc:
        result = {'changed': False, 'error': type(exc).__name__, 'message': str(exc)}
        text = [f'error: {exc}']
        rc = EXIT_REFUSED
    except Exception as exc:  # a bug: report it whole, with a code of its own, so it never reads as a result
        trace = traceback.format_exc()
        result = {'changed': False, 'error': type(exc).__name__, 'message': f'{args.command} crashed: {exc}',
                  'traceback': trace}
        text = [f'error: {args.command} crashed: {exc}', trace]
        rc = EXIT_CRASHED
    sys.stdout.write((json.dumps(result, sort_keys=True) if args.json else '\n'.join(text)) + '\n')
    sys.stdout.flush()
    return rc


if __name__ == '__main__':
    raise SystemExit(main())
