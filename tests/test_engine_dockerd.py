"""The private dockerd's name is its containerd namespace, checked before anything starts;
two of ours never start at once (they would race on the host's firewall chains)."""

from __future__ import annotations

import fcntl
import os
import threading
import time
from pathlib import Path

import pytest

from asynckubelet import errors
from asynckubelet.docker import engine
from asynckubelet.docker.engine import Dockerd, start_lock


@pytest.mark.parametrize("name", ["akl", "asynckubelet", "akltest-0f3a9c1e", "a.b_c-d", "x" * 68])
def test_a_containerd_namespace_name_is_accepted(name: str, tmp_path: Path) -> None:
    daemon = Dockerd(root=tmp_path, name=name)
    assert ["--containerd-namespace", name] == daemon.args()[-4:-2]


@pytest.mark.parametrize(
    "name", ["akltest-_ll5m5_b", "akltest-", "-akl", "a--b", "a b", "", "x" * 69, "akl/x"]
)
def test_a_name_containerd_would_refuse_is_refused_before_start(name: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not a valid containerd namespace"):
        Dockerd(root=tmp_path, name=name)


def _held(path: Path) -> bool:
    """Whether some open file holds ``path``'s lock (asked from a file of its own)."""
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def test_the_start_lock_makes_a_second_holder_wait_until_the_first_lets_go(
    tmp_path: Path,
) -> None:
    lock = tmp_path / "run" / "start.lock"
    order: list[str] = []
    with start_lock(lock, timeout=5):
        assert _held(lock)
        second = threading.Thread(target=lambda: _take(lock, order))
        second.start()
        time.sleep(0.3)
        order.append("first lets go")
    second.join(timeout=5)
    assert order == ["first lets go", "second holds"]
    assert not _held(lock)


def _take(lock: Path, order: list[str]) -> None:
    with start_lock(lock, timeout=5):
        order.append("second holds")


def test_a_lock_held_too_long_is_an_error_naming_it(tmp_path: Path) -> None:
    lock = tmp_path / "start.lock"
    with (
        start_lock(lock, timeout=5),
        pytest.raises(errors.RuntimeUnavailable) as e,
        start_lock(lock, timeout=0.2),
    ):
        pass
    assert "another Docker engine of ours has been starting" in str(e.value)
    assert str(lock) in str(e.value)


def test_dockerd_starts_holding_the_lock_until_it_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lock is held from the daemon's start until its socket answers, and let go
    whether the start succeeds or fails."""
    lock = tmp_path / "start.lock"
    seen: list[bool] = []

    class Started:
        pid = 4242

        def __init__(self, *_args: object, **_kwargs: object) -> None:
            seen.append(_held(lock))

        def poll(self) -> int | None:
            return None

    def answers(_socket: Path) -> bool:
        seen.append(_held(lock))
        return len(seen) >= 3

    monkeypatch.setattr("asynckubelet.docker.engine.shutil.which", lambda _n: "/usr/bin/dockerd")
    monkeypatch.setattr("asynckubelet.docker.engine.os.geteuid", lambda: 0)
    monkeypatch.setattr("asynckubelet.docker.engine.subprocess.Popen", Started)
    monkeypatch.setattr(engine, "api_answers", answers)
    Dockerd(root=tmp_path / "d", name="akltest-lock", lock=lock).start(timeout=5)
    assert seen == [True, True, True]
    assert not _held(lock)
