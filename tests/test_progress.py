"""Pull and wait progress: plain lines off a terminal, a display redrawn in place on one."""

from __future__ import annotations

import io
from typing import Any

import pytest
from rich.console import Console

from asynckubelet import errors
from asynckubelet.cli.progress import PullDisplay, WaitDisplay
from asynckubelet.docker import PullProgress
from asynckubelet.runtime.images import ImageManager
from asynckubelet.testing import FakeDocker

pytestmark = pytest.mark.anyio

IMAGE = "127.0.0.1:5000/app:1.0"
STREAM = [
    PullProgress(layer="", status="Pulling from app"),
    PullProgress(layer="3f4d", status="Pulling fs layer"),
    PullProgress(layer="3f4d", status="Downloading", current=100, total=1000),
    PullProgress(layer="3f4d", status="Downloading", current=500, total=1000),
    PullProgress(layer="3f4d", status="Downloading", current=1000, total=1000),
    PullProgress(layer="3f4d", status="Download complete"),
    PullProgress(layer="3f4d", status="Extracting", current=200, total=1000),
    PullProgress(layer="3f4d", status="Extracting", current=1000, total=1000),
    PullProgress(layer="3f4d", status="Pull complete"),
]


def plain(lines: list[str]) -> PullDisplay:
    return PullDisplay(
        console=Console(file=io.StringIO()), live=False, write=lambda i, t: lines.append(t)
    )


def test_plain_pull_lines_come_once_per_change_of_a_layers_state() -> None:
    lines: list[str] = []
    display = plain(lines)
    display.pull_started(IMAGE)
    for p in STREAM:
        display.pull_progress(IMAGE, p)
    display.pull_finished(IMAGE, None)
    assert lines == [
        "pulling",
        "Pulling from app",
        "3f4d: Pulling fs layer",
        "3f4d: Downloading 100/1000 bytes",
        "3f4d: Download complete",
        "3f4d: Extracting 200/1000 bytes",
        "3f4d: Pull complete",
        "pulled",
    ]


def test_a_failed_pull_ends_with_the_error() -> None:
    lines: list[str] = []
    display = plain(lines)
    display.pull_started(IMAGE)
    display.pull_finished(IMAGE, "manifest unknown")
    assert lines[-1] == "failed: manifest unknown"


def test_the_plain_lines_carry_no_carriage_return() -> None:
    buffer = io.StringIO()
    display = PullDisplay(console=Console(file=buffer, width=200), live=False)
    display.pull_started(IMAGE)
    for p in STREAM:
        display.pull_progress(IMAGE, p)
    display.pull_finished(IMAGE, None)
    text = buffer.getvalue()
    assert "\r" not in text
    assert "\x1b" not in text
    assert f"{IMAGE}: 3f4d: Pull complete" in text.splitlines()


def test_on_a_terminal_the_layers_are_redrawn_in_place() -> None:
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, width=120)
    display = PullDisplay(console=console, live=True)
    display.pull_started(IMAGE)
    for p in STREAM:
        display.pull_progress(IMAGE, p)
    display.pull_finished(IMAGE, None)
    text = buffer.getvalue()
    assert "3f4d" in text
    assert "Pull complete" in text
    assert "\x1b[2K" in text or "\x1b[1A" in text


def test_the_wait_display_prints_a_line_when_a_pods_reason_changes() -> None:
    lines: list[str] = []
    display = WaitDisplay(
        console=Console(file=io.StringIO()), live=False, write=lambda p, t: lines.append(f"{p} {t}")
    )
    display.update({"pod/web": "ContainerCreating"})
    display.update({"pod/web": "ContainerCreating"})
    display.update({"pod/web": "Running; containers with unready status: [a]"})
    assert lines == [
        "pod/web not ready: ContainerCreating",
        "pod/web not ready: Running; containers with unready status: [a]",
    ]


def test_the_wait_display_on_a_terminal_shows_every_pod_and_why() -> None:
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, width=120)
    with WaitDisplay(console=console, live=True) as display:
        display.update({"pod/web": "ContainerCreating", "pod/db": "not seen by the node yet"})
        display.update({"pod/db": "PodInitializing"})
    text = buffer.getvalue()
    assert "WAITING FOR" in text
    assert "pod/web" in text
    assert "PodInitializing" in text


def engine(*, fail: bool = False) -> FakeDocker:
    """An engine without the image, whose pull streams ``STREAM`` (or is denied)."""
    docker = FakeDocker()
    docker.pull_stream = list(STREAM)
    if fail:
        docker.fail(
            "pull_image",
            errors.ImagePullError(f'failed to pull image "{IMAGE}": denied', image=IMAGE),
        )
    return docker


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, object]] = []

    def pull_started(self, image: str) -> None:
        self.calls.append(("started", image, None))

    def pull_progress(self, image: str, progress: PullProgress) -> None:
        self.calls.append(("progress", image, progress.status))

    def pull_finished(self, image: str, error: str | None) -> None:
        self.calls.append(("finished", image, error))


async def test_the_image_manager_tells_its_listener_each_pulls_start_progress_and_end() -> None:
    recorder = Recorder()
    images = ImageManager(engine(), listener=recorder)
    await images.ensure(IMAGE, policy="IfNotPresent")
    assert recorder.calls[0] == ("started", IMAGE, None)
    assert [c[2] for c in recorder.calls[1:-1]] == [p.status for p in STREAM]
    assert recorder.calls[-1] == ("finished", IMAGE, None)


async def test_a_failed_pull_reaches_the_listener_with_its_error() -> None:
    recorder = Recorder()
    images = ImageManager(engine(fail=True), listener=recorder)
    with pytest.raises(errors.ImagePullError):
        await images.ensure(IMAGE, policy="IfNotPresent")
    assert recorder.calls[-1] == ("finished", IMAGE, f'failed to pull image "{IMAGE}": denied')


@pytest.mark.parametrize(
    ("item", "expected"),
    [
        (
            {"status": "Downloading", "progressDetail": {"current": 5, "total": 9}, "id": "ab"},
            PullProgress(layer="ab", status="Downloading", current=5, total=9),
        ),
        (
            {"status": "Pulling fs layer", "progressDetail": {}, "id": "ab"},
            PullProgress(layer="ab", status="Pulling fs layer"),
        ),
        (
            {"status": "Pulling from akltest/app", "id": "1.0"},
            PullProgress(layer="", status="Pulling from akltest/app"),
        ),
        (
            {"status": "Digest: sha256:00"},
            PullProgress(layer="", status="Digest: sha256:00"),
        ),
        (
            {"status": "Extracting", "progressDetail": {"current": 1, "total": -1}, "id": "ab"},
            PullProgress(layer="ab", status="Extracting", current=1, total=None),
        ),
    ],
)
def test_a_pull_stream_message_reads_as_layer_status_and_bytes(
    item: dict[str, Any], expected: PullProgress
) -> None:
    assert PullProgress.from_json(item) == expected
