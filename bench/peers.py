"""The whole job of a short pod, side by side with the tools people would use instead.

One job is everything a user waits for: start the pod, let its containers run to their
end, and clean up. Each tool does it in its own commands, timed together from the first
one's start to the last one's exit (start-up of each program included):

- ``asynckubelet``: ``asynckubelet run pod.yaml`` (one command: it streams the output,
  waits for the end and removes the pod).
- ``docker-compose``: ``docker-compose up`` then ``docker-compose down``, on the same
  Docker engine; an init container is a service the app services depend on with
  ``condition: service_completed_successfully``.
- ``podman``: ``podman kube play`` then ``podman wait`` on the app containers then
  ``podman kube down`` (podman 4.3 has no ``kube play --wait``).

The pods: ``three``, three app containers that each print a line and exit; ``init``, an
init container then one app container. The compose file and both pod manifests are made
from the same definitions here, in a temporary directory. The tools run in turn (A B C A B
C ...), so the machine's noise hits them alike; the first round warms up and is not
counted. A tool that is not installed is skipped, and the output says so.

Nothing leaves the machine. Images are local: the project's
``asynckubelet.local/busybox:1.35`` and ``pause:3.10``, built when missing; podman gets
the busybox image from the local Docker (``docker save | podman load``, tagged
``localhost/...``), and every manifest says ``imagePullPolicy: Never`` (compose:
``pull_policy: never``), so no registry is asked. ``--network none`` (the default) gives
every container only a loopback interface in all three tools (asynckubelet's
``--network loopback``, compose's ``network_mode: none``, podman's ``--network none``),
so no tool spends time on a network the others do not make; ``--network default`` leaves
each tool its own default local network instead (asynckubelet: its bridge; compose: a
project network; podman: its ``podman`` bridge).

podman 4.3 needs ``default_ulimits`` (the machine's open-files limit is below its
default); unless ``CONTAINERS_CONF`` is set, the bench hands podman a containers.conf of
its own with ``nofile=1024:1024`` and ``nproc=4096:4096``.

Run: ``python bench/peers.py [--rounds 10] [--pods three,init] [--network none|default]
[--tools asynckubelet,docker-compose,podman] [--asynckubelet 'CMD'] [--baseline 'CMD']``
(``--baseline`` adds a second asynckubelet, another checkout say, to the same rounds).
Prints, per pod and tool, the median, min and max seconds and the ratio of medians to
asynckubelet's, as a Markdown table.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

BUSYBOX = "asynckubelet.local/busybox:1.35"
PAUSE = "asynckubelet.local/pause:3.10"
PODMAN_BUSYBOX = "localhost/busybox:1.35"
PODMAN_CONF = '[containers]\ndefault_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]\n'
COMMAND_TIMEOUT = 120.0


@dataclass(frozen=True)
class Container:
    name: str
    line: str


@dataclass(frozen=True)
class PodDef:
    name: str
    init: tuple[Container, ...]
    apps: tuple[Container, ...]


PODS = {
    "three": PodDef(
        name="three",
        init=(),
        apps=(Container("a", "a"), Container("b", "b"), Container("c", "c")),
    ),
    "init": PodDef(name="init", init=(Container("init", "init"),), apps=(Container("app", "app"),)),
}


def _container(c: Container, image: str) -> dict[str, Any]:
    return {
        "name": c.name,
        "image": image,
        "imagePullPolicy": "Never",
        "command": ["sh", "-c", f"echo {c.line}"],
    }


def pod_manifest(pod: PodDef, *, name: str, image: str) -> str:
    """The Pod both asynckubelet and podman run."""
    spec: dict[str, Any] = {"restartPolicy": "Never"}
    if pod.init:
        spec["initContainers"] = [_container(c, image) for c in pod.init]
    spec["containers"] = [_container(c, image) for c in pod.apps]
    document = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}
    return yaml.safe_dump(document, sort_keys=False)


def compose_file(pod: PodDef, *, image: str, network: str) -> str:
    """The same pod as services: init containers one after the other, the apps after the
    last of them succeeded."""
    services: dict[str, Any] = {}
    previous: str | None = None
    for c in (*pod.init, *pod.apps):
        service: dict[str, Any] = {
            "image": image,
            "pull_policy": "never",
            "command": ["sh", "-c", f"echo {c.line}"],
        }
        if network == "none":
            service["network_mode"] = "none"
        if previous is not None:
            service["depends_on"] = {previous: {"condition": "service_completed_successfully"}}
        services[c.name] = service
        if c in pod.init:
            previous = c.name
    return yaml.safe_dump({"services": services}, sort_keys=False)


@dataclass
class Tool:
    """A peer: how to check it is there, set it up once, and the commands of one job."""

    name: str
    workdir: Path
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))

    def missing(self) -> str | None:
        raise NotImplementedError

    def prepare(self) -> None:
        pass

    def job(self, pod: PodDef, *, network: str) -> list[list[str]]:
        raise NotImplementedError

    def cleanup(self, pod: PodDef, *, network: str) -> None:
        pass


@dataclass
class AsyncKubelet(Tool):
    command: list[str] = field(default_factory=list)
    suffix: str = ""

    def missing(self) -> str | None:
        if shutil.which("docker") is None:
            return "the docker command is not installed (the bench checks images with it)"
        return None

    def prepare(self) -> None:
        for ref, verb in ((BUSYBOX, "build-busybox"), (PAUSE, "build-pause")):
            if _quiet(["docker", "image", "inspect", ref], env=self.env) != 0:
                _check([*self.command, "images", verb], env=self.env)

    def _file(self, pod: PodDef) -> Path:
        path = self.workdir / f"akl-{pod.name}.yaml"
        if not path.exists():
            path.write_text(pod_manifest(pod, name=f"{pod.name}-{self.suffix}", image=BUSYBOX))
        return path

    def job(self, pod: PodDef, *, network: str) -> list[list[str]]:
        extra = ["--network", "loopback"] if network == "none" else []
        return [[*self.command, "run", str(self._file(pod)), *extra]]


@dataclass
class Compose(Tool):
    suffix: str = ""

    def missing(self) -> str | None:
        if shutil.which("docker-compose") is None:
            return "docker-compose is not installed (Debian: apt-get install docker-compose)"
        return None

    def _project(self, pod: PodDef) -> str:
        return f"peers{pod.name}{self.suffix}"

    def _file(self, pod: PodDef, network: str) -> Path:
        path = self.workdir / f"compose-{pod.name}.yaml"
        if not path.exists():
            path.write_text(compose_file(pod, image=BUSYBOX, network=network))
        return path

    def job(self, pod: PodDef, *, network: str) -> list[list[str]]:
        base = ["docker-compose", "-p", self._project(pod), "-f", str(self._file(pod, network))]
        return [[*base, "up"], [*base, "down"]]

    def cleanup(self, pod: PodDef, *, network: str) -> None:
        _quiet(self.job(pod, network=network)[-1], env=self.env)


@dataclass
class Podman(Tool):
    suffix: str = ""

    def missing(self) -> str | None:
        if shutil.which("podman") is None:
            return "podman is not installed (Debian: apt-get install podman catatonit)"
        if shutil.which("docker") is None:
            return "the docker command is not installed (podman's image comes from Docker)"
        return None

    def prepare(self) -> None:
        if "CONTAINERS_CONF" not in self.env:
            conf = self.workdir / "containers.conf"
            conf.write_text(PODMAN_CONF)
            self.env["CONTAINERS_CONF"] = str(conf)
        if _quiet(["podman", "image", "exists", PODMAN_BUSYBOX], env=self.env) == 0:
            return
        if _quiet(["docker", "image", "inspect", BUSYBOX], env=self.env) != 0:
            raise SystemExit(f"{BUSYBOX} is not in Docker: build it first")
        save = subprocess.Popen(["docker", "save", BUSYBOX], stdout=subprocess.PIPE, env=self.env)
        _check(["podman", "load"], stdin=save.stdout, env=self.env)
        if save.wait() != 0:
            raise SystemExit(f"docker save {BUSYBOX} failed")
        _check(["podman", "tag", BUSYBOX, PODMAN_BUSYBOX], env=self.env)

    def _name(self, pod: PodDef) -> str:
        return f"{pod.name}-{self.suffix}"

    def _file(self, pod: PodDef) -> Path:
        path = self.workdir / f"podman-{pod.name}.yaml"
        if not path.exists():
            path.write_text(pod_manifest(pod, name=self._name(pod), image=PODMAN_BUSYBOX))
        return path

    def job(self, pod: PodDef, *, network: str) -> list[list[str]]:
        file = str(self._file(pod))
        extra = ["--network", "none"] if network == "none" else []
        apps = [f"{self._name(pod)}-{c.name}" for c in pod.apps]
        return [
            ["podman", "kube", "play", *extra, file],
            ["podman", "wait", *apps],
            ["podman", "kube", "down", file],
        ]

    def cleanup(self, pod: PodDef, *, network: str) -> None:
        _quiet(self.job(pod, network=network)[-1], env=self.env)


def _quiet(command: Sequence[str], *, env: dict[str, str]) -> int:
    return subprocess.run(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=False
    ).returncode


def _check(command: Sequence[str], *, env: dict[str, str], stdin: Any = None) -> None:
    result = subprocess.run(
        command, stdin=stdin, capture_output=True, text=True, env=env, check=False
    )
    if result.returncode != 0:
        raise SystemExit(f"{shlex.join(command)} failed:\n{result.stdout}{result.stderr}")


def timed_job(tool: Tool, pod: PodDef, *, network: str) -> float:
    """Seconds from the first command's start to the last one's exit; a failing command
    ends the bench with its output."""
    commands = tool.job(pod, network=network)
    outputs: list[subprocess.CompletedProcess[bytes]] = []
    started = time.perf_counter()
    for command in commands:
        result = subprocess.run(
            command,
            capture_output=True,
            env=tool.env,
            cwd=tool.workdir,
            timeout=COMMAND_TIMEOUT,
            check=False,
        )
        outputs.append(result)
        if result.returncode != 0:
            break
    elapsed = time.perf_counter() - started
    failed = [r for r in outputs if r.returncode != 0]
    if failed:
        tool.cleanup(pod, network=network)
        r = failed[0]
        text = (r.stdout + r.stderr).decode(errors="replace")
        raise SystemExit(f"{tool.name}: {shlex.join(r.args)} exited {r.returncode}:\n{text}")
    return elapsed


def version(command: Sequence[str]) -> str:
    try:
        result = subprocess.run(command, capture_output=True, text=True, check=False)
    except OSError:
        return "?"
    lines = (result.stdout or result.stderr).strip().splitlines()
    return lines[0] if lines else "?"


def table(
    results: dict[tuple[str, str], list[float]], pods: Sequence[str], tools: Sequence[str]
) -> str:
    rows = [
        "| pod | tool | median s | min-max s | ratio to asynckubelet |",
        "|---|---|---|---|---|",
    ]
    for pod in pods:
        base = results.get((pod, "asynckubelet"))
        for tool in tools:
            times = results.get((pod, tool))
            if not times:
                continue
            median = statistics.median(times)
            ratio = f"{median / statistics.median(base):.2f}" if base else "-"
            rows.append(
                f"| {pod} | {tool} | {median:.3f} | {min(times):.3f}-{max(times):.3f} | {ratio} |"
            )
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--pods", default="three,init", help="three, init or both")
    parser.add_argument("--network", choices=("none", "default"), default="none")
    parser.add_argument("--tools", default="asynckubelet,docker-compose,podman")
    parser.add_argument(
        "--asynckubelet",
        default=None,
        help="the command that is asynckubelet (default: the one beside this Python, "
        "else python -m asynckubelet)",
    )
    parser.add_argument(
        "--baseline",
        default=None,
        help="a second asynckubelet command, timed in the same rounds as 'baseline' "
        "(e.g. another checkout: 'env PYTHONPATH=../other python -m asynckubelet')",
    )
    args = parser.parse_args()
    pods = [PODS[p] for p in args.pods.split(",")]
    wanted = args.tools.split(",")

    akl = args.asynckubelet
    if akl is None:
        script = Path(sys.executable).with_name("asynckubelet")
        command = [str(script)] if script.exists() else [sys.executable, "-m", "asynckubelet"]
    else:
        command = shlex.split(akl)
    suffix = uuid.uuid4().hex[:6]
    workdir = Path(tempfile.mkdtemp(prefix="akl-peers-"))
    candidates: list[Tool] = [
        AsyncKubelet("asynckubelet", workdir, command=command, suffix=suffix),
        *(
            [AsyncKubelet("baseline", workdir, command=shlex.split(args.baseline), suffix=suffix)]
            if args.baseline
            else []
        ),
        Compose("docker-compose", workdir, suffix=suffix),
        Podman("podman", workdir, suffix=suffix),
    ]
    tools: list[Tool] = []
    for tool in candidates:
        if tool.name not in wanted and tool.name != "baseline":
            continue
        reason = tool.missing()
        if reason is not None:
            print(f"skipping {tool.name}: {reason}")
            continue
        tool.prepare()
        tools.append(tool)
    print(f"network: {args.network}; rounds: {args.rounds} (+1 warm-up, not counted)")
    print(f"asynckubelet: {shlex.join(command)}")
    if args.baseline:
        print(f"baseline: {args.baseline}")
    print(f"docker-compose: {version(['docker-compose', '--version'])}")
    print(f"podman: {version(['podman', '--version'])}")

    results: dict[tuple[str, str], list[float]] = {}
    try:
        for round_ in range(args.rounds + 1):
            for pod in pods:
                for tool in tools:
                    seconds = timed_job(tool, pod, network=args.network)
                    if round_ > 0:
                        results.setdefault((pod.name, tool.name), []).append(seconds)
            if round_ > 0:
                print(f"round {round_}/{args.rounds} done", file=sys.stderr)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print()
    print(table(results, [p.name for p in pods], [t.name for t in tools]))


if __name__ == "__main__":
    main()
