"""The cluster lab after playbooks/isolate_suspect.yml (day one, leave-one-out, the engine talking to itself, the
quarantine, the restore) and the ring's admission: every host's Ethernet link verified by what it is, the day-one
matrix naming the suspect's transmit path and nothing else, the ring's admission refusing it, the ladder
characterizing it (per flow, its sender, not its host's TCP), the real engine served with and without it (lab-c
starting nothing while left out) and on lab-c alone talking to itself over loopback, the quarantine (lab-c a solo
llama-server behind its gateway role, the ring served again without it), kept and checked by a later verify, every
iperf3 server and engine process stopped through the ledger, and the restore verifying all four hosts."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "shared" / "tests"))

from labinfo import LAB_DIR, RING, RUN_DIR, assert_records_valid, host_ledger, own_processes  # noqa: E402

testinfra_hosts = RING
HOSTS = ["lab-a", "lab-b", "lab-c", "lab-d"]


def fragment(stage: str) -> dict:
    paths = sorted(RUN_DIR.glob(f"**/fragments/{stage}/*.json"))
    assert len(paths) == 1, paths
    return json.loads(paths[0].read_text())


def matrix() -> dict:
    return fragment("link_pairs")


def test_every_host_passed_as_an_ethernet_link(host):
    name = host.backend.get_hostname()
    [path] = RUN_DIR.glob(f"**/fragments/verify/{name}.json")
    state = json.loads(path.read_text())
    assert state["ok"] is True, [c for c in state["checks"] if not c["ok"]]
    assert (state["link"]["kind"], state["link"]["interface"], state["link"]["speed_mbps"]) == ("ethernet", "eth1",
                                                                                                10000)
    assert "link peer present" not in [c["name"] for c in state["checks"]]


def test_the_matrix_tested_every_ordered_pair_in_six_rounds():
    result = matrix()
    assert result["hosts"] == HOSTS and len(result["rounds"]) == 6
    assert sorted((t["from"], t["to"]) for t in result["tests"]) == sorted(
        (a, b) for a in HOSTS for b in HOSTS if a != b)
    assert all(t["error"] is None and t["bps"] > 0 for t in result["tests"]), result["tests"]


def test_the_matrix_names_the_suspects_transmit_path_and_nothing_else():
    verdicts = matrix()["verdicts"]
    assert verdicts["suspects"] == ["lab-c"] and verdicts["weak_pairs"] == [], verdicts["text"]
    assert verdicts["hosts"]["lab-c"]["verdict"] == "transmit weak"
    assert "lab-c: its transmit path is weak against every peer" in verdicts["text"]
    # the emulation's shape: the suspect's one flow well under the port's rate, the others near it
    sent = {(t["from"], t["to"]): t["bps"] for t in matrix()["tests"]}
    suspect = [bps for (a, _b), bps in sent.items() if a == "lab-c"]
    others = [bps for (a, _b), bps in sent.items() if a != "lab-c"]
    assert max(suspect) * 1.5 < min(others), (suspect, others)


def test_the_ladder_characterizes_the_suspect_per_flow_and_on_its_sending_side():
    result = fragment("suspect_ladder")
    assert result["hosts"] == {"suspect": "lab-c", "server": "lab-a", "control": "lab-b"}
    assert all(run["error"] is None and run["bps"] > 0 for run in result["runs"]), result["runs"]
    assert len(result["runs"]) == 12
    steps = result["ladder"]["steps"]
    verdicts = {name: step["verdict"] for name, step in steps.items()}
    # the lab's per-flow cap (35.8 Mbit/s a flow, 93 a port): more flows add up, another sender is faster, the
    # server sends back at the port's rate, and loopback does not go through the cap
    assert verdicts["flows"] == "per flow", steps["flows"]["text"]
    assert verdicts["control"] == "the suspect's sender", steps["control"]["text"]
    assert verdicts["loopback"] == "loopback fast", steps["loopback"]["text"]
    assert steps["control"]["figures"]["receive_ratio"] >= 1.5, steps["control"]["text"]
    assert all(step["does_not_show"] for step in steps.values())
    assert result["ladder"]["theory"].startswith("a theory, not a cause: the limit is per flow")


def test_leave_one_out_served_with_and_without_the_suspect():
    result = fragment("leave_one_out")
    runs = result["runs"]
    assert [(r["label"], r["round"], r["ring"]) for r in runs] == [
        ("whole ring", 1, HOSTS), ("without lab-c", 1, ["lab-a", "lab-b", "lab-d"])]
    assert all(r["passed"] and r["figures"]["single_stream_decode_tok_s"] > 0 for r in runs), runs
    verdict = result["verdict"]
    assert verdict["rounds"] == 1 and set(verdict["configurations"]) == {"whole ring", "without lab-c"}
    # one round never names a member, whatever the real engine shows: a lift is "not claimed"
    assert verdict["named"] == [], verdict["text"]
    assert verdict["hosts"]["lab-c"]["verdict"] in ("not claimed", "no clear difference"), verdict["text"]


def test_the_matrix_is_kept_for_the_rings_admission_and_leave_one_out_admitted_lab_c():
    [kept] = LAB_DIR.glob("controller/state/day_one.json")
    day_one = json.loads(kept.read_text())
    assert day_one["suspects"] == ["lab-c"] and day_one["hosts"] == HOSTS
    for path in sorted(RUN_DIR.glob("**/fragments/leave_one_out_runs/*.json")):
        admission = json.loads(path.read_text())["admission"]
        expected = [] if "without_lab_c" in path.name else ["lab-c"]
        assert admission["weak_in_ring"] == admission["admitted"] == expected, (path.name, admission)


def test_a_left_out_host_starts_nothing_of_its_configuration():
    served = sorted(RUN_DIR.glob("**/fragments/leave_one_out_runs/*.json"))
    assert len(served) == 2, served
    for path in served:
        mode = json.loads(path.read_text())
        without = "without_lab_c" in path.name
        assert sorted(mode["ranks"]) == (["lab-a", "lab-b", "lab-d"] if without else HOSTS), path.name
        assert mode["layers"]["runtime"] == ("llamacpp_rpc3" if without else "llamacpp_rpc4"), path.name
        assert mode["layers"]["left_out"] == ("lab-c" if without else "none"), path.name
    # lab-c's ledger: a ggml-rpc-server on its link address for the whole-ring run only (its loopback one is the
    # engine talking to itself)
    members = [e for e in host_ledger("lab-c").values()
               if e["kind"] == "process" and "ggml-rpc-server" in str(e.get("params"))
               and "127.0.0.1" not in str(e.get("params"))]
    assert len(members) == 1 and {e["state"] for e in members} == {"undone"}, members


def test_the_engine_talked_to_itself_on_lab_c_over_loopback():
    result = fragment("engine_loopback")
    assert sorted(result["ranks"]) == ["lab-c"], result["ranks"]
    assert (result["layers"]["runtime"], result["layers"]["rpc"]) == ("llamacpp_rpc1", "loopback")
    head = result["ranks"]["lab-c"]
    assert "--rpc" in head["argv"] and head["argv"][head["argv"].index("--rpc") + 1] == "127.0.0.1:50052"
    assert head["loopback_member"]["argv"][1:3] == ["-H", "127.0.0.1"], head["loopback_member"]
    assert result["acceptance"]["passed"] is True
    assert result["trials"]["figures"]["single_stream_decode_tok_s"]["median"] > 0
    assert result["admission"]["admitted"] == ["lab-c"], result["admission"]


def test_the_quarantine_served_lab_c_solo_and_the_ring_without_it():
    plan = json.loads(next(RUN_DIR.glob("**/fragments/topology/plan.json")).read_text())
    assert (plan["engine"], plan["solo"], plan["ring"]) == ("llamacpp", ["lab-c"], ["lab-a", "lab-b", "lab-d"])
    solo = fragment("topology_solo")
    assert solo["host"] == "lab-c" and solo["argv"][0].endswith("/llama-server") and "--rpc" not in solo["argv"]
    assert solo["direct"]["ok"] == solo["direct"]["requests"] > 0, solo["direct"]
    ring = fragment("topology_ring")
    assert sorted(ring["ranks"]) == ["lab-a", "lab-b", "lab-d"] and ring["acceptance"]["passed"] is True
    assert ring["admission"]["weak_in_ring"] == [], ring["admission"]
    public = json.loads(next(RUN_DIR.glob("**/fragments/topology/public.json")).read_text())["roles"]
    assert public["solo-lab-c"]["passed"] and public["solo-lab-c"]["served_by"] == [solo["url"] + "/v1"], public


def test_a_later_verify_checked_the_kept_quarantine_and_the_restore_forgot_it():
    [later] = (RUN_DIR.parent / "later-verify").glob("**/fragments/kept_topology/public.json")
    kept = json.loads(later.read_text())
    assert kept["public_model"] and set(kept["roles"]) == {kept["public_model"], "solo-lab-c"}, kept["roles"]
    assert all(role["passed"] for role in kept["roles"].values()), kept["roles"]
    solo = kept["roles"]["solo-lab-c"]
    assert solo["served_by"] == [solo["expected_backend"]] and solo["requests"] > 0, solo
    # the kept record went with the restore that ended the quarantine
    assert list(LAB_DIR.glob("controller/state/topology.json")) == []


def test_every_iperf3_server_and_engine_process_was_stopped_through_the_ledger(host):
    name = host.backend.get_hostname()
    assert own_processes(host, "(^|/)[i]perf3 ") == []
    assert own_processes(host, "[l]lama-server|[g]gml-rpc-server") == []
    entries = [e for e in host_ledger(name).values() if e["kind"] == "process"]
    assert entries and {e["state"] for e in entries} == {"undone"}, entries


def test_the_restore_verified_every_host_of_the_ring_against_its_known_good_state(host):
    name = host.backend.get_hostname()
    restored = json.loads((RUN_DIR / "fragments" / "restore" / f"{name}.json").read_text())
    assert restored["verified"] is True and restored["differences"] == [], restored["differences"]
    assert restored["compared_with"] == "known_good"


def test_every_record_of_the_scenario_is_schema_valid():
    assert assert_records_valid() > 0
