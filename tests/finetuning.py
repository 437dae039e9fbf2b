"""What the fine-tuning tests share: the tiny model and dataset (examples/finetune/make_tiny.py, nothing
downloaded), and reading back what the recipe wrote. Transformers runs in subprocesses only: pytest's
own process stays free of it, as it stays free of the other frameworks."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

MAKE_TINY = REPO / "examples" / "finetune" / "make_tiny.py"
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
STEP_LINE = re.compile(r"\bstep (\d+)/(\d+) loss ([\d.]+)")
RESUME_LINE = re.compile(r"resuming from (\S+)/checkpoint-(\d+) \(step (\d+)\)")

# Loads the base model with the saved adapter, and the merged model when there is one, then generates.
GENERATE = r'''
import json, sys, torch
from pathlib import Path
from peft import PeftModel
from transformers import AutoModelForCausalLM, AutoTokenizer

model_dir, output = sys.argv[1], Path(sys.argv[2])
tokenizer = AutoTokenizer.from_pretrained(model_dir)
tuned = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(model_dir), output / "adapter").eval()
prompt = tokenizer("ana has 5", return_tensors="pt")
with torch.no_grad():
    generated = tuned.generate(**prompt, max_new_tokens=6, min_new_tokens=6, do_sample=False,
                               pad_token_id=tokenizer.pad_token_id)
    report = {"new_tokens": generated.shape[1] - prompt["input_ids"].shape[1],
              "text": tokenizer.decode(generated[0]),
              "lora_b_nonzero": any(bool(p.abs().sum() > 0) for n, p in tuned.named_parameters() if "lora_B" in n)}
    if (output / "merged").is_dir():
        merged = AutoModelForCausalLM.from_pretrained(output / "merged").eval()
        report["merged_max_diff"] = (merged(**prompt).logits - tuned(**prompt).logits).abs().max().item()
print(json.dumps(report))
'''


def environment() -> dict:
    return {**os.environ, **OFFLINE}


def make_tiny(directory: Path, rows: int = 256) -> Path:
    """DIR/model and DIR/data.jsonl (text in the column "sentence"); returns DIR."""
    subprocess.run([sys.executable, str(MAKE_TINY), str(directory), "--rows", str(rows)], check=True,
                   env=environment(), capture_output=True, timeout=180)
    return directory


def generate(model_dir: Path, output_dir: Path) -> dict:
    done = subprocess.run([sys.executable, "-c", GENERATE, str(model_dir), str(output_dir)], env=environment(),
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


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
