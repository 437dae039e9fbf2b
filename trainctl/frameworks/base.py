"""The common shape of a framework: the facts that differ between job kinds.

A framework module subclasses :class:`Framework` and sets class attributes
(kind, replica types, default container, port, restart policy) and overrides
the few methods whose behaviour differs (``topology`` for ``--workers``, the
per-replica environment, the success rule, its own admission rules and submit
options, what a pod or a local process of it needs besides). Everything else -
names, labels, defaults, validation, rendering, the reconcile loop, both runtimes -
is written once, against this interface, and asks it instead of testing a kind:
adding a framework means one module here plus one template
(``templates/<kind>.yaml.j2``), found by the registry (trainctl/frameworks/__init__.py).

This package is the ground the engine stands on: it imports nothing of trainctl's
but :mod:`trainctl.errors` (the job view and the network it is handed are types only).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, ClassVar, NamedTuple, Protocol

from trainctl import TRAINER_API_GROUP

OPERATOR_GROUP = "training.kubeflow.org"
LABEL_OPERATOR = f"{OPERATOR_GROUP}/operator-name"
LABEL_JOB_NAME = f"{OPERATOR_GROUP}/job-name"
LABEL_REPLICA_TYPE = f"{OPERATOR_GROUP}/replica-type"
LABEL_REPLICA_INDEX = f"{OPERATOR_GROUP}/replica-index"
LABEL_JOB_ROLE = f"{OPERATOR_GROUP}/job-role"
JOB_ROLE_MASTER = "master"  # that label's value: the operator's word, whatever a kind calls its leader

PYTHONUNBUFFERED = {"name": "PYTHONUNBUFFERED", "value": "1"}

# Kubeflow Trainer v2: what its controller and SDK key a runtime on (contract section 2)
LABEL_TRAINER_FRAMEWORK = f"{TRAINER_API_GROUP}/framework"  # the SDK skips a runtime without it
LABEL_ANCESTOR_STEP = f"{TRAINER_API_GROUP}/trainjob-ancestor-step"  # on the job template of the trainer's job
ANCESTOR_TRAINER = "trainer"
NODE = "node"  # the trainer's replicatedJob, and the container in it that a TrainJob's trainer fields fill


if TYPE_CHECKING:  # what a framework is handed, for type checkers: at run time these are the core's objects
    class Job(Protocol):
        """What a framework may ask of a job: the core's view of it, with the operator's defaults applied
        (trainctl/core/job.py), replica types in their canonical spelling."""

        name: str
        namespace: str
        spec: dict
        resource: dict

        @property
        def replica_types(self) -> list[str]: ...

        @property
        def total_replicas(self) -> int: ...

        @property
        def suspended(self) -> bool: ...

        @property
        def kueue_queue(self) -> str | None: ...

        def replicas(self, rtype: str) -> int: ...

        def pod_name(self, rtype: str, index: int) -> str: ...

        def template(self, rtype: str) -> dict: ...

    class Network(Protocol):
        """How replicas address each other, handed to a framework's env: pods by their Services' names in a
        cluster, 127.0.0.1 and a port each locally (the two are in trainctl/core/network.py)."""

        #: True when each replica gets a headless Service and pods wait for DNS (a cluster)
        cluster: bool

        def image(self, helper: HelperImage) -> str:
            """The image the controller runs for ``helper`` (its option's value, else its default; '' locally)."""

        def host(self, job: Job, rtype: str, index: int) -> str:
            """Address other replicas use (MASTER_ADDR style)."""

        def qualified_host(self, job: Job, rtype: str, index: int) -> str:
            """Fully qualified address (TF_CONFIG style)."""

        def port(self, job: Job, rtype: str, index: int) -> int | None:
            """The framework port that replica listens on."""

        def pod_ip(self) -> str | None:
            """The value of fieldRef status.podIP, when known in advance (local only)."""


def env_var(name: str, value: object) -> dict:
    return {"name": name, "value": str(value)}


class PeerLoss(NamedTuple):
    """What a replica writes when it fails because another one did (trainctl/core/attribution.py):
    ``label`` names it in the failure summary ("stopped after its peer was lost (gloo)")."""

    label: str
    source: str  # the regular expression

    @property
    def pattern(self) -> re.Pattern[str]:
        """Compiled when a failure is first judged (re keeps it), not when every command imports the frameworks."""
        return re.compile(self.source)


def peer_loss(label: str, *phrases: str) -> PeerLoss:
    """A signature matching any of ``phrases`` (regular expressions, searched anywhere in a line)."""
    return PeerLoss(label, "|".join(f"(?:{phrase})" for phrase in phrases))


class KindOption(NamedTuple):
    """A ``trainctl submit`` option (and ``Client.run`` keyword) that only this kind takes, e.g. ``--ps``.

    The submit options (trainctl/submit/options.py) turn it into a flag and a keyword like every other
    option; given for another kind it is refused, naming the kind that takes it."""

    name: str  # the Python keyword; the flag is --name with - for _
    type: type  # int or str
    help: str  # shown after "<framework name>: " in ``submit --help``
    minimum: int | None = None  # an int's smallest value
    #: what is wrong with a value beyond the minimum, or None
    problem: Callable[[object], str | None] | None = None


class FunctionLaunch(NamedTuple):
    """How a job's processes know where they stand, as data for the two stdlib-only programs that run in the
    replicas and cannot import this module where trainctl is not installed: a function job's runner
    (trainctl.functions.runner) reads it from call.json, ``trainctl.report()`` (trainctl.reporting) from the
    replica's ``TRAINCTL_LAUNCH`` variable, which both runtimes set (trainctl.code.pods, the local supervisor)."""

    #: the first of these variables that is set holds the process's rank in the job ("0" when none is)
    rank_variables: tuple[str, ...] = ()
    #: the first of these that is set holds how many processes the job runs (trainctl.checkpoints: a checkpoint
    #: is complete once every one of them marked it)
    world_variables: tuple[str, ...] = ()
    #: or: a cluster spec in this variable (JSON with "cluster" and "task"), whose rank 0 is index 0 of the
    #: first of ``leader_tasks`` the cluster has, else of the worker tasks
    cluster_spec: str | None = None
    leader_tasks: tuple[str, ...] = ()
    #: (name, default, variable it copies) set where no launcher set them: what a script expects of a launcher
    defaults: tuple[tuple[str, str, str | None], ...] = ()
    #: the program that sets ``defaults`` for the processes it starts (named in a failure's hint)
    launcher: str | None = None
    #: variables numbering the processes one replica runs (a launcher's local ranks): only the process where
    #: each is 0 or unset reports the replica's progress
    replica_ranks: tuple[str, ...] = ()
    #: (rank, local size) variables: when a replica runs several processes, the rank a raise is recorded with
    shared_rank: tuple[str, str] | None = None
    #: a module whose ``COMM_WORLD.Abort`` ends every rank when one raises (ranks that wait for each other in
    #: collectives would otherwise wait for ever)
    abort_module: str | None = None

    def as_call(self) -> dict:
        return {"rank_variables": list(self.rank_variables), "world_variables": list(self.world_variables),
                "cluster_spec": self.cluster_spec,
                "leader_tasks": list(self.leader_tasks), "defaults": [list(entry) for entry in self.defaults],
                "replica_ranks": list(self.replica_ranks),
                "shared_rank": list(self.shared_rank) if self.shared_rank else None, "abort_module": self.abort_module}


class HelperImage(NamedTuple):
    """An image the in-cluster controller runs beside a kind's replicas (an init container), which a cluster that
    cannot pull the default (air-gapped, a mirror) names with a ``trainctl controller run``/``install`` option."""

    key: str  # the option's Python name, and the key of ClusterNetwork.helper_images
    flag: str  # the option: upstream's flag name
    default: str  # upstream's default image
    help: str


class ScriptRunner(NamedTuple):
    """A program that runs a script file, with options of its own before it (``torchrun [options] train.py``):
    the local backend checks, before it starts anything, that the script exists."""

    name: str
    #: options that take no value; any other ``--option`` without ``=`` consumes the next word
    switches: frozenset[str] = frozenset()
    #: options after which no file is run (a module, or a program that is not Python)
    no_file: frozenset[str] = frozenset()


class TrainerV2(NamedTuple):
    """How a job of this kind is spelled in Kubeflow Trainer v2 (``trainer.kubeflow.org``): one ``node`` job of
    identical pods under a runtime's ``mlPolicy``, which ``trainctl convert`` maps to and from this kind's replicas
    (trainctl/core/convert.py, docs/trainer-v2.md)."""

    #: the runtime's ``mlPolicy`` key that gives this kind's processes their place (None: none, upstream's plainML)
    policy: str | None
    #: the runtime's ``trainer.kubeflow.org/framework`` label
    label: str
    #: upstream's default ClusterTrainingRuntime for it (None: none ships, a TrainingRuntime goes along)
    runtime: str | None = None
    #: replica types whose pods are the ``node`` job's, in the order of their ranks
    node_types: tuple[str, ...] = ("Worker",)
    #: the replica type that is a job of its own beside the nodes and runs the command (named in lower case)
    launcher_type: str | None = None
    #: the spec field v2's ``numProcPerNode`` stands for
    proc_field: str | None = None
    #: the policy's fields at their CRD defaults: any other value of one has no v1 spelling
    policy_defaults: tuple[tuple[str, object], ...] = ()
    #: what the v1 operator sets in a replica that v2's plugin does not (a command that reads them breaks)
    v1_env: tuple[str, ...] = ()
    #: what v2's plugin sets in a node that the v1 operator does not
    v2_env: tuple[str, ...] = ()
    #: what the loss of :attr:`v1_env` means for the job under v2
    v1_env_lost: str = "a command that reads them needs changing"


class TrainerRuntime(NamedTuple):
    """A ClusterTrainingRuntime Kubeflow Trainer v2 ships for a kind's plugin, as ``trainctl runtimes install``
    installs it (its spec: :meth:`Framework.trainer_runtime_spec`)."""

    name: str  # ``torch-distributed``
    label: str  # its trainer.kubeflow.org/framework label
    image: str  # upstream's image; ``--image RUNTIME=IMAGE`` replaces it


def trainer_job(name: str, image: str, ancestor: bool = True, pod: dict | None = None, **container: object) -> dict:
    """A runtime's replicatedJob ``name``: one Job whose pods (with the ``pod`` fields) run container ``node`` from
    ``image`` (with the ``container`` fields); ``ancestor``: the job TrainJobs' trainer fields go to."""
    containers = [{"name": NODE, "image": image, **container}]
    job: dict = {"metadata": {"labels": {LABEL_ANCESTOR_STEP: ANCESTOR_TRAINER}}} if ancestor else {}
    job["spec"] = {"template": {"spec": {**(pod or {}), "containers": containers}}}
    return {"name": name, "template": job}


RESTART_POLICIES = ("Always", "OnFailure", "Never", "ExitCode")
CLEAN_POD_POLICIES = ("All", "Running", "None")


class Framework:
    """Facts about one kubeflow.org/v1 job kind. Subclasses are singletons."""

    #: ``PyTorchJob``
    kind: ClassVar[str]
    #: CLI name: ``trainctl submit pytorch``
    name: ClassVar[str]
    #: other accepted CLI names
    aliases: ClassVar[tuple[str, ...]] = ()
    #: ``pytorchReplicaSpecs``
    replica_spec_field: ClassVar[str]
    #: canonical replica types, in the fixed order status rules evaluate them
    #: (the master role first; upstream iterates a Go map at random [quirk])
    replica_types: ClassVar[tuple[str, ...]]
    #: name of the container the operator wires (env, ports, exit code)
    container: ClassVar[str]
    #: default port name and number appended to that container if missing
    port_name: ClassVar[str | None]
    port: ClassVar[int | None]
    #: replica restartPolicy when the spec sets none
    restart_policy: ClassVar[str]
    #: replicas when a replica spec sets none
    default_replicas: ClassVar[dict[str, int]] = {}
    #: whether the CRD has a scale subresource on the Worker replicas
    scalable: ClassVar[bool] = False
    #: kind-specific spec properties (structural OpenAPI fragments) for the CRD
    spec_properties: ClassVar[dict[str, dict]] = {}
    #: one-line meaning of --workers N, shown in --help and the submit summary
    workers_help: ClassVar[str]
    #: image used by ``submit`` when --image is not given (the local backend ignores images)
    default_image: ClassVar[str]
    #: how this framework's processes fail when a peer failed first: such a replica is named as a
    #: consequence, not the cause, in the failure summary and the Failed condition
    peer_loss_signatures: ClassVar[tuple[PeerLoss, ...]] = ()
    #: exceptions a launcher raises to report a child's failure (torchrun's ChildFailedError): the
    #: child's own traceback, earlier in the log, names what went wrong
    launcher_reports: ClassVar[tuple[str, ...]] = ()

    # ---- roles and names ---------------------------------------------------
    #: replica types of the leader role (one replica each): every index of the master role gets the
    #: ``job-role: master`` label when the role is one of them, else only index 0
    leader_types: ClassVar[tuple[str, ...]] = ()
    #: replica types whose one pod is named ``<job>-<type>``, without an index and its label (MPI's launcher)
    unindexed_types: ClassVar[tuple[str, ...]] = ()
    #: the operator wires the first container whatever its name, not the one named :attr:`container`
    wires_first_container: ClassVar[bool] = False
    #: each replica gets a headless Service named like its pod (in a cluster); False: replicas find each
    #: other otherwise (MPI's launcher reaches its workers through kubectl exec)
    services: ClassVar[bool] = True
    #: every replica runs the program to its end (no parameter server, no idle host): the job's success waits
    #: for the other replicas' runs too (:meth:`awaited_at_success`)
    every_replica_runs_to_the_end: ClassVar[bool] = False

    # ---- submitting: options, topology, command ---------------------------------
    #: ``--workers`` when it is not given
    default_workers: ClassVar[int] = 1
    #: submit options only this kind takes (``--ps``, ``--nproc-per-node``)
    options: ClassVar[tuple[KindOption, ...]] = ()
    #: programs that start the job's command on the other replicas (mpirun): a command behind one is checked
    #: and run as the launcher's
    launchers: ClassVar[tuple[str, ...]] = ()
    #: why ``--pip``/``--requirements`` cannot wrap this kind's command (None: they can)
    no_packages: ClassVar[str | None] = None
    #: how a job's processes know their rank and what a launcher would have told them
    function_launch: ClassVar[FunctionLaunch] = FunctionLaunch(rank_variables=("RANK",), world_variables=("WORLD_SIZE",))
    #: programs of this framework that run a script file (checked by the local backend before it starts)
    script_runners: ClassVar[tuple[ScriptRunner, ...]] = ()
    #: images the controller runs beside this kind's replicas, each an option of ``trainctl controller``
    helper_images: ClassVar[tuple[HelperImage, ...]] = ()
    #: a ``trainctl submit`` example showing this kind's own options (the words after ``submit NAME``)
    cli_example: ClassVar[str | None] = None
    #: the kind in Trainer v2 terms (``trainctl convert``; None: it has none)
    trainer_v2: ClassVar[TrainerV2 | None] = None

    # ---- Kubeflow Trainer v2 (trainer.kubeflow.org/v1alpha1) ---------------------------
    #: the schema of the value of its plugin's ``mlPolicy`` key (:attr:`TrainerV2.policy`): a structural OpenAPI
    #: fragment of the runtime CRDs (trainctl/core/trainer_crds.py)
    trainer_policy_schema: ClassVar[dict] = {"type": "object"}
    #: the default ClusterTrainingRuntimes upstream ships for that plugin (``trainctl runtimes``)
    trainer_runtimes: ClassVar[tuple[TrainerRuntime, ...]] = ()

    # ---- derived names -------------------------------------------------
    @property
    def title(self) -> str:
        """The framework's name as people write it: ``PyTorch`` (a kind may say otherwise)."""
        return self.kind.removesuffix("Job")

    @property
    def plural(self) -> str:
        return self.kind.lower() + "s"

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def operator_name(self) -> str:
        return f"{self.kind.lower()}-controller"

    @property
    def cli_names(self) -> tuple[str, ...]:
        return (self.name, *self.aliases)

    def replicas_default(self, rtype: str) -> int:
        return self.default_replicas.get(rtype, 1)

    def canonical_replica_type(self, key: str) -> str | None:
        """The canonical spelling of a replica-type key, matched case-insensitively."""
        for rtype in self.replica_types:
            if rtype.lower() == key.lower():
                return rtype
        return None

    def main_container(self, containers: list[dict]) -> dict | None:
        """The container the operator wires: named after the framework, else the first (or always the first)."""
        if not self.wires_first_container:
            for container in containers:
                if isinstance(container, dict) and container.get("name") == self.container:
                    return container
        return containers[0] if containers and isinstance(containers[0], dict) else None

    def pod_name(self, job_name: str, rtype: str, index: int) -> str:
        if rtype in self.unindexed_types:
            return f"{job_name}-{rtype.lower()}"
        return f"{job_name}-{rtype.lower()}-{index}".replace("/", "-")

    def is_master_role(self, replica_types: list[str], rtype: str, index: int) -> bool:
        """Whether replica ``rtype``/``index`` gets the ``job-role: master`` label."""
        role = self.master_role(replica_types)
        if role is None:
            return index == 0
        return rtype == role and (index == 0 or rtype in self.leader_types)

    # ---- behaviour that differs -----------------------------------------
    def topology(self, workers: int, **options: int) -> dict[str, int]:
        """Replica counts for ``--workers N`` (and kind options such as --ps)."""
        return {"Worker": workers}

    def command(self, command: list[str], workers: int | None, options: dict) -> list[str]:
        """The command a rendered replica runs for the one given after ``--`` (``options``: this kind's own)."""
        return command

    def takes_gpus(self, rtype: str) -> bool:
        """Whether ``--gpus`` applies to this replica type (a launcher that only starts others needs none)."""
        return True

    def function_command(self, python: str, runner: str, options: dict) -> list[str]:
        """A function job's command: the runner under the launcher this kind needs, if any."""
        return [python, runner]

    def launcher_problem(self, command: list[str], version: Callable[[], str]) -> str | None:
        """Why ``command``, which starts with one of :attr:`launchers`, cannot run on this machine, or None
        (``version``: that launcher's ``--version`` output, read only when asked for; '' when it cannot run)."""
        return None

    def run_policy(self, spec: dict) -> dict:
        """The spec's runPolicy as the operator reads it (a kind may keep a deprecated twin of a field)."""
        return dict(spec.get("runPolicy") or {})

    def admission_problems(self, spec: dict) -> Iterator[tuple[str, str]]:
        """This kind's own admission rules (upstream's webhook, contract section 3): ``(field path, problem)``
        for each one the spec breaks, the roles first."""
        return iter(())

    def replica_specs_at(self, spec: dict) -> tuple[dict, str]:
        """The spec's replica specs as written, and their field path (for admission rules' messages)."""
        return spec.get(self.replica_spec_field) or {}, f"spec.{self.replica_spec_field}"

    @staticmethod
    def one_replica(specs: dict, path: str, rtype: str) -> Iterator[tuple[str, str]]:
        """Upstream's rule for a leader type: when present, it says ``replicas: 1``."""
        if specs.get(rtype) is not None and specs[rtype].get("replicas") != 1:
            yield f"{path}.{rtype}.replicas", f"must be 1 (got {specs[rtype].get('replicas')})"

    def master_role(self, replica_types: list[str]) -> str | None:
        """Replica type whose pods get the ``job-role: master`` label (None: index 0 of any type)."""
        return "Master"

    def lockstep(self, replica_types: list[str]) -> bool:
        """Whether every rank meets the others in collectives, so that ranks still progressing on one node show that
        the ranks on another are alive too (trainctl/core/nodes.py judges a silent node by it)."""
        return True

    def status_role(self, replica_types: list[str]) -> str:
        """Replica type whose progress is the job's: Running when it runs, Succeeded when it is done."""
        return "Master" if "Master" in replica_types else "Worker"

    def env(self, job: Job, rtype: str, index: int, network: Network) -> list[dict]:
        """The env the operator appends to the wired containers of one replica (contract section 2)."""
        return [PYTHONUNBUFFERED]

    def restart_env(self, attempt: int) -> list[dict]:
        """What this kind's own launchers tell a process of its restarts, for the job's ``attempt`` (0: the first
        run), so that code written for them works unchanged when trainctl restarts the job instead."""
        return []

    def wired_containers(self, job: Job, rtype: str, containers: list[dict]) -> list[dict]:
        """Containers that receive :meth:`env`: all of them, unless the kind says otherwise."""
        return containers

    def idle_command(self, rtype: str) -> dict | None:
        """For a replica type that only hosts what another replica starts in it, the command (and args)
        its container idles with when its template gives none; None: every replica runs its own."""
        return None

    def user_env_wins(self, name: str) -> bool:
        """Whether a variable the user set in the container keeps its value over the operator's of that name."""
        return False

    def prepare_pod(self, job: Job, rtype: str, index: int, spec: dict, network: Network) -> None:
        """What else a replica's pod spec needs, after the env is wired (both runtimes; ``network.cluster``
        tells a cluster's pod from a local process)."""

    def unmet_dependency(self, job: Job, rtype: str, observed: list) -> tuple[str, str] | None:
        """What the replicas of ``rtype`` wait for before the first of them is created, as (replica type, the status
        it must reach), given the ``observed`` replicas; None: nothing (every v1 kind starts its replicas together)."""
        return None

    def succeeded(self, job: Job, rtype: str, counts: dict, observed: list) -> bool:
        """Whether the status role's replicas are done (``expected == 0``)."""
        return job.replicas(rtype) - counts.get("succeeded", 0) <= 0

    def awaited_at_success(self, job: Job, role: str) -> tuple[str, ...]:
        """Replica types whose runs the job's success waits for once the status role's replicas are done (up to
        a bound: trainctl/core/reconcile.py SUCCESS_WAIT_S): kinds whose every replica runs the program to its end
        say which, so a replica that started late (its pod waited for the master's Service) and fails after the
        master succeeded still fails the job. None by default: a parameter server or an idle MPI host never ends."""
        if not self.every_replica_runs_to_the_end:
            return ()
        return tuple(rtype for rtype in job.replica_types if rtype != role)

    def failure_ends_job(self, job: Job, rtype: str) -> bool:
        """Whether a failed replica of ``rtype`` that will not restart fails the job."""
        return True

    def trainer_runtime_spec(self, image: str) -> dict:
        """The spec of this kind's default runtimes with ``image``: the plugin's policy with its defaults, one
        ``node`` job."""
        return {"mlPolicy": {"numNodes": 1, self.trainer_v2.policy: {}},
                "template": {"spec": {"replicatedJobs": [trainer_job(NODE, image)]}}}

    # ---- local processes (the local backend) -----------------------------------------
    def local_env(self, job: Job, rtype: str, index: int, state_dir: str) -> dict[str, str]:
        """What a local process of this replica needs that a pod gets from its node or image
        (``state_dir``: the job's directory, for files of its own)."""
        return {}

    def local_files(self, job: Job, network: Network) -> dict[str, str]:
        """Files the local replicas read, by path relative to the job's directory (``network.files_dir``)."""
        return {}

    def local_command(self, job: Job, rtype: str, command: list[str], files_dir: str) -> list[str]:
        """The command and args a local process of this replica runs for its container's (``files_dir``: the job's
        directory, where :meth:`local_files` are): its own, unless a pod's program cannot be a process here or
        names a path only a pod has."""
        return command

    # ---- cluster-only wiring (the in-cluster controller; the local backend has no cluster) ----
    #: kinds among :meth:`cluster_objects` that the controller deletes once they are no longer wanted
    pruned_kinds: ClassVar[tuple[str, ...]] = ()

    def cluster_objects(self, job: Job, pods: list[dict]) -> list[dict]:
        """Objects besides pods and services this kind needs in a cluster (created or updated each pass)."""
        return []

    def decorate_pod(self, job: Job, rtype: str, pod: dict, network: Network) -> None:
        """Cluster-only changes to a replica's pod before it is created (volumes, service account)."""

    # ---- Trainer v2 (``trainctl convert``) -----------------------------------------------
    def v2_command(self, command: list[str], args: list[str]) -> list[str] | None:
        """The command a v2 node runs for this v1 command (``args`` follow it) so that it keeps what the v1
        operator's env gave it; None: no launcher can stand in, :attr:`TrainerV2.v1_env` is what it loses."""
        return None

    def __repr__(self) -> str:
        return f"<Framework {self.kind}>"
