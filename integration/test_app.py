"""The example app (``examples/app/``) on one node, with each firewall: ``serve`` and
``apply -f examples/app/ --wait`` bring up the web Deployment, its Service, the
ConfigMap, the migration Job and the client pod; the host reaches the NodePort on
loopback; the client reaches the web by ``web``, ``web.default`` and
``web.default.svc.cluster.local``; ``apply -k`` of a kustomization over the same files
changes nothing; a changed image rolls with a ready endpoint at every moment (a pod and
the host poll throughout); a migration that fails fails ``apply --wait``.

The cluster DNS forwards other names only to a loopback port where nothing listens: no
query leaves the machine.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import pytest

from asynckubelet.docker import DockerClient
from asynckubelet.images import build as image_build
from integration.harness import BUSYBOX_IMAGE, PAUSE_IMAGE, TEST_IMAGE_PREFIX, Engine
from integration.network_helpers import free_cidr
from integration.serve_helpers import Daemon
from integration.service_helpers import (
    free_node_port,
    leftovers,
    remove_service_node,
    service_chains,
    service_daemon,
)

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "app"
EXAMPLE_IMAGE = "asynckubelet.local/busybox:1.35"
ROLLED_IMAGE = f"{TEST_IMAGE_PREFIX}/busybox:1.35-rolled"
NAMES = ("web", "web.default", "web.default.svc.cluster.local")
POLLER = """
apiVersion: v1
kind: Pod
metadata: {name: poller}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: BUSYBOX
    command:
    - sh
    - -c
    - |
      trap 'exit 0' TERM
      while true; do
        got=$(printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 10 web 80 | grep -o 'Hello[^<]*')
        echo "poll ${got:-FAILED}"
        sleep 0.1
      done
"""


@dataclass
class App:
    """A node running the example app, and the copy of the example it was applied from."""

    d: Daemon
    folder: Path
    node_port: int
    applied: str = ""
    seen_chains: set[str] = field(default_factory=set)

    def json(self, *args: str) -> dict[str, object]:
        result = self.d.cli("get", *args, "-o", "json")
        assert result.returncode == 0, result.stderr
        found = json.loads(result.stdout)
        assert isinstance(found, dict)
        return found

    def exec(self, pod: str, script: str) -> str:
        result = self.d.cli("exec", pod, "--", "sh", "-c", script)
        assert result.returncode == 0, result.stdout + result.stderr
        return result.stdout

    def apply(self, *args: str) -> str:
        done = self.d.cli(*args, "--wait", "--timeout", "150", timeout=240)
        assert done.returncode == 0, done.stdout + done.stderr + self.d.log()[-3000:]
        return done.stdout

    def web_images(self) -> set[str]:
        items = self.json("pods")["items"]
        assert isinstance(items, list)
        return {
            c["image"]
            for p in items
            if (p["metadata"].get("labels") or {}).get("app") == "web"
            and not p["metadata"].get("deletionTimestamp")
            for c in p["spec"]["containers"]
        }


def copy_example(into: Path, *, node_port: int, image: str = BUSYBOX_IMAGE) -> Path:
    """The example's files with the test's image and a free nodePort."""
    into.mkdir()
    for source in sorted(EXAMPLE.glob("*.yaml")):
        text = source.read_text().replace(EXAMPLE_IMAGE, image)
        (into / source.name).write_text(text.replace("nodePort: 30080", f"nodePort: {node_port}"))
    return into


def fetch(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as response:
        return str(response.read().decode())


@pytest.fixture(scope="module", params=["iptables", "nftables"])
def app(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    docker_engine: Engine,
    test_images: dict[str, str],
) -> Iterator[App]:
    firewall = str(request.param)
    name = f"akltest-{uuid.uuid4().hex[:10]}"
    bridge, cidr = f"akp{name[-8:]}", free_cidr()
    tmp = tmp_path_factory.mktemp(f"app-{firewall}")
    daemon = service_daemon(
        tmp, name=name, bridge=bridge, cidr=cidr, firewall=firewall, engine=docker_engine
    )
    assert PAUSE_IMAGE
    node_port = free_node_port()
    made = App(daemon, copy_example(tmp / "app", node_port=node_port), node_port)
    daemon.start()
    try:
        made.applied = made.apply("apply", "-f", str(made.folder))
        made.seen_chains = service_chains(bridge)
        yield made
    finally:
        remove_service_node(
            daemon, name=name, bridge=bridge, cidr=cidr, firewall=firewall, engine=docker_engine
        )
    assert firewall == "nftables" or made.seen_chains, "the iptables node made no Service chain"
    assert leftovers(bridge, made.seen_chains) == []


@pytest.fixture(scope="module")
def rolled_image(docker_engine: Engine) -> Iterator[str]:
    """The test busybox under a second name, for an image change to roll to."""

    async def build() -> None:
        async with DockerClient(url=docker_engine.url) as client:
            await image_build.build_busybox_image(client, tag=ROLLED_IMAGE)

    anyio.run(build)
    yield ROLLED_IMAGE

    async def remove() -> None:
        async with DockerClient(url=docker_engine.url) as client:
            await client.remove_image(ROLLED_IMAGE, force=True)

    anyio.run(remove)


def test_apply_wait_brings_the_whole_app_up(app: App) -> None:
    lines = app.applied.splitlines()
    for made in (
        "configmap/web-content created",
        "deployment.apps/web created",
        "service/web created",
        "job.batch/migrate created",
        "pod/client created",
    ):
        assert made in lines, app.applied
    assert "deployment.apps/web successfully rolled out" in lines, app.applied
    assert any(line.startswith("service/web ready: ") for line in lines), app.applied
    job = app.json("jobs", "migrate")["status"]
    assert isinstance(job, dict)
    assert (job.get("succeeded"), job.get("failed")) == (1, None)
    endpoints = app.json("endpoints", "web")["subsets"]
    assert isinstance(endpoints, list)
    assert len([a for s in endpoints for a in s.get("addresses") or []]) == 2


def test_the_host_reaches_the_web_on_the_node_port_on_loopback(app: App) -> None:
    assert "Hello from the web Deployment." in fetch(app.node_port)


def test_the_client_reaches_the_web_by_each_of_its_names(app: App) -> None:
    for name in NAMES:
        page = app.exec("client", f"printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 5 {name} 80")
        assert "Hello from the web Deployment." in page, name


def test_the_services_full_name_resolves_to_its_cluster_ip_from_the_client(app: App) -> None:
    spec = app.json("services", "web")["spec"]
    assert isinstance(spec, dict)
    # busybox nslookup also asks the names of the search path (NXDOMAIN) and exits 1.
    looked_up = app.exec("client", f"nslookup {NAMES[-1]} || true")
    assert f"Name:\t{NAMES[-1]}\nAddress: {spec['clusterIP']}" in looked_up, looked_up


def test_apply_k_of_a_kustomization_over_the_same_files_changes_nothing(
    app: App, tmp_path: Path
) -> None:
    # Neither kustomize nor kubectl is the project's: apply -k runs whichever is on PATH.
    if not (shutil.which("kustomize") or shutil.which("kubectl")):
        pytest.skip("neither kustomize nor kubectl is installed")
    folder = copy_example(tmp_path / "kust", node_port=app.node_port, image=EXAMPLE_IMAGE)
    (folder / "kustomization.yaml").write_text(
        "resources: [config.yaml, web.yaml, service.yaml, migrate.yaml, client.yaml]\n"
        "images:\n"
        f"- name: {EXAMPLE_IMAGE.split(':')[0]}\n"
        f"  newName: {BUSYBOX_IMAGE.split(':')[0]}\n"
    )
    done = app.d.cli("apply", "-k", str(folder))
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(done.stdout.splitlines()) == [
        "configmap/web-content unchanged",
        "deployment.apps/web unchanged",
        "job.batch/migrate unchanged",
        "pod/client unchanged",
        "service/web unchanged",
    ]


class HostPoller:
    """Fetches the NodePort from the host in a thread until stopped; counts failures."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.answers: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                page = fetch(self.port)
                self.answers.append("ok" if "Hello" in page else page)
            except (OSError, urllib.error.URLError) as e:
                self.answers.append(f"FAILED {e}")
            time.sleep(0.05)

    def __enter__(self) -> HostPoller:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=30)


def _polls(app: App) -> list[str]:
    """The poller's lines so far: one a poll, each once its answer or failure is known."""
    logs = app.d.cli("logs", "poller").stdout.splitlines()
    return [line for line in logs if line.startswith("poll ")]


def test_a_changed_image_rolls_with_a_ready_endpoint_at_every_moment(
    app: App, rolled_image: str
) -> None:
    poller = app.folder.parent / "poller.yaml"
    poller.write_text(POLLER.replace("BUSYBOX", BUSYBOX_IMAGE))
    app.apply("apply", "-f", str(poller))
    try:
        web = app.folder / "web.yaml"
        web.write_text(web.read_text().replace(BUSYBOX_IMAGE, rolled_image))
        with HostPoller(app.node_port) as host:
            rolled = app.apply("apply", "-f", str(app.folder))
            # Polls and answers counted, not seconds: a loaded machine only makes it slower.
            wanted = max(len(_polls(app)) + 5, 11)
            deadline = time.monotonic() + 60
            while (len(_polls(app)) < wanted or len(host.answers) <= 10) and (
                time.monotonic() < deadline
            ):
                time.sleep(0.5)
        polls = _polls(app)
    finally:
        app.d.cli("delete", "pod", "poller", "--grace-period", "1")
    assert "deployment.apps/web configured" in rolled.splitlines(), rolled
    assert app.web_images() == {rolled_image}
    assert len(polls) > 10
    assert [p for p in polls if p == "poll FAILED"] == [], polls
    assert len(host.answers) > 10
    assert [a for a in host.answers if a != "ok"] == []


def test_a_failing_migration_fails_apply_wait(app: App) -> None:
    deleted = app.d.cli("delete", "job", "migrate")
    assert deleted.returncode == 0, deleted.stderr
    config = app.folder / "config.yaml"
    config.write_text(config.read_text().replace('schema-version: "2"', 'schema-version: ""'))
    migrate = app.folder / "migrate.yaml"
    migrate.write_text(migrate.read_text().replace("backoffLimit: 2", "backoffLimit: 0"))
    done = app.d.cli("apply", "-f", str(app.folder), "--wait", "--timeout", "150", timeout=240)
    assert done.returncode != 0, done.stdout + done.stderr
    assert "job.batch/migrate failed" in done.stderr, done.stderr
    job = app.json("jobs", "migrate")["status"]
    assert isinstance(job, dict)
    assert job.get("failed") == 1
