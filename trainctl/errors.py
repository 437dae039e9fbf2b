"""Errors that end a command with a one-line message instead of a traceback.

Every problem caused by the user's input (a flag, a YAML file, a name, a
missing cluster) is raised as :class:`UserError`. The CLI prints its message
on one line and exits with status 2; nothing else is caught, so a real bug
still shows its traceback.
"""


class UserError(Exception):
    """Bad input: the message names the culprit and how to fix it."""

    exit_code = 2

    def __init__(self, message: str):
        super().__init__(" ".join(message.split()))  # always one line

    @property
    def message(self) -> str:
        return self.args[0]


class NotFound(UserError):
    """The named job (or other object) does not exist."""

    @classmethod
    def job(cls, name: str, namespace: str, backend: str, elsewhere: list[str] = ()) -> "NotFound":
        """No job ``name`` in ``namespace``; ``elsewhere``: the namespaces that have one, which the
        message names (YAML written for the Training Operator often says ``namespace: kubeflow``)."""
        others = sorted(set(elsewhere) - {namespace})
        if len(others) == 1:
            hint = f'there is one in namespace "{others[0]}": add -n {others[0]}'
        elif others:
            hint = f"namespaces {', '.join(others)} have one: add -n NAMESPACE"
        else:
            hint = "see trainctl list"
        return cls(f'job "{name}" not found in namespace "{namespace}" ({backend}): {hint}')


class InvalidArgument(UserError):
    """A Python API call's argument is unknown or bad (``Client.run(workers=0)``); nothing was created."""


class JobFailed(Exception):
    """A job the caller waited for failed; ``summary`` says which replica, how, and its last log lines.

    Not a :class:`UserError`: the input was fine, the training was not. ``str()`` is the whole
    multi-line summary (:class:`trainctl.failures.FailureSummary`), ready to print.
    """

    exit_code = 1

    def __init__(self, summary) -> None:
        super().__init__(str(summary))
        self.summary = summary
