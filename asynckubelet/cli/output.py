"""How a command meets the terminal and the process: consoles, logging, errors, the event loop.

What a command is for (pod output, tables, YAML) goes to stdout; progress, warnings, log
lines and errors go to stderr, so ``asynckubelet run pod.yaml > out.txt`` captures only
what the pod printed. A failure is one line, as kubectl words it (``error: ...``, ``Error
from server (NotFound): pods "web" not found``), and an exit code; a rejected manifest is
one line per field error. Every command is wrapped by :func:`command`, the one place that
maps the project's exceptions (:mod:`asynckubelet.errors`) and Typer's to them; the
command line's own usage errors come through :func:`usage_error`. An error no rule
foresaw is one line too, its traceback logged at debug level. Exit codes: 0 success, 1 a
failure, 2 a usage error, 128+N the signal N that stopped the command, and for ``run``
and ``exec`` the exit code of what they ran.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Iterator
from types import ModuleType
from typing import TYPE_CHECKING, Any, Generic, TextIO, TypeVar, TypeVarTuple, cast

import anyio
import typer
from typer._click import exceptions as click_errors

from asynckubelet import errors
from asynckubelet.cli.options import LOG_FORMATS, LOG_LEVELS, LogOptions, UsageError, expand

if TYPE_CHECKING:
    from rich.console import Console

    from asynckubelet.cli.console import Stdout


C = TypeVar("C")


class _OnFirstUse(Generic[C]):
    """An object made when it is first used: importing ``rich.console`` costs time and
    memory (docs/benchmarks.md), which a command that prints nothing (``serve``, while all
    is well) need not pay. An attribute set before the object is made is kept and set on it
    when it is made. ``stream`` names the standard stream the console writes to (see
    :func:`line`)."""

    __slots__ = ("_made", "_make", "_pending", "_stream")

    def __init__(self, make: Callable[[], C], stream: str) -> None:
        object.__setattr__(self, "_make", make)
        object.__setattr__(self, "_made", None)
        object.__setattr__(self, "_pending", {})
        object.__setattr__(self, "_stream", stream)

    def _get(self) -> C:
        made: C | None = object.__getattribute__(self, "_made")
        if made is None:
            made = object.__getattribute__(self, "_make")()
            pending: dict[str, Any] = object.__getattribute__(self, "_pending")
            for name, value in pending.items():
                setattr(made, name, value)
            pending.clear()
            object.__setattr__(self, "_made", made)
        return made

    def __getattr__(self, name: str) -> Any:
        pending: dict[str, Any] = object.__getattribute__(self, "_pending")
        if name in pending:
            return pending[name]
        return getattr(self._get(), name)

    def __setattr__(self, name: str, value: Any) -> None:
        made = object.__getattribute__(self, "_made")
        if made is None:
            object.__getattribute__(self, "_pending")[name] = value
        else:
            setattr(made, name, value)

    def __delattr__(self, name: str) -> None:
        pending: dict[str, Any] = object.__getattribute__(self, "_pending")
        if name in pending:
            del pending[name]
            return
        delattr(self._get(), name)


def made(console: C) -> C:
    """The console itself behind :data:`out` or :data:`err`, made now: for what needs the
    rich object, not its attributes (a live display enters it as a context)."""
    if isinstance(console, _OnFirstUse):
        made_now: C = console._get()
        return made_now
    return console


def _stdout() -> Stdout:
    from asynckubelet.cli.console import Stdout

    return Stdout(highlight=False, soft_wrap=True, emoji=False)


def _stderr() -> Console:
    from rich.console import Console

    return Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)


out = cast("Stdout", _OnFirstUse(_stdout, "stdout"))
"""Standard output (:class:`~asynckubelet.cli.console.Stdout`)."""
err = cast("Console", _OnFirstUse(_stderr, "stderr"))
"""Standard error, a rich console."""


_CONTROL_CODES = dict.fromkeys((0x07, 0x08, 0x0B, 0x0C, 0x0D))
"""What rich leaves out of text it prints: bell, backspace, vertical tab, form feed and
carriage return."""


def _plain_stream(console: object) -> TextIO | None:
    """The stream of :data:`out` or :data:`err` when rich, asked, would find it is not a
    terminal: the stream is no TTY, and neither ``FORCE_COLOR`` nor ``TTY_COMPATIBLE``
    (which rich obeys first) is set. None when rich must answer: the console is made
    already, or is another, or the stream is (or may claim to be) a terminal."""
    if not isinstance(console, _OnFirstUse):
        return None
    if object.__getattribute__(console, "_made") is not None:
        return None
    if os.environ.get("FORCE_COLOR") is not None or os.environ.get("TTY_COMPATIBLE"):
        return None
    name = object.__getattribute__(console, "_stream")
    stream: TextIO = sys.stdout if name == "stdout" else sys.stderr
    try:
        return None if stream.isatty() else stream
    except (AttributeError, ValueError):
        return None


def is_terminal(console: Console) -> bool:
    """``console.is_terminal``, without making :data:`out` or :data:`err` for the answer
    where the stream is plainly not a terminal."""
    if _plain_stream(console) is not None:
        return False
    return bool(console.is_terminal)


_open_line: tuple[object, Console] | None = None
"""Who left a line open (printed a piece of a pod's line without its newline), and on
which console."""


def open_line() -> object | None:
    """Who left the line open, or None when every line printed has ended."""
    return _open_line[0] if _open_line is not None else None


def end_open_line(*, keep: object | None = None) -> None:
    """End the line left open with its newline, unless ``keep`` left it open."""
    global _open_line
    if _open_line is None or (keep is not None and _open_line[0] == keep):
        return
    _, console = _open_line
    _open_line = None
    _print(console, "", style=None, end="\n")


def hold_open(owner: object, console: Console) -> None:
    """``owner`` printed a line on ``console`` without its newline, by its own means."""
    global _open_line
    _open_line = (owner, console)


def line(
    console: Console,
    text: str,
    *,
    style: str | None = None,
    end: str = "\n",
    owner: object | None = None,
) -> None:
    """``text`` as one line on ``console``, as it is (never read as markup: a backslash
    before a bracket stays), in ``style`` where styles show.

    A line left open by another owner is ended first. With ``end=""`` the line is left
    open for ``owner``, who may go on with it (a pod's line printed a piece at a time);
    any other line printed here ends it.

    Where the console's stream is not a terminal, rich prints such a line as the text
    without its control codes (:data:`_CONTROL_CODES`), tabs expanded to its tab stops;
    a line without a tab is written here so, without importing rich (a fifth of what
    ``run`` imports) for it. A reader that went away (``| head``) is the console's to
    handle, as when rich writes."""
    global _open_line
    end_open_line(keep=owner)
    _open_line = None if end else (owner, console)
    _print(console, text, style=style, end=end)


def _print(console: Console, text: str, *, style: str | None, end: str) -> None:
    stream = _plain_stream(console)
    if stream is None or "\t" in text:
        from rich.text import Text

        console.print(Text(text, style=style or ""), highlight=False, end=end)
        return
    try:
        stream.write(text.translate(_CONTROL_CODES) + end)
        stream.flush()
    except BrokenPipeError:
        made(console).on_broken_pipe()


def say(text: str) -> None:
    """``text`` as it is, a line on stderr: what ``serve`` prints once it is up, without
    importing rich for it."""
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def escape(text: str) -> str:
    """``text`` with what rich would read as markup escaped."""
    from rich.markup import escape as rich_escape

    return rich_escape(text)


R = TypeVar("R")
T = TypeVar("T")
Ts = TypeVarTuple("Ts")


def warn(message: str) -> None:
    err.print(f"[yellow]warning:[/yellow] {escape(message)}")


def fail(message: str) -> typer.TyperException:
    """The error a command raises to end with ``error: <message>``, exit 1 (a usage error,
    exit 2, is an :class:`~asynckubelet.cli.options.UsageError`)."""
    return typer.TyperException(message)


def not_found(kind: str, message: str) -> typer.Exit:
    """kubectl's ``Error from server (<kind>): <message>``, exit 1."""
    err.print(f"Error from server ({kind}): {escape(message)}")
    return typer.Exit(1)


@contextlib.contextmanager
def reported_errors(*, not_found_as: str | None = None) -> Iterator[None]:
    """Turn a failure into its line on stderr and the exit code.

    A missing pod is kubectl's ``Error from server (NotFound): pods "web" not found``, a
    container the pod does not have ``error: container c is not valid for pod web:
    choose one of: [a b]``; ``not_found_as`` reports any other
    :class:`~asynckubelet.errors.NotFound` as ``Error from server (<reason>)``
    (``BadRequest`` for a container instance that is not there). Failures inside a task
    group arrive as an exception group: each is reported, and the first one's exit code
    is the command's. Anything else (a bug) is one line naming its type, its traceback
    logged at debug level (``--log-level debug``).
    """
    try:
        yield
    except KeyboardInterrupt:
        raise typer.Exit(128 + signal.SIGINT) from None
    except (typer.Exit, typer.Abort):
        raise
    except Exception as e:
        codes = [_report(f, not_found_as=not_found_as) for f in _leaves(e)]
        raise typer.Exit(codes[0]) from None


REPORTED = (typer.TyperException, errors.AsyncKubeletError, OSError)
"""The failures reported as a message: the command line's own, the project's, the system's."""


def _leaves(error: BaseException) -> list[BaseException]:
    if not isinstance(error, BaseExceptionGroup):
        return [error]
    return [leaf for inner in error.exceptions for leaf in _leaves(inner)]


def _report(failure: BaseException, *, not_found_as: str | None) -> int:
    """Print the failure's line (a rejected manifest's: one per field error); its exit
    code."""
    if isinstance(failure, errors.ContainerNotValid):
        err.print(f"[red]error:[/red] {escape(str(failure))}")
        return 1
    if isinstance(failure, errors.PodNotFound):
        err.print(f"Error from server (NotFound): {escape(str(failure))}")
        return 1
    if isinstance(failure, errors.ManifestError) and failure.errors:
        for problem in failure.errors:
            source = f"{problem.source}: " if problem.source else ""
            err.print(f"[red]error:[/red] {escape(source + str(problem))}")
        return 1
    if isinstance(failure, errors.NotFound) and not_found_as is not None:
        err.print(f"Error from server ({not_found_as}): {escape(str(failure))}")
        return 1
    if isinstance(failure, errors.DaemonError) and failure.reason:
        err.print(f"Error from server ({failure.reason}): {escape(str(failure))}")
        return 1
    if isinstance(failure, typer.TyperException):
        err.print(f"[red]error:[/red] {escape(failure.format_message())}")
        return failure.exit_code
    if not isinstance(failure, REPORTED):
        from asynckubelet._logging import logger

        logger.opt(exception=failure).debug("unexpected error")
        text = f"{type(failure).__name__}: {failure}".rstrip(": ")
        err.print(f"[red]error:[/red] {escape(one_line(text))} (--log-level debug shows where)")
        return 1
    err.print(f"[red]error:[/red] {escape(one_line(str(failure)))}")
    return 1


def one_line(text: str) -> str:
    """``text`` with its line breaks folded, so a failure stays one line."""
    return "; ".join(part.strip() for part in text.splitlines() if part.strip())


def usage_error(error: click_errors.ClickException) -> int:
    """Print a usage error of the command line (an unknown flag or command, a missing or
    bad argument) as one line, kubectl's way where it has one; its exit code."""
    import re

    message = error.format_message()
    if isinstance(error, click_errors.NoSuchOption):
        message = f"unknown flag: {error.option_name}"
    elif found := re.match(r"No such command '(.*)'\.(.*)", message, re.DOTALL):
        message = f'unknown command "{found.group(1)}"'
        if found.group(2).strip():
            message += f" ({found.group(2).strip()[:1].lower()}{found.group(2).strip()[1:]})"
    else:
        message = message[:1].lower() + message[1:]
    message = message.rstrip(".")
    context = getattr(error, "ctx", None)
    hint = f"; see '{context.command_path} --help'" if context is not None else ""
    err.print(f"[red]error:[/red] {escape(one_line(message))}{escape(hint)}")
    return error.exit_code


def command(
    *, not_found_as: str | None = None, log_default: str = "WARNING"
) -> Callable[[Callable[..., R]], Callable[..., R]]:
    """Make a function a command: its option groups expanded (:func:`options.expand`),
    logging set up from its :class:`LogOptions` before it runs, its failures reported."""

    def decorate(function: Callable[..., R]) -> Callable[..., R]:
        @functools.wraps(function)
        def logged(**values: Any) -> R:
            for value in values.values():
                if isinstance(value, LogOptions):
                    setup_logging(value, default=log_default)
            return function(**values)

        expanded = expand(logged)

        @functools.wraps(expanded)
        def run(**values: Any) -> R:
            with reported_errors(not_found_as=not_found_as):
                return expanded(**values)

        return run

    return decorate


def run_async(function: Callable[[*Ts], Awaitable[T]], *args: *Ts) -> T:
    """Run a command's coroutine function to its end on asyncio (anyio), the cyclic garbage
    collector running again (:func:`asynckubelet.cli.process.release_collector`)."""
    from asynckubelet.cli.process import release_collector

    release_collector()
    return anyio.run(function, *args)


async def first_signal() -> int:
    """Wait for SIGINT or SIGTERM; the signal's number."""
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            return int(signum)
    raise AssertionError("the signal receiver ended")


@contextlib.contextmanager
def exit_on_signals() -> Iterator[None]:
    """Around blocking work: SIGINT or SIGTERM ends the command with exit code 128+N."""

    def stop(signum: int, _frame: object) -> None:
        raise typer.Exit(128 + signum)

    previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


@contextlib.contextmanager
def interrupt_on_signals() -> Iterator[None]:
    """Around work that ends on Ctrl-C by ``KeyboardInterrupt``: SIGINT and SIGTERM raise
    it, whatever the process inherited (a shell's background job, and so many CI runners,
    start it with SIGINT ignored, where Python's own handler is never installed)."""

    def interrupted(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    previous = {s: signal.signal(s, interrupted) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


async def stopped_by_signal(function: Callable[[*Ts], Awaitable[object]], *args: *Ts) -> int | None:
    """Run ``function`` until it returns or SIGINT/SIGTERM arrives; that signal's number,
    else None. The signal cancels the function through its task group's scope, which anyio
    keeps delivering until the function has stopped, whatever await it is in."""
    received: list[int] = []
    async with anyio.create_task_group() as tg:

        async def watch() -> None:
            received.append(await first_signal())
            tg.cancel_scope.cancel()

        tg.start_soon(watch, name="signals")
        await function(*args)
        tg.cancel_scope.cancel()
    return received[0] if received else None


# -- logging ---------------------------------------------------------------------------------

global_logging = LogOptions()
"""``--log-level``/``--log-format`` before the command, or their environment variables."""


def set_global_logging(*, log_level: str | None, log_format: str | None) -> None:
    global global_logging
    global_logging = LogOptions(log_level=log_level, log_format=log_format)


def setup_logging(options: LogOptions, *, default: str = "WARNING") -> None:
    """Log to stderr at the chosen level and format. The command's own flags come first
    (``-v``: INFO, ``-vv``: DEBUG), then those before the command or the environment.

    The sink is added when loguru is imported (at once if it is): a command whose work
    logs nothing never imports it."""
    from asynckubelet import _imports

    level = options.log_level
    if level is None and options.verbose:
        level = "DEBUG" if options.verbose > 1 else "INFO"
    level = (level or global_logging.log_level or default).upper()
    form = (options.log_format or global_logging.log_format or "text").lower()
    if level not in LOG_LEVELS:
        raise UsageError(f"--log-level must be DEBUG, INFO, WARNING or ERROR, not {level!r}")
    if form not in LOG_FORMATS:
        raise UsageError(f"--log-format must be text or json, not {form!r}")
    from asynckubelet import _logging

    _logging.set_threshold(level)
    _imports.when_imported("loguru", functools.partial(_log_to_stderr, level=level, form=form))


def _log_to_stderr(loguru: ModuleType, *, level: str, form: str) -> None:
    from asynckubelet.cli.logsetup import add_sink

    logger = loguru.logger
    logger.remove()
    logger.enable("asynckubelet")
    if form == "json":
        add_sink(json_sink, level=level)
    else:
        add_sink(text_sink, level=level, colorize=sys.stderr.isatty())


def json_sink(message: Any) -> None:
    """One JSON object per line: time, level, message, then the bound context (pod...)."""
    import json
    import traceback

    record = message.record
    entry: dict[str, Any] = {
        "time": record["time"].isoformat(),
        "level": record["level"].name,
        "message": record["message"],
    }
    entry.update({k: v for k, v in record["extra"].items() if v is not None})
    entry["logger"] = record["name"]
    if record["exception"] is not None:
        kind, value, tb = record["exception"]
        entry["exception"] = "".join(traceback.format_exception(kind, value, tb))
    sys.stderr.write(json.dumps(entry, default=str) + "\n")
    sys.stderr.flush()


def text_sink(message: Any) -> None:
    """To whatever ``sys.stderr`` is at the time: a live display replaces it while it runs."""
    sys.stderr.write(message)
