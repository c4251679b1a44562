"""``run`` and ``serve`` start the project's own Docker engine, announced in one line, only
when none answers, none was named, and this machine can start one."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from asynckubelet.cli import provision
from asynckubelet.docker import engine


class FakeDaemon:
    url = "unix:///run/asynckubelet/docker.sock"
    root = Path("/var/lib/asynckubelet/engine")
    log = root / "dockerd.log"

    def __init__(self) -> None:
        self.started = 0

    def start(self) -> None:
        self.started += 1


@pytest.fixture
def daemon(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> FakeDaemon:
    fake = FakeDaemon()
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.setattr(engine, "DEFAULT_SOCKET", tmp_path / "none.sock")
    monkeypatch.setattr(engine, "OWN_ENGINE_SOCKET", tmp_path / "own.sock")
    monkeypatch.setattr(engine, "own_engine", lambda: fake)
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(shutil, "which", lambda name: f"/usr/bin/{name}")
    return fake


def test_no_engine_answering_starts_ours_and_says_so_in_one_line(daemon: FakeDaemon) -> None:
    said: list[str] = []
    provision.ensure_engine(None, say=said.append)
    assert daemon.started == 1
    assert said == [
        "no Docker engine answers; starting one at unix:///run/asynckubelet/docker.sock "
        "(data /var/lib/asynckubelet/engine, log /var/lib/asynckubelet/engine/dockerd.log; "
        "`asynckubelet engine stop` stops it)"
    ]


@pytest.mark.parametrize("named", ["--docker-host", "DOCKER_HOST"])
def test_an_engine_the_user_named_is_never_replaced(
    daemon: FakeDaemon, monkeypatch: pytest.MonkeyPatch, named: str
) -> None:
    host = "unix:///nowhere.sock"
    if named == "DOCKER_HOST":
        monkeypatch.setenv("DOCKER_HOST", host)
    provision.ensure_engine(host if named == "--docker-host" else None, say=print)
    assert daemon.started == 0


def test_an_engine_that_answers_is_used(
    daemon: FakeDaemon, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(engine, "resolve_docker_url", lambda url=None: "unix:///x.sock")
    monkeypatch.setattr(engine, "api_answers", lambda path, timeout=2.0: True)
    provision.ensure_engine(None, say=print)
    assert daemon.started == 0


def test_without_root_nothing_is_started(
    daemon: FakeDaemon, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    provision.ensure_engine(None, say=print)
    assert daemon.started == 0
