"""The documentation's example pods (``tests/data/examples``) for volumes, probes, hooks and
security contexts, on real Docker, checked against what their pages say.

The public images are replaced in each test's copy by stand-ins built here from the host's
static busybox, under test-only names (no public image name is tagged or pulled):

- ``nginx``, ``nginx:1.29`` -> ``akltest.local/standin-nginx``: an ``nginx`` script that
  serves ``/usr/share/nginx/html`` on :80 with busybox ``httpd`` and stops it on
  ``nginx -s quit``;
- ``registry.k8s.io/busybox:1.27.2``, ``busybox:1.28``, ``debian`` ->
  ``akltest.local/standin-busybox``;
- ``gcr.io/google-samples/node-hello:1.0``, ``gcr.io/google-samples/hello-app:2.0`` ->
  ``akltest.local/standin-node-hello``: a long-running ``httpd`` on :8080;
- ``registry.k8s.io/pause:3.6`` -> the harness's pause image.

Every copy also gets ``imagePullPolicy: IfNotPresent``, as the examples' README asks.

The pods run on the runtime's default network backend, ``loopback``: the sandbox has
Docker's ``NetworkMode: none``, so a pod's network namespace holds only ``lo`` and nothing
a pod does (``init-containers.yaml``'s download of http://info.cern.ch included, and its
DNS query) can leave this machine.
"""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import jwt
import pytest
import yaml
from lightkube.models.core_v1 import Pod, PodStatus

from asynckubelet.docker import DockerClient
from asynckubelet.images.build import (
    DEFAULT_PATH,
    Directory,
    File,
    ImageConfig,
    Symlink,
    image_archive,
)
from asynckubelet.manifests import load_manifests_text
from asynckubelet.node.foreground import run_pods
from asynckubelet.node.printpod import kubectl_status
from asynckubelet.node.runner import options_from_manifests
from asynckubelet.runtime import naming
from integration.harness import PAUSE_IMAGE
from integration.spec_helpers import Events, make_manager

pytestmark = pytest.mark.anyio

EXAMPLES = Path(__file__).resolve().parents[1] / "tests" / "data" / "examples"
NGINX = "akltest.local/standin-nginx:1"
BUSYBOX = "akltest.local/standin-busybox:1"
NODE_HELLO = "akltest.local/standin-node-hello:1"
STAND_INS = {
    "nginx": NGINX,
    "nginx:1.29": NGINX,
    "debian": BUSYBOX,
    "registry.k8s.io/busybox:1.27.2": BUSYBOX,
    "busybox:1.28": BUSYBOX,
    "gcr.io/google-samples/node-hello:1.0": NODE_HELLO,
    "gcr.io/google-samples/hello-app:2.0": NODE_HELLO,
    "registry.k8s.io/pause:3.6": PAUSE_IMAGE,
}
NGINX_SCRIPT = b"""#!/bin/sh
if [ "$1" = "-s" ]; then killall httpd; exit 0; fi
mkdir -p /usr/share/nginx/html
exec httpd -f -p 80 -h /usr/share/nginx/html
"""


def _busybox_files() -> list[Any]:
    binary = Path("/bin/busybox").read_bytes()
    listed = subprocess.run(
        ["/bin/busybox", "--list"], capture_output=True, text=True, check=True
    ).stdout.split()
    return [
        File(path="/bin/busybox", data=binary, mode=0o755),
        *(
            Symlink(path=f"/bin/{a}", target="busybox")
            for a in sorted((set(listed) | {"sh"}) - {"busybox"})
        ),
        Directory(path="/tmp", mode=0o1777),
        File(path="/etc/passwd", data=b"root:x:0:0:root:/root:/bin/sh\n"),
        File(path="/etc/group", data=b"root:x:0:\n"),
    ]


@pytest.fixture(scope="module")
def stand_ins(docker_engine: Any, test_images: dict[str, str]) -> None:
    base = _busybox_files()
    env = [f"PATH={DEFAULT_PATH}"]
    images = {
        BUSYBOX: (base, ImageConfig(cmd=["sh"], env=env)),
        NGINX: (
            [*base, File(path="/usr/sbin/nginx", data=NGINX_SCRIPT, mode=0o755)],
            ImageConfig(cmd=["nginx"], env=env),
        ),
        NODE_HELLO: (
            [*base, Directory(path="/srv")],
            ImageConfig(cmd=["httpd", "-f", "-p", "8080", "-h", "/srv"], env=env),
        ),
    }

    async def build() -> None:
        async with DockerClient(url=docker_engine.url) as client:
            for tag, (files, config) in images.items():
                await client.load_image(image_archive(repo_tag=tag, files=files, config=config))

    anyio.run(build)


async def poll(condition: Callable[[], bool], timeout: float) -> None:
    """Wait until ``condition()`` holds, checking five times a second; fail after ``timeout``."""
    for _ in range(int(timeout * 5)):
        if condition():
            return
        await anyio.sleep(0.2)
    raise TimeoutError(f"not true after {timeout} s")


def _copy(*names: str) -> str:
    """The examples' documents with stand-in images and ``IfNotPresent``."""
    docs: list[Any] = []
    for name in names:
        docs.extend(d for d in yaml.safe_load_all((EXAMPLES / name).read_text()) if d)
    for doc in docs:
        if doc.get("kind") != "Pod":
            continue
        spec = doc["spec"]
        for c in [*spec.get("initContainers", []), *spec.get("containers", [])]:
            c["image"] = STAND_INS.get(c["image"], c["image"])
            c["imagePullPolicy"] = "IfNotPresent"
    return yaml.safe_dump_all(docs)


class Running:
    """One example pod run by the pod worker until stopped; statuses and events recorded."""

    def __init__(self, docker: DockerClient, pod: Pod) -> None:
        self.docker = docker
        self.pod = pod
        self.statuses: list[PodStatus] = []
        self.events = Events()
        self.lines: list[str] = []

    @property
    def status(self) -> PodStatus:
        return self.statuses[-1]

    def container_id(self, name: str) -> str:
        for cs in [
            *(self.status.initContainerStatuses or []),
            *(self.status.containerStatuses or []),
        ]:
            if cs.name == name and cs.containerID:
                return str(cs.containerID).removeprefix("docker://")
        raise AssertionError(f"no container {name}")

    async def exec(self, container: str, *cmd: str) -> str:
        result = await self.docker.exec_run(self.container_id(container), list(cmd), timeout=10)
        return result.output

    async def fetch(self, container: str, url: str, timeout: float = 10) -> str:
        """``wget`` in the container, retried until the server answers (it may still start)."""
        output = ""
        for _ in range(int(timeout * 5)):
            result = await self.docker.exec_run(
                self.container_id(container), ["wget", "-qO-", url], timeout=10
            )
            output = result.output
            if result.exit_code == 0:
                return output
            await anyio.sleep(0.2)
        raise AssertionError(f"{url} did not answer in {container}: {output}")

    async def wait(self, predicate: Callable[[PodStatus], bool], timeout: float = 60) -> None:
        await poll(lambda: bool(self.statuses and predicate(self.status)), timeout)


@pytest.fixture
async def run_example(
    docker: DockerClient, node_name: str, tmp_path: Path, stand_ins: None
) -> AsyncIterator[Callable[..., Any]]:
    async with anyio.create_task_group() as tg:
        stop = anyio.Event()

        async def start(*names: str) -> Running:
            manifests = load_manifests_text(_copy(*names), node_name=node_name)
            (pod,) = manifests.pods
            running = Running(docker, pod)
            options = options_from_manifests(manifests, node_name=node_name, grace_period=2)
            rm = make_manager(docker, node_name, tmp_path, running.events)

            async def go() -> None:
                async with rm:
                    await run_pods(
                        rm,
                        [pod],
                        stop=stop,
                        on_status=lambda p, s: running.statuses.append(s),
                        on_log=lambda p, c, line: running.lines.append(f"{c}: {line.text}"),
                        options=options,
                    )

            tg.start_soon(go)
            return running

        yield start
        stop.set()


def _cs(status: PodStatus, name: str) -> Any:
    for cs in [*(status.initContainerStatuses or []), *(status.containerStatuses or [])]:
        if cs.name == name:
            return cs
    return None


def _running(name: str) -> Callable[[PodStatus], bool]:
    return lambda s: bool(_cs(s, name) and _cs(s, name).state.running)


async def test_pod_configmap_volume_lists_the_config_map_keys(run_example: Any) -> None:
    run = await run_example("configmap__configmaps.yaml", "pod-configmap-volume.yaml")
    await run.wait(lambda s: s.phase == "Succeeded")
    await poll(lambda: bool(run.lines), 10)
    assert run.lines == ["test-container: special.how"]


async def test_secret_pod_mounts_the_secret_files_read_only(run_example: Any) -> None:
    run = await run_example("inject__secret.yaml", "inject__secret-pod.yaml")
    await run.wait(_running("test-container"))
    listing = await run.exec("test-container", "ls", "/etc/secret-volume")
    assert listing.split() == ["password", "username"]
    assert await run.exec("test-container", "cat", "/etc/secret-volume/username") == "my-app"
    assert await run.exec("test-container", "cat", "/etc/secret-volume/password") == "39528$vdg7Jb"


async def test_lifecycle_events_post_start_writes_the_message(run_example: Any) -> None:
    run = await run_example("lifecycle-events.yaml")
    await run.wait(_running("lifecycle-demo-container"))
    message = await run.exec("lifecycle-demo-container", "cat", "/usr/share/message")
    assert message == "Hello from the postStart handler\n"


async def test_exec_liveness_restarts_the_container_after_the_file_goes(run_example: Any) -> None:
    run = await run_example("probe__exec-liveness.yaml")
    await run.wait(lambda s: bool(_cs(s, "liveness") and _cs(s, "liveness").restartCount >= 1), 120)
    messages = [m for _, reason, m in run.events.seen if reason == "Unhealthy"]
    assert "Liveness probe failed: cat: can't open '/tmp/healthy': No such file or directory\n" in (
        messages
    )
    killing = [m for _, reason, m in run.events.seen if reason == "Killing"]
    assert "Container liveness failed liveness probe, will be restarted" in killing


async def test_security_context_runs_as_1000_with_fs_group_2000(run_example: Any) -> None:
    run = await run_example("security__security-context.yaml")
    await run.wait(_running("sec-ctx-demo"))
    assert await run.exec("sec-ctx-demo", "id") == "uid=1000 gid=0(root) groups=0(root),2000\n"
    listing = await run.exec("sec-ctx-demo", "stat", "-c", "%A %g", "/data/demo")
    assert listing == "drwxrwsrwx 2000\n"
    owner = await run.exec(
        "sec-ctx-demo",
        "sh",
        "-c",
        "echo hello > /data/demo/testfile; stat -c '%u %g' /data/demo/testfile",
    )
    assert owner == "1000 2000\n"
    status = await run.exec("sec-ctx-demo", "grep", "NoNewPrivs", "/proc/self/status")
    assert status == "NoNewPrivs:\t1\n"


async def test_shared_volume_serves_what_the_init_container_wrote(run_example: Any) -> None:
    run = await run_example("multi-container__shared-volume.yaml")
    await run.wait(_running("web"))
    page = await run.fetch("web", "http://127.0.0.1/")
    assert page == "Hello from the init container\n"
    refused = await run.exec(
        "web", "sh", "-c", "touch /usr/share/nginx/html/x 2>/dev/null || echo ro"
    )
    assert refused == "ro\n"


async def test_startup_coordination_starts_the_app_after_the_sidecars_startup_probe(
    run_example: Any,
) -> None:
    run = await run_example("multi-container__startup-coordination.yaml")
    await run.wait(_running("main-app"))
    await poll(lambda: "main-app: greeting=hello" in run.lines, 10)
    sidecar, app = _cs(run.status, "config-sidecar"), _cs(run.status, "main-app")
    assert sidecar.started is True
    assert app.state.running.startedAt >= sidecar.state.running.startedAt


async def test_two_container_pod_shares_the_page_the_debian_container_wrote(
    run_example: Any,
) -> None:
    run = await run_example("two-container-pod.yaml")
    await run.wait(
        lambda s: bool(
            _cs(s, "debian-container")
            and _cs(s, "debian-container").state.terminated
            and _cs(s, "nginx-container").state.running
        )
    )
    debian = _cs(run.status, "debian-container").state.terminated
    assert (debian.reason, debian.exitCode) == ("Completed", 0)
    page = await run.fetch("nginx-container", "http://127.0.0.1/")
    assert page == "Hello from the debian container\n"
    assert run.status.phase == "Running"


async def test_a_projected_service_account_token_is_issued_by_the_node_for_vault(
    run_example: Any, tmp_path: Path
) -> None:
    run = await run_example("pod-projected-svc-token.yaml")
    await run.wait(_running("nginx"))
    token = await run.exec("nginx", "cat", "/var/run/secrets/tokens/vault-token")
    public = (tmp_path / "serviceaccount" / "signing-key.pub").read_bytes()
    claims = jwt.decode(token, public, algorithms=["RS256"], audience="vault")
    assert claims["aud"] == ["vault"]
    assert claims["exp"] - claims["iat"] == 7200
    assert claims["iss"] == "https://asynckubelet.local"
    assert claims["sub"] == "system:serviceaccount:default:default"
    assert run.pod.metadata is not None
    assert claims["kubernetes.io"]["pod"] == {"name": "nginx", "uid": run.pod.metadata.uid}


async def test_init_containers_offline_the_download_fails_and_nginx_never_starts(
    run_example: Any,
) -> None:
    """Offline by construction: the loopback backend leaves the pod only ``lo`` (checked
    below), so wget's DNS query for info.cern.ch fails before a packet is sent; the
    example's ``dnsPolicy: Default`` stays as written."""
    run = await run_example("init-containers.yaml")

    def retried_in_back_off(s: PodStatus) -> bool:
        install = _cs(s, "install")
        return bool(
            install
            and install.restartCount >= 1
            and kubectl_status(run.pod, s) == "Init:CrashLoopBackOff"
        )

    await run.wait(retried_in_back_off, 90)
    sandbox = (await run.docker.list_containers(labels=_pod_labels(run, naming.TYPE_SANDBOX)))[0]
    network = (await run.docker.inspect_container(sandbox["Id"]))["HostConfig"]["NetworkMode"]
    assert network == "none"
    assert "install: wget: bad address 'info.cern.ch'" in run.lines
    words = {kubectl_status(run.pod, s) for s in run.statuses}
    assert "Init:CrashLoopBackOff" in words
    assert words <= {"Init:0/1", "Init:Error", "Init:CrashLoopBackOff"}
    for s in run.statuses:
        nginx = _cs(s, "nginx")
        assert nginx.state.waiting.reason == "PodInitializing"
        assert s.phase == "Pending"
    containers = await run.docker.list_containers(labels=_pod_labels(run, naming.TYPE_CONTAINER))
    assert {(c.get("Labels") or {})[naming.LABEL_CONTAINER_NAME] for c in containers} == {"install"}


def _pod_labels(run: Running, kind: str) -> dict[str, str | None]:
    assert run.pod.metadata is not None
    return {naming.LABEL_POD_UID: run.pod.metadata.uid, naming.LABEL_TYPE: kind}


async def test_inject_envars_sets_the_greeting_and_farewell(run_example: Any) -> None:
    run = await run_example("inject__envars.yaml")
    await run.wait(_running("envar-demo-container"))
    env = (await run.exec("envar-demo-container", "env")).splitlines()
    assert "DEMO_GREETING=Hello from the environment" in env
    assert "DEMO_FAREWELL=Such a sweet sorrow" in env
    assert run.status.phase == "Running"


async def test_multiple_config_map_env_variables_are_printed_and_the_pod_completes(
    run_example: Any,
) -> None:
    run = await run_example(
        "configmap__configmaps.yaml", "pod-multiple-configmap-env-variable.yaml"
    )
    await run.wait(lambda s: s.phase == "Succeeded")
    await poll(lambda: "test-container: LOG_LEVEL=INFO" in run.lines, 10)
    assert "test-container: SPECIAL_LEVEL_KEY=very" in run.lines
    terminated = _cs(run.status, "test-container").state.terminated
    assert (terminated.reason, terminated.exitCode) == ("Completed", 0)
    assert kubectl_status(run.pod, run.status) == "Completed"


@pytest.mark.parametrize(
    ("example", "container", "qos", "cgroup"),
    [
        (
            "qos__qos-pod.yaml",
            "qos-demo-ctr",
            "Guaranteed",
            {"CpuShares": 716, "CpuQuota": 70000, "CpuPeriod": 100000, "Memory": 209715200},
        ),
        (
            "qos__qos-pod-2.yaml",
            "qos-demo-2-ctr",
            "Burstable",
            {"CpuShares": 2, "CpuQuota": 0, "CpuPeriod": 0, "Memory": 209715200},
        ),
        (
            "qos__qos-pod-3.yaml",
            "qos-demo-3-ctr",
            "BestEffort",
            {"CpuShares": 2, "CpuQuota": 0, "CpuPeriod": 0, "Memory": 0},
        ),
    ],
)
async def test_qos_examples_get_their_class_and_the_kubelets_cgroup_settings(
    run_example: Any, example: str, container: str, qos: str, cgroup: dict[str, int]
) -> None:
    run = await run_example(example)
    await run.wait(_running(container))
    assert run.status.qosClass == qos
    host = (await run.docker.inspect_container(run.container_id(container)))["HostConfig"]
    assert {k: host.get(k) for k in cgroup} == cgroup


async def test_a_pod_with_scheduling_gates_stays_scheduling_gated_and_creates_nothing(
    run_example: Any,
) -> None:
    run = await run_example("pod-with-scheduling-gates.yaml")
    await run.wait(lambda s: s.phase == "Pending")
    # A gated pod's worker reports SchedulingGated and waits to be woken without syncing
    # (nothing is due for it): by its first report it has decided, and made nothing.
    assert {(s.phase, kubectl_status(run.pod, s)) for s in run.statuses} == {
        ("Pending", "SchedulingGated")
    }
    (scheduled,) = run.status.conditions
    assert (scheduled.type, scheduled.status, scheduled.reason, scheduled.message) == (
        "PodScheduled",
        "False",
        "SchedulingGated",
        "Scheduling is blocked due to non-empty scheduling gates",
    )
    assert run.status.containerStatuses is None
    assert run.pod.metadata is not None
    owned = await run.docker.list_containers(labels={naming.LABEL_POD_UID: run.pod.metadata.uid})
    assert owned == []
