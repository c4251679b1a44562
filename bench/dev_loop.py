"""The inner dev loop: from saving a file to its new content being served, side by side.

The app is ``examples/dev/``: busybox's httpd serving ``web/www/`` from an image built
from ``web/``, a Deployment of one replica behind a readiness probe and a ClusterIP
Service. Each change writes a new ``index.html`` (a fresh token in it); the time is from
the write until a GET of the Service's ClusterIP from this host (to a pod the bench made)
answers with the token, polled every ``POLL`` seconds. The modes:

- ``rebuild``: ``asynckubelet apply --build --watch --wait`` following the app (its watch
  rules removed, so every change rebuilds): the watch notices the file, rebuilds the
  image and rolls the Deployment onto the new image ID.
- ``hand``: the same loop by hand, as a developer types it once the file is saved:
  ``docker build -t localhost/web:dev web/``, then ``asynckubelet delete pod --all`` (the
  Deployment's pod, on the tag, comes back on the new image), then poll.
- ``sync``: ``apply --build --watch`` with a ``sync`` watch rule (``www`` to ``/www``):
  the file is copied into the running container, nothing rebuilt or restarted. Skipped,
  with a line saying so, where the node has no watch rules.
- ``compose``: ``docker compose watch`` on the same image with a ``rebuild`` action,
  published on 127.0.0.1. Skipped, with a line saying why, where the machine has no
  compose with ``watch`` (Debian's docker-compose 1.29 has none).

Each mode runs in its own namespace and copy of the app, one after another; its first
change warms up and is not counted. Nothing leaves the machine: the images are local
(``asynckubelet images build-*``), the cluster DNS forwards to a loopback port where
nothing listens. Needs root (the node's bridge) and a Docker engine: ``DOCKER_HOST``'s,
else a private dockerd the bench starts and removes.

Run: ``python bench/dev_loop.py [--repeat 5] [--mode rebuild --mode hand ...]``. Prints
a Markdown table.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import queue
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from app_up import BUSYBOX, PAUSE, free_port, run, stop_node
from nodenet import free_cidr, private_bridge

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "dev"
IMAGE = "localhost/web:dev"
POLL = 0.05
"""Seconds between two GETs of the served page."""
CHANGE_TIMEOUT = 180.0
"""Seconds a change may take to be served before the bench gives up."""
WATCH_RULES = "watch.asynckubelet.dev/"
SYNC_RULE = "- action: sync\n  path: www\n  target: /www\n"
COMPOSE = """\
services:
  web:
    build: {context}
    image: {image}
    ports: ["127.0.0.1:{port}:8080"]
    develop:
      watch:
        - action: rebuild
          path: {context}/www
"""


def page(token: str) -> str:
    return f"<!doctype html>\n<title>web</title>\n<h1>Hello from web, {token}</h1>\n"


def served(url: str) -> str:
    try:
        with urllib.request.urlopen(url, timeout=1) as answer:  # noqa: S310  (loopback or a pod IP)
            return str(answer.read().decode(errors="replace"))
    except (OSError, urllib.error.URLError):
        return ""


def until_served(url: str, token: str, since: float) -> float:
    """Seconds from ``since`` until ``url`` answers with ``token``."""
    while token not in served(url):
        if time.perf_counter() - since > CHANGE_TIMEOUT:
            raise SystemExit(f"{url}: {token} not served after {CHANGE_TIMEOUT} s")
        time.sleep(POLL)
    return time.perf_counter() - since


def app_copy(work: Path, rules: str | None) -> Path:
    """A copy of the example, its Deployment's watch rules replaced by ``rules`` (or
    removed)."""
    app = work / "app"
    shutil.copytree(EXAMPLE, app)
    documents = list(yaml.safe_load_all((app / "web.yaml").read_text()))
    for doc in documents:
        if doc.get("kind") != "Deployment":
            continue
        meta = doc["spec"]["template"].setdefault("metadata", {})
        notes = {
            k: v
            for k, v in (meta.get("annotations") or {}).items()
            if not k.startswith(WATCH_RULES)
        }
        if rules is not None:
            notes[WATCH_RULES + "web"] = rules
        meta["annotations"] = notes
    (app / "web.yaml").write_text(yaml.safe_dump_all(documents, sort_keys=False))
    return app


class Node:
    """``asynckubelet serve`` on its own bridge and pod range, the modes' node."""

    def __init__(self, work: Path, env: dict[str, str]) -> None:
        self.work = work
        self.name = f"bench-dev-{uuid.uuid4().hex[:6]}"
        self.bridge = private_bridge()
        self.cidr = free_cidr()
        self.env = {**env, "ASYNCKUBELET_STATE_DIR": str(work / "state")}
        self.cli = [sys.executable, "-m", "asynckubelet"]
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        for ref, verb in ((BUSYBOX, "build-busybox"), (PAUSE, "build-pause")):
            if run(["docker", "image", "inspect", ref], env=self.env, check=False).returncode:
                run([*self.cli, "images", verb], env=self.env)
        with (self.work / "serve.log").open("wb") as log:
            self.process = subprocess.Popen(
                [*self.cli, "serve", "--node-name", self.name, "--pause-image", PAUSE,
                 "--bridge", self.bridge, "--pod-cidr", self.cidr, "--firewall", "nftables",
                 "--dns-upstream", f"127.0.0.1:{free_port()}", "--stop-pods-on-exit"],
                env=self.env, stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
        deadline = time.monotonic() + 60
        state = self.work / "state"
        while not ((state / "api.sock").exists() and (state / "node.json").exists()):
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise SystemExit("serve did not start:\n" + (self.work / "serve.log").read_text())
            time.sleep(0.2)

    def cluster_url(self, namespace: str) -> str:
        out = run([*self.cli, "get", "svc", "web", "-n", namespace, "-o", "json"], env=self.env)
        return f"http://{json.loads(out.stdout)['spec']['clusterIP']}/"

    def stop(self) -> None:
        stop_node(self.process, self.bridge, self.cidr)


class Mode:
    """One way of getting a change served: ``start`` it, then ``change`` once per
    repetition (returning the seconds from the save to the new content served)."""

    name = ""

    def __init__(self, work: Path, node: Node) -> None:
        self.work = work
        self.node = node
        self.namespace = f"dev-{self.name.replace('+', '-')}-{uuid.uuid4().hex[:4]}"
        self.app = work
        self.url = ""

    def missing(self) -> str | None:
        """Why this mode cannot run here, or None."""
        return None

    def start(self) -> None:
        raise NotImplementedError

    def save(self, token: str) -> float:
        (self.app / "web" / "www" / "index.html").write_text(page(token))
        return time.perf_counter()

    def change(self, token: str) -> float:
        raise NotImplementedError

    def make_namespace(self) -> None:
        made = self.work / "namespace.yaml"
        made.write_text(f"apiVersion: v1\nkind: Namespace\nmetadata: {{name: {self.namespace}}}\n")
        run([*self.node.cli, "apply", "-f", str(made)], env=self.node.env)

    def stop(self) -> None:
        run([*self.node.cli, "delete", "namespace", self.namespace, "--ignore-not-found"],
            env=self.node.env, check=False)  # fmt: skip


class Watch(Mode):
    """``apply --build --watch --wait`` following the app, with ``RULES`` as its rules."""

    name = "rebuild"
    RULES: str | None = None
    DONE: tuple[str, ...] = ("watching for changes",)
    """What the watch prints once it has dealt with a change."""

    def start(self) -> None:
        self.app = app_copy(self.work, self.RULES)
        self.make_namespace()
        self.lines: queue.Queue[str] = queue.Queue()
        self.process = subprocess.Popen(
            [*self.node.cli, "apply", "--build", "--watch", "--wait", "-n", self.namespace,
             "-f", str(self.app / "web.yaml")],
            env=self.node.env, cwd=self.app, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True,
        )  # fmt: skip
        threading.Thread(target=self._read, daemon=True).start()
        self._until(("watching for changes",))
        self.url = self.node.cluster_url(self.namespace)
        until_served(self.url, "version 1", time.perf_counter())

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put("")

    def _until(self, wanted: tuple[str, ...]) -> None:
        seen = []
        while True:
            try:
                line = self.lines.get(timeout=CHANGE_TIMEOUT)
            except queue.Empty:
                raise SystemExit(f"{self.name}: no {wanted!r} line: {''.join(seen)}") from None
            if not line:
                raise SystemExit(f"{self.name}: the watch ended: {''.join(seen)}")
            seen.append(line)
            if line.startswith("error"):
                print(f"{self.name}: {line.rstrip()}", file=sys.stderr)
            if any(text in line for text in wanted):
                return

    def change(self, token: str) -> float:
        took = until_served(self.url, token, self.save(token))
        self._until(self.DONE)
        return took

    def stop(self) -> None:
        if getattr(self, "process", None) is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
        super().stop()


class Sync(Watch):
    """The watch with a ``sync`` rule: the file copied into the running container."""

    name = "sync"
    RULES = SYNC_RULE
    DONE = ("synced", "watching for changes")

    def missing(self) -> str | None:
        if importlib.util.find_spec("asynckubelet.images.watchrules") is None:
            return "this asynckubelet has no watch rules: the sync rule is not supported"
        return None


class Hand(Mode):
    """``docker build`` and ``delete pod --all`` typed after the save, then a poll."""

    name = "hand"

    def start(self) -> None:
        self.app = app_copy(self.work, None)
        run(["docker", "build", "-q", "-t", IMAGE, str(self.app / "web")], env=self.node.env)
        self.make_namespace()
        run([*self.node.cli, "apply", "--wait", "-n", self.namespace,
             "-f", str(self.app / "web.yaml")], env=self.node.env)  # fmt: skip
        self.url = self.node.cluster_url(self.namespace)
        until_served(self.url, "version 1", time.perf_counter())

    def change(self, token: str) -> float:
        saved = self.save(token)
        run(["docker", "build", "-q", "-t", IMAGE, str(self.app / "web")], env=self.node.env)
        run([*self.node.cli, "delete", "pod", "--all", "-n", self.namespace], env=self.node.env)
        return until_served(self.url, token, saved)


def compose_command(env: dict[str, str]) -> tuple[list[str] | None, str]:
    """The compose that has ``watch`` (``docker compose`` v2.22+), or None and why not."""
    v2 = run(["docker", "compose", "version", "--short"], env=env, check=False)
    if v2.returncode == 0:
        version = v2.stdout.strip().lstrip("v")
        if run(["docker", "compose", "watch", "--help"], env=env, check=False).returncode == 0:
            return ["docker", "compose"], version
        return None, f"docker compose {version} has no watch"
    if shutil.which("docker-compose") is not None:
        v1 = run(["docker-compose", "version", "--short"], env=env, check=False).stdout.strip()
        return None, f"docker-compose {v1 or '(unknown version)'} has no watch"
    return None, "no docker compose on this machine"


class Compose(Mode):
    """``docker compose watch`` rebuilding the image on a change of ``www``."""

    name = "compose"

    def missing(self) -> str | None:
        command, why = compose_command(self.node.env)
        return None if command is not None else f"{why}: not measured"

    def start(self) -> None:
        command, _ = compose_command(self.node.env)
        assert command is not None
        self.app = app_copy(self.work, None)
        port = free_port()
        self.file = self.work / "compose.yaml"
        self.file.write_text(COMPOSE.format(context=self.app / "web", image=IMAGE, port=port))
        self.base = [*command, "-p", f"benchdev{uuid.uuid4().hex[:6]}", "-f", str(self.file)]
        run([*self.base, "up", "-d", "--build"], env=self.node.env)
        self.process = subprocess.Popen(
            [*self.base, "watch"], env=self.node.env,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        self.url = f"http://127.0.0.1:{port}/"
        until_served(self.url, "version 1", time.perf_counter())

    def change(self, token: str) -> float:
        return until_served(self.url, token, self.save(token))

    def stop(self) -> None:
        if getattr(self, "process", None) is not None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
            run([*self.base, "down", "-t", "1"], env=self.node.env, check=False)


MODES: dict[str, Callable[[Path, Node], Mode]] = {
    "rebuild": Watch,
    "hand": Hand,
    "sync": Sync,
    "compose": Compose,
}
"""Each mode by its ``--mode`` name, in the table's order."""


def measure(mode: Mode, repeat: int) -> list[float]:
    mode.start()
    times = []
    try:
        for i in range(repeat + 1):
            took = mode.change(f"change {uuid.uuid4().hex[:8]}")
            print(f"{mode.name} {'warm-up' if i == 0 else i}: {took:.2f} s", file=sys.stderr)
            if i > 0:
                times.append(took)
    finally:
        mode.stop()
    return times


def table(results: dict[str, list[float]], skipped: dict[str, str]) -> str:
    lines = [
        "| save to served | p50 s | min s | max s | changes |",
        "|---|---|---|---|---|",
    ]
    for name, got in results.items():
        lines.append(
            f"| {name} | {statistics.median(got):.2f} | {min(got):.2f} | {max(got):.2f} "
            f"| {len(got)} |"
        )
    if skipped:
        lines.append("")
    lines.extend(f"- {name}: {why}" for name, why in skipped.items())
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="counted changes per mode")
    parser.add_argument(
        "--mode", action="append", choices=list(MODES), help="a mode to run (default: all)"
    )
    parser.add_argument("--serve-log", type=Path, help="keep serve's log (debug) in this file")
    args = parser.parse_args()
    if shutil.which("docker") is None:
        raise SystemExit("docker is not installed")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASYNCKUBELET_")}
    env["PYTHONPATH"] = str(REPO)
    results: dict[str, list[float]] = {}
    skipped: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="bench-dev-") as tmp:
        engine: Any = None
        if not env.get("DOCKER_HOST"):
            from asynckubelet.docker.engine import Dockerd

            engine = Dockerd(root=Path(tmp) / "dockerd", name=f"akldev-{uuid.uuid4().hex[:6]}")
            engine.start()
            env["DOCKER_HOST"] = engine.url
        (Path(tmp) / "node").mkdir()
        node = Node(Path(tmp) / "node", env)
        try:
            node.start()
            for name in args.mode or list(MODES):
                work = Path(tmp) / name
                work.mkdir()
                mode = MODES[name](work, node)
                why = mode.missing()
                if why is not None:
                    skipped[name] = why
                    print(f"{name}: {why}", file=sys.stderr)
                    continue
                results[name] = measure(mode, args.repeat)
        finally:
            node.stop()
            if args.serve_log is not None and (node.work / "serve.log").exists():
                shutil.copy(node.work / "serve.log", args.serve_log)
            if engine is not None:
                engine.stop(remove=True)
    print(table(results, skipped))


if __name__ == "__main__":
    main()
