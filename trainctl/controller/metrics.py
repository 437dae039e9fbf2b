"""Prometheus metrics in the text exposition format, without a client library.

Counters, gauges and histograms with labels; ``render()`` is what /metrics serves.
The Kubeflow operator's ``training_operator_jobs_*_total`` counters are kept under
their own names so existing dashboards work unchanged.
"""

from __future__ import annotations

import bisect
import threading

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


def label_text(names: tuple[str, ...], values: tuple[str, ...], extra: str = "") -> str:
    pairs = [f'{n}="{escape(v)}"' for n, v in zip(names, values)] + ([extra] if extra else [])
    return "{" + ",".join(pairs) + "}" if pairs else ""


def escape(value: str) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


class Metric:
    kind = "untyped"

    def __init__(self, name: str, help_text: str, labels: tuple[str, ...] = ()) -> None:
        self.name, self.help_text, self.labels = name, help_text, labels
        self.values: dict[tuple[str, ...], float] = {}
        self.lock = threading.Lock()

    def header(self) -> list[str]:
        return [f"# HELP {self.name} {self.help_text}", f"# TYPE {self.name} {self.kind}"]

    def render(self) -> list[str]:
        with self.lock:
            rows = sorted(self.values.items())
        return self.header() + [f"{self.name}{label_text(self.labels, k)} {v:g}" for k, v in rows]


class Counter(Metric):
    kind = "counter"

    def inc(self, *labels: str, amount: float = 1) -> None:
        with self.lock:
            self.values[labels] = self.values.get(labels, 0) + amount


class Gauge(Metric):
    kind = "gauge"

    def set(self, value: float, *labels: str) -> None:
        with self.lock:
            self.values[labels] = value

    def replace(self, values: dict[tuple[str, ...], float]) -> None:
        with self.lock:
            self.values = dict(values)


class Histogram(Metric):
    kind = "histogram"

    def __init__(self, name: str, help_text: str, labels: tuple[str, ...] = (),
                 buckets: tuple[float, ...] = LATENCY_BUCKETS) -> None:
        super().__init__(name, help_text, labels)
        self.buckets = buckets
        self.series: dict[tuple[str, ...], list] = {}  # labels -> [bucket counts..., sum, count]

    def observe(self, value: float, *labels: str) -> None:
        with self.lock:
            series = self.series.setdefault(labels, [0] * len(self.buckets) + [0.0, 0])
            position = bisect.bisect_left(self.buckets, value)
            if position < len(self.buckets):
                series[position] += 1
            series[-2] += value
            series[-1] += 1

    def bucket_line(self, labels: tuple[str, ...], bound: str, count: int) -> str:
        return f"{self.name}_bucket{label_text(self.labels, labels, 'le=' + chr(34) + bound + chr(34))} {count}"

    def render(self) -> list[str]:
        lines = self.header()
        with self.lock:
            rows = sorted((k, list(v)) for k, v in self.series.items())
        for labels, series in rows:
            cumulative = 0
            for bound, count in zip(self.buckets, series):
                cumulative += count
                lines.append(self.bucket_line(labels, f"{bound:g}", cumulative))
            lines.append(self.bucket_line(labels, "+Inf", series[-1]))
            lines.append(f"{self.name}_sum{label_text(self.labels, labels)} {series[-2]:g}")
            lines.append(f"{self.name}_count{label_text(self.labels, labels)} {series[-1]}")
        return lines


class Metrics:
    """Everything the controller exports."""

    def __init__(self) -> None:
        self.reconciles = Counter("trainctl_reconcile_total", "Reconciles by job kind and result.",
                                  ("kind", "result"))
        self.latency = Histogram("trainctl_reconcile_duration_seconds", "Time per reconcile.", ("kind",))
        self.queue_depth = Gauge("trainctl_workqueue_depth", "Jobs waiting to be reconciled.")
        self.jobs = Gauge("trainctl_jobs", "Jobs by kind and state (the last condition).", ("kind", "state"))
        self.pod_create_failures = Counter("trainctl_pod_creation_failures_total",
                                           "Pods the API server refused to create.", ("kind",))
        self.api_requests = Gauge("trainctl_api_requests", "API requests sent since start, by verb.", ("verb",))
        self.api_throttled = Gauge("trainctl_api_throttled_seconds", "Seconds requests waited for a token of "
                                   "--kube-api-qps since start (all requests together).")
        self.progress_writes = Counter("trainctl_progress_writes_total", "Progress annotations written, by job kind "
                                       "(trainctl.controller.progress).", ("kind",))
        self.record_log_reads = Counter("trainctl_record_log_reads_total", "Pod logs read to keep a run's record "
                                        "(trainctl.controller.records).")
        self.records_written = Counter("trainctl_records_written_total", "Replica records written, by job kind.",
                                       ("kind",))
        self.record_bytes = Counter("trainctl_record_bytes_total", "Compressed bytes of the records written (each "
                                    "write counts the record's whole size), by job kind.", ("kind",))
        self.leader = Gauge("trainctl_leader", "1 while this controller holds the lease (or runs without one).")
        upstream = ("job_namespace", "framework")
        self.created = Counter("training_operator_jobs_created_total", "Jobs seen created.", upstream)
        self.deleted = Counter("training_operator_jobs_deleted_total", "Jobs deleted by TTL.", upstream)
        self.successful = Counter("training_operator_jobs_successful_total", "Jobs that succeeded.", upstream)
        self.failed = Counter("training_operator_jobs_failed_total", "Jobs that failed.", upstream)
        self.restarted = Counter("training_operator_jobs_restarted_total", "Job restarts.", upstream)

    def render(self) -> str:
        metrics = [value for value in vars(self).values() if isinstance(value, Metric)]
        return "\n".join(line for metric in metrics for line in metric.render()) + "\n"
