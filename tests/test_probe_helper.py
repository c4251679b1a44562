"""Where probes and hooks connect from, and the probe helper's words turned into the
kubelet's: the pure parts of :mod:`asynckubelet.runtime.probehelper` and the helper path
of :mod:`asynckubelet.runtime.hooks`."""

from __future__ import annotations

import dataclasses
import errno
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from lightkube.models.core_v1 import (
    Container,
    ExecAction,
    HTTPGetAction,
    HTTPHeader,
    PodSpec,
    Probe,
    TCPSocketAction,
)
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Pod

from asynckubelet import errors
from asynckubelet.docker.engine import EngineTLS
from asynckubelet.docker.types import ExecResult
from asynckubelet.images import build as image_build
from asynckubelet.network import PodNetwork
from asynckubelet.node.prober import Prober
from asynckubelet.runtime import hooks, naming, probehelper
from asynckubelet.runtime.manager import RuntimeConfig, RuntimeManager
from asynckubelet.runtime.probehelper import (
    ProbeHelpers,
    Route,
    choose_route,
    describe_engine,
    engine_is_isolated,
    helper_config,
)
from asynckubelet.runtime.probes import ProbeResult
from asynckubelet.runtime.types import ContainerState, ContainerStatus, PodRuntimeStatus
from asynckubelet.testing import FakeDocker

R = Route


@pytest.mark.parametrize(
    ("host_network", "pod_ip", "local", "isolated", "root", "route"),
    [
        # a remote engine: the node shares no network with the pods, whatever else holds
        (False, "10.1.0.5", False, False, True, R.HELPER),
        (True, "", False, False, True, R.HELPER),
        (False, "", False, False, True, R.HELPER),
        (False, "10.1.0.5", False, False, False, R.HELPER),
        # Docker Desktop or rootless behind a local socket: the same
        (False, "172.18.0.2", True, True, True, R.HELPER),
        (True, "", True, True, True, R.HELPER),
        # a local engine the node shares a network with: the kubelet's way
        (False, "10.137.0.4", True, False, True, R.POD_IP),
        (False, "172.18.0.2", True, False, False, R.POD_IP),
        (True, "", True, False, True, R.NODE_LOOPBACK),
        (True, "", True, False, False, R.NODE_LOOPBACK),
        # no pod IP (the loopback network): its netns as root, else the helper
        (False, "", True, False, True, R.NETNS),
        (False, "", True, False, False, R.HELPER),
    ],
)
def test_the_route_of_a_probe_follows_what_the_node_can_reach(
    host_network: bool, pod_ip: str, local: bool, isolated: bool, root: bool, route: Route
) -> None:
    chosen = choose_route(
        host_network=host_network,
        pod_ip=pod_ip,
        engine_local=local,
        engine_isolated=isolated,
        root=root,
    )
    assert chosen is route


@pytest.mark.parametrize(
    ("info", "isolated"),
    [
        ({"OperatingSystem": "Debian GNU/Linux 12 (bookworm)", "SecurityOptions": []}, False),
        ({"OperatingSystem": "Docker Desktop", "SecurityOptions": ["name=seccomp"]}, True),
        ({"OperatingSystem": "Ubuntu 24.04", "SecurityOptions": ["name=rootless"]}, True),
        ({}, False),
    ],
)
def test_docker_desktop_and_rootless_engines_count_as_isolated(
    info: dict[str, Any], isolated: bool
) -> None:
    assert engine_is_isolated(info) is isolated


def test_a_helper_joins_its_sandboxs_network_and_carries_the_pods_and_nodes_labels() -> None:
    sandbox_labels = {
        naming.LABEL_POD_NAME: "web",
        naming.LABEL_POD_NAMESPACE: "default",
        naming.LABEL_POD_UID: "u1",
        naming.LABEL_ATTEMPT: "2",
    }
    name, config = helper_config(
        image="asynckubelet.local/probe:abc",
        node="n1",
        sandbox_id="sb1",
        sandbox_labels=sandbox_labels,
    )
    assert name == "akl_PROBE_web_default_u1_2"
    assert config["HostConfig"]["NetworkMode"] == "container:sb1"
    assert config["Labels"] == {
        naming.LABEL_NODE: "n1",
        naming.LABEL_POD_NAME: "web",
        naming.LABEL_POD_NAMESPACE: "default",
        naming.LABEL_POD_UID: "u1",
        naming.LABEL_TYPE: naming.TYPE_PROBE_HELPER,
        naming.LABEL_SANDBOX_ID: "sb1",
    }


def helper_docker(
    stdout: str = "", exit_code: int = 0, fail: Exception | None = None
) -> FakeDocker:
    """The app and its helper running; every exec answers with the probe program's output
    given (or fails)."""
    docker = FakeDocker()
    docker.add_container(id="app-id", state="running")
    docker.add_container(id="helper-id", state="running")
    if fail is not None:
        docker.fail("exec_run", fail, times=None)
    docker.exec_results = [ExecResult(exit_code=exit_code, stdout=stdout.encode(), stderr=b"")]
    return docker


def execs(docker: FakeDocker) -> list[tuple[str, list[str]]]:
    return [(c.target, list(c.command)) for c in docker.calls if c.method == "exec_run"]


APP = Container(name="app", image="img")
HELPED = hooks.HookTarget(container_id="app-id", host="10.1.0.5", netns=None, helper="helper-id")


async def _run(
    probe: Probe, docker: FakeDocker, target: hooks.HookTarget = HELPED
) -> hooks.Outcome:
    return await hooks.run_handler(probe, APP, target, docker=docker, timeout=1.0)


def _http(path: str = "/healthz", **kw: Any) -> Probe:
    return Probe(httpGet=HTTPGetAction(port=8080, path=path, **kw))


@pytest.mark.anyio
async def test_an_http_probe_with_a_helper_runs_the_probe_program_in_the_helper() -> None:
    docker = helper_docker("status 200\nok")
    await _run(_http(httpHeaders=[HTTPHeader(name="X-Check", value="1")]), docker)
    assert execs(docker) == [
        (
            "helper-id",
            [
                "/probe", "http", "10.1.0.5", "8080", "/healthz", "1000",
                "Host: 10.1.0.5:8080", "User-Agent: kube-probe/1.33", "Accept: */*",
                "X-Check: 1",
            ],
        )
    ]  # fmt: skip


@pytest.mark.anyio
async def test_a_probe_header_replaces_the_kubelets_default_of_the_same_name() -> None:
    docker = helper_docker("status 200\n")
    await _run(_http(httpHeaders=[HTTPHeader(name="host", value="example.test")]), docker)
    assert "Host: example.test" in execs(docker)[0][1]
    assert not any(arg.startswith("Host: 10.") for arg in execs(docker)[0][1])


@pytest.mark.parametrize(
    ("answer", "result", "text"),
    [
        ("status 200\nhello", ProbeResult.SUCCESS, "hello"),
        ("status 302\n", ProbeResult.SUCCESS, ""),
        ("status 500\n", ProbeResult.FAILURE, "HTTP probe failed with statuscode: 500"),
        ("status 404\nnot here", ProbeResult.FAILURE, "HTTP probe failed with statuscode: 404"),
        (
            f"dial {errno.ECONNREFUSED}\n",
            ProbeResult.FAILURE,
            'Get "http://10.1.0.5:8080/healthz": dial tcp 10.1.0.5:8080: connect: '
            "connection refused",
        ),
        (
            "timeout dial\n",
            ProbeResult.FAILURE,
            'Get "http://10.1.0.5:8080/healthz": dial tcp 10.1.0.5:8080: i/o timeout',
        ),
        (
            "timeout headers\n",
            ProbeResult.FAILURE,
            'Get "http://10.1.0.5:8080/healthz": context deadline exceeded '
            "(Client.Timeout exceeded while awaiting headers)",
        ),
        ("error EOF\n", ProbeResult.FAILURE, 'Get "http://10.1.0.5:8080/healthz": EOF'),
    ],
)
@pytest.mark.anyio
async def test_the_helpers_http_verdicts_read_as_the_kubelets(
    answer: str, result: ProbeResult, text: str
) -> None:
    outcome = await _run(_http(), helper_docker(answer))
    assert (outcome.result, outcome.output) == (result, text)


@pytest.mark.parametrize(
    ("answer", "result", "text"),
    [
        ("ok\n", ProbeResult.SUCCESS, ""),
        (
            f"dial {errno.ECONNREFUSED}\n",
            ProbeResult.FAILURE,
            "dial tcp 10.1.0.5:5432: connect: connection refused",
        ),
        ("timeout dial\n", ProbeResult.FAILURE, "dial tcp 10.1.0.5:5432: i/o timeout"),
    ],
)
@pytest.mark.anyio
async def test_the_helpers_tcp_verdicts_read_as_the_kubelets(
    answer: str, result: ProbeResult, text: str
) -> None:
    docker = helper_docker(answer)
    outcome = await _run(Probe(tcpSocket=TCPSocketAction(port=5432)), docker)
    assert (outcome.result, outcome.output) == (result, text)
    assert execs(docker)[0][1] == ["/probe", "tcp", "10.1.0.5", "5432", "1000"]


@pytest.mark.anyio
async def test_a_helper_that_cannot_be_reached_makes_the_probe_unknown_with_the_reason() -> None:
    docker = helper_docker(fail=errors.NotFound("no such container: helper-id"))
    outcome = await _run(_http(), docker)
    assert outcome.result is ProbeResult.UNKNOWN
    assert outcome.error == "the probe helper failed: no such container: helper-id"


@pytest.mark.anyio
async def test_an_https_probe_through_the_helper_is_unknown_with_the_reason() -> None:
    outcome = await _run(_http(scheme="HTTPS"), helper_docker())
    assert outcome.result is ProbeResult.UNKNOWN
    assert "the probe helper speaks plain HTTP only" in outcome.error


@pytest.mark.anyio
async def test_a_target_without_a_route_makes_http_probes_unknown_with_its_error() -> None:
    target = hooks.HookTarget(container_id="c", host="", netns=None, error="cannot start helper: x")
    outcome = await _run(_http(), helper_docker(), target)
    assert (outcome.result, outcome.error) == (ProbeResult.UNKNOWN, "cannot start helper: x")


@pytest.mark.anyio
async def test_an_exec_probe_never_goes_through_the_helper() -> None:
    docker = helper_docker("fine")
    await _run(Probe(exec=ExecAction(command=["true"])), docker)
    assert execs(docker) == [("app-id", ["true"])]


class OneAddress:
    name = "docker"

    def __init__(self, ip: str) -> None:
        self.ip = ip

    async def get_pod_network_status(self, *, sandbox_id: str) -> PodNetwork:
        return PodNetwork(ips=(self.ip,) if self.ip else ())


class Helpers:
    def __init__(self, fail: Exception | None = None) -> None:
        self.fail = fail
        self.asked: list[str] = []

    async def container_for(self, *, sandbox_id: str) -> str:
        self.asked.append(sandbox_id)
        if self.fail is not None:
            raise self.fail
        return f"helper-of-{sandbox_id}"


POD = Pod(
    metadata=ObjectMeta(name="web", namespace="default", uid="u1"), spec=PodSpec(containers=[APP])
)


def _manager(url: str, ip: str, helpers: Helpers) -> RuntimeManager:
    rm = RuntimeManager(
        RuntimeConfig(node_name="n1"),
        docker=FakeDocker(url=url, info={"OperatingSystem": "Debian GNU/Linux 12 (bookworm)"}),
        network=OneAddress(ip),  # type: ignore[arg-type]
    )
    rm.deps = dataclasses.replace(rm.deps, probe_helpers=helpers)  # type: ignore[arg-type]
    return rm


@pytest.mark.anyio
async def test_a_pod_on_a_remote_engine_is_probed_through_its_sandboxs_helper() -> None:
    helpers = Helpers()
    rm = _manager("tcp://192.0.2.10:2376", "172.18.0.2", helpers)
    target = await rm.hook_target(POD, container_id="c1", sandbox_id="sb1")
    assert (target.helper, target.host, helpers.asked) == ("helper-of-sb1", "172.18.0.2", ["sb1"])


@pytest.mark.anyio
async def test_a_pod_on_a_local_engine_is_probed_at_its_ip_without_a_helper() -> None:
    helpers = Helpers()
    rm = _manager("unix:///var/run/docker.sock", "172.18.0.2", helpers)
    target = await rm.hook_target(POD, container_id="c1", sandbox_id="sb1")
    assert (target.helper, target.host, helpers.asked) == (None, "172.18.0.2", [])


@pytest.mark.anyio
async def test_a_helper_that_cannot_start_leaves_a_target_that_names_the_reason() -> None:
    helpers = Helpers(fail=errors.ImageBuildError("no C compiler found"))
    rm = _manager("tcp://192.0.2.10:2376", "172.18.0.2", helpers)
    target = await rm.hook_target(POD, container_id="c1", sandbox_id="sb1")
    assert target.helper is None
    assert target.error == "cannot start the pod's probe helper: no C compiler found"


@pytest.mark.parametrize(
    ("url", "tls", "isolated", "start"),
    [
        (
            "tcp://192.0.2.10:2376",
            EngineTLS(verify=True, cert_path=Path("/certs/client")),
            False,
            "remote, tcp://192.0.2.10:2376 over TLS, the engine verified against "
            "/certs/client/ca.pem, client certificate /certs/client/cert.pem: this node cannot "
            "enter its containers' namespaces or reach pod IPs, so pods use the docker network "
            "backend",
        ),
        (
            "tcp://192.0.2.10:2376",
            EngineTLS(verify=False, cert_path=Path("/certs/client")),
            False,
            "remote, tcp://192.0.2.10:2376 over TLS without verifying the engine (DOCKER_TLS)",
        ),
        ("tcp://192.0.2.10:2375", None, False, "remote, tcp://192.0.2.10:2375 without TLS"),
        (
            "unix:///Users/me/.docker/run/docker.sock",
            None,
            True,
            "local socket unix:///Users/me/.docker/run/docker.sock, but the engine runs apart",
        ),
        (
            "unix:///var/run/docker.sock",
            None,
            False,
            "local, unix:///var/run/docker.sock: its containers' namespaces and pod volumes are "
            "reachable from here",
        ),
    ],
)
def test_doctor_describes_the_engines_shape_and_what_follows_for_probes(
    url: str, tls: EngineTLS | None, isolated: bool, start: str
) -> None:
    assert describe_engine(url=url, tls=tls, isolated=isolated).startswith(start)


@pytest.mark.anyio
async def test_a_prober_asks_the_runtime_where_to_probe_with_the_pod_ip_it_knows() -> None:
    asked: list[dict[str, Any]] = []

    async def locate(pod: Pod, **where: Any) -> hooks.HookTarget:
        asked.append(where)
        return HELPED

    pod = Pod(
        metadata=ObjectMeta(name="web", namespace="default", uid="u1"),
        spec=PodSpec(containers=[APP]),
    )
    now = datetime.now(UTC)
    status = ContainerStatus(
        id="c1", name="app", state=ContainerState.RUNNING, created_at=now, sandbox_id="sb1"
    )
    prober = Prober(docker=FakeDocker(), events=lambda *a, **k: None, locate=locate)
    prober.update(
        pod,
        PodRuntimeStatus(
            uid="u1", name="web", namespace="default", containers=(status,), ips=("10.1.0.5",)
        ),
    )
    assert await prober.target(status) is HELPED
    assert asked == [{"container_id": "c1", "sandbox_id": "sb1", "pod_ip": "10.1.0.5"}]


PROBE_TAG = "asynckubelet.local/probe:t"


def helper_engine(*, has_image: bool = True) -> FakeDocker:
    """Sandbox ``sb1`` of pod default/web running; new containers are ``helper1``, ``helper2``..."""
    docker = FakeDocker(id_prefix="helper", images=[PROBE_TAG] if has_image else [])
    docker.add_container(
        id="sb1",
        state="running",
        labels={
            naming.LABEL_POD_NAME: "web",
            naming.LABEL_POD_NAMESPACE: "default",
            naming.LABEL_POD_UID: "u1",
            naming.LABEL_ATTEMPT: "0",
        },
    )
    return docker


def _helpers(engine: FakeDocker) -> ProbeHelpers:
    return ProbeHelpers(docker=engine, node="n1", image=PROBE_TAG)


@pytest.mark.anyio
async def test_a_sandboxs_helper_is_started_once_and_reused() -> None:
    engine = helper_engine()
    helpers = _helpers(engine)
    first = await helpers.container_for(sandbox_id="sb1")
    second = await helpers.container_for(sandbox_id="sb1")
    assert (first, second, engine.targets("create_container")) == (
        "helper1",
        "helper1",
        ["akl_PROBE_web_default_u1_0"],
    )


@pytest.mark.anyio
async def test_a_running_helper_left_by_an_earlier_agent_is_adopted() -> None:
    engine = helper_engine()
    await _helpers(engine).container_for(sandbox_id="sb1")
    adopted = await _helpers(engine).container_for(sandbox_id="sb1")
    assert (adopted, len(engine.targets("create_container"))) == ("helper1", 1)


@pytest.mark.anyio
async def test_a_helper_that_stopped_is_replaced_at_the_next_look(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(probehelper, "RECHECK_SECONDS", 0.0)
    engine = helper_engine()
    helpers = _helpers(engine)
    await helpers.container_for(sandbox_id="sb1")
    engine.exit("helper1")
    replaced = await helpers.container_for(sandbox_id="sb1")
    assert (replaced, engine.targets("remove_container")) == ("helper2", ["helper1"])


@pytest.mark.anyio
async def test_the_helper_image_is_loaded_through_the_api_when_the_engine_lacks_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    built: list[str] = []
    archives: list[bytes] = []

    async def build(docker: FakeDocker, *, tag: str) -> str:
        built.append(tag)
        archives.append(
            image_build.image_archive(
                repo_tag=tag,
                files=[image_build.File(path="/probe", data=b"", mode=0o755)],
                config=image_build.ImageConfig(entrypoint=("/probe",)),
            )
        )
        await docker.load_image(archives[-1])
        return "sha256:x"

    monkeypatch.setattr(image_build, "build_probe_image", build)
    engine = helper_engine(has_image=False)
    await _helpers(engine).container_for(sandbox_id="sb1")
    assert (built, engine.loaded) == ([PROBE_TAG], archives)


@pytest.mark.anyio
async def test_removing_a_sandboxs_helpers_removes_every_one_labelled_with_it() -> None:
    engine = helper_engine()
    helpers = _helpers(engine)
    await helpers.container_for(sandbox_id="sb1")
    await helpers.remove_for(sandbox_id="sb1")
    assert engine.targets("remove_container") == ["helper1"]
    assert await helpers.container_for(sandbox_id="sb1") == "helper2"
