"""``--build-arg`` and ``--target``: checked before anything is built, over what an
annotation gives, and sent to the engine's build API as encoded query parameters."""

from __future__ import annotations

import io
import json
import re
import tarfile
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
import typer
from socket_helpers import unix_server
from typer.testing import CliRunner

from asynckubelet.cli import provision
from asynckubelet.cli.app import app
from asynckubelet.cli.building import BuildOptions, build_options, build_typed
from asynckubelet.docker import DockerClient
from asynckubelet.manifests import load_manifests

DOCKERFILE = "FROM busybox AS base\nARG WORD\nFROM base AS dev\nFROM base AS prod\n"
POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: p
  annotations: {annotations}
spec:
  restartPolicy: Never
  containers: [{{name: c, image: "web:dev"}}]
"""


def test_build_args_are_key_value_pairs_or_keys_from_the_environment() -> None:
    options = build_options(
        True,
        ["A=1", "B=x=y", "EMPTY=", "FROM_ENV", "UNSET", "A=2"],
        "dev",
        environ={"FROM_ENV": "env value"},
    )
    assert options == BuildOptions(
        {"A": "2", "B": "x=y", "EMPTY": "", "FROM_ENV": "env value"}, "dev"
    )


def test_no_build_flags_are_no_options() -> None:
    assert build_options(False, None, None) == BuildOptions({}, "")


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("=value", "--build-arg '=value': '' is not a build argument name"),
        ("", "--build-arg '': '' is not a build argument name"),
        ("MY-ARG=1", "--build-arg 'MY-ARG=1': 'MY-ARG' is not a build argument name"),
        ("1A=1", "--build-arg '1A=1': '1A' is not a build argument name"),
        ("A B=1", "--build-arg 'A B=1': 'A B' is not a build argument name"),
        ("A&target=x=1", "--build-arg 'A&target=x=1': 'A&target' is not a build argument name"),
        ("A=a\0b", "--build-arg 'A=a\\x00b': build argument A holds a NUL character"),
        (
            "A=" + "x" * 40000,
            "--build-arg 'A=" + "x" * 59 + "...': build argument A is longer than 32768 characters",
        ),
    ],
)
def test_a_malformed_build_arg_is_an_error_naming_the_flag(given: str, message: str) -> None:
    with pytest.raises(typer.TyperException, match="^" + re.escape(message)):
        build_options(True, [given], None, environ={})


def test_a_build_arg_or_target_without_build_is_an_error() -> None:
    with pytest.raises(typer.TyperException, match="--build-arg and --target need --build"):
        build_options(False, ["A=1"], None)
    with pytest.raises(typer.TyperException, match="--build-arg and --target need --build"):
        build_options(False, None, "dev")


def test_an_empty_target_is_an_error_naming_the_flag() -> None:
    with pytest.raises(typer.TyperException, match="--target: give a stage name"):
        build_options(True, None, "")


def _manifest(tmp_path: Path, annotation: str) -> Path:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "Dockerfile").write_text(DOCKERFILE)
    notes = json.dumps({"build.asynckubelet.dev/c": annotation})
    path = tmp_path / "pod.yaml"
    path.write_text(POD.format(annotations=notes))
    return path


def test_the_command_line_goes_over_the_annotations_args_and_target(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manifest = _manifest(tmp_path, "context=src,target=dev,arg.WORD=annotated,arg.KEEP=k")
    built: list[Any] = []

    def build(contexts: dict[str, Any], **_: Any) -> dict[str, str]:
        built.append(dict(contexts))
        return {"web:dev": "sha256:" + "1" * 64}

    monkeypatch.setattr("asynckubelet.cli.building.build_images", build)
    loaded = load_manifests([str(manifest)])
    build_typed(
        loaded,
        [str(manifest)],
        docker_host=None,
        options=BuildOptions({"WORD": "flag"}, "prod"),
    )
    context = built[0]["web:dev"]
    assert (context.target, context.args) == ("prod", {"WORD": "flag", "KEEP": "k"})


def test_a_target_the_dockerfile_lacks_is_refused_before_any_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manifest = _manifest(tmp_path, "context=src")

    def build(*_: Any, **__: Any) -> dict[str, str]:
        raise AssertionError("nothing is built")

    monkeypatch.setattr("asynckubelet.cli.building.build_images", build)
    monkeypatch.setattr(provision, "ensure_engine", lambda *args, **kwargs: None)
    result = CliRunner().invoke(
        app,
        ["run", "--build", "--target", "prd", str(manifest)],
        env={"ASYNCKUBELET_STATE_DIR": str(tmp_path / "state"), "COLUMNS": "400"},
    )
    assert result.exit_code == 1
    assert (
        "error: --target (image web:dev): target 'prd' is not a stage of Dockerfile "
        "(stages: base, dev, prod)"
    ) in " ".join(result.output.split())


def test_a_malformed_build_arg_on_apply_is_refused_before_the_node_is_asked(
    tmp_path: Path,
) -> None:
    manifest = _manifest(tmp_path, "context=src")
    result = CliRunner().invoke(
        app,
        ["apply", "--build", "--build-arg", "=x", "-f", str(manifest)],
        env={"ASYNCKUBELET_STATE_DIR": str(tmp_path / "state"), "COLUMNS": "400"},
    )
    assert result.exit_code == 1
    assert "error: --build-arg '=x': '' is not a build argument name" in " ".join(
        result.output.split()
    )


def _engine_building(requests: list[str]) -> Any:
    """An engine answering ``/_ping`` and ``/build`` (a one-step build reporting its image
    ID), recording each request line."""

    def answer(conn: Any, head: bytes, rest: bytes) -> None:
        line = head.split(b"\r\n", 1)[0].decode()
        requests.append(line)
        if line.split()[1] == "/_ping":
            body = b"OK"
        else:
            body = (
                b'{"stream":"Step 1/1 : FROM busybox"}\r\n'
                b'{"aux":{"ID":"sha256:' + b"2" * 64 + b'"}}\r\n'
            )
        head_out = [
            "HTTP/1.1 200 OK",
            "Content-Type: application/json",
            f"Content-Length: {len(body)}",
            "Connection: close",
            "Api-Version: 1.41",
        ]
        conn.sendall(("\r\n".join(head_out) + "\r\n\r\n").encode() + body)

    return answer


@pytest.mark.anyio
async def test_hostile_build_args_and_target_stay_one_parameter_each(tmp_path: Path) -> None:
    requests: list[str] = []
    hostile = {
        "A": "x&target=evil&dockerfile=/etc/passwd#",
        "B": 'a b\n"quoted" %00 %26 ;',
        "C": "ünïcode",
    }
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(DOCKERFILE)
        tar.addfile(info, io.BytesIO(DOCKERFILE.encode()))
    with unix_server(tmp_path / "d.sock", _engine_building(requests)) as path:
        async with DockerClient(url=f"unix://{path}") as client:
            assert await client.ping() is True
            got = [
                item
                async for item in client.build_image(
                    buffer.getvalue(),
                    tag="web:dev",
                    dockerfile="Dockerfile",
                    target="dev",
                    args=hostile,
                )
            ]
    assert got[-1] == ("id", "sha256:" + "2" * 64)
    build = next(r for r in requests if "/build?" in r)
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(build.split()[1]).query)
    assert sorted(query) == ["buildargs", "dockerfile", "forcerm", "rm", "t", "target"]
    assert query["target"] == ["dev"]
    assert query["dockerfile"] == ["Dockerfile"]
    assert query["t"] == ["web:dev"]
    assert json.loads(query["buildargs"][0]) == hostile


def _engine_receiving(bodies: list[bytes]) -> Any:
    """An engine answering ``/build`` with the built image's ID, keeping each build's body
    (the context as the client sent it) and answering every other request ``{}``."""

    def answer(conn: Any, head: bytes, rest: bytes) -> None:
        line = head.split(b"\r\n", 1)[0].decode()
        if "/build?" in line:
            fields = dict(h.split(b":", 1) for h in head.split(b"\r\n")[1:] if b":" in h)
            size = int({k.strip().lower(): v for k, v in fields.items()}[b"content-length"])
            while len(rest) < size:
                rest += conn.recv(65536)
            bodies.append(rest[:size])
            body = b'{"aux":{"ID":"sha256:' + b"3" * 64 + b'"}}\r\n'
        elif " /_ping" in line:
            body = b"OK"
        elif "/version" in line:
            body = b'{"ApiVersion": "1.41", "Version": "20.10.24"}'
        else:
            body = b"{}"
        head_out = [
            "HTTP/1.1 200 OK",
            "Content-Type: application/json",
            f"Content-Length: {len(body)}",
            "Connection: close",
            "Api-Version: 1.41",
        ]
        conn.sendall(("\r\n".join(head_out) + "\r\n\r\n").encode() + body)

    return answer


def test_the_context_is_sent_to_an_engine_that_cannot_see_it(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path, "context=src")
    (tmp_path / "src" / "index.html").write_text("built from the context\n")
    bodies: list[bytes] = []
    with unix_server(tmp_path / "remote.sock", _engine_receiving(bodies)) as path:
        loaded = load_manifests([str(manifest)])
        build_typed(loaded, [str(manifest)], docker_host=f"unix://{path}")
    with tarfile.open(fileobj=io.BytesIO(bodies[0])) as tar:
        sent = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]
    assert sent["Dockerfile"].decode() == DOCKERFILE
    assert sent["index.html"] == b"built from the context\n"
    (pod,) = loaded.pods
    assert pod.spec is not None
    assert pod.spec.containers[0].image == "sha256:" + "3" * 64
