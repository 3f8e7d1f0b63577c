"""The lab's direct link as hardware: what the cable and the hosts' XDomain discovery do around a driver reload.

On a real pair of hosts an ``rmmod thunderbolt_net`` removes ``thunderbolt0`` with its addresses, and the peer's
``thunderbolt0`` goes too (this host's ThunderboltIP service disappears from the peer's view). A load brings both back
with no addresses, and carrier only once both sides have logged in again (the driver retries every 4.5 s).

The emulated driver layer does the first half on the host itself: its unload deletes the lab's veth, and both ends go
with their addresses. This daemon, run by the lab on the controller, is the other half: while the link is absent and
both hosts' fixture roots show ``thunderbolt_net`` loaded, it waits the login delay and creates a new veth pair, one
end in each host's namespace, down and with no address. Setting it up and addressing it is the hosts' business, as on
a real site. ``candidate_login: never`` stands for a candidate whose link never comes back (a controller that never
returns TX credits): no login succeeds while either host shows a candidate (``parameters/tx_e2e`` present).

The driver's effect on the link is the hardware's too: each end gets the link profile (a tc qdisc on the host's own
end, applied with the collection's tc logic, which the lab installs as ``tc_module``) of the driver its host has
loaded, ``driver_profiles`` (the lab's default: ``lossy`` for the stock driver, whose TX path drops TP2's bursts, and
``clean`` for the candidate). It is applied when the daemon starts (the link as it trained at power-on) and whenever
the daemon creates the pair after a reload, never in between: a profile the hosts set themselves (a link test's A/B,
the link_profile role) stays until the next reload, as on real hardware.

    python -m inferlab.lab.link_daemon --config FILE --pidfile FILE

The config (JSON, re-read every poll, so the lab can change the login behaviour of a running lab; the daemon's
shape is src/inferlab/lab/daemon.py's):
``{"hosts": [{"netns", "interface", "mtu", "sysfs_root"}, {...}], "login_delay_s", "candidate_login": "ok"|"never",
"poll_s", "driver_profiles": {"stock": PROFILE, "candidate": PROFILE}, "tc_module": FILE}`` (without
``driver_profiles`` no profile is applied; with them, ``tc_module`` is the lab's copy of the collection's
plugins/module_utils/_tc.py). Each event goes to stdout as one line with a UTC timestamp.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from inferlab.lab import daemon as lab_daemon
from inferlab.lab.daemon import log
from inferlab.lab.tc_module import TcModuleError, load_tc

LOGINS = ("ok", "never")
DRIVERS = ("stock", "candidate")


class LinkConfigError(lab_daemon.DaemonConfigError):
    """A config the daemon cannot act on; the message says what was expected."""


def read_config(path: Path) -> dict:
    try:
        config = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise LinkConfigError(f"cannot read {path}: {exc}") from None
    hosts = config.get("hosts")
    if not isinstance(hosts, list) or len(hosts) != 2:
        raise LinkConfigError(f"{path}: expected two hosts, found {hosts!r}")
    for host in hosts:
        if not isinstance(host, dict) or not all(host.get(k) for k in ("netns", "interface", "mtu", "sysfs_root")):
            raise LinkConfigError(f"{path}: each host needs netns, interface, mtu and sysfs_root, found {host!r}")
    if config.get("candidate_login", "ok") not in LOGINS:
        raise LinkConfigError(f"{path}: candidate_login must be one of {', '.join(LOGINS)}")
    profiles = config.get("driver_profiles", {})
    known = config_tc(path, config).PROFILES if profiles else ()
    if not isinstance(profiles, dict) or set(profiles) - set(DRIVERS) or not set(profiles.values()) <= set(known):
        raise LinkConfigError(f"{path}: driver_profiles maps {' and '.join(DRIVERS)} to one of {', '.join(known)}, "
                              f"found {profiles!r}")
    for name in ("login_delay_s", "poll_s"):
        if not isinstance(config.get(name), (int, float)) or config[name] < 0:
            raise LinkConfigError(f"{path}: {name} must be a non-negative number, found {config.get(name)!r}")
    return config


def driver_state(sysfs_root: str) -> str:
    """``absent``, ``stock`` or ``candidate``: what the host's fixture root shows of thunderbolt_net."""
    module = Path(sysfs_root) / "module" / "thunderbolt_net"
    if not module.is_dir():
        return "absent"
    return "candidate" if (module / "parameters" / "tx_e2e").exists() else "stock"


def next_action(link_present: bool, drivers: list[str], ready_since: float | None, now: float,
                login_delay_s: float, candidate_login: str) -> tuple[str, float | None]:
    """What the link does next, and since when it has been ready to log in: ``(action, ready_since)``.

    ``none`` (the link is there), ``wait`` (a driver is not loaded, or the login delay is not over), ``refuse``
    (a candidate whose login never succeeds) or ``create``."""
    if link_present:
        return "none", None
    if "absent" in drivers:
        return "wait", None
    if candidate_login == "never" and "candidate" in drivers:
        return "refuse", None
    ready_since = now if ready_since is None else ready_since
    return ("create" if now - ready_since >= login_delay_s else "wait"), ready_since


def config_tc(path: Path, config: dict):
    """The tc logic the config names (``tc_module``): the one the link_profile module uses on a real host."""
    if not isinstance(config.get("tc_module"), str) or not config["tc_module"]:
        raise LinkConfigError(f"{path}: driver_profiles need tc_module, the lab's copy of the collection's tc logic, "
                              f"found {config.get('tc_module')!r}")
    try:
        return load_tc(config["tc_module"])
    except TcModuleError as exc:
        raise LinkConfigError(f"{path}: {exc}") from None


def driver_profile(config: dict, driver: str) -> str | None:
    """The link profile the hardware shows with ``driver`` loaded (None: none configured, or no driver)."""
    return config.get("driver_profiles", {}).get(driver)


def apply_profile(host: dict, profile: str, tc) -> str:
    """Put ``profile`` on the host's end of the link (its own TX side) with ``tc`` (the lab's tc module); the tc
    error, or ``""``. A qdisc that is not one of the link profiles' is left alone and named."""
    netns, interface = host["netns"], host["interface"]
    shown = subprocess.run(["ip", "netns", "exec", netns, *tc.show_argv(interface)], capture_output=True, text=True,
                           check=False, timeout=10)
    if shown.returncode != 0:
        return shown.stderr.strip()
    try:
        commands = tc.plan(interface, tc.classify_output(shown.stdout), profile, tc.wanted_parameters(profile))
    except tc.TcError as exc:
        return str(exc)
    for argv in commands:
        done = subprocess.run(["ip", "netns", "exec", netns, *argv], capture_output=True, text=True, check=False,
                              timeout=10)
        if done.returncode != 0:
            return done.stderr.strip()
    return ""


def apply_driver_profiles(config: dict, drivers: list[str]) -> None:
    """Each end's profile for its host's driver, logged."""
    for host, driver in zip(config["hosts"], drivers, strict=True):
        profile = driver_profile(config, driver)
        if profile is None:
            continue
        error = apply_profile(host, profile, load_tc(config["tc_module"]))
        log(f"{host['netns']}:{host['interface']}: " + (f"could not apply {profile} ({driver} driver): {error}"
                                                        if error else f"{profile} ({driver} driver)"))


def ip(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *argv], capture_output=True, text=True, check=False, timeout=10,
                          env=dict(os.environ, LC_ALL="C"))


def link_present(host: dict) -> bool:
    return ip("-n", host["netns"], "link", "show", "dev", host["interface"]).returncode == 0


def create_link(a: dict, b: dict) -> str:
    """A new veth pair, one end in each namespace, both down and without addresses (what a driver registers)."""
    done = ip("-n", a["netns"], "link", "add", a["interface"], "mtu", str(a["mtu"]), "type", "veth",
              "peer", "name", b["interface"], "mtu", str(b["mtu"]), "netns", b["netns"])
    return "" if done.returncode == 0 else done.stderr.strip()


def serve(config_path: Path) -> None:
    ready_since, absent_since, last = None, None, None
    config = read_config(config_path)
    if link_present(config["hosts"][0]):  # the link as it trained at power-on
        apply_driver_profiles(config, [driver_state(h["sysfs_root"]) for h in config["hosts"]])
    while True:
        config = read_config(config_path)
        a, b = config["hosts"]
        present = link_present(a)  # a veth pair: both ends or neither
        drivers = [driver_state(h["sysfs_root"]) for h in (a, b)]
        now = time.monotonic()
        if not present and absent_since is None:
            absent_since = now
            log(f"link gone (drivers: {', '.join(drivers)})")
        action, ready_since = next_action(present, drivers, ready_since, now, config["login_delay_s"],
                                          config.get("candidate_login", "ok"))
        if action == "create":
            error = create_link(a, b)
            if error:
                log(f"could not create the link: {error}")
            else:
                log(f"link back, bare, {now - absent_since:.1f}s after it went (drivers: {', '.join(drivers)})")
                apply_driver_profiles(config, drivers)
                absent_since, ready_since = None, None
        elif action != last and action in ("refuse", "wait") and not present:
            log("no login: a candidate whose link never comes back" if action == "refuse"
                else f"waiting (drivers: {', '.join(drivers)})")
        last = action
        time.sleep(config["poll_s"])


def main(argv: list[str] | None = None) -> int:
    return lab_daemon.main("inferlab.lab.link_daemon", __doc__.split("\n\n", maxsplit=1)[0], read_config, serve,
                           "serving the direct link of", argv)


if __name__ == "__main__":
    sys.exit(main())
