"""What the fine-tuning tests share: the tiny model and dataset (examples/finetune/make_tiny.py, nothing
downloaded), and reading back what the recipe wrote. Transformers runs in subprocesses only: pytest's
own process stays free of it, as it stays free of the other frameworks."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.conftest import REPO

MAKE_TINY = REPO / "examples" / "finetune" / "make_tiny.py"
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
STEP_LINE = re.compile(r"\bstep (\d+)/(\d+) loss ([\d.]+)")
RESUME_LINE = re.compile(r"resuming from (\S+)/checkpoint-(\d+) \(step (\d+)\)")

# For each line [model directory, output directory] on stdin: loads the base model with the saved adapter, and the
# merged model when there is one, generates, and prints a line "report {...}".
GENERATE = r'''
import json, sys, torch
from pathlib import Path
from peft import PeftModel
from transformers import AutoModelForCausalLM, AutoTokenizer


def check(model_dir, output):
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


for line in sys.stdin:
    model_dir, output = json.loads(line)
    print("report " + json.dumps(check(model_dir, Path(output))), flush=True)
'''


def environment() -> dict:
    return {**os.environ, **OFFLINE}


def make_tiny(directory: Path, rows: int = 256) -> Path:
    """DIR/model and DIR/data.jsonl (text in the column "sentence"); returns DIR."""
    subprocess.run([sys.executable, str(MAKE_TINY), str(directory), "--rows", str(rows)], check=True,
                   env=environment(), capture_output=True, timeout=180)
    return directory


class Generator:
    """One process that loads a run's adapter back and generates (GENERATE), for as many runs as it is given:
    importing transformers and peft, some 7 CPU-s, is paid once per Generator, not once per run checked."""

    def __init__(self) -> None:
        self.errors = tempfile.TemporaryFile(mode="w+")  # read when it fails; a pipe could fill and block it
        self.process = subprocess.Popen([sys.executable, "-c", GENERATE], env=environment(), text=True,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.errors)

    def __call__(self, model_dir: Path, output_dir: Path) -> dict:
        self.process.stdin.write(json.dumps([str(model_dir), str(output_dir)]) + "\n")
        self.process.stdin.flush()
        for line in self.process.stdout:
            if line.startswith("report "):
                return json.loads(line.removeprefix("report "))
        self.errors.seek(0)
        raise AssertionError(f"the generating process ended ({self.process.wait()}): {self.errors.read()[-3000:]}")

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=60)
        self.errors.close()

    def __enter__(self) -> Generator:
        return self

    def __exit__(self, *_) -> None:
        self.close()


def generate(model_dir: Path, output_dir: Path) -> dict:
    """One run checked by a Generator of its own."""
    with Generator() as generator:
        return generator(model_dir, output_dir)


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
