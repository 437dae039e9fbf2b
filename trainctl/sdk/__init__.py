"""The Python API: what a notebook or a script uses, and what the CLI calls.

``Client`` (client.py) picks a backend and holds the calls; ``JobHandle`` (handle.py) is one job,
read fresh on every use; ``run()`` turns keywords and functions into the submission pipeline's
options (running.py); ``finetune()`` runs the LoRA recipe (finetuning.py); a failure is summarised
by failures.py, a wait shown by progress.py, jobs and logs in IPython by display.py, metrics drawn by
plotting.py; compat_models.py gives ``trainctl.compat`` upstream's model objects. It may import every
layer below it (submission, backends, core, frameworks); only client.py names the Client class, the
modules below it receive the client and use it. ``from trainctl import Client`` is the way in.
"""
