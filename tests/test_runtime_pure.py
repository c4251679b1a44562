"""The runtime's pure helpers: expansion, environment, image references, Docker config,
inspect parsing, garbage-collection choice, resources and names."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import builders
import pytest
from lightkube.models.core_v1 import Container, Pod

from asynckubelet import errors
from asynckubelet.runtime import containers as ctr
from asynckubelet.runtime import naming
from asynckubelet.runtime.env import Environment, PodContext, make_environment, service_environment
from asynckubelet.runtime.expansion import expand
from asynckubelet.runtime.images import (
    auths_from_secrets,
    registry_of,
    validate_image_name,
    with_default_tag,
)
from asynckubelet.runtime.kill import dead_instances_to_remove
from asynckubelet.runtime.poddns import DNSSettings, ResolverConfig
from asynckubelet.runtime.resources import host_config_resources, resource_field_value
from asynckubelet.runtime.sandbox import generate_pod_sandbox_config, sandbox_docker_config
from asynckubelet.runtime.types import ContainerState, ContainerStatus, PodRuntimeStatus

VARS = {"VAR_A": "A", "VAR_B": "B", "VAR_C": "C", "VAR_REF": "$(VAR_A)", "VAR_EMPTY": ""}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("$(VAR_A)", "A"),
        ("___$(VAR_B)___", "___B___"),
        ("$(VAR_A)-$(VAR_A)", "A-A"),
        ("$(VAR_A)$(VAR_B)$(VAR_C)", "ABC"),
        ("$(VAR_REF)", "$(VAR_A)"),
        ("$(VAR_EMPTY)", ""),
        ("$(UNKNOWN)", "$(UNKNOWN)"),
        ("$$(VAR_A)", "$(VAR_A)"),
        ("$$$(VAR_A)", "$A"),
        ("$$$$(VAR_A)", "$$(VAR_A)"),
        ("$(VAR_A", "$(VAR_A"),
        ("$VAR_A", "$VAR_A"),
        ("$", "$"),
        ("foo$", "foo$"),
        ("$()", "$()"),
        ("$$", "$"),
        ("no refs here", "no refs here"),
    ],
)
def test_expansion_follows_the_kubelet_rules(text: str, expected: str) -> None:
    assert expand(text, VARS) == expected


def _pod(spec: dict[str, Any], **meta: Any) -> Pod:
    return builders.pod("web", namespace="team", uid="u-1", meta=meta, **spec)


def _env(container: dict[str, Any], ctx: PodContext | None = None, **meta: Any) -> Environment:
    pod = _pod({"containers": [container]}, **meta)
    assert pod.spec is not None
    return make_environment(pod, pod.spec.containers[0], ctx or PodContext(node_name="n1"))


def test_env_values_expand_against_variables_defined_before_them() -> None:
    env = _env(
        {
            "name": "c",
            "env": [
                {"name": "LATER", "value": "$(FIRST)-x"},
                {"name": "FIRST", "value": "one"},
                {"name": "SECOND", "value": "$(FIRST)-two"},
            ],
        }
    )
    assert dict(env.env) == {"LATER": "$(FIRST)-x", "FIRST": "one", "SECOND": "one-two"}


def test_command_and_args_expand_against_the_final_environment() -> None:
    env = _env(
        {
            "name": "c",
            "env": [{"name": "WHO", "value": "world"}],
            "command": ["echo", "$(WHO)"],
            "args": ["$$(WHO)", "$(MISSING)"],
        }
    )
    assert env.command == ["echo", "world"]
    assert env.args == ["$(WHO)", "$(MISSING)"]


def test_field_refs_give_pod_metadata_and_addresses() -> None:
    env = _env(
        {
            "name": "c",
            "env": [
                {"name": n, "valueFrom": {"fieldRef": {"fieldPath": p}}}
                for n, p in [
                    ("NAME", "metadata.name"),
                    ("NS", "metadata.namespace"),
                    ("UID", "metadata.uid"),
                    ("NODE", "spec.nodeName"),
                    ("IP", "status.podIP"),
                    ("IPS", "status.podIPs"),
                    ("TIER", "metadata.labels['tier']"),
                ]
            ],
        },
        PodContext(node_name="n1", pod_ips=("10.1.0.5", "fd00::5")),
        labels={"tier": "front"},
    )
    assert dict(env.env) == {
        "NAME": "web",
        "NS": "team",
        "UID": "u-1",
        "NODE": "n1",
        "IP": "10.1.0.5",
        "IPS": "10.1.0.5,fd00::5",
        "TIER": "front",
    }


def test_config_map_and_secret_keys_resolve_and_env_from_applies_prefix_and_skips_bad_keys() -> (
    None
):
    ctx = PodContext(
        configmaps={"cfg": {"MODE": "fast", "bad-key!": "x"}},
        secrets={"sec": {"token": b"t0k"}},
    )
    env = _env(
        {
            "name": "c",
            "envFrom": [{"configMapRef": {"name": "cfg"}, "prefix": "CFG_"}],
            "env": [
                {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "sec", "key": "token"}}}
            ],
        },
        ctx,
    )
    assert dict(env.env) == {"CFG_MODE": "fast", "TOKEN": "t0k"}
    assert env.skipped == ("CFG_bad-key!",)


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ({"configMapKeyRef": {"name": "gone", "key": "k"}}, 'configmap "gone" not found'),
        (
            {"configMapKeyRef": {"name": "cfg", "key": "nokey"}},
            "couldn't find key nokey in ConfigMap team/cfg",
        ),
        ({"secretKeyRef": {"name": "gone", "key": "k"}}, 'secret "gone" not found'),
    ],
)
def test_missing_references_are_container_config_errors_in_the_kubelets_words(
    ref: dict[str, Any], message: str
) -> None:
    ctx = PodContext(configmaps={"cfg": {"k": "v"}})
    with pytest.raises(errors.ContainerConfigError, match=message):
        _env({"name": "c", "env": [{"name": "X", "valueFrom": ref}]}, ctx)


def test_optional_missing_references_are_skipped() -> None:
    env = _env(
        {
            "name": "c",
            "env": [
                {
                    "name": "X",
                    "valueFrom": {
                        "configMapKeyRef": {"name": "gone", "key": "k", "optional": True}
                    },
                }
            ],
            "envFrom": [{"secretRef": {"name": "gone", "optional": True}}],
        }
    )
    assert env.env == ()


@pytest.mark.parametrize(
    ("image", "registry", "tagged"),
    [
        ("busybox", "docker.io", "busybox:latest"),
        ("library/busybox:1.36", "docker.io", "library/busybox:1.36"),
        ("127.0.0.1:5000/app", "127.0.0.1:5000", "127.0.0.1:5000/app:latest"),
        ("localhost/app:1", "localhost", "localhost/app:1"),
        ("registry.k8s.io/pause:3.10", "registry.k8s.io", "registry.k8s.io/pause:3.10"),
        ("ghcr.io/o/app@sha256:" + "a" * 64, "ghcr.io", "ghcr.io/o/app@sha256:" + "a" * 64),
    ],
)
def test_image_references_parse_registry_and_default_tag(
    image: str, registry: str, tagged: str
) -> None:
    validate_image_name(image)
    assert registry_of(image) == registry
    assert with_default_tag(image) == tagged


@pytest.mark.parametrize("image", ["", "library/UPPER", "a//b", "bad:tag:twice", "-leading"])
def test_invalid_image_names_are_rejected_as_invalid_image_name(image: str) -> None:
    with pytest.raises(errors.InvalidImageName):
        validate_image_name(image)


def test_pull_secrets_of_both_docker_config_types_give_registry_auth() -> None:
    auth = base64.b64encode(b"alice:pw").decode()
    secrets = [
        (
            "kubernetes.io/dockerconfigjson",
            {
                ".dockerconfigjson": json.dumps(
                    {"auths": {"https://reg.example:5000/v2/": {"auth": auth}}}
                ).encode()
            },
        ),
        (
            "kubernetes.io/dockercfg",
            {
                ".dockercfg": json.dumps(
                    {"index.docker.io": {"username": "bob", "password": "pw2"}}
                ).encode()
            },
        ),
        ("Opaque", {"x": b"y"}),
    ]
    found = auths_from_secrets(secrets)
    assert [(a.server, a.header()["username"], a.header()["password"]) for a in found] == [
        ("reg.example:5000", "alice", "pw"),
        ("docker.io", "bob", "pw2"),
    ]


def _container(**spec: Any) -> Container:
    return cast(Container, Container.from_dict({"name": "app", "image": "busybox:1", **spec}))


def test_container_config_joins_the_sandbox_and_carries_the_identity_labels() -> None:
    pod = _pod(
        {"containers": [{"name": "app", "image": "busybox:1"}], "shareProcessNamespace": True}
    )
    container = _container(command=["sleep"], args=["1"])
    env = Environment(env=(("A", "1"),), command=["sleep"], args=["1"])
    name, config = ctr.container_config(
        pod, container, node="n1", sandbox_id="sb1", restart_count=3, environment=env
    )
    assert name == "akl_app_web_team_u-1_3"
    assert config["HostConfig"]["NetworkMode"] == "container:sb1"
    assert config["HostConfig"]["IpcMode"] == "container:sb1"
    assert config["HostConfig"]["PidMode"] == "container:sb1"
    labels = config["Labels"]
    assert labels[naming.LABEL_NODE] == "n1"
    assert labels[naming.LABEL_RESTART_COUNT] == "3"
    assert labels[naming.LABEL_HASH] == naming.hash_container(container)
    assert labels[naming.LABEL_SANDBOX_ID] == "sb1"
    assert config["Entrypoint"] == ["sleep"]
    assert config["Cmd"] == ["1"]
    assert config["Env"] == ["A=1"]


@pytest.mark.parametrize(
    ("command", "args", "entrypoint", "cmd"),
    [
        (["sh"], None, ["sh"], []),
        (None, ["-c", "x"], None, ["-c", "x"]),
        (None, None, None, None),
    ],
    ids=[
        "command replaces the image's command and args",
        "args only keep the entrypoint",
        "neither keeps both",
    ],
)
def test_command_and_args_map_to_entrypoint_and_cmd_as_kubernetes_defines(
    command: list[str] | None, args: list[str] | None, entrypoint: Any, cmd: Any
) -> None:
    pod = _pod({"containers": [{"name": "app", "image": "busybox:1"}]})
    env = Environment(env=(), command=command, args=args)
    _, config = ctr.container_config(
        pod, _container(), node="n", sandbox_id="s", restart_count=0, environment=env
    )
    assert config.get("Entrypoint") == entrypoint
    assert config.get("Cmd") == cmd


def test_sandbox_config_is_shareable_ipc_with_the_plugins_network_and_the_pods_hostname() -> None:
    pod = _pod(
        {"containers": [{"name": "app", "image": "busybox:1"}], "hostname": "h1"},
        labels={"app": "web"},
    )
    sandbox = generate_pod_sandbox_config(
        pod, node="n1", attempt=2, dns=DNSSettings(), node_resolver=ResolverConfig()
    )
    config = sandbox_docker_config(pod, sandbox, image="pause", network_mode="none")
    assert sandbox.name == "akl_POD_web_team_u-1_2"
    assert config["HostConfig"]["IpcMode"] == "shareable"
    assert config["HostConfig"]["NetworkMode"] == "none"
    assert config["Hostname"] == "h1"
    assert config["Labels"]["app"] == "web"
    assert config["Labels"][naming.LABEL_TYPE] == naming.TYPE_SANDBOX


def _inspect(state: dict[str, Any]) -> Any:
    return {
        "Id": "c1",
        "Created": "2026-01-02T03:04:05.123456789Z",
        "Image": "sha256:abc",
        "Config": {
            "Image": "busybox:1",
            "Labels": {naming.LABEL_CONTAINER_NAME: "app", naming.LABEL_RESTART_COUNT: "2"},
        },
        "State": state,
    }


@pytest.mark.parametrize(
    ("state", "kstate", "reason"),
    [
        ({"Status": "running", "Running": True}, ContainerState.RUNNING, ""),
        ({"Status": "created"}, ContainerState.CREATED, ""),
        ({"Status": "exited", "ExitCode": 0}, ContainerState.EXITED, "Completed"),
        ({"Status": "exited", "ExitCode": 2}, ContainerState.EXITED, "Error"),
        (
            {"Status": "exited", "ExitCode": 137, "OOMKilled": True},
            ContainerState.EXITED,
            "OOMKilled",
        ),
        (
            {"Status": "exited", "ExitCode": 127, "Error": "exec: no such file"},
            ContainerState.EXITED,
            "ContainerCannotRun",
        ),
    ],
)
def test_inspect_becomes_a_container_status_with_the_kubelets_reasons(
    state: dict[str, Any], kstate: ContainerState, reason: str
) -> None:
    status = ctr.container_status_from_inspect(_inspect(state))
    assert (status.state, status.reason) == (kstate, reason)
    assert status.restart_count == 2
    assert status.created_at == datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)


def test_docker_zero_times_read_as_none() -> None:
    assert ctr.parse_time("0001-01-01T00:00:00Z") is None
    assert ctr.parse_time("2026-01-02T03:04:05Z") == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def test_garbage_collection_keeps_the_newest_dead_instance_of_each_container() -> None:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)

    def c(cid: str, name: str, state: ContainerState, age: int) -> ContainerStatus:
        return ContainerStatus(
            id=cid, name=name, state=state, created_at=t0 - timedelta(seconds=age)
        )

    status = PodRuntimeStatus(
        uid="u",
        name="p",
        namespace="n",
        containers=(
            c("a3", "a", ContainerState.RUNNING, 0),
            c("a2", "a", ContainerState.EXITED, 10),
            c("a1", "a", ContainerState.EXITED, 20),
            c("a0", "a", ContainerState.EXITED, 30),
            c("b0", "b", ContainerState.EXITED, 5),
        ),
    )
    assert dead_instances_to_remove(status) == ["a1", "a0"]


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        ({"requests": {"cpu": "250m"}}, {"CpuShares": 256}),
        ({"requests": {"cpu": "1m"}}, {"CpuShares": 2}),
        (
            {"limits": {"cpu": "500m", "memory": "64Mi"}},
            {"CpuShares": 512, "CpuPeriod": 100000, "CpuQuota": 50000, "Memory": 67108864},
        ),
        ({}, {"CpuShares": 2}),
        ({"limits": {"memory": "200Mi"}}, {"CpuShares": 2, "Memory": 209715200}),
    ],
)
def test_cpu_and_memory_map_to_docker_as_the_kubelet_maps_them_to_cgroups(
    resources: dict[str, Any], expected: dict[str, int]
) -> None:
    assert host_config_resources(_container(resources=resources)) == expected


def test_resource_field_refs_divide_and_round_up() -> None:
    container = _container(resources={"limits": {"memory": "64Mi", "cpu": "1500m"}})
    assert resource_field_value(container, "limits.memory", "1Mi") == "64"
    assert resource_field_value(container, "limits.cpu", "1") == "2"
    assert resource_field_value(container, "limits.cpu", "1m") == "1500"


def test_names_parse_back_into_their_parts() -> None:
    name = naming.container_name(container="app", pod="web", namespace="team", uid="u-1", attempt=4)
    parsed = naming.parse_name("/" + name)
    assert parsed is not None
    assert (parsed.container, parsed.pod, parsed.namespace, parsed.uid, parsed.attempt) == (
        "app",
        "web",
        "team",
        "u-1",
        4,
    )
    assert naming.parse_name("k8s_app_web_team_u-1_4") is None
    assert naming.parse_name("something-else") is None


def _service(name: str, ns: str, ip: str | None, ports: list[dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = {"ports": ports}
    if ip is not None:
        spec["clusterIP"] = ip
    return {"metadata": {"name": name, "namespace": ns}, "spec": spec}


SERVICES = [
    _service(
        "fooservice",
        "team",
        "10.96.0.20",
        [{"name": "http", "port": 8765, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}],
    ),
    _service("other-ns", "elsewhere", "10.96.0.30", [{"port": 80}]),
    _service("headless", "team", "None", [{"port": 80}]),
    _service("external", "team", None, [{"port": 80}]),
    _service("kubernetes", "default", "10.96.0.1", [{"name": "https", "port": 443}]),
]


def test_service_variables_are_the_kubelets_for_the_pods_namespace() -> None:
    """As the kubelet's envvars.FromServices: host, first port, named ports and Docker's
    link variables, for Services of the pod's namespace with a cluster IP, plus the API
    server's own Service; none for a headless or IP-less Service or another namespace."""
    env = service_environment(SERVICES, namespace="team", enable_links=True)
    assert env == {
        "FOOSERVICE_SERVICE_HOST": "10.96.0.20",
        "FOOSERVICE_SERVICE_PORT": "8765",
        "FOOSERVICE_SERVICE_PORT_HTTP": "8765",
        "FOOSERVICE_PORT": "tcp://10.96.0.20:8765",
        "FOOSERVICE_PORT_8765_TCP": "tcp://10.96.0.20:8765",
        "FOOSERVICE_PORT_8765_TCP_PROTO": "tcp",
        "FOOSERVICE_PORT_8765_TCP_PORT": "8765",
        "FOOSERVICE_PORT_8765_TCP_ADDR": "10.96.0.20",
        "FOOSERVICE_PORT_53_UDP": "udp://10.96.0.20:53",
        "FOOSERVICE_PORT_53_UDP_PROTO": "udp",
        "FOOSERVICE_PORT_53_UDP_PORT": "53",
        "FOOSERVICE_PORT_53_UDP_ADDR": "10.96.0.20",
        "KUBERNETES_SERVICE_HOST": "10.96.0.1",
        "KUBERNETES_SERVICE_PORT": "443",
        "KUBERNETES_SERVICE_PORT_HTTPS": "443",
        "KUBERNETES_PORT": "tcp://10.96.0.1:443",
        "KUBERNETES_PORT_443_TCP": "tcp://10.96.0.1:443",
        "KUBERNETES_PORT_443_TCP_PROTO": "tcp",
        "KUBERNETES_PORT_443_TCP_PORT": "443",
        "KUBERNETES_PORT_443_TCP_ADDR": "10.96.0.1",
    }


def test_service_links_off_leave_only_the_api_servers_service() -> None:
    env = service_environment(SERVICES, namespace="team", enable_links=False)
    assert sorted({k.split("_")[0] for k in env}) == ["KUBERNETES"]


def test_dashes_become_underscores_and_ipv6_addresses_get_brackets() -> None:
    env = service_environment(
        [_service("my-db", "team", "fd00::10", [{"name": "pg-main", "port": 5432}])],
        namespace="team",
        enable_links=True,
    )
    assert env["MY_DB_SERVICE_HOST"] == "fd00::10"
    assert env["MY_DB_SERVICE_PORT_PG_MAIN"] == "5432"
    assert env["MY_DB_PORT"] == "tcp://[fd00::10]:5432"
    assert env["MY_DB_PORT_5432_TCP_ADDR"] == "fd00::10"


def test_service_variables_come_after_the_containers_own_and_never_replace_them() -> None:
    """Read when the container is made; ``$(VAR)`` in a value and in the command sees
    them; a variable the container defines wins over the Service's."""
    reads: list[str] = []

    def services() -> dict[str, str]:
        reads.append("read")
        return service_environment(SERVICES, namespace="team", enable_links=True)

    env = _env(
        {
            "name": "c",
            "env": [
                {
                    "name": "URL",
                    "value": "http://$(FOOSERVICE_SERVICE_HOST):$(FOOSERVICE_SERVICE_PORT)",
                },
                {"name": "KUBERNETES_SERVICE_HOST", "value": "mine"},
            ],
            "command": ["echo", "$(FOOSERVICE_PORT)"],
        },
        PodContext(node_name="n1", service_env=services),
    )
    names = [name for name, _ in env.env]
    values = dict(env.env)
    assert names[:2] == ["URL", "KUBERNETES_SERVICE_HOST"]
    assert values["URL"] == "http://10.96.0.20:8765"
    assert values["KUBERNETES_SERVICE_HOST"] == "mine"
    assert values["FOOSERVICE_PORT_8765_TCP"] == "tcp://10.96.0.20:8765"
    assert env.command == ["echo", "tcp://10.96.0.20:8765"]
    assert reads == ["read"]
