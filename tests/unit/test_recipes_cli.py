"""``trainctl recipes``: list the recipes, print one to copy; a name is looked up, never used as a path."""

from __future__ import annotations

from pathlib import Path

import pytest

import trainctl.recipes.finetune as finetune


def test_list_names_each_recipe_with_how_to_run_it(cli):
    result = cli("recipes", "list")
    assert result.returncode == 0, result.stderr
    assert "finetune" in result.stdout and "python -m trainctl.recipes.finetune --help" in " ".join(result.stdout.split())


def test_show_prints_the_recipe_byte_for_byte_so_a_copy_runs_the_same(cli):
    result = cli("recipes", "show", "finetune")
    assert result.returncode == 0, result.stderr
    assert result.stdout == Path(finetune.__file__).read_text()


@pytest.mark.parametrize("name", ["nope", "../api", "finetune.py", "/etc/passwd", "__init__"])
def test_an_unknown_recipe_is_one_line_naming_the_recipes(cli, name):
    result = cli("recipes", "show", name)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [f"error: no recipe {name!r}: the recipes are finetune "
                                                  "(trainctl recipes list)"]
    assert result.stdout == ""


@pytest.mark.parametrize(("args", "rows"), [(["recipes", "list"], 1), (["templates", "list"], 8)])
def test_piped_tables_are_plain_columns_as_every_table_prints_them(cli, args, rows):
    """One printer for every table (formatting.print_table): piped, a row per line, each value whole and
    starting where its header starts, columns three spaces apart, so awk and cut see the same fields."""
    result = cli(*args)
    assert result.returncode == 0, result.stderr
    header, *lines = result.stdout.splitlines()
    assert len(lines) == rows, result.stdout
    starts = [header.index(name) for name in header.split()]
    assert starts[0] == 0 and all(header[start - 3:start] == "   " for start in starts[1:]), header
    for line in lines:
        cells = line.split("   ")
        assert [line.index(cell.strip()) for cell in cells if cell.strip()] == starts, line
