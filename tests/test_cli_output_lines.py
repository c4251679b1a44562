"""Plain lines on a stream that is no terminal (a pipe, a CI log, a file): the command
line writes them itself, byte for byte what its rich console would print there, and
leaves anything else (a terminal, a forced colour, a tab to expand) to rich."""

from __future__ import annotations

import io
import random
import subprocess
import sys

import pytest
from output_helpers import RENDERER, REPO, child
from rich.console import Console
from rich.text import Text

from asynckubelet.cli import output

ALPHABET = [
    *(chr(i) for i in range(0x80) if chr(i) != "\t"),
    *"é漢字🙂\u0301\u200b\u2028\u2029\x85\xa0\ufeff\U0001f468\u200d\U0001f469",
    "[red]",
    "[/]",
    "[dim]",
    "[/dim]",
    ":smile:",
    "[link=x]",
    "  ",
]


def texts(count: int, *, seed: int, longest: int = 300) -> list[str]:
    rng = random.Random(seed)  # noqa: S311  (a repeatable corpus, not a secret)
    return [
        "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, longest))) for _ in range(count)
    ]


class Pipe(io.StringIO):
    """A stream that is no terminal."""


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def rich_prints(text: str, *, style: str = "", env: dict[str, str] | None = None) -> str:
    """What the command line's console prints of ``text`` on a stream that is no TTY."""
    stream = Pipe()
    console = Console(file=stream, highlight=False, soft_wrap=True, emoji=False, _environ=env or {})
    console.print(Text(text, style=style), highlight=False)
    return stream.getvalue()


@pytest.fixture
def pipes(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> pytest.CaptureFixture[str]:
    """stdout and stderr are pipes (pytest's capture): no TTY, nothing forcing colour."""
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)
    assert not sys.stdout.isatty()
    assert not sys.stderr.isatty()
    return capsys


def fresh(stream: str) -> output._OnFirstUse[Console]:
    def make() -> Console:
        return Console(stderr=stream == "stderr", highlight=False, soft_wrap=True, emoji=False)

    return output._OnFirstUse(make, stream)


def is_made(console: output._OnFirstUse[Console]) -> bool:
    return object.__getattribute__(console, "_made") is not None


def test_a_line_on_a_pipe_is_byte_for_byte_what_rich_prints_there(
    pipes: pytest.CaptureFixture[str],
) -> None:
    console = fresh("stdout")
    corpus = texts(2000, seed=1)
    for text in corpus:
        output.line(console, text)  # type: ignore[arg-type]
    assert pipes.readouterr().out == "".join(rich_prints(t) for t in corpus)
    assert not is_made(console), "rich made a console for plain lines"


def test_a_styled_line_on_a_pipe_is_what_rich_prints_of_it(
    pipes: pytest.CaptureFixture[str],
) -> None:
    console = fresh("stderr")
    corpus = [*texts(2000, seed=2), "C:\\[x]", "\\[y", "ends in \\", "[dim]"]
    for text in corpus:
        output.line(console, text, style="dim")  # type: ignore[arg-type]
    assert pipes.readouterr().err == "".join(rich_prints(t, style="dim") for t in corpus)
    assert not is_made(console)


def test_a_line_keeps_its_backslashes_and_brackets(pipes: pytest.CaptureFixture[str]) -> None:
    output.line(fresh("stderr"), "Failed: \\[y [red]x[/red] C:\\", style="dim")  # type: ignore[arg-type]
    assert pipes.readouterr().err == "Failed: \\[y [red]x[/red] C:\\\n"


def test_a_styled_line_on_a_terminal_keeps_its_backslashes_and_brackets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Never read as markup, where rich's escaping loses a backslash before a bracket
    that opens no tag and doubles a last one."""
    monkeypatch.setenv("FORCE_COLOR", "1")
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    output.line(fresh("stderr"), "Failed: \\[y [red]x[/red] C:\\", style="red")  # type: ignore[arg-type]
    assert terminal.getvalue() == "\x1b[31mFailed: \\[y [red]x[/red] C:\\\x1b[0m\n"


def test_a_line_with_a_tab_is_rich_s_with_its_tabs_expanded(
    pipes: pytest.CaptureFixture[str],
) -> None:
    console = fresh("stdout")
    output.line(console, "漢\tx\ty")  # type: ignore[arg-type]
    assert pipes.readouterr().out == rich_prints("漢\tx\ty") == "漢      x       y\n"
    assert is_made(console)


@pytest.mark.parametrize("variable", ["FORCE_COLOR", "TTY_COMPATIBLE"])
def test_a_variable_rich_obeys_first_leaves_the_line_to_rich(
    pipes: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    monkeypatch.setenv(variable, "1")
    console = fresh("stdout")
    assert output.is_terminal(console)  # type: ignore[arg-type]
    output.line(console, "web", style="red")  # type: ignore[arg-type]
    assert pipes.readouterr().out == "\x1b[31mweb\x1b[0m\n"


def test_a_terminal_is_rich_s(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    console = fresh("stderr")
    assert output.is_terminal(console)  # type: ignore[arg-type]
    output.line(console, "web", style="red")  # type: ignore[arg-type]
    assert is_made(console)
    assert "\x1b[" in terminal.getvalue()


def test_a_pipe_is_no_terminal_and_the_console_is_not_made_to_say_so(
    pipes: pytest.CaptureFixture[str],
) -> None:
    console = fresh("stdout")
    assert not output.is_terminal(console)  # type: ignore[arg-type]
    assert not is_made(console)


def test_an_attribute_set_before_the_console_is_made_is_set_on_it() -> None:
    console = fresh("stdout")
    console.quiet = True
    assert console.quiet is True
    assert not is_made(console)
    assert object.__getattribute__(console, "_get")().quiet is True
    console.quiet = False
    assert object.__getattribute__(console, "_get")().quiet is False


def test_a_reader_that_goes_away_from_plain_lines_calls_the_commands_handler() -> None:
    """The pipe's reader closes it: the writes fail, and ``on_closed`` (the command's way
    of ending quietly, as with rich's writes) is called once, its later lines going
    nowhere."""
    code = (
        "import sys\n"
        "from asynckubelet.cli import output\n"
        "closed = []\n"
        "output.out.on_closed = lambda: closed.append(1)\n"
        "while not closed:\n"
        "    output.line(output.out, 'x' * 200)\n"
        "output.line(output.out, 'after')\n"
        "print(len(closed), 'rich.console' in sys.modules, file=sys.stderr)\n"
    )
    with subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
        env={"PYTHONPATH": str(REPO)},
    ) as proc:
        assert proc.stdout is not None
        assert proc.stderr is not None
        assert proc.stdout.read(1) == b"x"
        proc.stdout.close()
        said = proc.stderr.read().decode()
        assert proc.wait(timeout=60) == 0, said
    assert said.split() == ["1", "True"]


def test_runs_status_and_output_lines_on_pipes_load_no_rich() -> None:
    """``run`` with its output piped (CI): status lines and the pods' output, written
    without rich, which a run then never imports; a waiting reason once, with its
    container and message."""
    code = RENDERER + (
        "import sys\n"
        "from lightkube.models.core_v1 import (\n"
        "    ContainerState, ContainerStateWaiting, ContainerStatus, PodStatus)\n"
        "waiting = ContainerStateWaiting(reason='ErrImagePull', message='no such image\\r')\n"
        "status = PodStatus(phase='Pending', containerStatuses=[ContainerStatus(\n"
        "    name='app', image='busybox', imageID='', ready=False, restartCount=0,\n"
        "    state=ContainerState(waiting=waiting))])\n"
        "renderer.status(pod, status)\n"
        "renderer.log(pod, 'app', LogLine(stream='stdout', text='[b]hello[/b]\\x07'))\n"
        "renderer.log(pod, 'app', LogLine(stream='stderr', text='oops'))\n"
        "print('rich' in sys.modules, file=sys.stderr)\n"
    )
    result = child(code)
    assert result.stdout == "web/app | [b]hello[/b]\n"
    assert result.stderr.splitlines() == [
        "pod/web/app: ErrImagePull: no such image",
        "web/app | oops",
        "False",
    ]


def test_runs_coloured_output_keeps_the_pods_text_as_it_is() -> None:
    """On a terminal (here: ``FORCE_COLOR``) the prefix is coloured and the pod's text is
    printed as it is, brackets and backslashes included."""
    code = RENDERER + (
        "renderer.log(pod, 'app', LogLine(stream='stdout', text='\\\\[y [b]x[/b] C:\\\\'))\n"
    )
    result = child(code, FORCE_COLOR="1")
    assert result.stdout == "\x1b[36mweb/app\x1b[0m | \\[y [b]x[/b] C:\\\n"
