"""Submission: what a user asks for (flags, keywords, a values file) becomes a job.

One pipeline (:mod:`trainctl.submit.pipeline`) serves ``trainctl submit`` and ``Client.run``.
It may use the core (the job model, validation), the frameworks, the code that travels
(trainctl.code) and the ground floor; it never imports a backend, the SDK or the CLI: the
client that creates the job is handed to it.
"""
