"""The embedded lab, controller side: preflight checks, status, and the small helpers the `lab` role calls.

The role `inferlab.distributed.lab` builds and removes the lab; this module holds the logic that deserves unit tests
and is called from the role as ``python -m inferlab.lab.control SUBCOMMAND`` (JSON on stdout, exit 0 unless the helper
itself broke):

- ``preflight --name N --octet O``: root, required tools, and the route-clash check against ``ip -j -4 route``;
- ``check-routes --name N --octet O [--routes FILE]``: the route-clash check alone (exit 1 on a clash, for people);
- ``status (--lab-dir DIR | -i INVENTORY) [--json]``: what ``inferlab lab status`` prints;
- ``write-tree --root DIR``: converge a file tree (the per-host hardware fixture) from a JSON spec on stdin;
- ``write-record --lab-dir DIR``: write ``lab.json`` (the role's spec plus the daemons' PIDs);
- ``stop-pidfiles --lab-dir DIR``: stop the lab's daemons by pidfile, after checking ``/proc/PID/cmdline``;
- ``kill-netns-pids --name N``: kill whatever still runs in the lab's network namespaces.

Addressing (see inventory/lab/group_vars): the management subnet is ``169.254.<octet>.0/24`` (one /30 per host,
controller side ``.4i+1``, host side ``.4i+2``); the direct link lives in ``169.254.<octet+100>.0/24``. Both must stay
clear of ``169.254.169.0/24`` (cloud metadata) and of RFC 3927's reserved first and last /24.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from inferlab.lab.addressing import check_name, clash_problem, lab_subnets, route_clashes
from inferlab.lab.commands import read_routes
from inferlab.lab.lab_files import write_record, write_tree
from inferlab.lab.layout import LabError
from inferlab.lab.preflight import preflight
from inferlab.lab.processes import kill_lab_scripts, kill_netns_pids, stop_pidfiles
from inferlab.lab.status import render_status_text, status


def _print(obj) -> None:
    print(json.dumps(obj, indent=2, sort_keys=True))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m inferlab.lab.control",
                                     description=__doc__.split("\n\n", maxsplit=1)[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("preflight", help="root, tools and route clashes, as JSON")
    p.add_argument("--name", required=True)
    p.add_argument("--octet", required=True)
    p = sub.add_parser("check-routes", help="the route-clash check alone (exit 1 on a clash)")
    p.add_argument("--name", required=True)
    p.add_argument("--octet", required=True)
    p.add_argument("--routes", help="a saved `ip -j -4 route show table all` (default: read this machine's)")
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("status", help="the lab's state")
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("--lab-dir")
    group.add_argument("-i", "--inventory")
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("write-tree", help="converge a file tree from a JSON spec on stdin")
    p.add_argument("--root", required=True)
    p.add_argument("--check", action="store_true")
    p = sub.add_parser("write-record", help="write lab.json from {spec, spec_digest, built_at} on stdin")
    p.add_argument("--lab-dir", required=True)
    p.add_argument("--check", action="store_true")
    p = sub.add_parser("stop-pidfiles", help="stop the lab's daemons by pidfile")
    p.add_argument("--lab-dir", required=True)
    p = sub.add_parser("kill-netns-pids", help="kill what still runs in the lab's namespaces")
    p.add_argument("--name", required=True)
    p = sub.add_parser("kill-lab-scripts", help="kill what runs a script installed under the lab (controller side)")
    p.add_argument("--lab-dir", required=True)
    args = parser.parse_args(argv)

    try:
        if args.command == "preflight":
            _print(preflight(args.name, args.octet))
        elif args.command == "check-routes":
            routes = json.loads(Path(args.routes).read_text()) if args.routes else read_routes()
            subnets = lab_subnets(args.octet)
            check_name(args.name)
            clashes = route_clashes(routes, args.name, args.octet)
            if args.json:
                _print({"subnets": {k: str(v) for k, v in subnets.items()}, "clashes": clashes})
            if clashes:
                print(clash_problem(clashes, subnets["management"]), file=sys.stderr)
            return 1 if clashes else 0
        elif args.command == "status":
            st = status(args.lab_dir or args.inventory)
            print(json.dumps(st, indent=2) if args.json else render_status_text(st))
        elif args.command == "write-tree":
            _print(write_tree(Path(args.root), json.load(sys.stdin), check=args.check))
        elif args.command == "write-record":
            _print(write_record(Path(args.lab_dir), json.load(sys.stdin), check=args.check))
        elif args.command == "stop-pidfiles":
            _print(stop_pidfiles(Path(args.lab_dir)))
        elif args.command == "kill-netns-pids":
            check_name(args.name)
            _print(kill_netns_pids(args.name))
        elif args.command == "kill-lab-scripts":
            _print(kill_lab_scripts(Path(args.lab_dir)))
    except LabError as exc:
        print(f"inferlab.lab.control: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
