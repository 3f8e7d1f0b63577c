"""plots/*.png from fixed records (tests/unit/fixtures/report/): which plots are drawn, which are left out and why,
and that each file is a PNG of the expected pixel size with something drawn in it (read with struct and zlib, no
Pillow). The sampler's series are written here in its format (plugins/module_utils/_sampler.py) at the
paths the record names, one sample a second across each counter window."""

from __future__ import annotations

import json
import math
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from unit_fixtures import FIXTURE_ROOT

from inferlab.plots import canvas, plots, serving
from inferlab.plots import prefix_collectives as plots_prefix_collectives
from inferlab.record import view as record_view
from inferlab.report import report

FIXTURES = FIXTURE_ROOT / "report"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def load(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE, f"{path.name} is not a PNG"
    length, kind = struct.unpack(">I4s", data[8:16])
    assert kind == b"IHDR" and length == 13
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def png_pixels(path: Path) -> bytes:
    """The decompressed image data (filter bytes included) of all IDAT chunks."""
    data, offset, idat = path.read_bytes(), 8, b""
    while offset < len(data):
        length, kind = struct.unpack(">I4s", data[offset : offset + 8])
        if kind == b"IDAT":
            idat += data[offset + 8 : offset + 8 + length]
        offset += 12 + length
    return zlib.decompress(idat)


def expected(kind: str) -> tuple[int, int]:
    width, height = canvas.SIZES[kind]
    return round(width * canvas.DPI), round(height * canvas.DPI)


def assert_drawn(path: Path, size: tuple[int, int] | None = None) -> None:
    assert path.is_file() and path.stat().st_size > 5000, f"{path.name} is missing or nearly empty"
    width, height = png_size(path)
    if size:
        assert (width, height) == size, f"{path.name} is {width}x{height}, expected {size[0]}x{size[1]}"
    pixels = png_pixels(path)
    assert len(set(pixels)) > 16, f"{path.name} looks blank"


def write_samples(run_dir: Path, record: dict, rate_bps: float = 2e9, retrans_per_s: int = 30) -> int:
    """A sampler series for every window that names one; returns the number of files written."""
    written = 0
    for window in record_view.counter_windows(record):
        path = window.samples.get("path")
        if not path or window.opened is None or window.closed is None:
            continue
        target = run_dir / path
        target.parent.mkdir(parents=True, exist_ok=True)
        lines, moved = [], 0
        seconds = max(2, math.ceil(window.closed - window.opened))
        for i in range(seconds + 1):
            moved += int(i and rate_bps / 8 * (1 + 0.5 * math.sin(i)))  # counters only grow
            lines.append(json.dumps({
                "t_wall": window.opened + i, "t_mono": 1000.0 + window.opened - 1.7e9 + i,
                "interfaces": {window.interface: {"rx_bytes": 10**6 + moved, "tx_bytes": 10**6 + moved // 2}},
                "tcp": {"RetransSegs": 100 + i * retrans_per_s, "OutSegs": 0, "InSegs": 0, "InErrs": 0},
                "tcp_ext": {"TCPLostRetransmit": 0, "TCPTimeouts": 0},
            }))
        target.write_text("\n".join(lines) + "\n")
        written += 1
    return written


def test_a_serving_run_draws_throughput_counters_and_a_timeline_per_host(tmp_path):
    data = load("serve")
    assert write_samples(tmp_path, data) == 4
    written = plots.render(tmp_path, data)
    assert [p.name for p in written] == [
        "serving_tok_s.png", "counter_deltas.png", "timeline_lab-a.png", "timeline_lab-b.png"]
    assert_drawn(tmp_path / "plots" / "serving_tok_s.png", expected("serving_tok_s"))
    assert_drawn(tmp_path / "plots" / "counter_deltas.png", expected("counter_deltas"))
    for host in ("lab-a", "lab-b"):
        assert_drawn(tmp_path / "plots" / f"timeline_{host}.png", expected("timeline"))
    text = report.write(tmp_path, data).read_text()
    assert "](plots/timeline_lab-a.png)" in text and "not drawn" not in text  # shown in place


def test_a_sampler_line_cut_short_is_skipped_not_fatal(tmp_path):
    data = load("serve")
    write_samples(tmp_path, data)
    series = tmp_path / "windows" / "serve_nextn" / "samples" / "lab-a.jsonl"
    series.write_text(series.read_text() + '{"t_wall": 17960')
    samples = record_view.read_samples(series)
    assert len(samples) == len(series.read_text().splitlines()) - 1
    assert "timeline_lab-a.png" in [p.name for p in plots.render(tmp_path, data)]


def test_a_link_test_run_draws_the_link_plots_and_rtt_unloaded_against_loaded(tmp_path):
    data = load("link_test")
    write_samples(tmp_path, data)
    names = [p.name for p in plots.render(tmp_path, data)]
    assert names == [
        "counter_deltas.png", "timeline_lab-a.png", "timeline_lab-b.png", "link_throughput_lab-a.png",
        "link_asymmetry_intervals_lab-a.png", "link_rtt_lab-a.png"]
    for name in names:
        assert_drawn(tmp_path / "plots" / name)
    width, height = png_size(tmp_path / "plots" / "link_rtt_lab-a.png")
    assert height == 400 and width >= 600  # four boxes: unloaded and loaded, each direction


def test_a_record_without_sampler_series_skips_the_timeline_and_says_so(tmp_path):
    data = load("serve")
    for by_host in data["stages"].values():
        for window in by_host.values():
            window["samples"].update(path=None, count=0)
    planned = plots.plan(data, tmp_path)
    skipped = {p.name: p.skipped for p in planned if p.skipped}
    assert skipped == {
        "timeline_lab-a.png": "the record has no sampler series for lab-a (no window recorded samples)",
        "timeline_lab-b.png": "the record has no sampler series for lab-b (no window recorded samples)",
    }
    assert [p.name for p in plots.render(tmp_path, data)] == ["serving_tok_s.png", "counter_deltas.png"]
    text = report.write(tmp_path, data).read_text()
    assert "- timeline_lab-a.png not drawn: the record has no sampler series for lab-a" in text


def test_sampler_files_missing_from_the_run_directory_are_named(tmp_path):
    planned = {p.name: p for p in plots.plan(load("link_test"), tmp_path)}
    assert planned["timeline_lab-a.png"].skipped.startswith(
        "the sampler series the record names are missing from the run directory: windows/asymmetry/samples/lab-a.jsonl")
    assert planned["counter_deltas.png"].skipped is None


@pytest.mark.parametrize("name", ["lab_up", "verify_failed", "fallback", "candidate_emulated", "restore_driver"])
def test_a_record_without_plot_data_draws_nothing(tmp_path, name):
    assert plots.render(tmp_path, load(name)) == []
    assert not (tmp_path / "plots").exists()


def test_the_kernel_experiment_plots_receiver_errors(tmp_path):
    data = load("experiment_kernel")
    write_samples(tmp_path, data, retrans_per_s=120)
    names = [p.name for p in plots.render(tmp_path, data)]
    assert names == ["serving_tok_s.png", "counter_deltas.png", "timeline_ws-a.png", "timeline_ws-b.png"]
    assert_drawn(tmp_path / "plots" / "counter_deltas.png", expected("counter_deltas"))


def test_serving_plot_with_only_single_stream_batches_keeps_its_size(tmp_path):
    data = load("serve")
    for mode in data["serving"].values():
        mode["acceptance"]["steps"] = [s for s in mode["acceptance"]["steps"] if s["step"] != "concurrent"]
    del data["stages"]["window_serve_baseline"], data["stages"]["window_serve_nextn"]
    written = plots.render(tmp_path, data)
    assert [p.name for p in written] == ["serving_tok_s.png"]
    assert_drawn(written[0], expected("serving_tok_s"))


def test_measured_trials_draw_the_spread_across_trials(tmp_path):
    data = load("serve_trials")
    names = [p.name for p in plots.render(tmp_path, data)]
    assert names[:2] == ["serving_tok_s.png", "serving_trials.png"]
    assert_drawn(tmp_path / "plots" / "serving_trials.png", expected("serving_trials"))


def test_a_trial_figure_without_values_leaves_its_panel_empty_and_the_size(tmp_path):
    data = load("serve_trials")
    for mode in data["serving"].values():
        figure = mode["trials"]["figures"]["aggregate_output_tok_s"]
        figure.update(values=[None] * len(figure["values"]), median=None, min=None, max=None, n=0)
    target = serving.trial_throughput(record_view.serving_trials(data), tmp_path / "trials.png")
    assert_drawn(target, expected("serving_trials"))


def test_prefix_trials_and_collectives_are_drawn(tmp_path):
    names = [p.name for p in plots.render(tmp_path, load("serve_trials"))]
    assert names[:4] == ["serving_tok_s.png", "serving_trials.png", "serving_prefix_ttft.png",
                         "serving_collectives.png"]
    assert_drawn(tmp_path / "plots" / "serving_prefix_ttft.png", expected("serving_prefix_ttft"))
    assert_drawn(tmp_path / "plots" / "serving_collectives.png", expected("serving_collectives"))


def test_a_label_without_confirmed_trials_and_a_host_not_read_keep_the_sizes(tmp_path):
    data = load("serve_trials")
    for mode in data["serving"].values():
        mode["prefix_trials"]["figures"]["warm"]["ttft_ms"].update(values=[None] * 3, median=None, min=None,
                                                                   max=None, n=0)
        mode["collectives"]["hosts"]["lab-b"] = None
        mode["collectives"]["wire_overhead"] = {"theory": None, "hosts": {}, "notes": [], "problem": "none"}
    for name, draw in (("serving_prefix_ttft", plots_prefix_collectives.prefix_ttft),
                       ("serving_collectives", plots_prefix_collectives.collective_bytes)):
        modes = (plots_prefix_collectives.prefix_modes if name == "serving_prefix_ttft"
                 else plots_prefix_collectives.collective_modes)(data)
        assert_drawn(draw(modes, tmp_path / f"{name}.png"), expected(name))


@pytest.mark.parametrize("name", ["serve", "serve_trials", "link_test", "experiment_kernel"])
def test_plan_without_a_run_directory_matches_the_files_drawn(tmp_path, name):
    data = load(name)
    write_samples(tmp_path, data)
    drawn = [p.name for p in plots.render(tmp_path, data)]
    assert [p.name for p in plots.plan(data) if p.skipped is None] == drawn


def test_rendering_does_not_touch_the_fixtures(tmp_path):
    copy = tmp_path / "serve.json"
    shutil.copy(FIXTURES / "serve.json", copy)
    data = json.loads(copy.read_text())
    plots.render(tmp_path, data)
    assert json.loads(copy.read_text()) == data == load("serve")


def test_reading_a_record_and_writing_its_report_do_not_import_matplotlib():
    """Only drawing imports matplotlib (a second or more of a CLI command's start): the CLI, the report, compare and
    the record's readers do not."""
    code = ("import sys; from inferlab import cli; from inferlab.analysis import compare; "
            "from inferlab.record import query, view; from inferlab.report import report; "
            "from inferlab.plots import plots; "
            "report.render(__import__('json').load(open(sys.argv[1]))); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'matplotlib'))")
    done = subprocess.run([sys.executable, "-c", code, str(FIXTURES / "serve_trials.json")], capture_output=True,
                          text=True, check=True)
    assert done.stdout.strip() == "[]"
