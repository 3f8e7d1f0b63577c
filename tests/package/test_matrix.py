"""inferlab matrix: runs grouped by their hosts' identities (host names do not count), each stage's outcome with
conflicts counted, the candidate against stock through compare (one run: no verdict; repeated whole runs: one), and
runs without an identity listed apart, never guessed."""

import copy
import csv
import io
import json
from pathlib import Path

import pytest
from unit_fixtures import FIXTURE_ROOT

from inferlab import cli, exit_codes
from inferlab.analysis import matrix
from inferlab.plots import matrix as matrix_plot
from inferlab.report import matrix as matrix_text

FIXTURES = FIXTURE_ROOT / "compare"
ASM4242 = {
    "format": "inferlab.host_identity/1",
    "host_router": {"domain": "domain0", "pci_slot": "0000:72:00.0", "pci_vendor": "0x1b21", "pci_device": "0x2425",
                    "pci_id": "1b21:2425", "generation": 4, "nvm_version": "3.1", "vendor_name": "ASMedia",
                    "device_name": "ASM4242"},
    "peer": {"device": "0-1", "vendor_id": "0x1d6b", "device_id": "0x4", "id": "1d6b:0004", "vendor_name": "Linux",
             "device_name": "peer", "rx_speed_gbps": 20.0, "rx_lanes": 2, "tx_speed_gbps": 20.0, "tx_lanes": 2},
    "kernel_release": "6.1.0-27-amd64",
    "driver": {"loaded": True, "srcversion": "6C0E2A5F1B8D94E7A3C1F02", "parameters": {"e2e": "Y"}},
    "firmware": {"bios_vendor": "AMI", "bios_version": "1.A0", "board_vendor": "MSI", "board_name": "X870",
                 "product_name": "MS-7E51"},
    "missing": [],
}


def figure(values, definition):
    return {"values": values, "definition": definition, "median": None, "min": None, "max": None, "n": 0}


def trials(single, aggregate):
    return {"count": len(single), "passed": True, "problems": [], "trials": [],
            "figures": {"single_stream_output_tok_s": figure(single, "median output tok/s per request"),
                        "aggregate_output_tok_s": figure(aggregate, "aggregate output tok/s of the batch")}}


def journal_entry(stage: str, index: int, status: str) -> dict:
    """A stage journal entry as roles/experiment writes it (the schema's journal_entry)."""
    return {"stage": stage, "index": index, "started": "2026-12-01T10:00:00Z", "finished": "2026-12-01T10:05:00Z",
            "status": status, "measured": False, "control": None, "layer": None, "changes": "", "note": ""}


def run(root: Path, stamp: str, hosts=("lab-a", "lab-b"), identity="asm4242", stock=(200, 201, 199),
        candidate=(240, 238, 242), statuses=None) -> str:
    """A run directory under `root` whose record served nextn and nextn_candidate with trials; returns its id.
    `identity`: each host's (the ASM4242 host by default, None for none)."""
    identity = ASM4242 if identity == "asm4242" else identity
    data = json.loads((FIXTURES / "serve_tp2_nextn.json").read_text())
    run_id = f"{stamp}-experiment"
    data["run"]["id"] = run_id
    data["hosts"] = {name: dict(entry, identity=copy.deepcopy(identity) if identity else None)
                     for name, entry in zip(hosts, data["hosts"].values(), strict=True)}
    data["hosts"] = {k: {x: y for x, y in v.items() if y is not None} for k, v in data["hosts"].items()}
    nextn = data["serving"]["nextn"]
    nextn["layers"]["driver"] = "stock"  # as the experiment's tp2_nextn stage declares it
    nextn["trials"] = trials([40.0] * len(stock), list(stock))
    data["serving"]["nextn_candidate"] = dict(copy.deepcopy(nextn),
                                              layers=dict(nextn["layers"], driver="candidate"),
                                              window="serve_nextn_candidate",
                                              trials=trials([40.0] * len(candidate), list(candidate)))
    data["journal"] = {stage: journal_entry(stage, n, status)
                       for n, (stage, status) in enumerate((statuses or {"verify": "ok", "tp2_nextn": "ok",
                                                                         "tp2_nextn_candidate": "ok"}).items(), 1)}
    data["link_tests"] = {}
    path = root / run_id
    path.mkdir(parents=True)
    (path / "record.json").write_text(json.dumps(data))
    return run_id


def test_runs_on_the_same_hardware_share_a_row_whatever_the_hosts_are_called(tmp_path):
    first = run(tmp_path, "20261201T100000Z")
    second = run(tmp_path, "20261202T100000Z", hosts=("ws-a", "ws-b"))
    other_bios = dict(ASM4242, firmware=dict(ASM4242["firmware"], bios_version="1.B2"))
    third = run(tmp_path, "20261203T100000Z", identity=other_bios)
    table = matrix.build([tmp_path])
    assert [(r.label, r.runs) for r in table.rows] == [("C1", [first, second]), ("C2", [third])]
    assert table.rows[0].identity == {
        "host router": "1b21:2425", "generation": "4", "NVM": "3.1", "peer": "1d6b:0004", "link rx": "2 x 20 Gb/s",
        "link tx": "2 x 20 Gb/s", "kernel": "6.1.0-27-amd64", "stock driver": "6C0E2A5F1B8D94E7A3C1F02",
        "board": "MSI X870", "BIOS": "1.A0"}
    assert table.rows[1].identity["BIOS"] == "1.B2" and table.apart == []


def test_hosts_that_differ_show_both_values_and_a_missing_value_says_so(tmp_path):
    data_dir = tmp_path / "runs"
    run(data_dir, "20261201T100000Z")
    record_path = next(data_dir.glob("*/record.json"))
    data = json.loads(record_path.read_text())
    data["hosts"]["lab-b"]["identity"]["host_router"]["nvm_version"] = None
    data["hosts"]["lab-b"]["identity"]["kernel_release"] = "6.12.9-amd64"
    record_path.write_text(json.dumps(data))
    [row] = matrix.build([data_dir]).rows
    assert row.identity["NVM"] == "3.1 / missing"
    assert row.identity["kernel"] == "6.1.0-27-amd64 / 6.12.9-amd64"


def test_a_run_without_an_identity_for_every_host_is_listed_apart(tmp_path):
    kept = run(tmp_path, "20261201T100000Z")
    old = run(tmp_path, "20261202T100000Z", identity=None)
    table = matrix.build([tmp_path])
    assert [r.runs for r in table.rows] == [[kept]]
    assert table.apart == [(old, "no identity for every host (record.json hosts.<host>.identity)")]
    assert f"- {old}: no identity" in matrix_text.render_markdown(table)


def test_conflicting_stage_outcomes_are_counted_and_a_missing_stage_was_not_run(tmp_path):
    run(tmp_path, "20261201T100000Z")
    run(tmp_path, "20261202T100000Z", statuses={"verify": "ok", "tp2_nextn": "failed"})
    run(tmp_path, "20261203T100000Z", statuses={"verify": "ok", "tp2_nextn": "running"})
    [row] = matrix.build([tmp_path]).rows
    assert row.stages["verify"] == "passed"
    assert row.stages["tp2_nextn"] == "1 passed, 1 failed, 1 stopped"
    assert row.stages["tp2_nextn_candidate"] == "2 not run, 1 passed"


def test_one_run_gives_the_candidates_difference_and_no_verdict(tmp_path):
    run(tmp_path, "20261201T100000Z", stock=(200, 201, 199), candidate=(240, 238, 242))
    [row] = matrix.build([tmp_path]).rows
    c = row.candidate
    assert (c.runs, c.stock, c.candidate, c.difference) == (1, 200, 240, 40)
    assert c.verdict == "inconclusive" and "one run a side" in c.reason
    assert matrix_text.candidate_text(c).startswith("200.0 -> 240.0 tok/s (+40.0")


def test_repeated_whole_runs_give_a_verdict(tmp_path):
    for day in range(1, 6):
        run(tmp_path, f"202612{day:02d}T100000Z", stock=(200 + day, 201 + day, 199 + day),
            candidate=(240 + day, 238 + day, 242 + day))
    [row] = matrix.build([tmp_path]).rows
    assert row.candidate.runs == 5 and row.candidate.verdict == "supported", row.candidate
    assert row.candidate.interval is not None and row.candidate.interval[0] > 0


def test_markdown_csv_and_plot(tmp_path):
    run(tmp_path / "runs", "20261201T100000Z")
    table = matrix.build([tmp_path / "runs"])
    text = matrix_text.render_markdown(table)
    assert "| C1 | 1 | 1b21:2425 | 4 | 3.1 |" in text and "## Stages" in text
    rows = list(csv.DictReader(io.StringIO(matrix_text.render_csv(table))))
    assert rows[0]["combination"] == "C1" and rows[0]["difference"] == "40.0" and rows[0]["stage verify"] == "passed"
    target = matrix_plot.plot(table, tmp_path / "matrix.png")
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_writes_the_table_and_the_files(tmp_path, capsys):
    run(tmp_path / "runs", "20261201T100000Z")
    code = cli.main(["matrix", str(tmp_path / "runs"), "--csv", str(tmp_path / "m.csv"),
                     "--plot", str(tmp_path / "m.png")])
    assert code == exit_codes.SUCCESS
    assert capsys.readouterr().out.startswith("# Compatibility matrix")
    assert (tmp_path / "m.csv").read_text().startswith("combination,runs,host router")
    assert (tmp_path / "m.png").stat().st_size > 0


def test_nothing_to_aggregate_is_a_usage_error(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert cli.main(["matrix", str(tmp_path / "empty")]) == exit_codes.USAGE
    assert "no run with a record.json in or under" in capsys.readouterr().err


def test_a_run_directory_given_without_a_record_is_listed_apart(tmp_path):
    run(tmp_path / "runs", "20261201T100000Z")
    (tmp_path / "refused").mkdir()
    table = matrix.build([tmp_path / "runs", tmp_path / "refused"])
    assert len(table.rows) == 1 and table.apart[0][0] == str(tmp_path / "refused")
    assert "cannot read it" in table.apart[0][1]


@pytest.mark.parametrize("text", ["not json", "[]"])
def test_an_unreadable_record_is_listed_apart(tmp_path, text):
    run(tmp_path, "20261201T100000Z")
    bad = tmp_path / "20261202T100000Z-broken"
    bad.mkdir()
    (bad / "record.json").write_text(text)
    table = matrix.build([tmp_path])
    assert len(table.rows) == 1 and table.apart[0][0].endswith("20261202T100000Z-broken")
    assert table.apart[0][1].startswith("unreadable:")


# An Ethernet host's identity (host_observe with link_kind ethernet): no host router, no Thunderbolt peer; its NIC.
X550_HOST = {"format": "inferlab.host_identity/1", "host_router": None, "peer": None,
             "kernel_release": "6.1.0-28-amd64", "driver": {"loaded": False, "srcversion": None, "parameters": {}},
             "firmware": {"board_vendor": "Supermicro", "board_name": "X12SPi-TF", "bios_version": "1.4"},
             "nic": {"interface": "enp1s0f0", "driver": "ixgbe", "driver_version": "6.1.0-28-amd64",
                     "firmware_version": "0x800003df, 1.1767.0", "speed_mbps": 10000, "pci_id": "8086:1563"},
             "missing": []}


def test_ethernet_hosts_are_grouped_by_their_nic_and_a_thunderbolt_only_matrix_is_unchanged(tmp_path):
    run(tmp_path / "tb", "20261201T100000Z")
    thunderbolt = matrix.build([tmp_path / "tb"])
    assert "NIC" not in shown(thunderbolt) and "host router" in shown(thunderbolt)
    run(tmp_path / "eth", "20261202T100000Z", identity=X550_HOST)
    newer_firmware = dict(X550_HOST, nic=dict(X550_HOST["nic"], firmware_version="0x80000d67, 1.3261.0"))
    run(tmp_path / "eth", "20261203T100000Z", identity=newer_firmware)
    ethernet = matrix.build([tmp_path / "eth"])
    assert [len(r.runs) for r in ethernet.rows] == [1, 1]  # the NIC's firmware tells the two apart
    assert ethernet.rows[0].identity == {
        "NIC": "8086:1563", "NIC driver": "ixgbe", "NIC firmware": "0x800003df, 1.1767.0", "link speed": "10 Gb/s",
        "kernel": "6.1.0-28-amd64", "stock driver": "missing", "board": "Supermicro X12SPi-TF", "BIOS": "1.4"}
    both = matrix.build([tmp_path / "tb", tmp_path / "eth"])
    text = matrix_text.render_markdown(both)
    assert "| runs | host router |" in text and "| NIC driver |" in text
    assert "n/a" in text  # a Thunderbolt row has no NIC, an Ethernet row no host router
    header = matrix_text.render_csv(both).splitlines()[0].split(",")
    assert header[2:6] == ["host router", "generation", "NVM", "peer"] and "NIC driver" in header


def shown(table):
    return matrix.shown_fields(table)
