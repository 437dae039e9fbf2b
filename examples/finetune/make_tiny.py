"""A tiny causal language model and a small dataset to fine-tune it on, made here: nothing is downloaded.

    python examples/finetune/make_tiny.py DIR [--rows 256] [--layers 2]

writes DIR/model (a 2-layer GPT-2 with random weights and a byte-pair tokenizer trained on the
data, both loadable with from_pretrained) and DIR/data.jsonl (one JSON object per line; the
training text is in the column "sentence"). The sentences follow a pattern a model can learn
("ana has 7 pears. ana eats one. ana has 6 pears."), so the loss of a few dozen LoRA steps falls.
The tests and docs/finetuning.md use it; for real work, point --model at a model you have.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

NAMES = ("ana", "ben", "carla", "dev", "emil", "fatima", "goro", "hana")
FRUITS = ("apples", "pears", "plums", "figs", "limes", "dates")


def sentences(count: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    lines = []
    for _ in range(count):
        name, fruit, number = rng.choice(NAMES), rng.choice(FRUITS), rng.randint(2, 9)
        lines.append(f"{name} has {number} {fruit}. {name} eats one. {name} has {number - 1} {fruit}.")
    return lines


def write_dataset(path: Path, lines: list[str]) -> None:
    with path.open("w") as file:
        for index, line in enumerate(lines):
            file.write(json.dumps({"id": index, "sentence": line, "source": "make_tiny"}) + "\n")


def write_model(directory: Path, lines: list[str], layers: int, width: int = 64, heads: int = 4,
                positions: int = 64) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE(unk_token="<unk>"))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(lines, trainers.BpeTrainer(vocab_size=256, special_tokens=["<unk>", "<eos>", "<pad>"]))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, unk_token="<unk>", eos_token="<eos>",
                                        bos_token="<eos>", pad_token="<pad>")
    config = GPT2Config(vocab_size=len(tokenizer), n_positions=positions, n_embd=width, n_layer=layers, n_head=heads,
                        bos_token_id=tokenizer.eos_token_id, eos_token_id=tokenizer.eos_token_id,
                        pad_token_id=tokenizer.pad_token_id)
    GPT2LMHeadModel(config).save_pretrained(directory)  # random weights, seeded below
    tokenizer.save_pretrained(directory)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("directory", type=Path)
    parser.add_argument("--rows", type=int, default=256)
    parser.add_argument("--layers", type=int, default=2)
    options = parser.parse_args()
    import torch

    torch.manual_seed(0)
    options.directory.mkdir(parents=True, exist_ok=True)
    lines = sentences(options.rows)
    write_dataset(options.directory / "data.jsonl", lines)
    write_model(options.directory / "model", lines, options.layers)
    print(f"wrote {options.directory / 'model'} and {options.directory / 'data.jsonl'} ({len(lines)} rows)")


if __name__ == "__main__":
    main()
