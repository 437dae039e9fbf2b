"""``trainctl completion bash|zsh|fish``: print a shell completion script.

completions/ holds the generated scripts (tests/unit/test_completions.py keeps them current):

    trainctl completion bash > completions/trainctl.bash
"""

from __future__ import annotations

from typing import Annotated

import typer

from trainctl.errors import UserError

SHELLS = ("bash", "zsh", "fish")


def completion_script(shell: str) -> str:
    from typer._completion_shared import get_completion_script

    if shell not in SHELLS:
        raise UserError(f"unsupported shell {shell!r}: use one of {', '.join(SHELLS)}")
    return get_completion_script(prog_name="trainctl", complete_var="_TRAINCTL_COMPLETE", shell=shell)


def completion(
    shell: Annotated[str, typer.Argument(help=f"One of {', '.join(SHELLS)}.")],
) -> None:
    typer.echo(completion_script(shell))


def register(app: typer.Typer) -> None:
    app.command(help="Print a shell completion script. Example: source <(trainctl completion bash)")(completion)
