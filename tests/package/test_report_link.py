"""report.md and plots/ for a run with a link test suite and an A/B comparison, built from real fixtures."""

import json

import jsonschema
import pytest

from ansible_collections.inferlab.distributed.plugins.filter.link_ab_metrics import link_ab_metrics
from ansible_collections.inferlab.distributed.plugins.filter.link_test_result import link_test_result
from ansible_collections.inferlab.distributed.plugins.module_utils._link_verdict import link_condition_table
from ansible_collections.inferlab.distributed.tests.unit.linkfixtures import inputs, soak_inputs
from inferlab.plots import plots
from inferlab.record import record
from inferlab.report import report

RUN = {
    "id": "20261130T100000Z-link_test", "playbook": "playbooks/link_test.yml", "inventory": "inventory/lab/hosts.yml",
    "started": "2026-11-30T10:00:00Z", "finished": "2026-11-30T10:03:00Z", "status": "successful",
    "ansible_rc": 0, "exit_code": 0, "exit_meaning": "success", "extravars": {}, "stats": {},
}


@pytest.mark.parametrize("built", [inputs, soak_inputs], ids=["suite", "soak"])
def test_link_test_fragments_match_the_record_schema(built):
    schema = record.load_schema()
    jsonschema.validate(link_test_result(built()), {"$defs": schema["$defs"], "$ref": "#/$defs/link_test"})


def write_fragment(run_dir, stage, host, fragment):
    target = run_dir / "fragments" / stage / f"{host}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(fragment))


def test_link_sections_and_plots(tmp_path):
    suite = link_test_result(inputs())
    write_fragment(tmp_path, "link_test", "lab-a", suite)
    rows = [{"condition": c, "repetition": 1, "metrics": link_ab_metrics(suite)} for c in ("stock", "candidate")]
    write_fragment(tmp_path, "link_ab", "lab-a", {
        "conditions": [{"name": "stock", "hook": "driver", "driver": "stock"},
                       {"name": "candidate", "hook": "link_profile", "profile": "clean"}],
        "repetitions": 1, "shaped_host": "lab-b", "tests": ["asymmetry"],
        "transport_label": "emulated", "runs": rows, "table": link_condition_table(rows)})
    data = json.loads(record.write(tmp_path, RUN).read_text())

    text = report.render(data)
    assert "### lab-a <-> lab-b over thunderbolt0 (transport: emulated)" in text
    assert "- asymmetry: symmetric (ratio" in text
    assert "| asymmetry (bidir) |" in text and "700 (7%)" in text
    assert "A veth never counts receiver CRC or overrun errors" in text
    assert ("### stock vs candidate (1 interleaved repetitions, transport: emulated; stock: the stock driver on "
            "every ring host; candidate: link profile clean on lab-b)") in text
    assert "| asymmetry_b_tcp_retrans_pct | 7 (7 to 7, 1) | 7 (7 to 7, 1) |" in text
    assert "| asymmetry_b_tcp_retrans | 700 (700 to 700, 1) |" in text

    written = plots.render(tmp_path, data)
    assert sorted(p.name for p in written) == [
        "link_asymmetry_intervals_lab-a.png", "link_rtt_lab-a.png", "link_throughput_lab-a.png"]
    for path in written:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 5000


def test_a_soak_shows_its_events_failed_probes_and_timeline(tmp_path):
    """A soak alone (link_test_tests: [soak]): the failed probes and each host's link events in a table with their
    times, and the soak's timeline plot in place of the suite's throughput bars."""
    suite = link_test_result(soak_inputs())
    write_fragment(tmp_path, "link_test", "lab-a", suite)
    data = json.loads(record.write(tmp_path, RUN).read_text())
    text = report.render(data)
    assert "- soak: 4 probe(s) every 60.0 s over 240.0 s, 3 failed; link events: 1 on lab-a, 1 on lab-b" in text
    assert "Soak, 4 probe(s) of 5 s every 60 s; failed probes: 3." in text
    assert "| 2026-11-30T11:19:20.000000Z | lab-a | carrier changed 2 time(s) |" in text
    assert "| 2026-11-30T11:19:20.000000Z | lab-b | a sample could not be read |" in text
    assert ("| — | lab-a -> lab-b | probe 1 failed: unable to connect to server: Connection refused |") in text

    written = plots.render(tmp_path, data)
    assert [p.name for p in written] == ["link_soak_lab-a.png"]
    assert written[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and written[0].stat().st_size > 5000
