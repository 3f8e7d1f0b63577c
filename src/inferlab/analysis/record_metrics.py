"""The metrics of a record, matched by section and name: the served modes' measured trials, the ladder steps' requests
and batches, the prefix trials, the link tests, the link A/B repetitions and the counter windows."""

from __future__ import annotations

from inferlab.analysis.metric_rows import INFO, SPEED, TRANSPORT, Metric
from inferlab.analysis.record_input import TRIAL_SUFFIX, as_list, as_mapping, as_sample
from inferlab.record import view as record_view

# Per-request figures of a workload batch (llm_workload's records): key, name with its definition, better, role,
# scale. Where the served mode ran measured trials, the speed claim rests on those instead (TRIAL_METRICS) and these
# count as info: the requests of one batch are not repetitions.
REQUEST_METRICS = (
    ("output_tok_s", "output tok/s per request (TTFT included)", "higher", SPEED, 1),
    ("decode_tok_s", "decode tok/s per request (TTFT excluded)", "higher", INFO, 1),
    ("ttft_s", "TTFT ms per request", "lower", INFO, 1000),
)
# Per-batch figures of a ladder step (llm_workload's batch): key, name with its definition, better. Information only:
# one value a batch, so a sample a run (with repeated runs, the runs' medians); records from before them have none.
BATCH_METRICS = (
    ("request_throughput_req_s", "requests/s of the batch (OK requests / wall time)", "higher"),
    ("total_token_throughput_tok_s", "total tok/s of the batch ((prompt + output tokens) / wall time)", "higher"),
)
# Per-trial figures of a served mode's measured trials (serving.<mode>.trials.figures): key, better, role. One
# value per trial, so that the samples are repetitions.
TRIAL_METRICS = (
    ("single_stream_output_tok_s", "higher", SPEED),
    ("aggregate_output_tok_s", "higher", SPEED),
    ("single_stream_decode_tok_s", "higher", INFO),
    ("single_stream_ttft_ms", "lower", INFO),
)
# Per-trial figures of the cold and warm prefix trials (serving.<mode>.prefix_trials.figures.<label>): key, better.
# Information only: one value per proven trial of that label.
PREFIX_METRICS = (("ttft_ms", "lower"), ("prefill_tok_s", "higher"), ("decode_tok_s", "higher"))


def _counter_roles(transport: str) -> tuple[str, str]:
    """(role of TCP retransmissions, role of receiver errors): a veth never counts receiver errors, and on real
    hosts receiver errors are the transport damage itself; when unknown, both count."""
    return {"emulated": (TRANSPORT, INFO), "kernel": (INFO, TRANSPORT)}.get(transport, (TRANSPORT, TRANSPORT))


def _rx_errors(counters: dict, where: str) -> float | None:
    values = [as_sample(counters.get(name), f"{where}.{name}") for name in record_view.RX_ERROR_COUNTERS]
    values = [v for v in values if v is not None]
    return sum(values) if values else None


def _window_counters(window: dict, where: str) -> tuple[str | None, float | None, float | None]:
    """(link interface, TCP retransmitted segments, receiver errors on the link) of one counter-window fragment."""
    link = as_mapping(window.get("link_before") or window.get("link_after"), f"{where}.link_before")
    interface = link.get("interface")
    retrans = as_sample(as_mapping(window.get("tcp"), f"{where}.tcp").get("RetransSegs"), f"{where}.tcp.RetransSegs")
    interfaces = as_mapping(window.get("interfaces"), f"{where}.interfaces")
    rx = None
    if interface in interfaces:
        rx = _rx_errors(
            as_mapping(interfaces[interface], f"{where}.interfaces.{interface}"), f"{where}.interfaces.{interface}"
        )
    return interface, retrans, rx


def _link_ab_kind(name: str, transport: str) -> tuple[str, str]:
    """(better, role) of one link_ab_metrics name."""
    retrans_role, rx_role = _counter_roles(transport)
    if name.endswith("_gbps"):
        return "higher", SPEED
    if name.endswith("_tcp_retrans"):
        return "lower", retrans_role
    if name.endswith("_rx_errors"):
        return "lower", rx_role
    return "lower", INFO  # retransmission shares, iperf3's own counts, probe loss and round-trip times


class _Metrics(dict):
    """(section, name) -> Metric; a metric without samples is left out."""

    def add(self, section: str, name: str, better: str | None, role: str, samples: list[float | None]) -> None:
        samples = [s for s in samples if s is not None]
        if samples:
            self[(section, name)] = Metric(section, name, better, role, tuple(samples))

    def add_counters(
        self, section: str, prefix: str, roles: tuple[str, str], retrans: list, rx: list, interface: str | None = None
    ) -> None:
        self.add(section, f"{prefix}TCP retransmitted segments", "lower", roles[0], retrans)
        on = f" on {interface}" if interface else ""
        self.add(section, f"{prefix}receiver errors{on} (crc+over+missed+length)", "lower", roles[1], rx)


def _serving_metrics(metrics: _Metrics, record: dict, modes: dict[str, str], roles: tuple[str, str]) -> set[str]:
    """Per-request figures of every ladder step, by kind and cache label, and the mode's counter window; returns the
    window stages it used."""
    serving, stages = as_mapping(record.get("serving"), "serving"), as_mapping(record.get("stages"), "stages")
    used = set()
    for mode, label in modes.items():
        where = f"serving.{mode}"
        result = as_mapping(serving[mode], where)
        acceptance = as_mapping(result.get("acceptance"), f"{where}.acceptance")
        trials = as_mapping(result.get("trials") or {}, f"{where}.trials")
        figures = as_mapping(trials.get("figures") or {}, f"{where}.trials.figures")
        for key, better, role in TRIAL_METRICS:
            figure = as_mapping(figures.get(key) or {}, f"{where}.trials.figures.{key}")
            values = as_list(figure.get("values") or [], f"{where}.trials.figures.{key}.values")
            numbers = [as_sample(v, f"{where}.trials.figures.{key}.values[{n}]") for n, v in enumerate(values)]
            name = f"{figure.get('definition', key)} (one value per trial)"
            metrics.add(f"serving {label}: measured trials", name, better, role, numbers)
        prefix = as_mapping(result.get("prefix_trials") or {}, f"{where}.prefix_trials")
        for cache in ("cold", "warm") if prefix else ():
            for key, better in PREFIX_METRICS:
                fwhere = f"{where}.prefix_trials.figures.{cache}.{key}"
                figures = as_mapping(prefix.get("figures"), f"{where}.prefix_trials.figures")
                figure = as_mapping(figures.get(cache, {}).get(key) or {}, fwhere)
                values = [v for v in as_list(figure.get("values") or [], f"{fwhere}.values") if v is not None]
                numbers = [as_sample(v, f"{fwhere}.values[{n}]") for n, v in enumerate(values)]
                metrics.add(f"serving {label}: {cache} prefix trials",
                            f"{figure.get('definition', key)} (one value per proven trial)", better, INFO, numbers)
        request_role = INFO if trials.get("count") else None
        for i, step in enumerate(as_list(acceptance.get("steps"), f"{where}.acceptance.steps")):
            step_where = f"{where}.acceptance.steps[{i}]"
            step = as_mapping(step, step_where)
            batch = as_mapping(step.get("batch"), f"{step_where}.batch")
            if not batch:
                continue
            section = f"serving {label}: {step.get('step')} ({batch.get('kind')}, {batch.get('cache')} cache)"
            where_records = f"{step_where}.batch.records"
            requests = [
                (n, r)
                for n, r in enumerate(as_list(batch.get("records"), where_records))
                if isinstance(r, dict) and r.get("ok") is True
            ]
            for key, name, better, role, scale in REQUEST_METRICS:
                values = [as_sample(r.get(key), f"{where_records}[{n}].{key}") for n, r in requests]
                scaled = [None if v is None else v * scale for v in values]
                metrics.add(section, name, better, request_role or role, scaled)
            for key, name, better in BATCH_METRICS:
                metrics.add(section, name, better, INFO, [as_sample(batch.get(key), f"{step_where}.batch.{key}")])
        if result.get("window"):
            stage = f"window_{result['window']}"
            used.add(stage)
            for host, window in sorted(as_mapping(stages.get(stage), f"stages.{stage}").items()):
                interface, retrans, rx = _window_counters(as_mapping(window, f"stages.{stage}.{host}"), stage)
                metrics.add_counters(f"serving {label}: counter window", f"{host}: ", roles, [retrans], [rx], interface)
    return used


def _link_test_metrics(metrics: _Metrics, record: dict, roles: tuple[str, str]) -> None:
    """Per-second throughput of the bidirectional test, and each test's counter deltas per host."""
    for host, test in sorted(as_mapping(record.get("link_tests"), "link_tests").items()):
        where = f"link_tests.{host}"
        test = as_mapping(test, where)
        pair = as_mapping(test.get("pair"), f"{where}.pair")
        a, b = pair.get("a"), pair.get("b")
        section = f"link test {a} <-> {b}"
        tests = as_mapping(test.get("tests"), f"{where}.tests")
        asymmetry = as_mapping(tests.get("asymmetry"), f"{where}.tests.asymmetry")
        where_intervals = f"{where}.tests.asymmetry.intervals"
        intervals = [
            (n, iv)
            for n, iv in enumerate(as_list(asymmetry.get("intervals"), where_intervals))
            if isinstance(iv, dict) and not iv.get("omitted")
        ]
        for key, source, sink in (("forward_bps", a, b), ("reverse_bps", b, a)):
            values = [as_sample(iv.get(key), f"{where_intervals}[{n}].{key}") for n, iv in intervals]
            name = f"{source} -> {sink} Gb/s per 1 s interval (bidirectional test)"
            metrics.add(section, name, "higher", SPEED, [None if v is None else v / 1e9 for v in values])
        for test_name, result in sorted(tests.items()):
            where_counters = f"{where}.tests.{test_name}.host_counters"
            counters = as_mapping(as_mapping(result, f"{where}.tests.{test_name}").get("host_counters"), where_counters)
            for counter_host, values in sorted(counters.items()):
                values = as_mapping(values, f"{where_counters}.{counter_host}")
                retrans = as_sample(values.get("RetransSegs"), f"{where_counters}.{counter_host}.RetransSegs")
                rx = _rx_errors(values, f"{where_counters}.{counter_host}")
                metrics.add_counters(section, f"{test_name}: {counter_host} ", roles, [retrans], [rx])


def _link_ab_metrics(metrics: _Metrics, stages: dict, transport: str) -> None:
    """The link A/B's repetitions, per condition (link_ab_metrics' names)."""
    for host, ab in sorted(as_mapping(stages.get("link_ab"), "stages.link_ab").items()):
        where = f"stages.link_ab.{host}"
        samples: dict[tuple[str, str], list[float | None]] = {}
        for i, repetition in enumerate(as_list(as_mapping(ab, where).get("runs"), f"{where}.runs")):
            repetition = as_mapping(repetition, f"{where}.runs[{i}]")
            for name, value in as_mapping(repetition.get("metrics"), f"{where}.runs[{i}].metrics").items():
                number = as_sample(value, f"{where}.runs[{i}].metrics.{name}")
                samples.setdefault((str(repetition.get("condition")), name), []).append(number)
        for (condition, name), values in sorted(samples.items()):
            metrics.add(f"link A/B {host}, condition {condition}", name, *_link_ab_kind(name, transport), values)


def _window_metrics(metrics: _Metrics, stages: dict, skip: set[str], roles: tuple[str, str]) -> None:
    """Counter windows of their own (link tests, experiments); windows `<name>_<N>` are trials of `<name>`."""
    trials: dict[str, dict[str, list[dict]]] = {}
    for stage, by_host in sorted(stages.items()):
        if not stage.startswith("window_") or stage in skip:
            continue
        match = TRIAL_SUFFIX.match(stage.removeprefix("window_"))
        base = match["base"] if match else stage.removeprefix("window_")
        for host, window in as_mapping(by_host, f"stages.{stage}").items():
            trials.setdefault(base, {}).setdefault(host, []).append(as_mapping(window, f"stages.{stage}.{host}"))
    for base, by_host in sorted(trials.items()):
        for host, windows in sorted(by_host.items()):
            counted = [_window_counters(w, f"stages.window_{base}*.{host}") for w in windows]
            interface = next((c[0] for c in counted if c[0]), None)
            metrics.add_counters(
                f"counter window {base}",
                f"{host}: ",
                roles,
                [c[1] for c in counted],
                [c[2] for c in counted],
                interface,
            )


def extract_metrics(record: dict, modes: dict[str, str], transport: str) -> dict[tuple[str, str], Metric]:
    """(section, name) -> Metric for one run. `modes` maps each served mode to compare to its label, shared by both
    runs, so that e.g. baseline in A and nextn in B land in the same rows."""
    metrics = _Metrics()
    roles = _counter_roles(transport)
    stages = as_mapping(record.get("stages"), "stages")
    windows_of_modes = _serving_metrics(metrics, record, modes, roles)
    _link_test_metrics(metrics, record, roles)
    _link_ab_metrics(metrics, stages, transport)
    _window_metrics(metrics, stages, windows_of_modes, roles)
    return dict(metrics)
