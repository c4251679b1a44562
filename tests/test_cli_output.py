"""The one error wrapper of every command: a failure is one message on stderr and an exit
code (the project's errors 1, usage errors 2, a NotFound as kubectl's ``Error from
server``), also when it comes out of a task group; a bug keeps its traceback."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest
import typer
from typer.testing import CliRunner

from asynckubelet import errors
from asynckubelet.cli import output
from asynckubelet.cli.options import LogOptions, UsageError


def invoke(fail: Callable[[], Any], *, not_found_as: str | None = None) -> Any:
    app = typer.Typer()

    @app.command()
    @output.command(not_found_as=not_found_as)
    def cmd(*, log: LogOptions) -> None:
        fail()

    return CliRunner().invoke(app, [])


def raising(error: BaseException) -> Callable[[], None]:
    def fail() -> None:
        raise error

    return fail


def in_a_task_group(*failures: Exception) -> Callable[[], None]:
    """A command whose task group's tasks each end with one of ``failures``."""

    async def failing(error: Exception) -> None:
        with anyio.CancelScope(shield=True):
            await anyio.sleep(0.01)
        raise error

    async def go() -> None:
        async with anyio.create_task_group() as tg:
            for failure in failures:
                tg.start_soon(failing, failure)

    return lambda: output.run_async(go)


@pytest.mark.parametrize(
    ("error", "code", "message"),
    [
        (errors.PodError("pod/web failed"), 1, "error: pod/web failed\n"),
        (errors.NotFound('pods "web" not found'), 1, 'error: pods "web" not found\n'),
        (OSError("disk full"), 1, "error: disk full\n"),
        (UsageError("--output must be text or json"), 2, "error: --output must be text or json\n"),
        (output.fail("no Pod found"), 1, "error: no Pod found\n"),
    ],
)
def test_a_failure_is_one_message_and_its_exit_code(
    error: Exception, code: int, message: str
) -> None:
    result = invoke(raising(error))
    assert (result.exit_code, result.stderr) == (code, message)


def test_a_message_is_printed_as_it_is_with_no_emoji_codes_replaced() -> None:
    """A name or a message holding ``:smile:`` is shown verbatim (markup is escaped, and
    emoji codes are not markup)."""
    result = invoke(raising(errors.ManifestError('pod "a:smile:b" has :100: problems')))
    assert result.stderr == 'error: pod "a:smile:b" has :100: problems\n'


def test_not_found_is_reported_as_kubectl_reports_it_where_the_command_asks() -> None:
    result = invoke(raising(errors.NotFound("container c is not valid")), not_found_as="BadRequest")
    assert (result.exit_code, result.stderr) == (
        1,
        "Error from server (BadRequest): container c is not valid\n",
    )


def test_a_failure_inside_a_task_group_is_reported_like_any_other() -> None:
    result = invoke(in_a_task_group(errors.NotFound("gone")), not_found_as="NotFound")
    assert (result.exit_code, result.stderr) == (1, "Error from server (NotFound): gone\n")


def test_several_failures_of_a_task_group_are_each_reported() -> None:
    result = invoke(in_a_task_group(errors.PodError("first"), UsageError("second")))
    assert result.exit_code in (1, 2)
    assert sorted(result.stderr.splitlines()) == ["error: first", "error: second"]


def test_a_bug_is_one_line_naming_its_type_never_a_traceback() -> None:
    result = invoke(raising(ValueError("a bug")))
    assert (result.exit_code, result.stderr) == (
        1,
        "error: ValueError: a bug (--log-level debug shows where)\n",
    )


def test_an_interrupt_exits_130() -> None:
    assert invoke(raising(KeyboardInterrupt())).exit_code == 130


def test_the_command_sets_the_exit_code_it_chose() -> None:
    assert invoke(raising(typer.Exit(7))).exit_code == 7
