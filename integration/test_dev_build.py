"""``run --build`` and ``apply --build`` on a real engine: an image built from the directory
named after it or from the context an annotation names, its steps shown, a failing step
named in one error, a hostile context refused before anything is built, and a rebuild
rolling a Deployment onto the new image ID."""

from __future__ import annotations

import json
import shlex
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from asynckubelet.docker import DockerClient
from integration.harness import BUSYBOX_IMAGE, Engine, free_port
from integration.run_helpers import run_pod
from integration.serve_helpers import Daemon, apply_watch, next_line, serve_daemon

POD = """
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  annotations: {annotations}
spec:
  restartPolicy: Never
  containers:
  - name: app
    image: {image}
"""

pytestmark = pytest.mark.usefixtures("built_images_removed")


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip())
    return path


def _image_id(engine: Engine, ref: str) -> str:
    async def go() -> str:
        async with DockerClient(url=engine.url) as client:
            return str((await client.inspect_image(ref)).get("Id", ""))

    return anyio.run(go)


def test_run_builds_the_directory_named_after_the_image(
    tmp_path: Path, docker_engine: Engine, test_images: dict[str, str], node_name: str
) -> None:
    tag = f"localhost/{node_name}-web:dev"
    _write(
        tmp_path / f"{node_name}-web" / "Containerfile",
        f"""
        FROM {BUSYBOX_IMAGE}
        COPY greeting.txt /greeting.txt
        CMD ["cat", "/greeting.txt"]
        """,
    )
    (tmp_path / f"{node_name}-web" / "greeting.txt").write_text("built from the directory\n")
    manifest = _write(tmp_path / "pod.yaml", POD.format(name="web", annotations="{}", image=tag))
    done = run_pod(manifest, "--build", node=node_name)
    assert done.returncode == 0, done.stderr
    assert "web/app | built from the directory" in done.stdout
    assert f"{tag}: Step 2/3 : COPY greeting.txt /greeting.txt" in done.stderr
    assert f"{tag}: built {_image_id(docker_engine, tag)}" in done.stderr


def test_run_builds_the_context_and_target_an_annotation_names(
    tmp_path: Path, docker_engine: Engine, test_images: dict[str, str], node_name: str
) -> None:
    _write(
        tmp_path / "src" / "build" / "app.Dockerfile",
        f"""
        FROM {BUSYBOX_IMAGE} AS base
        ARG WORD=unset
        RUN echo "word=$WORD stage=base" > /out
        FROM base AS dev
        RUN sed -i 's/stage=base/stage=dev/' /out
        FROM base AS prod
        CMD ["cat", "/out"]
        """,
    )
    annotation = json.dumps(
        {"build.asynckubelet.dev/app": "context=src,dockerfile=build/app.Dockerfile,"
         "target=dev,arg.WORD=hello"}
    )  # fmt: skip
    manifest = _write(
        tmp_path / "pod.yaml",
        POD.format(name="annotated", annotations=annotation, image=f"{node_name}-app:dev")
        + '    command: ["cat", "/out"]\n',
    )
    done = run_pod(manifest, "--build", node=node_name)
    assert done.returncode == 0, done.stderr
    assert "annotated/app | word=hello stage=dev" in done.stdout
    assert "FROM base AS prod" not in done.stderr


def test_a_failing_step_is_one_error_naming_the_step(
    tmp_path: Path, docker_engine: Engine, test_images: dict[str, str], node_name: str
) -> None:
    tag = f"{node_name}-broken:dev"
    _write(
        tmp_path / f"{node_name}-broken" / "Dockerfile",
        f"""
        FROM {BUSYBOX_IMAGE}
        RUN echo about to fail && exit 3
        """,
    )
    manifest = _write(tmp_path / "pod.yaml", POD.format(name="b", annotations="{}", image=tag))
    done = run_pod(manifest, "--build", node=node_name)
    assert done.returncode == 1
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert errors == [
        f'error: failed to build image "{tag}" at Step 2/2 : RUN echo about to fail && '
        "exit 3: The command '/bin/sh -c echo about to fail && exit 3' returned a non-zero "
        "code: 3"
    ]
    assert "pod/b" not in done.stderr


def test_a_context_outside_the_manifests_directory_is_refused(
    tmp_path: Path, docker_engine: Engine, test_images: dict[str, str], node_name: str
) -> None:
    annotation = json.dumps({"build.asynckubelet.dev/app": "context=../../etc"})
    manifest = _write(
        tmp_path / "m" / "pod.yaml",
        POD.format(name="evil", annotations=annotation, image=f"{node_name}-evil:dev"),
    )
    done = run_pod(manifest, "--build", node=node_name)
    assert done.returncode == 1
    assert "annotation build.asynckubelet.dev/app: context '" in done.stderr
    assert "is outside" in done.stderr
    assert "Step" not in done.stderr


DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {{name: web}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: web
        image: {image}
        command: [sh, -c, "cat /version; trap 'exit 0' TERM; while true; do sleep 0.2; done"]
"""


@pytest.fixture
def node(
    tmp_path: Path, docker_engine: Engine, test_images: dict[str, str], node_name: str
) -> Iterator[Daemon]:
    yield from serve_daemon(tmp_path, docker_engine, node_name)


def _pod_images(node: Daemon) -> list[str]:
    listed = node.cli("get", "pods", "-o", "json")
    assert listed.returncode == 0, listed.stderr
    return sorted(
        c["image"]
        for pod in json.loads(listed.stdout)["items"]
        if not pod["metadata"].get("deletionTimestamp")
        for c in pod["spec"]["containers"]
    )


def test_a_rebuild_rolls_the_deployment_onto_the_new_image(
    node: Daemon, tmp_path: Path, docker_engine: Engine
) -> None:
    tag = f"localhost/{node.node_name}-roll:dev"
    app = tmp_path / "app"
    _write(app / f"{node.node_name}-roll" / "Dockerfile", f"FROM {BUSYBOX_IMAGE}\nCOPY . /\n")
    (app / f"{node.node_name}-roll" / "version").write_text("one\n")
    manifest = _write(app / "web.yaml", DEPLOYMENT.format(image=tag))
    first = node.cli("apply", "--build", "--wait", "-f", str(manifest))
    assert first.returncode == 0, first.stderr + node.log()
    assert "deployment.apps/web created" in first.stdout
    one = _image_id(docker_engine, tag)
    assert _pod_images(node) == [one]

    (app / f"{node.node_name}-roll" / "version").write_text("two\n")
    second = node.cli("apply", "--build", "--wait", "-f", str(manifest))
    assert second.returncode == 0, second.stderr + node.log()
    assert "deployment.apps/web configured" in second.stdout
    two = _image_id(docker_engine, tag)
    assert two != one
    assert _pod_images(node) == [two]

    again = node.cli("apply", "--build", "-f", str(manifest))
    assert again.returncode == 0, again.stderr
    assert "deployment.apps/web unchanged" in again.stdout


REPO = Path(__file__).resolve().parent.parent
WALKTHROUGH = "<!-- dev walkthrough: integration/test_dev_build.py -->\n```sh\n"


def _walkthrough() -> list[tuple[str, str]]:
    """The README's walkthrough: each command and the comment after it."""
    text = (REPO / "README.md").read_text()
    block = text.split(WALKTHROUGH, 1)[1].split("\n```\n", 1)[0]
    steps = []
    for line in block.splitlines():
        command, _, comment = line.partition("  #")
        steps.append((command.strip(), comment.strip()))
    return steps


def test_the_readme_walkthrough_builds_serves_and_rebuilds_a_change(
    node: Daemon, tmp_path: Path
) -> None:
    """Each line of the walkthrough run as written, in a copy of ``examples/dev`` and on a
    free local port: what ``curl`` shows is the comment after it."""
    port = free_port()
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    cwd = tmp_path
    background: list[subprocess.Popen[str]] = []
    served: list[str] = []
    try:
        for command, comment in _walkthrough():
            words = shlex.split(command.replace("8080:", f"{port}:").rstrip("&"))
            if words[0] == "cd":
                cwd = cwd / words[1]
            elif words[0] == "asynckubelet" and command.endswith("&"):
                process = subprocess.Popen(
                    [sys.executable, "-m", *words],
                    cwd=cwd,
                    env=node.env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
                background.append(process)
                assert process.stdout is not None
                first = process.stdout.readline()
                assert first == f"Forwarding from 127.0.0.1:{port} -> 8080\n", first
            elif words[0] == "asynckubelet":
                done = subprocess.run(
                    [sys.executable, "-m", *words],
                    cwd=cwd,
                    env=node.env,
                    capture_output=True,
                    text=True,
                    timeout=180,
                    check=False,
                )
                assert done.returncode == 0, command + done.stderr + node.log()
            elif words[0] == "curl":
                url = words[1].replace(":8080/", f":{port}/")
                assert url.startswith("http://127.0.0.1:")
                with urllib.request.urlopen(url, timeout=30) as answer:
                    body = answer.read().decode()
                assert comment in body, (command, body)
                served.append(comment)
            elif words[0] == "kill":
                process = background.pop()
                process.send_signal(signal.SIGINT)
                _, err = process.communicate(timeout=30)
                assert process.returncode == 0, err
            else:
                subprocess.run(words, cwd=cwd, check=True, timeout=30)
    finally:
        for process in background:
            process.send_signal(signal.SIGINT)
            process.communicate(timeout=30)
    assert served == [
        "<h1>Hello from web, version 1</h1>",
        "<h1>Hello from web, version 2</h1>",
    ]


def test_apply_watch_rebuilds_a_change_and_survives_a_broken_manifest(
    node: Daemon, tmp_path: Path, docker_engine: Engine
) -> None:
    shutil.copytree(REPO / "examples" / "dev", tmp_path / "dev")
    manifest = tmp_path / "dev" / "web.yaml"
    dockerfile = tmp_path / "dev" / "web" / "Dockerfile"
    process = apply_watch(node, manifest)
    seen: list[str] = []
    try:
        next_line(process, "deployment.apps/web created", seen)
        next_line(process, "watching for changes", seen)
        first = _pod_images(node)

        dockerfile.write_text(dockerfile.read_text() + "ENV VERSION=2\n")
        assert next_line(process, "changed: applying", seen) == "web/Dockerfile changed: applying\n"
        next_line(process, "deployment.apps/web configured", seen)
        next_line(process, "watching for changes", seen)
        second = _pod_images(node)
        assert second != first

        good = manifest.read_text()
        manifest.write_text(good + "---\nkind: Deployment\napiVersion: apps/v1\nspec: [\n")
        assert next_line(process, "changed: applying", seen) == "web.yaml changed: applying\n"
        assert next_line(process, "error:", seen).startswith("error: ")
        next_line(process, "watching for changes", seen)

        manifest.write_text(good)
        next_line(process, "changed: applying", seen)
        next_line(process, "deployment.apps/web unchanged", seen)
        next_line(process, "watching for changes", seen)
        assert process.poll() is None
        assert _pod_images(node) == second
    finally:
        process.send_signal(signal.SIGINT)
        rest, _ = process.communicate(timeout=60)
    assert process.returncode == 130, "".join(seen) + rest


STAGES = f"""
FROM {BUSYBOX_IMAGE} AS base
ARG WORD=unset
RUN echo "word=$WORD stage=base" > /out
FROM base AS dev
RUN sed -i 's/stage=base/stage=dev/' /out
FROM base AS prod
RUN sed -i 's/stage=base/stage=prod/' /out
"""


def test_run_builds_with_the_build_arg_and_target_flags(
    tmp_path: Path, docker_engine: Engine, test_images: dict[str, str], node_name: str
) -> None:
    tag = f"localhost/{node_name}-staged:dev"
    _write(tmp_path / f"{node_name}-staged" / "Dockerfile", STAGES)
    annotation = json.dumps({"build.asynckubelet.dev/app": f"context={node_name}-staged,"
                             "target=prod,arg.WORD=annotated"})  # fmt: skip
    manifest = _write(
        tmp_path / "pod.yaml",
        POD.format(name="staged", annotations=annotation, image=tag)
        + '    command: ["cat", "/out"]\n',
    )
    done = run_pod(
        manifest, "--build", "--build-arg", "WORD=from the flag & more", "--target", "dev",
        node=node_name,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "staged/app | word=from the flag & more stage=dev" in done.stdout
    assert "stage=prod" not in done.stdout


def test_a_target_the_dockerfile_lacks_is_one_error_naming_the_flag(
    tmp_path: Path, docker_engine: Engine, test_images: dict[str, str], node_name: str
) -> None:
    tag = f"localhost/{node_name}-notarget:dev"
    _write(tmp_path / f"{node_name}-notarget" / "Dockerfile", STAGES)
    manifest = _write(tmp_path / "pod.yaml", POD.format(name="nt", annotations="{}", image=tag))
    done = run_pod(manifest, "--build", "--target", "prd", node=node_name)
    assert done.returncode == 1
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert errors == [
        f"error: --target (image {tag}): target 'prd' is not a stage of Dockerfile "
        "(stages: base, dev, prod)"
    ]
    assert "Step" not in done.stderr


def test_the_engine_refusing_a_missing_target_is_one_clear_error(
    tmp_path: Path, docker_engine: Engine, test_images: dict[str, str], node_name: str
) -> None:
    from asynckubelet.errors import ImageBuildError
    from asynckubelet.images.contexts import context_tar

    tag = f"localhost/{node_name}-engine-target:dev"
    _write(tmp_path / "ctx" / "Dockerfile", STAGES)

    async def go() -> None:
        async with DockerClient(url=docker_engine.url) as client:
            async for _ in client.build_image(
                context_tar(tmp_path / "ctx"), tag=tag, dockerfile="Dockerfile", target="prd"
            ):
                pass

    with pytest.raises(ImageBuildError) as caught:
        anyio.run(go)
    message = str(caught.value)
    assert message.startswith(f'failed to build image "{tag}"')
    assert "prd" in message
    assert "\n" not in message


def test_apply_builds_with_the_build_arg_and_target_flags(
    node: Daemon, tmp_path: Path, docker_engine: Engine
) -> None:
    tag = f"localhost/{node.node_name}-applied:dev"
    _write(tmp_path / f"{node.node_name}-applied" / "Dockerfile", STAGES)
    manifest = _write(
        tmp_path / "pod.yaml",
        POD.replace("restartPolicy: Never", "restartPolicy: Always").format(
            name="applied", annotations="{}", image=tag
        )
        + '    command: ["sh", "-c", "cat /out; exec sleep 3600"]\n',
    )
    done = node.cli(
        "apply", "--build", "--build-arg", "WORD", "--target", "prod", "--wait",
        "-f", str(manifest),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr + node.log()
    # Running is reported when the process starts, before its first line is read.
    deadline = time.monotonic() + 30
    while (logs := node.cli("logs", "applied")).stdout == "" and time.monotonic() < deadline:
        time.sleep(0.2)
    assert logs.returncode == 0, logs.stderr
    assert logs.stdout == "word=unset stage=prod\n"
