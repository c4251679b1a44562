"""securityContext to Docker settings, and the kubelet's runAsNonRoot verdicts, as tables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from lightkube.models.core_v1 import Pod

from asynckubelet import errors
from asynckubelet.manifests import load_manifests_text
from asynckubelet.runtime.poddns import DNSSettings, ResolverConfig
from asynckubelet.runtime.sandbox import generate_pod_sandbox_config, sandbox_docker_config
from asynckubelet.runtime.security import host_config_security, image_user, verify_run_as_non_root

UID = "7c9e6679-7425-40de-944b-e07fc1f90ae7"


def _pod(container_ctx: str = "{}", pod_ctx: str = "{}") -> Pod:
    host_users = "false" if "Unmasked" in container_ctx else "true"
    return load_manifests_text(
        f"""
apiVersion: v1
kind: Pod
metadata: {{name: p, uid: {UID}}}
spec:
  hostUsers: {host_users}
  securityContext: {pod_ctx}
  containers: [{{name: c, image: x, securityContext: {container_ctx}}}]
""",
        pod_security="privileged",
    ).pods[0]


def _host(container_ctx: str = "{}", pod_ctx: str = "{}", **kw: Any) -> dict[str, Any]:
    pod = _pod(container_ctx, pod_ctx)
    assert pod.spec is not None
    return dict(host_config_security(pod, pod.spec.containers[0], **kw))


@pytest.mark.parametrize(
    ("container_ctx", "pod_ctx", "expected"),
    [
        ("{}", "{}", {}),
        (
            "{capabilities: {add: [NET_ADMIN], drop: [ALL]}}",
            "{}",
            {
                "CapAdd": ["CAP_NET_ADMIN"],
                "CapDrop": ["ALL"],
            },
        ),
        (
            "{readOnlyRootFilesystem: true}",
            "{}",
            {"ReadonlyRootfs": True},
        ),
        (
            "{allowPrivilegeEscalation: false}",
            "{}",
            {"SecurityOpt": ["no-new-privileges"]},
        ),
        ("{allowPrivilegeEscalation: true}", "{}", {}),
        ("{seccompProfile: {type: RuntimeDefault}}", "{}", {}),
        ("{}", "{seccompProfile: {type: RuntimeDefault}}", {}),
        (
            "{seccompProfile: {type: Unconfined}}",
            "{seccompProfile: {type: RuntimeDefault}}",
            {"SecurityOpt": ["seccomp=unconfined"]},
        ),
        ("{privileged: true}", "{}", {"Privileged": True}),
        (
            "{appArmorProfile: {type: Unconfined}}",
            "{}",
            {"SecurityOpt": ["apparmor=unconfined"]},
        ),
        (
            "{}",
            "{appArmorProfile: {type: Localhost, localhostProfile: k8s-deny-write}}",
            {"SecurityOpt": ["apparmor=k8s-deny-write"]},
        ),
        (
            "{appArmorProfile: {type: RuntimeDefault}}",
            "{}",
            {},
        ),
        (
            "{}",
            "{fsGroup: 2000, supplementalGroups: [4000, 2000]}",
            {"GroupAdd": ["2000", "4000"]},
        ),
        (
            "{procMount: Unmasked}",
            "{}",
            {"MaskedPaths": [], "ReadonlyPaths": []},
        ),
        ("{procMount: Default}", "{}", {}),
        (
            "{}",
            "{seLinuxOptions: {user: system_u, role: system_r, type: spc_t, level: 's0:c1,c2'}}",
            {
                "SecurityOpt": [
                    "label=user:system_u",
                    "label=role:system_r",
                    "label=type:spc_t",
                    "label=level:s0:c1,c2",
                ]
            },
        ),
        (
            "{seLinuxOptions: {level: 's0:c9'}}",
            "{seLinuxOptions: {type: spc_t, level: 's0:c1'}}",
            {"SecurityOpt": ["label=level:s0:c9"]},
        ),
    ],
)
def test_security_contexts_become_docker_host_settings(
    container_ctx: str, pod_ctx: str, expected: dict[str, Any]
) -> None:
    assert _host(container_ctx, pod_ctx) == expected


@pytest.mark.parametrize(
    ("container_ctx", "pod_ctx", "default", "expected"),
    [
        ("{}", "{}", True, []),
        ("{}", "{}", False, ["seccomp=unconfined"]),
        ("{allowPrivilegeEscalation: false}", "{}", True, ["no-new-privileges"]),
        (
            "{allowPrivilegeEscalation: false}",
            "{}",
            False,
            ["no-new-privileges", "seccomp=unconfined"],
        ),
        ("{}", "{seccompProfile: {type: Unconfined}}", True, ["seccomp=unconfined"]),
        ("{seccompProfile: {type: Unconfined}}", "{}", True, ["seccomp=unconfined"]),
        ("{}", "{seccompProfile: {type: RuntimeDefault}}", False, []),
        ("{seccompProfile: {type: RuntimeDefault}}", "{}", False, []),
        (
            "{seccompProfile: {type: RuntimeDefault}}",
            "{seccompProfile: {type: Unconfined}}",
            False,
            [],
        ),
        (
            "{seccompProfile: {type: Unconfined}}",
            "{seccompProfile: {type: RuntimeDefault}}",
            True,
            ["seccomp=unconfined"],
        ),
        ("{privileged: true}", "{}", True, []),
        ("{privileged: true}", "{}", False, []),
    ],
)
def test_the_seccomp_default_gives_runtime_default_where_pod_and_container_set_no_profile(
    container_ctx: str, pod_ctx: str, default: bool, expected: list[str]
) -> None:
    host = _host(container_ctx, pod_ctx, seccomp_default=default)
    assert host.get("SecurityOpt", []) == expected


@pytest.mark.parametrize("default", [True, False])
def test_a_localhost_seccomp_profile_is_the_same_whatever_the_default(
    tmp_path: Path, default: bool
) -> None:
    (tmp_path / "audit.json").write_text('{"defaultAction": "SCMP_ACT_LOG"}')
    host = _host(
        "{}",
        "{seccompProfile: {type: Localhost, localhostProfile: audit.json}}",
        seccomp_root=tmp_path,
        seccomp_default=default,
    )
    assert host["SecurityOpt"] == ['seccomp={"defaultAction": "SCMP_ACT_LOG"}']


def test_a_localhost_seccomp_profile_is_read_from_the_profile_root(tmp_path: Path) -> None:
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "audit.json").write_text('{"defaultAction": "SCMP_ACT_LOG"}')
    host = _host(
        "{seccompProfile: {type: Localhost, localhostProfile: profiles/audit.json}}",
        seccomp_root=tmp_path,
    )
    assert host["SecurityOpt"] == ['seccomp={"defaultAction": "SCMP_ACT_LOG"}']


def test_a_missing_localhost_seccomp_profile_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(errors.ContainerConfigError, match="cannot load seccomp profile"):
        _host(
            "{seccompProfile: {type: Localhost, localhostProfile: nope.json}}",
            seccomp_root=tmp_path,
        )


@pytest.mark.parametrize(
    ("user", "parsed"),
    [
        ("", (0, "")),
        ("0", (0, "")),
        ("1000", (1000, "")),
        ("1000:1000", (1000, "")),
        ("nobody", (None, "nobody")),
    ],
)
def test_image_users_parse_as_the_kubelet_reads_them(
    user: str, parsed: tuple[int | None, str]
) -> None:
    assert image_user(user) == parsed


REF = f'(pod: "p_default({UID})", container: c)'


@pytest.mark.parametrize(
    ("container_ctx", "pod_ctx", "image_user_field", "message"),
    [
        (
            "{runAsNonRoot: true}",
            "{}",
            "",
            f"container has runAsNonRoot and image will run as root {REF}",
        ),
        (
            "{}",
            "{runAsNonRoot: true}",
            "0:0",
            f"container has runAsNonRoot and image will run as root {REF}",
        ),
        (
            "{runAsNonRoot: true, runAsUser: 0}",
            "{}",
            "1000",
            f"container's runAsUser breaks non-root policy {REF}",
        ),
        (
            "{runAsNonRoot: true}",
            "{}",
            "app",
            "container has runAsNonRoot and image has non-numeric user (app), cannot verify user "
            f"is non-root {REF}",
        ),
        ("{runAsNonRoot: true}", "{}", "1000", None),
        ("{runAsNonRoot: true, runAsUser: 5}", "{}", "", None),
        ("{runAsNonRoot: false}", "{runAsNonRoot: true}", "", None),
        ("{}", "{}", "", None),
    ],
)
def test_run_as_non_root_verdicts_match_the_kubelet(
    container_ctx: str, pod_ctx: str, image_user_field: str, message: str | None
) -> None:
    pod = _pod(container_ctx, pod_ctx)
    assert pod.spec is not None
    container = pod.spec.containers[0]
    if message is None:
        verify_run_as_non_root(pod, container, image_user_field=image_user_field)
        return
    with pytest.raises(errors.ContainerConfigError) as e:
        verify_run_as_non_root(pod, container, image_user_field=image_user_field)
    assert str(e.value) == message


def test_the_sandbox_carries_the_pods_selinux_options() -> None:
    pod = _pod("{seLinuxOptions: {type: other_t}}", "{seLinuxOptions: {type: spc_t}}")
    sandbox = generate_pod_sandbox_config(
        pod, node="n", attempt=0, dns=DNSSettings(), node_resolver=ResolverConfig()
    )
    config = sandbox_docker_config(pod, sandbox, image="pause", network_mode="none")
    assert config["HostConfig"]["SecurityOpt"] == ["no-new-privileges", "label=type:spc_t"]
