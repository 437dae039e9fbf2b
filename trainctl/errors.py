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
