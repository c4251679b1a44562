"""The CNI backend's runtime arguments and CNI 1.1 verbs, engine keys and the dual-stack
options, without root or Docker.

Debian's reference plugins stop at CNI 1.0.0 and ignore ``runtimeConfig.dns``, so what a
1.1 plugin receives (``STATUS``, ``GC`` with the valid attachments) and what a plugin
declaring ``dns``/``ips`` receives is shown here with a recording plugin: a small script
that answers ``VERSION`` with the versions it is told and writes down every call's
environment and input. The real plugins' side (the fallback to DEL, ``ips`` with
host-local) is in ``integration/test_network_cni.py``.
"""

from __future__ import annotations

import json
import shutil
import stat
import subprocess
import sys
import zipfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from asynckubelet import errors
from asynckubelet.cli.options import ipv6_pod_cidr
from asynckubelet.network import IPS_ANNOTATION, PodDNS, PodNetworkRequest, requested_ips
from asynckubelet.network.cni import (
    PROJECT_CONF_DIR,
    VALID_ATTACHMENTS,
    CNIConfig,
    CNIPlugin,
    gc_config,
    load_config,
    parse_config,
    supports_gc,
)
from asynckubelet.network.cniexec import _run_plugin, capability_args, plugin_environment
from asynckubelet.network.factory import engine_key, make_network_plugin

RECORDER = """#!{python}
import json, os, sys
data = sys.stdin.read()
command = os.environ.get("CNI_COMMAND", "")
with open({log!r}, "a") as f:
    f.write(json.dumps({{
        "plugin": {kind!r},
        "command": command,
        "env": {{k: v for k, v in os.environ.items() if k.startswith("CNI_")}},
        "stdin": json.loads(data) if data else None,
    }}) + "\\n")
if command == "VERSION":
    print(json.dumps({{"cniVersion": "1.0.0", "supportedVersions": {versions!r}}}))
elif command == "ADD":
    conf = json.loads(data)
    print(json.dumps(conf.get("prevResult") or {{
        "cniVersion": conf["cniVersion"],
        "interfaces": [{{"name": "eth0"}}],
        "ips": [{{"address": "10.9.0.5/24", "interface": 0}}],
    }}))
"""

V11 = ["0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"]
V10 = ["0.3.0", "0.3.1", "0.4.0", "1.0.0"]


class Recorded:
    def __init__(self, tmp_path: Path) -> None:
        self.bin = tmp_path / "bin"
        self.conf = tmp_path / "net.d"
        self.cache = tmp_path / "cache"
        self.log = tmp_path / "calls.jsonl"
        self.bin.mkdir()
        self.conf.mkdir()
        for kind, versions in (("rec11", V11), ("rec10", V10)):
            script = self.bin / kind
            script.write_text(
                RECORDER.format(
                    python=sys.executable, log=str(self.log), kind=kind, versions=versions
                )
            )
            script.chmod(0o755)
        self.write_list("1.1.0")

    def write_list(self, version: str) -> None:
        doc = {
            "cniVersion": version,
            "name": "recnet",
            "plugins": [
                {"type": "rec11", "capabilities": {"dns": True, "ips": True}},
                {"type": "rec10"},
            ],
        }
        (self.conf / "10-rec.conflist").write_text(json.dumps(doc))

    def plugin(
        self, *, engine: str = "engine-1", exists: Callable[[str], Awaitable[bool]] | None = None
    ) -> CNIPlugin:
        async def engine_id() -> str:
            return engine

        return CNIPlugin(
            CNIConfig(
                conf_dirs=(self.conf,),
                plugin_dirs=(self.bin,),
                cache_dir=self.cache,
                sandbox_exists=exists,
                engine_id=engine_id,
            )
        )

    def calls(self, command: str | None = None) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        rows = [json.loads(line) for line in self.log.read_text().splitlines()]
        return [r for r in rows if command is None or r["command"] == command]

    def clear(self) -> None:
        self.log.unlink(missing_ok=True)


@pytest.fixture
def rec(tmp_path: Path) -> Recorded:
    return Recorded(tmp_path)


def _request(sid: str, **kwargs: Any) -> PodNetworkRequest:
    return PodNetworkRequest(
        sandbox_id=sid,
        pod_name="p",
        namespace="default",
        uid="u",
        netns_path="/proc/self/ns/net",
        **kwargs,
    )


SID_A, SID_B, SID_C = ("a" * 64, "b" * 64, "c" * 64)


# -- pure argument building -------------------------------------------------------------


@pytest.mark.parametrize(
    ("network_version", "plugin_versions", "expected"),
    [
        ("1.1.0", V11, True),
        ("1.1.0", V10, False),
        ("1.0.0", V11, False),
        ("1.1.0", [], False),
        ("1.2.0", V11, True),
    ],
)
def test_status_and_gc_go_only_to_a_1_1_plugin_of_a_1_1_list(
    network_version: str, plugin_versions: list[str], expected: bool
) -> None:
    assert supports_gc(network_version, plugin_versions) is expected


@pytest.mark.parametrize("command", ["STATUS", "GC", "VERSION"])
def test_verbs_without_an_attachment_get_only_the_command_and_the_plugin_path(
    command: str,
) -> None:
    env = plugin_environment(command=command, plugin_dirs=[Path("/a"), Path("/b")])
    assert {k: v for k, v in env.items() if k.startswith("CNI_")} == {
        "CNI_COMMAND": command,
        "CNI_PATH": "/a:/b",
    }


def test_add_gets_the_attachment_variables() -> None:
    env = plugin_environment(
        command="ADD",
        plugin_dirs=[Path("/a")],
        sandbox_id="sid",
        netns="/proc/1/ns/net",
        ifname="eth0",
        cni_args="K=V",
    )
    assert env["CNI_CONTAINERID"] == "sid"
    assert env["CNI_NETNS"] == "/proc/1/ns/net"
    assert env["CNI_IFNAME"] == "eth0"
    assert env["CNI_ARGS"] == "K=V"


def test_gc_input_lists_the_valid_attachments_under_both_key_names() -> None:
    network = parse_config(b'{"cniVersion": "1.1.0", "name": "n", "plugins": [{"type": "x"}]}')
    conf = gc_config(network, network.plugins[0], valid=[("sid", "eth0")])
    assert conf[VALID_ATTACHMENTS] == [{"containerID": "sid", "ifname": "eth0"}]
    assert conf["cni.dev/attachments"] == conf[VALID_ATTACHMENTS]
    assert (conf["name"], conf["cniVersion"], conf["type"]) == ("n", "1.1.0", "x")


def test_the_pods_resolver_settings_become_the_dns_capability_argument() -> None:
    dns = PodDNS(servers=("10.0.0.10",), searches=("ns.svc.cluster.local",), options=("ndots:5",))
    assert capability_args(_request("s", dns=dns))["dns"] == {
        "servers": ["10.0.0.10"],
        "searches": ["ns.svc.cluster.local"],
        "options": ["ndots:5"],
    }


def test_requested_addresses_become_the_ips_capability_argument() -> None:
    assert capability_args(_request("s", ips=("10.1.0.9", "fd00::9")))["ips"] == [
        "10.1.0.9",
        "fd00::9",
    ]


def test_a_pod_asking_for_nothing_has_no_capability_arguments() -> None:
    assert capability_args(_request("s", dns=PodDNS())) == {}


@pytest.mark.parametrize(
    ("capabilities", "expected"),
    [
        ({}, None),
        ({"dns": True}, {"dns": {"servers": ["10.0.0.10"], "searches": [], "options": []}}),
        ({"ips": True}, {"ips": ["10.1.0.9"]}),
        ({"dns": False, "ips": True}, {"ips": ["10.1.0.9"]}),
    ],
)
def test_a_plugin_gets_only_the_capabilities_it_declares(
    capabilities: dict[str, bool], expected: dict[str, Any] | None
) -> None:
    network = parse_config(b'{"cniVersion": "1.0.0", "name": "n", "plugins": [{"type": "x"}]}')
    args = capability_args(_request("s", dns=PodDNS(servers=("10.0.0.10",)), ips=("10.1.0.9",)))
    conf = CNIPlugin.plugin_conf(
        network,
        {"type": "x", "capabilities": capabilities},
        prev=None,
        capability_args=args,
    )
    assert conf.get("runtimeConfig") == expected
    assert "capabilities" not in conf


# -- the ips annotation -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, ()),
        ('["10.1.0.9"]', ("10.1.0.9",)),
        ('["10.1.0.9", "fd00::9"]', ("10.1.0.9", "fd00::9")),
    ],
)
def test_the_ips_annotation_names_the_addresses_a_pod_asks_for(
    value: str | None, expected: tuple[str, ...]
) -> None:
    annotations = {IPS_ANNOTATION: value} if value is not None else {}
    assert requested_ips(annotations) == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("10.1.0.9", "not a JSON list of addresses"),
        ('{"ip": "10.1.0.9"}', "must be a JSON list of addresses"),
        ('["10.1.0.999"]', "'10.1.0.999' is not an IP address"),
        ('["fe80::1%eth0\\nIP=10.0.0.1"]', "is not an IP address"),
        ('["10.1.0.9/24"]', "'10.1.0.9/24' is not an IP address"),
    ],
)
def test_a_bad_ips_annotation_is_refused_naming_the_annotation(value: str, message: str) -> None:
    with pytest.raises(errors.NetworkError, match=f"annotation {IPS_ANNOTATION}: .*{message}"):
        requested_ips({IPS_ANNOTATION: value})


# -- the recording plugin ---------------------------------------------------------------


@pytest.mark.anyio
async def test_a_plugin_declaring_dns_and_ips_receives_them_and_the_other_does_not(
    rec: Recorded,
) -> None:
    dns = PodDNS(servers=("10.0.0.10",), searches=("default.svc.cluster.local",))
    await rec.plugin().setup_pod(_request(SID_A, dns=dns, ips=("10.9.0.7",)))
    adds = {c["plugin"]: c["stdin"] for c in rec.calls("ADD")}
    assert adds["rec11"]["runtimeConfig"] == {
        "dns": {
            "servers": ["10.0.0.10"],
            "searches": ["default.svc.cluster.local"],
            "options": [],
        },
        "ips": ["10.9.0.7"],
    }
    assert "runtimeConfig" not in adds["rec10"]


@pytest.mark.anyio
async def test_status_asks_only_the_plugins_that_speak_1_1(rec: Recorded) -> None:
    ready, why = await rec.plugin().status()
    assert (ready, why) == (True, "")
    statuses = rec.calls("STATUS")
    assert [c["plugin"] for c in statuses] == ["rec11"]
    assert set(statuses[0]["env"]) == {"CNI_COMMAND", "CNI_PATH"}


@pytest.mark.anyio
async def test_a_list_older_than_1_1_gets_no_status_even_from_a_1_1_plugin(
    rec: Recorded,
) -> None:
    rec.write_list("1.0.0")
    assert await rec.plugin().status() == (True, "")
    assert rec.calls("STATUS") == []


@pytest.mark.anyio
async def test_each_plugin_binary_is_asked_its_version_once(rec: Recorded) -> None:
    plugin = rec.plugin()
    await plugin.status()
    await plugin.status()
    assert sorted(c["plugin"] for c in rec.calls("VERSION")) == ["rec10", "rec11"]


@pytest.mark.anyio
async def test_the_sweep_dels_its_gone_sandboxes_then_gcs_with_the_valid_attachments(
    rec: Recorded,
) -> None:
    await rec.plugin(engine="engine-1").setup_pod(_request(SID_A))
    await rec.plugin(engine="engine-1").setup_pod(_request(SID_B))
    await rec.plugin(engine="engine-2").setup_pod(_request(SID_C))
    rec.clear()

    async def exists(sid: str) -> bool:
        return sid == SID_A

    gone = await rec.plugin(engine="engine-1", exists=exists).sweep()
    assert gone == [SID_B]
    assert {(c["plugin"], c["env"]["CNI_CONTAINERID"]) for c in rec.calls("DEL")} == {
        ("rec11", SID_B),
        ("rec10", SID_B),
    }
    gcs = rec.calls("GC")
    assert [c["plugin"] for c in gcs] == ["rec11"]
    assert gcs[0]["stdin"][VALID_ATTACHMENTS] == [
        {"containerID": SID_A, "ifname": "eth0"},
        {"containerID": SID_C, "ifname": "eth0"},
    ]


@pytest.mark.anyio
async def test_the_sweep_leaves_another_engines_attachments_alone(rec: Recorded) -> None:
    await rec.plugin(engine="engine-2").setup_pod(_request(SID_C))

    async def exists(sid: str) -> bool:
        return False

    assert await rec.plugin(engine="engine-1", exists=exists).sweep() == []
    assert rec.plugin().cached_sandboxes() == {SID_C}


@pytest.mark.anyio
async def test_a_cache_entry_names_the_engine_that_made_it(rec: Recorded) -> None:
    await rec.plugin(engine="engine-7").setup_pod(_request(SID_A))
    assert rec.plugin().cached_owners() == {SID_A: "engine-7"}


@pytest.mark.anyio
async def test_the_cache_is_private_to_the_nodes_user_and_a_wider_one_is_tightened(
    rec: Recorded,
) -> None:
    (rec.cache / "results").mkdir(parents=True)
    rec.cache.chmod(0o755)
    (rec.cache / "results").chmod(0o755)
    plugin = rec.plugin()
    await plugin.start()
    await plugin.setup_pod(_request(SID_A))
    found = {
        str(p.relative_to(rec.cache)): stat.S_IMODE(p.stat().st_mode)
        for p in [rec.cache, *rec.cache.rglob("*")]
    }
    assert found == {
        ".": 0o700,
        "results": 0o700,
        f"results/recnet-{SID_A}-eth0": 0o600,
    }


# -- the default configuration list ships inside the package --------------------------


def test_the_default_conflist_resolves_through_importlib_resources() -> None:
    assert PROJECT_CONF_DIR.joinpath("10-asynckubelet.conflist").is_file()
    assert load_config([PROJECT_CONF_DIR]).name == "asynckubelet"


def test_the_built_wheel_carries_the_default_conflist(tmp_path: Path) -> None:
    repo = Path(__file__).resolve().parent.parent
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(repo / name, source / name)
    shutil.copytree(
        repo / "asynckubelet",
        source / "asynckubelet",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    out = tmp_path / "wheel"
    build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
    subprocess.run(
        [*build, "--no-index", "-q", "-w", str(out), str(source)],
        check=True,
        cwd=tmp_path,
    )
    (wheel,) = out.glob("asynckubelet-*.whl")
    with zipfile.ZipFile(wheel) as z:
        assert "asynckubelet/cni/10-asynckubelet.conflist" in z.namelist()


# -- engine keys ----------------------------------------------------------------------


def test_two_daemons_sharing_docker_20_10s_key_file_have_different_engine_keys() -> None:
    shared_id = "IZ6J:V2RJ:62GX:DWF6"
    one = engine_key({"ID": shared_id, "DockerRootDir": "/var/lib/docker"})
    two = engine_key({"ID": shared_id, "DockerRootDir": "/tmp/akd-1/data"})
    assert one != two


# -- the dual-stack options -----------------------------------------------------------


@pytest.mark.parametrize(
    ("dual_stack", "pod_cidr_v6", "expected"),
    [
        (False, None, None),
        (True, None, "fd00:ac1::/64"),
        (False, "fd00:77::/64", "fd00:77::/64"),
        (True, "fd00:77::/64", "fd00:77::/64"),
    ],
)
def test_the_ipv6_pod_cidr_comes_from_dual_stack_and_pod_cidr_v6(
    dual_stack: bool, pod_cidr_v6: str | None, expected: str | None
) -> None:
    assert ipv6_pod_cidr(dual_stack=dual_stack, pod_cidr_v6=pod_cidr_v6) == expected


@pytest.mark.parametrize(
    ("backend", "hint"),
    [("cni", "host-local an IPv6 range"), ("loopback", "use --network bridge")],
)
def test_dual_stack_on_another_backend_is_refused_with_what_to_do(backend: str, hint: str) -> None:
    with pytest.raises(errors.NetworkError, match=f"bridge backend, not {backend}: .*{hint}"):
        make_network_plugin(backend, pod_cidr_v6="fd00:ac1::/64")


@pytest.mark.anyio
async def test_a_plugin_that_answers_without_reading_its_input_is_no_error(
    tmp_path: Path,
) -> None:
    script = tmp_path / "quick"
    script.write_text('#!/bin/sh\necho \'{"supportedVersions": ["1.0.0"]}\'\n')
    script.chmod(0o755)
    code, out, _ = await _run_plugin(script, stdin=b"x" * 1_000_000, env={})
    assert (code, json.loads(out)) == (0, {"supportedVersions": ["1.0.0"]})
