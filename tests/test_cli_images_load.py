"""``images load``: what is not an image archive is refused naming the file before the
engine is asked; an archive goes to the engine in bounded chunks, never read whole; the
engine's report is printed as ``docker load`` prints it, its refusal naming the file."""

from __future__ import annotations

import gzip
import io
import tarfile
from collections.abc import AsyncIterable
from pathlib import Path

import pytest
from daemon_helpers import invoke

import asynckubelet.docker
from asynckubelet import errors
from asynckubelet.cli.commands import images
from asynckubelet.docker.client import MAX_LOAD_REPORT_LINES, _load_report


def archive(size: int = 0) -> bytes:
    """A tar as ``docker save`` writes one (ustar headers), with a member of ``size`` bytes."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        member = tarfile.TarInfo("manifest.json")
        member.size = size
        tar.addfile(member, io.BytesIO(b"x" * size))
    return buffer.getvalue()


class Engine:
    """Stands in for :class:`~asynckubelet.docker.DockerClient`: records the chunks it was
    sent, answers ``report`` or raises ``refusal``."""

    chunks: list[int]
    report: list[str]
    refusal: str | None = None

    def __init__(self, *, url: str | None = None) -> None:
        self.url = url

    async def __aenter__(self) -> Engine:
        return self

    async def __aexit__(self, *_: object) -> None:
        return None

    async def load_images(self, chunks: AsyncIterable[bytes]) -> list[str]:
        async for chunk in chunks:
            type(self).chunks.append(len(chunk))
        if self.refusal is not None:
            raise errors.ImageError(self.refusal)
        return list(self.report)


@pytest.fixture
def engine(monkeypatch: pytest.MonkeyPatch) -> type[Engine]:
    class Fake(Engine):
        chunks: list[int] = []
        report = ["Loaded image: mine.local/app:1"]

    monkeypatch.setattr(asynckubelet.docker, "DockerClient", Fake)
    return Fake


def test_an_archive_is_sent_in_bounded_chunks_and_the_loaded_names_printed(
    tmp_path: Path, engine: type[Engine]
) -> None:
    path = tmp_path / "app.tar"
    data = archive(3 * images.CHUNK_BYTES)
    path.write_bytes(data)
    code, out, err = invoke(tmp_path, "images", "load", str(path))
    assert (code, out, err) == (0, "Loaded image: mine.local/app:1\n", "")
    assert sum(engine.chunks) == len(data)
    assert max(engine.chunks) <= images.CHUNK_BYTES
    assert len(engine.chunks) > 3


def test_stdin_and_a_compressed_archive_are_loaded(tmp_path: Path, engine: type[Engine]) -> None:
    path = tmp_path / "app.tar.gz"
    path.write_bytes(gzip.compress(archive(10)))
    assert invoke(tmp_path, "images", "load", str(path))[0] == 0
    code, out, _ = invoke(tmp_path, "images", "load", "-", stdin=archive(10).decode("latin-1"))
    assert (code, out) == (0, "Loaded image: mine.local/app:1\n")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, 'error: cannot read "PATH": no such file'),
        (b"", 'error: "PATH" is empty: no image archive to load'),
        (b"FROM busybox\n", 'error: "PATH" is not an image archive'),
        (b"\0" * 2048, 'error: "PATH" is not an image archive'),
    ],
)
def test_what_is_not_an_archive_is_refused_naming_the_file_before_the_engine_is_asked(
    tmp_path: Path, engine: type[Engine], content: bytes | None, message: str
) -> None:
    path = tmp_path / "app.tar"
    if content is not None:
        path.write_bytes(content)
    code, out, err = invoke(tmp_path, "images", "load", str(path))
    assert (code, out) == (1, "")
    assert err.startswith(message.replace("PATH", str(path))), err
    assert engine.chunks == []


def test_a_directory_and_an_empty_stdin_are_refused(tmp_path: Path, engine: type[Engine]) -> None:
    code, _, err = invoke(tmp_path, "images", "load", str(tmp_path))
    assert (code, err) == (1, f'error: cannot read "{tmp_path}": it is a directory\n')
    code, _, err = invoke(tmp_path, "images", "load", "-", stdin="")
    assert (code, err) == (1, 'error: "stdin" is empty: no image archive to load\n')
    assert engine.chunks == []


def test_the_engines_refusal_names_the_file(tmp_path: Path, engine: type[Engine]) -> None:
    engine.refusal = "Error processing tar file(exit status 1): unexpected EOF"
    path = tmp_path / "cut.tar"
    path.write_bytes(archive(10)[:600])
    code, out, err = invoke(tmp_path, "images", "load", str(path))
    assert (code, out) == (1, "")
    assert err == (
        f'error: the engine refused "{path}": Error processing tar file(exit status 1): '
        "unexpected EOF\n"
    )


def test_images_load_needs_its_file_argument(tmp_path: Path) -> None:
    code, _, err = invoke(tmp_path, "images", "load")
    assert code == 2
    assert "FILE" in err


@pytest.mark.parametrize(
    ("line", "lines"),
    [
        (b'{"stream":"Loaded image: a:1\\n"}\n', ["Loaded image: a:1"]),
        (b'{"stream":"Loaded image ID: sha256:ab\\n"}\n', ["Loaded image ID: sha256:ab"]),
        (b"\n", []),
        (b"not json\n", []),
        (b"[1, 2]\n", []),
    ],
)
def test_the_engines_report_lines_are_kept_as_docker_load_prints_them(
    line: bytes, lines: list[str]
) -> None:
    kept: list[str] = []
    _load_report(line, kept)
    assert kept == lines


def test_the_engines_error_line_is_raised_bounded_and_the_report_is_bounded() -> None:
    with pytest.raises(errors.ImageError, match=r"^unexpected EOF$"):
        _load_report(b'{"errorDetail":{"message":"x"},"error":"unexpected EOF"}', [])
    with pytest.raises(errors.ImageError) as raised:
        _load_report(b'{"error":"' + b"e" * 10_000 + b'"}', [])
    assert len(str(raised.value)) < 10_000
    kept: list[str] = []
    many = "\\n".join(f"Loaded image: a:{i}" for i in range(MAX_LOAD_REPORT_LINES + 5))
    _load_report(b'{"stream":"' + many.encode() + b'"}', kept)
    assert len(kept) == MAX_LOAD_REPORT_LINES
