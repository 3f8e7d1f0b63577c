from pathlib import Path

import pytest

from ansible_collections.inferlab.distributed.plugins.module_utils._ping import PingParseError, parse_ping

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "ping"


@pytest.mark.parametrize(
    ("name", "transmitted", "received", "errors", "loss", "rtt_avg", "replies"),
    [
        ("ok.txt", 3, 3, 0, 0.0, 0.053, [0.061, 0.048, 0.052]),
        ("unreachable.txt", 3, 0, 3, 100.0, None, []),
        ("partial_loss.txt", 4, 3, 0, 25.0, 0.748, [0.210, 1.93, 0.105]),
    ],
)
def test_parse_ping(name, transmitted, received, errors, loss, rtt_avg, replies):
    result = parse_ping((FIXTURES / name).read_text())
    assert result["transmitted"] == transmitted
    assert result["received"] == received
    assert result["errors"] == errors
    assert result["loss_pct"] == loss
    assert (result["rtt_ms"] or {}).get("avg") == rtt_avg
    assert result["replies_ms"] == replies


@pytest.mark.parametrize("output", ["", None, (FIXTURES / "truncated.txt").read_text(), "ping: unknown host x"])
def test_parse_ping_without_statistics_fails(output):
    with pytest.raises(PingParseError, match="no ping statistics line"):
        parse_ping(output)
