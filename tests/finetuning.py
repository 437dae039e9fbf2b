"""What the fine-tuning tests share: the tiny model and dataset (examples/finetune/make_tiny.py, nothing
downloaded), and reading back what the recipe wrote. Transformers runs in subprocesses only: pytest's
own process stays free of it, as it stays free of the other frameworks."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.conftest import REPO

MAKE_TINY = REPO / "examples" / "finetune" / "make_tiny.py"
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
# For the tests' lone processes (a one-replica job, the recipe run directly, the generating process): torch's
# OpenMP pool of one thread per core spins while the suite's other processes hold the cores, and a 16-step run
# cost 10.5 to 15 CPU-s with 2 threads against 7.3 to 8 s with 1 on 2 busy cores. Two replicas get 1 each already
# (the local backend's cores / replicas); the benchmarks keep what a user's run gets.
ONE_THREAD = {"OMP_NUM_THREADS": "1"}
STEP_LINE = re.compile(r"\bstep (\d+)/(\d+) loss ([\d.]+)")
RESUME_LINE = re.compile(r"resuming from (\S+)/checkpoint-(\d+) \(step (\d+)\)")
TINY_CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "trainctl" / "finetune-tiny"

# One process answering each line on stdin, ["generate", model directory, output directory] or ["recipe", working
# directory, argv], with a line "report {...}" (or "failed <traceback as JSON>"), then going on with the next.
# generate: loads the base model with the saved adapter, and the merged model when there is one, and generates.
# recipe: the recipe's main(argv) from that directory, as `python -m trainctl.recipes.finetune` runs it
# (sys.exit(main())): its exit code and what it wrote to stderr, an exception it let out as a traceback there.
HELPER = r'''
import contextlib, io, json, os, sys, torch, traceback
from pathlib import Path
from peft import PeftModel
from transformers import AutoModelForCausalLM, AutoTokenizer


def generate(model_dir, output):
    output = Path(output)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tuned = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(model_dir), output / "adapter").eval()
    prompt = tokenizer("ana has 5", return_tensors="pt")
    with torch.no_grad():
        generated = tuned.generate(**prompt, max_new_tokens=6, min_new_tokens=6, do_sample=False,
                                   pad_token_id=tokenizer.pad_token_id)
        report = {"new_tokens": generated.shape[1] - prompt["input_ids"].shape[1],
                  "text": tokenizer.decode(generated[0]),
                  "lora_b_nonzero": any(bool(p.abs().sum() > 0) for n, p in tuned.named_parameters()
                                        if "lora_B" in n)}
        if (output / "merged").is_dir():
            merged = AutoModelForCausalLM.from_pretrained(output / "merged").eval()
            report["merged_max_diff"] = (merged(**prompt).logits - tuned(**prompt).logits).abs().max().item()
    return report


def recipe(cwd, argv):
    from trainctl.recipes.finetune import main

    os.chdir(cwd)
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        try:
            code = main(argv)
        except SystemExit as exited:  # argparse's usage errors
            code = exited.code
        except Exception:
            traceback.print_exc()
            code = 1
    return {"code": code, "stderr": stderr.getvalue()}


for line in sys.stdin:
    kind, *question = json.loads(line)
    try:
        print("report " + json.dumps({"generate": generate, "recipe": recipe}[kind](*question)), flush=True)
    except Exception:  # this question's failure, not the next one's: the process goes on
        print("failed " + json.dumps(traceback.format_exc()), flush=True)
'''


def environment() -> dict:
    return {**os.environ, **OFFLINE}


def make_tiny(directory: Path, rows: int = 256) -> Path:
    """DIR/model and DIR/data.jsonl (text in the column "sentence"); returns DIR. make_tiny.py runs once per
    version of itself and of the libraries that write the model (some 9 CPU-s), into TINY_CACHE; each caller gets a
    copy. What it writes is seeded, so a copy is what a new run would write."""
    made = TINY_CACHE / tiny_key(rows)
    if not (made / "data.jsonl").is_file():
        made.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{made.name}-", dir=made.parent))
        subprocess.run([sys.executable, str(MAKE_TINY), str(staging), "--rows", str(rows)], check=True,
                       env=environment(), capture_output=True, timeout=180)
        try:
            staging.rename(made)  # whole or not there: another suite making it at the same time loses nothing
        except OSError:  # that other one came first
            shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(made, directory, dirs_exist_ok=True)
    return directory


def tiny_key(rows: int) -> str:
    """make_tiny.py's content, the rows asked for and the versions of the libraries that write the model."""
    versions = [importlib.metadata.version(package) for package in ("torch", "transformers", "tokenizers")]
    return hashlib.sha256("\n".join([MAKE_TINY.read_text(), str(rows), *versions]).encode()).hexdigest()[:16]


class Helper:
    """One process (HELPER) for what the fine-tuning tests ask after their runs: load a run's adapter back and
    generate, run the recipe's main() on bad input. Importing torch, Transformers and PEFT, some 7 CPU-s, is paid
    once per Helper, not once per run checked or per input refused after the recipe's imports."""

    def __init__(self) -> None:
        self.errors = tempfile.TemporaryFile(mode="w+")  # read when it fails; a pipe could fill and block it
        self.process = subprocess.Popen([sys.executable, "-c", HELPER], env={**environment(), **ONE_THREAD},
                                        text=True,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.errors)

    def generate(self, model_dir: Path, output_dir: Path) -> dict:
        return self.ask(["generate", str(model_dir), str(output_dir)], f"loading {output_dir}'s adapter back")

    def recipe(self, *args: str, cwd: Path) -> tuple[int, str]:
        """(exit code, stderr) of the recipe run with ``args`` from ``cwd``."""
        ran = self.ask(["recipe", str(cwd), list(args)], f"the recipe with {list(args)}")
        return ran["code"], ran["stderr"]

    def ask(self, question: list, what: str) -> dict:
        self.process.stdin.write(json.dumps(question) + "\n")
        self.process.stdin.flush()
        for line in self.process.stdout:
            if line.startswith("report "):
                return json.loads(line.removeprefix("report "))
            if line.startswith("failed "):
                failure = json.loads(line.removeprefix("failed "))
                raise AssertionError(f"{what} failed: {failure[-3000:]}")
        self.errors.seek(0)
        raise AssertionError(f"the helper process ended ({self.process.wait()}): {self.errors.read()[-3000:]}")

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=60)
        self.errors.close()

    def __enter__(self) -> Helper:
        return self

    def __exit__(self, *_) -> None:
        self.close()


def generate(model_dir: Path, output_dir: Path) -> dict:
    """One run checked by a Helper of its own."""
    with Helper() as helper:
        return helper.generate(model_dir, output_dir)


def logged_losses(output_dir: Path) -> list[tuple[int, float]]:
    """(step, loss) of every logging step, from the trainer_state.json rank 0 saves at the end."""
    state = json.loads((output_dir / "trainer_state.json").read_text())
    return [(entry["step"], entry["loss"]) for entry in state["log_history"] if "loss" in entry]


def rows_seen(output_dir: Path) -> dict[int, dict[str, set[int]]]:
    """rank -> epoch -> the rows its data loader handed out."""
    seen = {}
    for path in sorted((output_dir / "rows-seen").glob("rank-*.json")):
        data = json.loads(path.read_text())
        seen[data["rank"]] = {epoch: set(rows) for epoch, rows in data["epochs"].items()}
    return seen


def step_lines(text: str) -> list[int]:
    return [int(match.group(1)) for match in STEP_LINE.finditer(text)]
