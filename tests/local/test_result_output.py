"""job.result() finds rank 0's value whatever the function wrote before it (issue 23, defect 1), and when
there truly is none, says why.

The runner prints the result line on a line of its own, so output that ends without a newline
(``print(..., end="")``, a progress bar's ``\\r`` on stderr, a colour reset, 10 MB in one line) cannot
swallow its start; ``job.logs()`` shows neither it nor the newline put in front of it.
"""

from __future__ import annotations

import pytest

from tests.local import function_jobs
from trainctl.errors import UserError

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize(("function", "value", "printed"), [
    (function_jobs.ends_without_newline, {"loss": 0.25}, ["epoch done"]),
    (function_jobs.progress_bar, 3, ["\rtraining 1/3\rtraining 2/3\rtraining 3/3\r"]),
    (function_jobs.colour_reset_at_the_end, "coloured",
     ["\x1b[33mWARNING: Running pip as the 'root' user\x1b[0m\x1b[33m", "\x1b[0m"]),
])
def test_the_result_survives_output_without_a_final_newline(client, function, value, printed):
    job = client.run(function, framework="jax", name=function.__name__.replace("_", "-"), backoff_limit=0)
    assert job.result(timeout=60) == value
    assert [line.text for line in job.logs()] == printed  # the output as written, no result line, no extra line
    job.delete()


def test_the_result_survives_ten_megabytes_without_a_newline(client):
    job = client.run(function_jobs.ten_megabytes_without_newline, framework="jax", name="ten-mb", backoff_limit=0)
    assert job.result(timeout=90) == 10 << 20
    job.delete()


def test_a_function_that_exits_instead_of_returning_is_named_as_the_cause(client):
    job = client.run(function_jobs.exits_before_returning, framework="jax", name="exits", backoff_limit=0)
    with pytest.raises(UserError) as missing:
        job.result(timeout=60)
    message = missing.value.message
    assert "sys.exit()" in message and "logs" not in message.split(":")[0], message
    job.delete()


def test_logs_that_are_gone_are_named_as_the_cause(client, cli):
    job = client.run(function_jobs.ends_without_newline, framework="jax", name="gone", backoff_limit=0)
    job.wait(timeout=60, progress=False)
    for log in (cli.home / "jobs" / "default" / "gone" / "logs").glob("*.log"):
        log.unlink()
    with pytest.raises(UserError, match="logs are gone") as missing:
        job.result()
    assert "sys.exit" not in missing.value.message
    job.delete()
