"""Ready-made training programs that are plain framework code: each imports nothing from trainctl,
so it runs wherever its framework does and can be copied and changed (see docs/finetuning.md)."""
