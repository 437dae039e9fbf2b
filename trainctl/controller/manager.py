"""``trainctl controller run``: start informers, workers, leader election and the HTTP endpoints.

Lifecycle: caches sync first (readyz turns ready), then workers act, with
``--leader-elect`` only while this process holds the Lease. SIGTERM or SIGINT drains:
no new keys are handed out, in-flight reconciles finish, the Lease is released, exit 0.
Losing the Lease exits 1 so the pod restarts as a clean standby.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from trainctl import TRAINER_API_GROUP
from trainctl.errors import UserError

log = logging.getLogger("trainctl.controller")

DRAIN_TIMEOUT_S = 30
SYNC_LOG_EVERY_S = 10
# upstream's --kube-api-qps/--kube-api-burst defaults (cmd/training-operator.v1): what the controller's requests
# may average a second, and how many may go at once after a quiet spell (docs/controller.md, "Rate limits")
KUBE_API_QPS, KUBE_API_BURST = 20.0, 30


@dataclass
class Options:
    namespaces: list[str] = field(default_factory=list)
    kinds: list = field(default_factory=list)  # frameworks
    concurrency: int = 8
    leader_elect: bool = False
    lease_namespace: str | None = None
    lease_name: str = "trainctl-controller"
    metrics_addr: str = ":8080"
    health_addr: str = ":8081"
    gang_scheduler_name: str = ""
    cluster_domain: str | None = None
    #: the kinds' helper images given (trainctl.frameworks.base.HelperImage.key -> image); defaults for the rest
    helper_images: dict[str, str] = field(default_factory=dict)
    log_format: str = "text"
    keep_records: bool = True  # trainctl.controller.records
    context: str | None = None
    kubeconfig: str | None = None
    kube_api_qps: float = KUBE_API_QPS
    kube_api_burst: int = KUBE_API_BURST
    # trainctl.controller.progress: how often running jobs' logs are read, and the least time between two
    # writes of one job's progress annotation (None: that module's defaults)
    progress_interval_s: int | None = None
    progress_write_interval_s: int | None = None
    #: trainctl.controller.leader: the lease's duration, the renew deadline and the retry period, in seconds
    lease_timing: tuple[int, int, int] | None = None

    @classmethod
    def from_flags(cls, *, kinds: list[str], log_format: str, helper_images: dict[str, str | None] | None = None,
                   **flags) -> Options:
        """Validate the flags; one-line UserErrors name the bad one. ``helper_images``: each helper image's
        option as given (None: not given)."""
        from trainctl.frameworks import HELPER_IMAGES, by_name

        names = [name.strip() for value in kinds for name in value.split(",") if name.strip()]
        frameworks = []
        for name in names:
            framework = by_name(name)  # UserError naming the unknown kind and the known ones
            if framework not in frameworks:
                frameworks.append(framework)
        if log_format not in ("text", "json"):
            raise UserError(f"--log-format {log_format!r}: use text or json")
        for flag in ("metrics_addr", "health_addr"):
            parse_address(flags[flag], "--" + flag.replace("_", "-"))
        given = {key: image for key, image in (helper_images or {}).items() if image is not None}
        for key, image in given.items():
            check_image(image, HELPER_IMAGES[key].flag)
        check_rate_limit(flags.get("kube_api_qps", KUBE_API_QPS), flags.get("kube_api_burst", KUBE_API_BURST))
        if flags.get("lease_timing"):
            from trainctl.controller.leader import check_timing

            check_timing(*flags["lease_timing"])
        for flag in ("progress_interval_s", "progress_write_interval_s"):
            if flags.get(flag) == 0:
                raise UserError(f"--{flag[:-2].replace('_', '-')} 0: give a duration of 1s or more, e.g. 10s")
        return cls(kinds=frameworks, log_format=log_format, helper_images=given, **flags)

    def limiter(self):
        """A token bucket for one client (each client has its own, as in client-go); None: unthrottled."""
        from trainctl.kube.client import rate_limit

        return rate_limit(self.kube_api_qps, self.kube_api_burst)


def progress_pacing(options: Options) -> tuple[int, int]:
    """The progress watcher's round and least time between two writes of a job's annotation, in seconds."""
    from trainctl.controller.progress import MIN_WRITE_INTERVAL_S, ROUND_S

    return (options.progress_interval_s or ROUND_S, options.progress_write_interval_s or MIN_WRITE_INTERVAL_S)


def check_rate_limit(qps: float, burst: int) -> None:
    """--kube-api-qps: any number (0: client-go's default of 5, negative: no limit); --kube-api-burst: 0 or more."""
    import math

    if math.isnan(qps):
        raise UserError(f"--kube-api-qps {qps}: give requests a second, e.g. 20 (a negative value: no limit)")
    if burst < 0:
        raise UserError(f"--kube-api-burst {burst}: give 0 or more (0: client-go's default of 10)")


def parse_address(text: str, flag: str) -> tuple[str, int] | None:
    """``host:port`` (host may be empty for all interfaces); ``0`` turns the endpoint off."""
    if text == "0":
        return None
    host, _, port = text.rpartition(":")
    if not port.isdigit() or int(port) > 65535:
        raise UserError(f"{flag} {text!r}: use host:port, :port, or 0 to turn it off")
    return host.strip("[]") or "0.0.0.0", int(port)


def check_image(image: str, flag: str) -> str:
    if not image.strip() or any(c.isspace() for c in image):
        raise UserError(f"{flag} {image!r}: give an image reference such as registry.example.com/name:tag")
    return image


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {"time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}Z",
                 "level": record.levelname.lower(), "logger": record.name, "msg": record.getMessage()}
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry)


def configure_logging(log_format: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if log_format == "json":
        formatter = JsonFormatter()
        formatter.converter = time.gmtime
        handler.setFormatter(formatter)
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    root = logging.getLogger("trainctl")
    root.handlers[:] = [handler]
    root.setLevel(os.environ.get("TRAINCTL_LOG_LEVEL", "INFO").upper())


class Manager:
    def __init__(self, options: Options) -> None:
        from trainctl.controller.controller import Controller
        from trainctl.controller.gang import GangScheduler
        from trainctl.frameworks import ALL
        from trainctl.kube.client import connect

        self.options = options
        self.client = connect(options.context, options.kubeconfig, options.limiter())
        gang = GangScheduler(options.gang_scheduler_name) if options.gang_scheduler_name else None
        if gang and gang.resource and not self.crd_installed(f"{gang.resource.plural}.{gang.resource.group}"):
            log.warning("--gang-scheduler-name %s: the %s PodGroup CRD is not installed; no PodGroups will be made",
                        gang.name, gang.resource.group)
            gang = None
        # TrainJobs beside the v1 kinds where their CRD is installed (a cluster with the v1 CRDs alone runs as before),
        # unless --kinds names the kinds to run
        trainjobs = not options.kinds and self.crd_installed(f"trainjobs.{TRAINER_API_GROUP}")
        self.controller = Controller(self.client, frameworks=options.kinds or ALL, namespaces=options.namespaces,
                                     gang=gang, trainjob_gangs=self.trainjob_gangs(gang) if trainjobs else {},
                                     cluster_domain=options.cluster_domain,
                                     helper_images=options.helper_images,
                                     keep_records=options.keep_records, trainjobs=trainjobs)
        self.controller.hpa = self.served_hpa()
        self.stopping = threading.Event()
        self.acting = threading.Event()
        self.elector = None
        self.servers: list[ThreadingHTTPServer] = []

    def trainjob_gangs(self, gang) -> dict:
        """The gang schedulers a TrainJob's runtime may name in its podGroupPolicy (trainctl/controller/gang.py):
        ``volcano`` where its PodGroup CRD is installed; ``coscheduling``, the scheduler-plugins scheduler of
        --gang-scheduler-name (its name is what the pods need)."""
        from trainctl.controller.gang import COSCHEDULING, VOLCANO, GangScheduler

        found = {"coscheduling": gang} if gang and gang.resource == COSCHEDULING else {}
        if self.crd_installed(f"{VOLCANO.plural}.{VOLCANO.group}"):
            found["volcano"] = gang if gang and gang.volcano else GangScheduler("volcano")
        return found

    def crd_installed(self, name: str) -> bool:
        from trainctl.kube.client import CRDS, ApiError

        try:
            self.client.get(CRDS, name)
            return True
        except ApiError as error:
            if error.status in (401, 403) or error.status >= 500:
                raise UserError(f"checking for CRD {name}: {error}") from None
            return False

    def served_hpa(self):
        """autoscaling/v2 where served (Kubernetes >= 1.23), else v2beta2."""
        from trainctl.controller.owned import HPA_V2, HPA_V2BETA2
        from trainctl.kube.client import ApiError

        try:
            self.client.request("GET", "/apis/autoscaling/v2")
            return HPA_V2
        except ApiError:
            return HPA_V2BETA2

    # ---- HTTP endpoints -----------------------------------------------------------
    def serve(self, address: tuple[str, int] | None, routes: dict) -> None:
        if address is None:
            return

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                route = routes.get(self.path.split("?")[0])
                if route is None:
                    self.send_error(404)
                    return
                code, body, content_type = route()
                data = body.encode()
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        server = ThreadingHTTPServer(address, Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, name="http", daemon=True).start()
        self.servers.append(server)
        log.info("serving %s on %s:%d", ", ".join(routes), *server.server_address[:2])

    def healthz(self):
        alive = all(i.thread is None or i.thread.is_alive() for i in self.controller.informers)
        return (200, "ok", "text/plain") if alive else (500, "informer stopped", "text/plain")

    def readyz(self):
        if self.stopping.is_set():
            return 503, "shutting down", "text/plain"
        return (200, "ok", "text/plain") if self.controller.synced() else (503, "caches syncing", "text/plain")

    def metrics(self):
        self.controller.refresh_gauges()
        self.controller.metrics.leader.set(1 if self.acting.is_set() else 0)
        return 200, self.controller.metrics.render(), "text/plain; version=0.0.4"

    # ---- run ----------------------------------------------------------------------------
    def run(self) -> int:
        options = self.options
        self.serve(parse_address(options.health_addr, "--health-addr"), {"/healthz": self.healthz,
                                                                         "/readyz": self.readyz})
        self.serve(parse_address(options.metrics_addr, "--metrics-addr"), {"/metrics": self.metrics})
        for informer in self.controller.informers:
            informer.start()
        self.wait_for_caches()
        lost = self.lead() if options.leader_elect else None
        if lost is None:
            self.acting.set()  # before any worker takes a key: a key skipped while standing by is requeued
        workers = [threading.Thread(target=self.controller.work, args=(self.acting,), name=f"worker-{n}")
                   for n in range(options.concurrency)]
        for worker in workers:
            worker.start()
        self.controller.progress.start(self.acting, *progress_pacing(options))
        self.controller.records.start(self.acting)
        self.controller.leases.start()
        self.stopping.wait()
        return self.drain(workers, lost=lost is not None and lost.is_set())

    def wait_for_caches(self) -> None:
        started = time.monotonic()
        while not self.controller.synced() and not self.stopping.wait(0.05):
            if time.monotonic() - started > SYNC_LOG_EVERY_S:
                waiting = [repr(i) for i in self.controller.informers if not i.synced.is_set()]
                log.info("waiting for caches: %s", ", ".join(waiting))
                started = time.monotonic()
        jobs = sum(len(i.items()) for group in self.controller.jobs.values() for i in group)
        log.info("caches synced: %d jobs, %d pods", jobs, sum(len(i.items()) for i in self.controller.pods))

    def lead(self) -> threading.Event:
        from trainctl.controller.leader import LeaderElector

        namespace = self.options.lease_namespace or os.environ.get("POD_NAMESPACE") or self.client.config.namespace
        from trainctl.kube.client import Client

        # a client of its own, as controller-runtime gives leader election: renewals never queue behind a burst
        # of the workers' writes for a token
        lease_client = Client(self.client.config, limiter=self.options.limiter())
        self.elector = LeaderElector(lease_client, namespace, self.options.lease_name, self.controller.identity,
                                     self.options.lease_timing)

        def elect() -> None:
            self.elector.run(self.stopping)
            if self.elector.lost.is_set():
                self.stopping.set()

        def follow() -> None:  # acting mirrors leading; lost leadership ends the process
            while not self.stopping.is_set():
                if self.elector.leading.wait(0.2):
                    self.acting.set()
                    self.requeue_all()
                    break

        threading.Thread(target=elect, name="leader-election", daemon=True).start()
        threading.Thread(target=follow, name="leader-follow", daemon=True).start()
        log.info("waiting to acquire lease %s/%s as %s", namespace, self.options.lease_name,
                 self.controller.identity)
        return self.elector.lost

    def requeue_all(self) -> None:
        """A new leader reconciles every job once: standby workers skipped what they were handed."""
        for kind, informers in self.controller.jobs.items():
            for informer in informers:
                for job in informer.items():
                    self.controller.queue.add((kind, job["metadata"].get("namespace", ""), job["metadata"]["name"]))

    def drain(self, workers: list[threading.Thread], lost: bool) -> int:
        log.info("shutting down: finishing in-flight reconciles")
        self.controller.progress.stop()
        self.controller.records.stop()
        self.controller.leases.stop()
        self.controller.queue.shutdown()
        deadline = time.monotonic() + DRAIN_TIMEOUT_S
        for worker in workers:
            worker.join(max(0.0, deadline - time.monotonic()))
        self.acting.clear()
        if self.elector is not None:
            self.elector.release()
        for informer in self.controller.informers:
            informer.stop()
        for server in self.servers:
            server.shutdown()
        log.info("stopped")
        return 1 if lost else 0


def run_controller(options: Options) -> int:
    configure_logging(options.log_format)
    manager = Manager(options)
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: manager.stopping.set())
    return manager.run()
