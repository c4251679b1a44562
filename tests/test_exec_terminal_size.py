"""``exec -it`` and ``attach -it`` give the remote command the size of the terminal they
are attached to, as kubectl does: the terminal's own, not ``COLUMNS``/``LINES`` that a
parent process set for the width of its output (pytest-xdist's workers set 80x24)."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import termios
from collections.abc import Iterator

import pytest

from asynckubelet.cli.commands.exec import terminal_size


@pytest.fixture
def terminal() -> Iterator[int]:
    """The far end of a pseudo-terminal of 33 rows and 111 columns."""
    controller, far = pty.openpty()
    fcntl.ioctl(far, termios.TIOCSWINSZ, struct.pack("HHHH", 33, 111, 0, 0))
    yield far
    os.close(far)
    os.close(controller)


def test_the_terminals_own_size_wins_over_columns_and_lines(
    terminal: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("LINES", "24")
    with open(terminal, "w", closefd=False) as out:
        monkeypatch.setattr("sys.stdout", out)
        assert terminal_size() == (33, 111)


def test_stdin_tells_when_stdout_is_not_a_terminal(
    terminal: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    with open(os.devnull, "w") as out, open(terminal, closefd=False) as into:
        monkeypatch.setattr("sys.stdout", out)
        monkeypatch.setattr("sys.stdin", into)
        assert terminal_size() == (33, 111)


def test_without_a_terminal_columns_and_lines_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "101")
    monkeypatch.setenv("LINES", "42")
    with open(os.devnull, "w") as out, open(os.devnull) as into:
        monkeypatch.setattr("sys.stdout", out)
        monkeypatch.setattr("sys.stdin", into)
        assert terminal_size() == (42, 101)
