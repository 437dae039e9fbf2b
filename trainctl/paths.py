"""Where trainctl keeps things on this machine: one state directory, and in it local jobs and function files.

``$TRAINCTL_HOME``, else ``$XDG_DATA_HOME/trainctl``, else ``~/.local/share/trainctl``. The local
backend keeps its jobs under ``jobs/`` (trainctl/backends/local/store.py), ``Client.run`` writes a
local function job's files under ``functions/`` (trainctl/functions/shipping.py), and a code snapshot never
ships the directory when it lies inside the working directory (trainctl/code/snapshot.py). It is on
the ground floor: every layer may ask where it is, and it asks nothing of them.
"""

from __future__ import annotations

import os
from pathlib import Path


def home() -> Path:
    """$TRAINCTL_HOME, else $XDG_DATA_HOME/trainctl, else ~/.local/share/trainctl."""
    if os.environ.get("TRAINCTL_HOME"):
        return Path(os.environ["TRAINCTL_HOME"]).absolute()
    data_home = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return (Path(data_home) / "trainctl").absolute()


def functions_dir() -> Path:
    """Where a local job's function files live (one directory per submission, beside the jobs' state)."""
    return home() / "functions"
