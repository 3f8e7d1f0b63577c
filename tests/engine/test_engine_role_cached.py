"""roles/llamacpp_engine against the real build: a host whose cache already holds the build (the one `make engine`
made, which the role's own script made) answers from it offline, the real programs are verified, and a second run
changes nothing."""

import json
from pathlib import Path

from ansible_collections.inferlab.distributed.tests.unit.llamacpp_standins import ENGINE_ROLE_PLAYBOOK, run_playbook


def run(tmp_path, cache_dir):
    variables = {"llamacpp_engine_cache_dir": str(cache_dir), "facts_file": str(tmp_path / "facts.json")}
    return run_playbook(tmp_path, ENGINE_ROLE_PLAYBOOK, {"lab-a": {}}, variables)


def test_a_cached_build_is_taken_offline_verified_and_changes_nothing_the_second_time(bin_dir, tmp_path):
    cache_dir = Path(bin_dir).parents[1]  # CACHE/llamacpp-<sha>-<options>/bin
    first = run(tmp_path, cache_dir)
    assert first.returncode == 0, first.stdout[-3000:]
    facts = json.loads((tmp_path / "facts.json").read_text())
    assert facts["build"]["cached"] is True and facts["build"]["bin_dir"] == str(bin_dir)
    assert facts["info"]["rpc"] is True and facts["info"]["version"]["commit"] == "0c1e570"
    second = run(tmp_path, cache_dir)
    assert second.returncode == 0, second.stdout[-3000:]
    assert "changed=0" in second.stdout.split("PLAY RECAP")[1]
