"""The command line: one module per command group, each a thin layer over the SDK (trainctl.sdk).

A command parses its flags, calls the SDK and prints; what a notebook user would want too lives in
the SDK, not here. The top layer: it may import every other; nothing imports it. ``--help`` imports
no backend, no YAML and no template engine (app.py keeps the start-up light).
"""
