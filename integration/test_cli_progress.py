"""Progress on the command line, end to end: pulls from a registry on 127.0.0.1 shown per
layer (plain lines in a pipe, a display redrawn in place on a pseudo-terminal), what
`apply --wait` still waits for, and JSON log lines from a real `run`."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from asynckubelet.docker import DockerClient
from integration import serve_helpers
from integration.harness import BUSYBOX_IMAGE, PAUSE_IMAGE, Engine, held_connections
from integration.registry import Registry, registry
from integration.run_helpers import in_terminal

__all__ = ["registry"]

REPO = Path(__file__).resolve().parent.parent
LAYER_DONE = re.compile(r": [0-9a-f]{12}: Pull complete( \d+/\d+ bytes)?$")


def _unique_image(tag: str) -> bytes:
    """An image archive of a static busybox and 2 MiB of random data: a layer no engine has
    yet, so the pull downloads and extracts it (a known layer is skipped without progress)."""
    from asynckubelet.images.build import File, ImageConfig, Symlink, image_archive

    return image_archive(
        repo_tag=tag,
        files=[
            File(path="/bin/busybox", data=Path("/bin/busybox").read_bytes(), mode=0o755),
            Symlink(path="/bin/sh", target="busybox"),
            Symlink(path="/bin/true", target="busybox"),
            File(path="/data", data=os.urandom(2 * 1024 * 1024)),
        ],
        config=ImageConfig(cmd=["sh"], env=["PATH=/bin"]),
    )


@pytest.fixture
def pushed(docker_engine: Engine, test_images: dict[str, str], registry: Registry) -> Iterator[str]:
    """A fresh image in the registry, absent from the engine; removed from it afterwards."""
    ref = f"{registry.host}/akltest-{uuid.uuid4().hex[:8]}:1.0"

    async def push() -> None:
        async with DockerClient(url=docker_engine.url) as client:
            await client.load_image(_unique_image(ref))
            await client.push_image(ref, auth=registry.auth())
            await client.remove_image(ref)

    async def remove() -> None:
        async with DockerClient(url=docker_engine.url) as client:
            await client.remove_image(ref, force=True)

    anyio.run(push)
    try:
        yield ref
    finally:
        anyio.run(remove)


def _manifest(tmp_path: Path, registry: Registry, image: str, *, command: str = "true") -> Path:
    config = json.loads(registry.dockerconfigjson())
    text = textwrap.dedent(
        f"""
        apiVersion: v1
        kind: Secret
        metadata: {{name: regcred}}
        type: kubernetes.io/dockerconfigjson
        stringData:
          .dockerconfigjson: '{json.dumps(config)}'
        ---
        apiVersion: v1
        kind: Pod
        metadata: {{name: pulled}}
        spec:
          restartPolicy: Never
          imagePullSecrets: [{{name: regcred}}]
          containers:
            - name: app
              image: {image}
              command: ["sh", "-c", "{command}"]
        """
    )
    path = tmp_path / "pulled.yaml"
    path.write_text(text)
    return path


def _run_args(manifest: Path, node: str, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "asynckubelet",
        *extra,
        "run",
        str(manifest),
        "--node-name",
        node,
        "--pause-image",
        PAUSE_IMAGE,
        "--network",
        "loopback",
    ]


def _env(**more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASYNCKUBELET_LOG")}
    return {**env, "PYTHONPATH": str(REPO), **more}


def test_run_in_a_pipe_prints_one_plain_line_per_layer_state(
    tmp_path: Path, registry: Registry, pushed: str, node_name: str, docker_engine: Engine
) -> None:
    proc = subprocess.run(
        _run_args(_manifest(tmp_path, registry, pushed), node_name),
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(),
    )
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith(f"{pushed}: ")]
    assert lines[0] == f"{pushed}: pulling"
    assert lines[-1] == f"{pushed}: pulled"
    done = [line for line in lines if LAYER_DONE.search(line)]
    assert done, proc.stderr
    assert len(lines) == len(set(lines)), "a layer state was printed twice"
    assert "\r" not in proc.stderr


def test_run_on_a_terminal_redraws_the_layers_in_place(
    tmp_path: Path, registry: Registry, pushed: str, node_name: str, docker_engine: Engine
) -> None:
    code, output = in_terminal(_run_args(_manifest(tmp_path, registry, pushed), node_name), _env())
    assert code == 0, output
    assert pushed in output
    assert re.search(r"[0-9a-f]{12}\s+Pull complete", output), output
    assert "\x1b[2K" in output or "\x1b[1A" in output, "the display is not redrawn in place"


def test_log_format_json_gives_one_parseable_object_per_log_line(
    tmp_path: Path, registry: Registry, pushed: str, node_name: str, docker_engine: Engine
) -> None:
    proc = subprocess.run(
        _run_args(
            _manifest(tmp_path, registry, pushed),
            node_name,
            "--log-format",
            "json",
            "--log-level",
            "debug",
        ),
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(),
    )
    assert proc.returncode == 0, proc.stderr
    entries = [json.loads(line) for line in proc.stderr.splitlines() if line.startswith("{")]
    assert entries, proc.stderr
    for entry in entries:
        assert {"time", "level", "message"} <= set(entry)
    pulled = [e for e in entries if e.get("pod") == "default/pulled"]
    assert any(e["message"].startswith("Pulled ") for e in pulled), pulled


@pytest.fixture
def node(
    tmp_path: Path, docker_engine: Engine, test_images: dict[str, str], node_name: str
) -> Iterator[serve_helpers.Node]:
    with serve_helpers.running_node(tmp_path, docker_engine, node_name) as n:
        yield n


def test_apply_wait_on_a_terminal_shows_which_pods_are_not_ready_and_why(
    node: serve_helpers.Node, tmp_path: Path
) -> None:
    path = tmp_path / "slow.yaml"
    path.write_text(
        textwrap.dedent(
            f"""
            apiVersion: v1
            kind: Pod
            metadata: {{name: slow}}
            spec:
              terminationGracePeriodSeconds: 1
              containers:
                - name: app
                  image: {BUSYBOX_IMAGE}
                  command: ["sh", "-c", "sleep 1; touch /tmp/ready; sleep 300"]
                  readinessProbe:
                    exec: {{command: [cat, /tmp/ready]}}
                    periodSeconds: 1
            """
        )
    )
    code, output = in_terminal(
        [sys.executable, "-m", "asynckubelet", "apply", "-f", str(path), "--wait"], node.env
    )
    assert code == 0, output + node.log()
    assert "WAITING FOR" in output
    assert "pod/slow" in output
    assert "\x1b[2K" in output or "\x1b[1A" in output


def test_apply_wait_in_a_pipe_prints_a_line_per_change_of_reason(
    node: serve_helpers.Node, tmp_path: Path
) -> None:
    path = tmp_path / "slow.yaml"
    path.write_text(
        textwrap.dedent(
            f"""
            apiVersion: v1
            kind: Pod
            metadata: {{name: slow}}
            spec:
              terminationGracePeriodSeconds: 1
              containers:
                - name: app
                  image: {BUSYBOX_IMAGE}
                  command: ["sh", "-c", "sleep 3; touch /tmp/ready; sleep 300"]
                  readinessProbe:
                    exec: {{command: [cat, /tmp/ready]}}
                    periodSeconds: 1
            """
        )
    )
    proc = node.cli("apply", "-f", str(path), "--wait", "--timeout", "60")
    assert proc.returncode == 0, proc.stderr + node.log()
    waits = [line for line in proc.stderr.splitlines() if line.startswith("pod/slow: not ready:")]
    assert waits, proc.stderr
    assert len(waits) == len(set(waits))
    assert "\r" not in proc.stderr
    assert "\x1b" not in proc.stderr


@pytest.mark.anyio
async def test_a_pull_stream_cancelled_mid_way_gives_its_connection_back(
    docker: DockerClient, registry: Registry, pushed: str
) -> None:
    held: list[int] = []
    async with anyio.create_task_group() as tg:

        async def pull() -> None:
            async for progress in docker.pull_progress(pushed, auth=registry.auth()):
                if progress.layer:
                    held.append(held_connections(docker))
                    tg.cancel_scope.cancel()

        tg.start_soon(pull)
    assert held == [1], "the pull was not cancelled while its stream held a connection"
    assert held_connections(docker) == 0
