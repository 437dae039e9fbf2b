"""An option named in an error, spelled for the front-end the call came through (trainctl.errors): the CLI's flag
once it declared itself, the Python keyword otherwise; and the same message in both, from one raise."""

import pytest

from trainctl.errors import CLI, PYTHON, UserError, option, setting, speaking
from trainctl.submit.options import positive


@pytest.mark.parametrize(("spelled", "cli", "python"), [
    (lambda: option("backoff_limit"), "--backoff-limit", "backoff_limit"),
    (lambda: option("selector"), "-l/--selector", "selector"),
    (lambda: option("until"), "--for", "until"),
    (lambda: option("pip"), "--pip", "packages"),
    (lambda: setting("replace"), "--replace", "replace=True"),
    (lambda: setting("no_workdir"), "--no-workdir", "no_workdir=True"),
    (lambda: setting("backend", "local"), "--local", "backend='local'"),
    (lambda: setting("volume", ["host:/d:/d", "pvc:c:/e"]), "--volume host:/d:/d --volume pvc:c:/e",
     "volume=['host:/d:/d', 'pvc:c:/e']"),
])
def test_each_front_end_spells_an_option_its_own_way(spelled, cli, python):
    with speaking(CLI):
        assert spelled() == cli
    assert spelled() == python  # the Python API is the default: it has no entry point to declare itself
    with speaking(CLI), speaking(PYTHON):
        assert spelled() == python  # the innermost wins, and leaving it restores the outer


def test_one_check_raises_in_the_callers_words():
    with speaking(CLI), pytest.raises(UserError, match="^--workers 0: must be at least 1$"):
        positive(0, "workers")
    with pytest.raises(UserError, match="^workers 0: must be at least 1$"):
        positive(0, "workers")
