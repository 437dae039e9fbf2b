"""Fine-tune a causal language model with LoRA, on one process or many: a plain Hugging Face job.

    python -m trainctl.recipes.finetune --model ./my-model --dataset data.jsonl --output-dir out
    trainctl submit pytorch --workers 2 -- python -m trainctl.recipes.finetune --model ... (see docs/finetuning.md)

Every replica runs this same file. Distribution comes from the environment the PyTorchJob operator
(or trainctl's local backend) gives each replica, MASTER_ADDR/MASTER_PORT/WORLD_SIZE/RANK, which the
Transformers Trainer reads: DDP over gloo on CPU, NCCL on GPUs, and each rank trains on its own shard
of every epoch. What the recipe adds to a textbook Trainer script:

* any text column (``--text-column``) of a JSON Lines, JSON, CSV, Parquet or text file, or of a
  directory saved by ``datasets.save_to_disk``; nothing is downloaded unless ``--model``/``--dataset``
  name a Hub id instead of a path;
* checkpoints every ``save_steps`` into ``--output-dir``, each marked complete by every rank with
  ``trainctl.checkpoint_complete()``, and a restart (the replica's, or the whole job's) resumes from the
  newest one every rank completed (docs/fault-tolerance.md); checkpoints of another run there (other
  arguments, or another ``--run-name``) are never continued by chance: ``--resume`` says what to do with them;
* SIGTERM (``trainctl suspend``, a preempted or drained pod, the job's own restart) checkpoints at the end
  of the current step on every rank (they agree on which step, through ``trainctl.preempting()``) and
  exits 143, so a resume continues from there;
* rank 0 saves the adapter (``<output-dir>/adapter``) once at the end, and with ``--merge`` the
  base model with the adapter merged in (``<output-dir>/merged``);
* each rank writes the rows it trained on per epoch to ``<output-dir>/rows-seen/rank-<N>.json``;
* run by trainctl, each replica reports its step of ``max_steps`` and every logged loss with
  ``trainctl.report`` (``trainctl status``, ``job.progress()``, ``job.metrics()``: docs/progress.md).

This file needs nothing of trainctl: copy it into your project, change it, and run your copy the same
way (it travels with your working directory). Only when trainctl can be imported (in every job trainctl
starts, whatever the image: its stand-in package travels with the job) does it report, hear of a stop and
mark its checkpoints through it; elsewhere it catches SIGTERM itself and trusts trainer_state.json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import signal
import sys
from pathlib import Path
from typing import NamedTuple

TERMINATED_EXIT = 128 + signal.SIGTERM  # what a shell reports for a process ended by SIGTERM: retried, not success
DEFAULT_LORA = {"r": 8, "lora_alpha": 16, "lora_dropout": 0.05, "target_modules": "all-linear"}
DEFAULT_TRAINING = {"num_train_epochs": 1, "per_device_train_batch_size": 8, "learning_rate": 2e-4,
                    "logging_steps": 10, "save_steps": 50, "save_total_limit": 2, "report_to": "none",
                    "disable_tqdm": True,  # a progress bar per rank garbles logs; rank 0 prints a line per log step
                    "ddp_find_unused_parameters": False}
RESERVED_TRAINING = {"output_dir": "--output-dir", "deepspeed": "--deepspeed",  # trainctl.sdk.finetuning checks them too
                     "resume_from_checkpoint": "--resume"}
DATA_FORMATS = {".jsonl": "json", ".json": "json", ".csv": "csv", ".parquet": "parquet", ".txt": "text"}
SAVED_DATASET_FILES = ("dataset_info.json", "state.json", "dataset_dict.json")  # what save_to_disk writes
CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")
RUN_RECORD = "finetune-run.json"  # in each checkpoint: the run (name and arguments) that wrote it
RESUME_MODES = ("auto", "never")
FLAGS = {"output_dir": "--output-dir {}", "resume": "--resume {}"}  # how messages name them (Client.finetune: keywords)
# org/name as the Hub spells them (huggingface_hub's validate_repo_id): each part starts and ends with a
# letter, digit or _, and holds no -- or ..
HUB_ID = re.compile(r"(?!.*(?:--|\.\.))\w(?:[\w.-]*\w)?/\w(?:[\w.-]*\w)?")
PATH_STARTS = ("./", "../", "/", "~")


class RecipeError(Exception):
    """Bad input: printed as one line naming the culprit, exit code 2."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m trainctl.recipes.finetune", description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, type=os.path.expanduser,
                        help="a model directory (save_pretrained), or a Hub id")
    parser.add_argument("--dataset", required=True, type=os.path.expanduser,
                        help="a .jsonl/.json/.csv/.parquet/.txt file, a save_to_disk directory, or a Hub id")
    parser.add_argument("--output-dir", required=True, type=os.path.expanduser,
                        help="checkpoints, the adapter and the merged model")
    parser.add_argument("--text-column", default="text", help="the column holding the training text")
    parser.add_argument("--max-length", type=int, default=512, help="tokens per example; longer ones are cut")
    parser.add_argument("--lora", type=json_object, default={}, help='LoraConfig fields as JSON, e.g. \'{"r": 16}\'')
    parser.add_argument("--training-args", type=json_object, default={},
                        help='TrainingArguments fields as JSON, e.g. \'{"max_steps": 100, "save_steps": 20}\'')
    parser.add_argument("--merge", action="store_true", help="also save the base model with the adapter merged in")
    parser.add_argument("--resume", default="auto", type=os.path.expanduser,
                        help="auto: continue this run's own checkpoints, refuse another run's; never: start over, "
                             "deleting another run's checkpoints; or a checkpoint directory to continue from")
    parser.add_argument("--run-name", help="the run's name (Client.finetune gives its job's): checkpoints continue "
                                           "only the run of the same name and arguments")
    parser.add_argument("--deepspeed", type=os.path.expanduser,
                        help="a DeepSpeed config file, e.g. examples/finetune/ds_zero2.json (GPUs)")
    return parser.parse_args(argv)


def json_object(text: str) -> dict:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise argparse.ArgumentTypeError(f"not JSON ({error.msg} at column {error.colno}): {text!r}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"give a JSON object such as '{{\"r\": 8}}', not {text!r}")
    return value


# ---- data ------------------------------------------------------------------------------------

def load_rows(dataset: str, text_column: str):
    """The training split as a datasets.Dataset, with the text column checked."""
    import datasets

    path = Path(dataset)
    if path.is_dir() and any((path / name).exists() for name in SAVED_DATASET_FILES):
        rows = datasets.load_from_disk(str(path))
        rows = rows["train"] if isinstance(rows, datasets.DatasetDict) else rows
    elif path.is_file():
        builder = data_builder(path)
        rows = datasets.load_dataset(builder, data_files=str(path), split="train")
    else:
        rows = datasets.load_dataset(dataset, split="train")  # from the Hub: the user's choice, needs network
    if text_column not in rows.column_names:
        raise RecipeError(f"--text-column {text_column!r}: {dataset} has the columns "
                          f"{', '.join(rows.column_names)}; name the one holding the text")
    return rows


def looks_like_hub_id(name: str) -> bool:
    return HUB_ID.fullmatch(name) is not None


def data_builder(path: Path) -> str:
    """The datasets builder that reads the file ``path``, by its suffix."""
    builder = DATA_FORMATS.get(path.suffix.lower())
    if builder is None:
        raise RecipeError(f"--dataset {path}: cannot read {path.suffix or 'a file without suffix'}; give "
                          f"one of {', '.join(DATA_FORMATS)} or a save_to_disk directory")
    return builder


def source_problem(name: str, kind: str) -> str | None:
    """What is wrong with the model or dataset ``name``, or None: an existing path, or a Hub id (downloaded
    when loaded). A name that starts with ./ ../ / or ~, or whose first part exists here, is a path: when it
    is mistyped it fails here, in one line, not as a Hub download's ConnectionError after every import."""
    path = Path(name).expanduser()
    if path.exists():
        return None
    where = f"no such {kind} (from {os.getcwd()})"
    if name.startswith(PATH_STARTS):
        why = f"it starts with {next(start for start in PATH_STARTS if name.startswith(start))}"
    elif len(path.parts) > 1 and Path(path.parts[0]).exists():
        why = f"{path.parts[0]} is here"
    elif looks_like_hub_id(name):
        return None
    else:
        return f"{where}, and no Hub id such as org/name"
    return f"{where}{did_you_mean(path)}; {why}, so it is a path and not a Hub id"


def did_you_mean(path: Path) -> str:
    """`` (did you mean tiny/model?)`` when ``path``'s directory holds a name close to its last part."""
    import difflib

    try:
        names = [entry.name for entry in path.parent.iterdir()] if path.parent.is_dir() else []
    except OSError:  # unreadable: no suggestion, the message stands without it
        names = []
    close = difflib.get_close_matches(path.name, names, n=1)
    return f" (did you mean {path.parent / close[0]}?)" if close else ""


def check_sources(options: argparse.Namespace) -> None:
    """A mistyped path fails here, in one line, not as a Hub download error after the imports; so does a
    --training-args field that a flag of the recipe sets."""
    for flag, value, kind in (("--model", options.model, "directory"), ("--dataset", options.dataset, "file")):
        problem = source_problem(value, kind)
        if problem:
            raise RecipeError(f"{flag} {value}: {problem}")
    if Path(options.model).is_dir() and not (Path(options.model) / "config.json").is_file():
        raise RecipeError(f"--model {options.model}: no config.json in it; give a directory that save_pretrained "
                          "wrote (the model's config, weights and tokenizer)")
    if Path(options.dataset).is_file():
        data_builder(Path(options.dataset))
    for key, flag in RESERVED_TRAINING.items():  # before the imports too
        if key in options.training_args:
            raise RecipeError(f"--training-args: {key!r} is set by {flag}; leave it out")


def loaded(what: str, load, name: str):
    """``load(name)``, with a missing or unreadable model (or no network for a Hub id) as one line."""
    try:
        return load(name)
    except (OSError, ValueError) as error:  # missing files, no network, a tokenizer it cannot build
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise RecipeError(f"--model {name}: cannot load its {what}: {first}") from None


def tokenized(rows, tokenizer, text_column: str, max_length: int):
    """input_ids per row, plus its index as "row" (so each rank can record what it trained on)."""
    def tokenize(batch, indices):
        encoded = tokenizer([str(text) for text in batch[text_column]], truncation=True, max_length=max_length)
        return {"input_ids": encoded["input_ids"], "row": indices}

    return rows.map(tokenize, batched=True, with_indices=True, remove_columns=rows.column_names,
                    desc="tokenizing").filter(lambda example: len(example["input_ids"]) > 1)


class CausalCollator:
    """Pads a batch, makes labels of the inputs (padding ignored), and notes which rows it held."""

    def __init__(self, pad_id: int, seen: "RowsSeen"):
        self.pad_id, self.seen = pad_id, seen

    def __call__(self, examples: list[dict]) -> dict:
        import torch

        self.seen.add(example["row"] for example in examples)
        longest = max(len(example["input_ids"]) for example in examples)
        ids = torch.full((len(examples), longest), self.pad_id, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for i, example in enumerate(examples):
            ids[i, :len(example["input_ids"])] = torch.tensor(example["input_ids"])
            mask[i, :len(example["input_ids"])] = 1
        return {"input_ids": ids, "attention_mask": mask, "labels": ids.masked_fill(mask == 0, -100)}


# ---- callbacks -------------------------------------------------------------------------------

def callbacks(seen: "RowsSeen", identity: dict):
    """The Trainer callbacks, defined here so that importing this module needs no transformers."""
    from transformers import TrainerCallback

    class Progress(TrainerCallback):
        """One line per logging step on rank 0: what a person reads in ``trainctl logs``."""

        def on_log(self, args, state, control, logs=None, **kwargs):
            if state.is_world_process_zero and logs and "loss" in logs:
                print(f"step {state.global_step}/{state.max_steps} loss {logs['loss']:.4f} "
                      f"lr {logs.get('learning_rate', 0):.2e}", flush=True)

    class EpochOfRows(TrainerCallback):
        def on_epoch_begin(self, args, state, control, **kwargs):
            seen.epoch = int(state.epoch or 0)

    class CheckpointOnSigterm(TrainerCallback):
        """SIGTERM -> every rank saves a checkpoint at the end of the same step, then training stops.

        Transformers' own enable_jit_checkpoint lets each rank decide on its own, so in DDP one rank
        can stop a step before the other and leave it waiting in an all-reduce until it is killed;
        here the ranks agree through a one-number all-reduce per step. The notice is trainctl's
        (trainctl.preempting(): SIGTERM, or the local runtime's notice file), else a handler of its own."""

        def __init__(self):
            self.requested = self.stopped = False
            self.preempting = trainctl_function("preempting")
            if self.preempting is not None:
                self.preempting()  # arms it: SIGTERM is now a notice
            else:
                signal.signal(signal.SIGTERM, self.request)

        def request(self, signum, frame):
            self.requested = True

        def on_step_end(self, args, state, control, **kwargs):
            requested = self.requested or (self.preempting is not None and self.preempting())
            if agreed(requested, args.device):
                print(f"SIGTERM: saving a checkpoint at step {state.global_step}, then stopping", flush=True)
                control.should_save = control.should_training_stop = self.stopped = True
            return control

    class RecordTheRun(TrainerCallback):
        """Each checkpoint says which run wrote it (RUN_RECORD), written before the Trainer fills the directory:
        trainer_state.json comes last, so a checkpoint complete enough to resume always carries its run."""

        def on_step_end(self, args, state, control, **kwargs):
            self.record(args, state, control)

        def on_epoch_end(self, args, state, control, **kwargs):
            self.record(args, state, control)

        def record(self, args, state, control):
            if control.should_save and args.should_save:  # the process (per node, or per job) that saves
                checkpoint = Path(args.output_dir) / f"checkpoint-{state.global_step}"
                checkpoint.mkdir(parents=True, exist_ok=True)
                (checkpoint / RUN_RECORD).write_text(json.dumps({"run": identity}, indent=2))

    class MarkComplete(TrainerCallback):
        """Each rank's word that its part of a checkpoint is written (trainctl.checkpoint_complete), given once
        the Trainer saved it: a checkpoint is resumed only when every rank gave it. Where every pod keeps its own
        copy (no shared volume), the node's copy is whole by itself: one word, of a world of one."""

        def __init__(self):
            self.complete = trainctl_function("checkpoint_complete")

        def on_save(self, args, state, control, **kwargs):
            checkpoint = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            if self.complete is None or not checkpoint.is_dir():
                return
            if args.save_on_each_node:
                if args.should_save:
                    self.complete(checkpoint, rank=0, world_size=1)
            else:
                self.complete(checkpoint, rank=args.process_index, world_size=args.world_size)

    return (Progress(), EpochOfRows(), CheckpointOnSigterm(), RecordTheRun(),  # in this order: SIGTERM decides saves
            MarkComplete())


def trainctl_function(name: str):
    """trainctl's ``name`` (trainctl.checkpoints) where trainctl can be imported, else None."""
    try:
        import trainctl
    except ImportError:
        return None
    return getattr(trainctl, name, None)


def trainctl_reporting() -> list:
    """trainctl's callback that reports the steps and losses (trainctl.reporting), where it can be imported:
    every job trainctl starts puts it on the path; anywhere else, none."""
    try:
        from trainctl.reporting import transformers_callback
    except ImportError:
        return []
    return [transformers_callback()]


def agreed(flag: bool, device) -> bool:
    """Whether any rank has ``flag`` set (every rank gets the same answer)."""
    import torch
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return flag
    value = torch.tensor([1.0 if flag else 0.0], device=device)
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return bool(value.item())


class RowsSeen:
    """The row indices one rank trained on, per epoch, written to ``rows-seen/rank-<N>.json``."""

    def __init__(self):
        self.epoch, self.rows = 0, {}

    def add(self, rows) -> None:
        self.rows.setdefault(str(self.epoch), []).extend(int(row) for row in rows)

    def write(self, output_dir: Path, rank: int) -> None:
        directory = output_dir / "rows-seen"
        directory.mkdir(parents=True, exist_ok=True)
        (directory / f"rank-{rank}.json").write_text(json.dumps({"rank": rank, "epochs": self.rows}))


# ---- checkpoints -----------------------------------------------------------------------------

def complete_checkpoints(output_dir: Path) -> set[int]:
    """The steps of the checkpoints written to the end: a replica killed while saving leaves one without
    trainer_state.json (the Trainer writes it last), which transformers' get_last_checkpoint would pick; and
    one that trainctl's markers were begun on is complete only once every rank marked it (trainctl.checkpoints)."""
    if not output_dir.is_dir():
        return set()
    return {int(match.group(1)) for path in output_dir.iterdir()
            if (match := CHECKPOINT.match(path.name)) and (path / "trainer_state.json").is_file()
            and marked_complete(path)}


def marked_complete(checkpoint: Path) -> bool:
    """Whether every rank marked the checkpoint complete, where trainctl's markers are there to say it."""
    try:
        from trainctl.checkpoints import MARKERS, complete
    except ImportError:
        return True
    return not (checkpoint / MARKERS).is_dir() or complete(checkpoint)


class ResumePlan(NamedTuple):
    """What one rank found in its output directory (``resume_plan``), before the ranks agree on a step."""
    steps: set[int]  # this run's complete checkpoints
    given: Path | None  # --resume PATH: where to start while this run has no checkpoint of its own
    foreign: list[Path]  # --resume never: another run's checkpoints, deleted before training


def run_identity(options: argparse.Namespace) -> dict:
    """What makes two starts the same run: the job's name and every argument that changes what is trained
    (not --merge, which only adds a save at the end). A restarted replica runs the same command, so it matches."""
    return json.loads(json.dumps({
        "job": options.run_name, "model": options.model, "dataset": options.dataset,
        "text_column": options.text_column, "max_length": options.max_length, "lora": options.lora,
        "training_args": options.training_args, "deepspeed": options.deepspeed}))


def checkpoint_run(checkpoint: Path) -> dict | None:
    """The run that wrote ``checkpoint`` (its RUN_RECORD), or None: written by something else."""
    try:
        return json.loads((checkpoint / RUN_RECORD).read_text()).get("run")
    except (OSError, ValueError, AttributeError):  # none, or not one this recipe wrote
        return None


def resume_plan(options: argparse.Namespace, spelled: dict[str, str] = FLAGS) -> ResumePlan:
    """Which checkpoints of ``--output-dir`` this run may continue, as this rank sees them. Another run's
    are continued only when ``--resume`` names one: with auto (the default) they are refused here, before
    anything loads, naming the directory and the ways on (``spelled``: how that message writes the flags).
    Resuming them silently had mixed two runs' learning rates and save schedules."""
    output_dir, resume = Path(options.output_dir), options.resume
    given = None if resume in RESUME_MODES else Path(resume)
    if given is not None and not (given / "trainer_state.json").is_file():
        raise RecipeError(f"{spelled['resume'].format(resume)}: not a checkpoint (a checkpoint-N directory the "
                          f"Trainer wrote completely, with trainer_state.json); or give {' or '.join(RESUME_MODES)}")
    identity, steps = run_identity(options), complete_checkpoints(output_dir)
    mine = {step for step in steps if checkpoint_run(output_dir / f"checkpoint-{step}") == identity}
    others = sorted(steps - mine)
    if mine or not others:  # this run's own restart, or nothing to continue by mistake
        return ResumePlan(mine, given, [])
    if resume == "never":
        return ResumePlan(set(), None, [output_dir / f"checkpoint-{step}" for step in others])
    if resume == "auto":
        raise RecipeError(another_run(output_dir / f"checkpoint-{others[-1]}", identity, spelled))
    return ResumePlan(set(), given, [])


def another_run(newest: Path, identity: dict, spelled: dict[str, str]) -> str:
    recorded = checkpoint_run(newest)
    whose = (f"of another run ({run_differences(recorded, identity)})" if recorded is not None
             else f"that no run of this recipe wrote (it has no {RUN_RECORD})")
    return (f"{spelled['output_dir'].format(str(newest.parent))} holds {newest.name} {whose}: give another output "
            f"directory, {spelled['resume'].format('never')} to start over there (deleting its checkpoints), or "
            f"{spelled['resume'].format(str(newest))} to continue from that checkpoint with these arguments")


def run_differences(recorded: dict, identity: dict, most: int = 4) -> str:
    """``learning_rate 0.005 there, 0.0002 here; ...``: the fields of the two runs that differ, at most ``most``."""
    def flat(run: dict) -> dict:
        fields = {}
        for key, value in run.items():
            fields.update(value if key in ("lora", "training_args") and isinstance(value, dict) else {key: value})
        return fields

    def shown(value) -> str:
        return "unset" if value is None else value if isinstance(value, str) else json.dumps(value)

    there, here = flat(recorded), flat(identity)
    differing = [key for key in dict.fromkeys([*there, *here]) if there.get(key) != here.get(key)]
    parts = [f"{key} {shown(there.get(key))} there, {shown(here.get(key))} here" for key in differing[:most]]
    return "; ".join(parts + (["..."] if len(differing) > most else [])) or "recorded in another form"


def agreed_checkpoint(output_dir: Path, plan: ResumePlan) -> Path | None:
    """The newest checkpoint of this run that every rank has, so that all resume from the same step: in pods
    without a shared volume each rank has its own copy, and a pod made anew has none (then all start over,
    or from ``--resume PATH``)."""
    common = set.intersection(*gathered(plan.steps))
    return output_dir / f"checkpoint-{max(common)}" if common else plan.given


def output_is_shared(output_dir: Path, rank: int) -> bool:
    """Whether every rank sees the same output directory (one machine, or a shared volume): rank 0 leaves
    a file named by a random token there, and each rank looks for it."""
    token = gathered(secrets.token_hex(8) if rank == 0 else None)[0]
    marker = output_dir / f".shared-{token}"
    if rank == 0:
        output_dir.mkdir(parents=True, exist_ok=True)
        marker.touch()
    shared = all(gathered(marker.exists()))  # every rank looked before the gather could complete
    if rank == 0:
        marker.unlink()
    return shared


def delete_checkpoints(paths: list[Path]) -> None:
    """Another run's checkpoints, under ``--resume never``: left there, the Trainer would write this run's
    steps into their directories and its save_total_limit would count them."""
    import shutil

    for path in paths:
        shutil.rmtree(path, ignore_errors=True)


def gathered(value) -> list:
    """``value`` of every rank, in rank order (a collective: every rank calls it)."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return [value]
    values = [None] * dist.get_world_size()
    dist.all_gather_object(values, value)
    return values


# ---- the job ---------------------------------------------------------------------------------

def training_arguments(options: argparse.Namespace):
    import torch
    from transformers import TrainingArguments

    # Accelerate treats WORLD_SIZE > 1 as distributed CPU training only when told it is on CPU
    on_cpu = {"use_cpu": True} if not torch.cuda.is_available() else {}
    if on_cpu:  # DeepSpeed, when installed, finds the CPU by itself too, but warns on every replica
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
    fields = {**DEFAULT_TRAINING, **on_cpu, **options.training_args, "output_dir": options.output_dir,
              "remove_unused_columns": False,  # the collator needs "row"
              "deepspeed": options.deepspeed}
    try:
        return TrainingArguments(**fields)
    except TypeError as error:  # an unknown field: TypeError names it
        raise RecipeError(f"--training-args: {error}; the fields are TrainingArguments' "
                          "(https://huggingface.co/docs/transformers/main_classes/trainer)") from None


def lora_model(model, lora: dict):
    from peft import LoraConfig, get_peft_model

    try:
        config = LoraConfig(**{**DEFAULT_LORA, **lora, "task_type": "CAUSAL_LM"})
        return get_peft_model(model, config)
    except (TypeError, ValueError) as error:
        raise RecipeError(f"--lora: {error}") from None


def finetune(options: argparse.Namespace, plan: ResumePlan) -> int:
    """Train, save, and return the exit code (TERMINATED_EXIT after a SIGTERM checkpoint)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer, PrinterCallback, Trainer

    quiet_libraries()
    replica_environment(os.environ, options.deepspeed)
    args = training_arguments(options)  # sets up the process group from the operator's env
    output_dir, rank = Path(options.output_dir), args.process_index
    shared = output_is_shared(output_dir, rank)
    if not shared:
        args.save_on_each_node = True  # every pod keeps a whole checkpoint of its own to resume from
    resume = agreed_checkpoint(output_dir, plan)  # a collective: every rank has looked before one deletes
    if rank == 0 or not shared:
        delete_checkpoints(plan.foreign)
    tokenizer = loaded("tokenizer", AutoTokenizer.from_pretrained, options.model)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    with args.main_process_first(local=False, desc="loading the dataset"):  # rank 0 fills the cache first
        rows = tokenized(load_rows(options.dataset, options.text_column), tokenizer,
                         options.text_column, options.max_length)
    model = lora_model(loaded("model", AutoModelForCausalLM.from_pretrained, options.model), options.lora)
    if rank == 0:
        model.print_trainable_parameters()
    seen = RowsSeen()
    progress, epochs, sigterm, record, marks = callbacks(seen, run_identity(options))
    trainer = Trainer(model=model, args=args, train_dataset=rows, processing_class=tokenizer,
                      data_collator=CausalCollator(tokenizer.pad_token_id, seen),
                      callbacks=[progress, epochs, sigterm, record, marks, *trainctl_reporting()])
    trainer.remove_callback(PrinterCallback)  # its raw dicts repeat what Progress prints
    print(f"rank {rank} of {args.world_size}: {len(rows)} rows, "
          + (f"resuming from {resume} (step {resume.name.split('-')[1]})" if resume else "starting at step 0"),
          flush=True)
    trainer.train(resume_from_checkpoint=str(resume) if resume else None)
    if trainer.is_deepspeed_enabled:  # what the engine really ran, not what the config asked for
        print(f"rank {rank}: DeepSpeed ZeRO stage {trainer.model_wrapped.zero_optimization_stage()}", flush=True)
    seen.write(output_dir, rank)
    if sigterm.stopped:
        return TERMINATED_EXIT
    save_results(trainer, model, tokenizer, output_dir, options.merge)
    return 0


def without_unasked_deepspeed(deepspeed: str | None, modules: dict = sys.modules) -> None:
    """Without --deepspeed, Accelerate and Transformers are told DeepSpeed is not installed (importlib's
    find_spec says None for a module set to None): installed, they import it anyway, and MLflow with it, some
    2 s of CPU in every replica for nothing."""
    if not deepspeed:
        modules.setdefault("deepspeed", None)


def replica_environment(environ, deepspeed: str | None) -> bool:
    """Whether this process joins a process group, and if so, give the Trainer the LOCAL_RANK it wants (one
    process per replica, as the operator runs a pod; torchrun sets its own). A job of one replica (WORLD_SIZE 1)
    runs as the same command run directly: a process group of one rank does nothing, and on a GPU its NCCL
    communicator takes memory (a one-replica job peaked 558 MiB higher than the direct run; docs/finetuning.md).
    DeepSpeed's engine wants a process group even alone."""
    joins = "RANK" in environ and (environ.get("WORLD_SIZE", "1") != "1" or bool(deepspeed))
    if joins:
        environ.setdefault("LOCAL_RANK", "0")
    return joins


def quiet_libraries() -> None:
    """Logs are read per replica, line by line: no progress bars, and not the libraries' notes to each other."""
    import warnings

    import datasets
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()
    datasets.disable_progress_bars()
    # PEFT switches fan_in_fan_out on by itself for GPT-2's Conv1D layers, and says so once per replica;
    # Transformers' own Trainer calls its deprecated is_gradient_checkpointing.
    warnings.filterwarnings("ignore", message="fan_in_fan_out is set to False")
    warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.* is deprecated")


def save_results(trainer, model, tokenizer, output_dir: Path, merge: bool) -> None:
    """The adapter (and the merged model) once, by rank 0; the others wait until it is there."""
    trainer.save_state()  # trainer_state.json: the loss history, on rank 0
    trainer.save_model(str(output_dir / "adapter"))  # rank 0 only: the Trainer checks
    if merge and trainer.is_world_process_zero():
        merged = model.merge_and_unload()
        merged.save_pretrained(output_dir / "merged")
        tokenizer.save_pretrained(output_dir / "merged")
    trainer.accelerator.wait_for_everyone()
    if trainer.is_world_process_zero():
        print(f"saved the adapter to {output_dir / 'adapter'}" + (f" and the merged model to {output_dir / 'merged'}"
                                                                   if merge else ""), flush=True)


def main(argv: list[str] | None = None) -> int:
    options = parse_args(argv)
    without_unasked_deepspeed(options.deepspeed)
    try:
        check_sources(options)  # before the seconds that importing transformers takes
        return finetune(options, resume_plan(options))
    except RecipeError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
