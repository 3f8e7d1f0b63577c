"""Which Ansible strategy a run uses, and the environment that selects it.

`mitogen` (Mitogen for Ansible's `mitogen_linear`, a pinned dependency, through this package's
strategy_plugins/inferlab_mitogen_linear.py, which turns Mitogen's CPU pinning off) keeps one Python interpreter
per host for the whole run instead of starting one per task: the same tasks, in the same order, with fewer round
trips. The way back never depends on it: every restore (`inferlab run restore`, and the restore that follows a
canceled run) runs on ansible-core's own `linear`, and so does any run given `--strategy linear` or
`INFERLAB_STRATEGY=linear`.

    python -m inferlab.run.strategy [mitogen|linear]    # prints KEY=VALUE lines, for `env` in a Makefile
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

STRATEGIES = ("mitogen", "linear")
DEFAULT = "mitogen"
RESTORE = "linear"
ENV_VAR = "INFERLAB_STRATEGY"


class StrategyError(ValueError):
    """An unknown strategy name, or Mitogen asked for and not installed."""


def chosen(value: str | None = None) -> str:
    """The strategy named by `value`, else by $INFERLAB_STRATEGY, else the default."""
    name = value or os.environ.get(ENV_VAR) or DEFAULT
    if name not in STRATEGIES:
        source = "--strategy" if value else ENV_VAR
        raise StrategyError(f"{source}: expected one of {', '.join(STRATEGIES)}, found {name!r}")
    return name


# This package's strategy plugins (inferlab_mitogen_linear: Mitogen's mitogen_linear without its CPU pinning)
STRATEGY_PLUGINS = Path(__file__).parents[1] / "strategy_plugins"
MITOGEN_STRATEGY = "inferlab_mitogen_linear"


def mitogen_strategy_dir() -> Path:
    spec = importlib.util.find_spec("ansible_mitogen")
    if spec is None or not spec.origin:
        raise StrategyError(
            "strategy mitogen: the ansible_mitogen package is not installed in this Python "
            f"({sys.executable}); install inferlab's pinned dependencies, or set {ENV_VAR}=linear"
        )
    return Path(spec.origin).parent / "plugins" / "strategy"


def ansible_env(name: str) -> dict[str, str]:
    """The environment variables that make ansible-playbook use strategy `name` (overriding the caller's)."""
    if name == "linear":
        return {"ANSIBLE_STRATEGY": "linear"}
    if name == "mitogen":
        return {"ANSIBLE_STRATEGY_PLUGINS": os.pathsep.join([str(STRATEGY_PLUGINS), str(mitogen_strategy_dir())]),
                "ANSIBLE_STRATEGY": MITOGEN_STRATEGY}
    raise StrategyError(f"strategy: expected one of {', '.join(STRATEGIES)}, found {name!r}")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    try:
        env = ansible_env(chosen(args[0] if args else None))
    except StrategyError as exc:
        print(f"inferlab.run.strategy: {exc}", file=sys.stderr)
        return 2
    for key, value in env.items():
        print(f"{key}={value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
