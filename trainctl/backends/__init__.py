"""Where jobs run: ``local`` (processes on this machine) or ``kubernetes``."""
