"""``trainctl recipes list|show``: ready-made training programs, to run as they are or to copy and change."""

from __future__ import annotations

from typing import Annotated

import typer

from trainctl.errors import UserError
from trainctl.frameworks import DEFAULT

recipes_app = typer.Typer(
    help=f"""Ready-made training programs: plain framework code that imports nothing from trainctl.

Example: trainctl recipes show finetune > finetune.py
then change it and run your copy: trainctl submit {DEFAULT.name} --workers 2 -- python finetune.py --model ...
(on a cluster it travels with the working directory; docs/finetuning.md)
""",
    no_args_is_help=True,
    rich_markup_mode=None,  # plain help: Rich help formatting costs ~130 ms at start-up
)


def recipe_names() -> list[str]:
    import pkgutil

    import trainctl.recipes

    return sorted(module.name for module in pkgutil.iter_modules(trainctl.recipes.__path__))


def recipe_module(name: str):
    """The recipe's module; only names of the package's own modules are looked up (no paths from the user)."""
    import importlib

    names = recipe_names()
    if name not in names:
        raise UserError(f"no recipe {name!r}: the recipes are {', '.join(names)} (trainctl recipes list)")
    return importlib.import_module(f"trainctl.recipes.{name}")  # a recipe's top level imports only the stdlib


@recipes_app.command("list", help="Show each recipe and how to run it. Example: trainctl recipes list")
def list_recipes() -> None:
    from trainctl.cli.formatting import print_table

    rows = [[name, f"python -m trainctl.recipes.{name} --help",
             (recipe_module(name).__doc__ or "").strip().splitlines()[0]] for name in recipe_names()]
    print_table(["RECIPE", "RUN", "WHAT"], rows, whole=("RECIPE", "RUN"))  # the free text last, as kubectl


@recipes_app.command("show", help="Print a recipe's source. Example: trainctl recipes show finetune > finetune.py")
def show_recipe(name: Annotated[str, typer.Argument(help="The recipe, e.g. finetune.")]) -> None:
    from pathlib import Path

    typer.echo(Path(recipe_module(name).__file__).read_text(), nl=False)


def register(app: typer.Typer) -> None:
    app.add_typer(recipes_app, name="recipes")
