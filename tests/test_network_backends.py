"""Backend choice and the CNI backend's pure parts: configuration, results, plugin errors."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import anyio
import pytest
from pyroute2.netlink.exceptions import NetlinkError

from asynckubelet import errors
from asynckubelet.network import (
    LoopbackPlugin,
    NetworkPlugin,
    PodNetwork,
    PodNetworkRequest,
    PortMapping,
    SandboxExtra,
)
from asynckubelet.network.bridge import BridgeConfig, BridgePlugin, veth_name
from asynckubelet.network.cni import (
    PROJECT_CONF_DIR,
    CNIConfig,
    CNIPlugin,
    load_config,
    parse_config,
)
from asynckubelet.network.cniexec import _ips, _plugin_error
from asynckubelet.network.dockernet import DockerNetworkPlugin, network_name
from asynckubelet.network.factory import choose_backend, make_network_plugin
from asynckubelet.testing import FakeDocker


@pytest.mark.parametrize(
    ("url", "euid", "backend"),
    [
        ("unix:///var/run/docker.sock", 0, "bridge"),
        (None, 0, "bridge"),
        ("unix:///var/run/docker.sock", 1000, "docker"),
        ("tcp://10.0.0.5:2376", 0, "docker"),
        ("ssh://user@host", 0, "docker"),
    ],
)
def test_auto_picks_bridge_only_for_a_local_daemon_as_root(
    url: str | None, euid: int, backend: str
) -> None:
    assert choose_backend(docker_url=url, euid=euid)[0] == backend


def test_an_unknown_backend_name_is_refused_naming_the_choices() -> None:
    with pytest.raises(errors.NetworkError, match="one of auto, bridge, cni, docker, loopback"):
        make_network_plugin("flannel")


@pytest.mark.parametrize("name", ["loopback", "bridge", "cni"])
def test_every_backend_satisfies_the_plugin_protocol(name: str, tmp_path: Path) -> None:
    assert isinstance(make_network_plugin(name, state_dir=tmp_path), NetworkPlugin)


def test_the_loopback_backend_adds_nothing_to_the_sandbox() -> None:
    extra = LoopbackPlugin().sandbox_extra(
        host_network=False, port_mappings=(PortMapping(80, 8080),)
    )
    assert extra == SandboxExtra()


def test_the_docker_backend_publishes_host_ports_on_the_sandbox() -> None:
    plugin = DockerNetworkPlugin(docker=FakeDocker(), node_name="n1")
    extra = plugin.sandbox_extra(
        host_network=False,
        port_mappings=(PortMapping(8080, 18080), PortMapping(53, 1053, "UDP", "127.0.0.1")),
    )
    assert extra.host_config == {
        "PortBindings": {
            "8080/tcp": [{"HostIp": "", "HostPort": "18080"}],
            "53/udp": [{"HostIp": "127.0.0.1", "HostPort": "1053"}],
        }
    }
    assert extra.exposed_ports == {"8080/tcp": {}, "53/udp": {}}
    assert plugin.sandbox_network_mode(host_network=False) == "akl-n1"
    assert plugin.sandbox_network_mode(host_network=True) == "host"


def test_a_docker_network_name_keeps_only_characters_docker_accepts() -> None:
    assert network_name("my node/1") == "akl-my-node-1"


def test_the_projects_conflist_chains_bridge_portmap_firewall_and_loopback() -> None:
    network = load_config([PROJECT_CONF_DIR])
    assert network.cni_version == "1.0.0"
    assert [p["type"] for p in network.plugins] == ["bridge", "portmap", "firewall", "loopback"]
    assert network.plugins[0]["ipam"]["type"] == "host-local"


def test_a_single_plugin_conf_becomes_a_list_of_one() -> None:
    network = parse_config(b'{"cniVersion": "0.4.0", "name": "lo", "type": "loopback"}')
    assert [p["type"] for p in network.plugins] == ["loopback"]
    assert json.loads(network.raw)["plugins"][0]["type"] == "loopback"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (b"[1]", "not a JSON object"),
        (b"{", "not JSON"),
        (b'{"cniVersion": "1.0.0", "plugins": [{"type": "x"}]}', "name: required"),
        (b'{"cniVersion": "9.9.9", "name": "n", "plugins": [{"type": "x"}]}', "cniVersion '9.9.9'"),
        (b'{"cniVersion": "1.0.0", "name": "n", "plugins": [{}]}', r"plugins\[0\].type: required"),
    ],
)
def test_bad_configurations_are_refused_naming_the_field(text: bytes, message: str) -> None:
    with pytest.raises(errors.NetworkError, match=message):
        parse_config(text, source="test.conflist")


def test_no_configuration_anywhere_is_a_network_error_naming_the_directories(
    tmp_path: Path,
) -> None:
    with pytest.raises(
        errors.NetworkError, match=f"no CNI network configuration found in {tmp_path}"
    ):
        load_config([tmp_path])


def test_the_pod_ips_are_the_results_addresses_not_on_lo() -> None:
    result = {
        "interfaces": [{"name": "cni0"}, {"name": "veth1"}, {"name": "eth0"}, {"name": "lo"}],
        "ips": [
            {"interface": 2, "address": "10.1.0.5/24"},
            {"interface": 3, "address": "127.0.0.1/8"},
            {"interface": 2, "address": "fd00::5/64"},
        ],
    }
    assert _ips(result) == ("10.1.0.5", "fd00::5")


def test_a_plugins_error_json_is_quoted_with_code_message_and_details() -> None:
    out = json.dumps({"cniVersion": "1.0.0", "code": 7, "msg": "bad subnet", "details": "x/33"})
    assert _plugin_error("bridge", "ADD", out, b"") == (
        "CNI plugin bridge ADD failed (code 7): bad subnet: x/33"
    )


def test_a_plugin_failing_without_json_is_quoted_from_stderr() -> None:
    assert _plugin_error("bridge", "DEL", "", b"boom\n") == "CNI plugin bridge DEL failed: boom"


@pytest.mark.anyio
async def test_a_missing_plugin_binary_makes_the_cni_backend_not_ready(tmp_path: Path) -> None:
    plugin = CNIPlugin(CNIConfig(conf_dirs=(PROJECT_CONF_DIR,), plugin_dirs=(tmp_path,)))
    ready, why = await plugin.status()
    assert not ready
    assert why == f"CNI plugin 'bridge' not found in {tmp_path}"


def test_a_pod_veth_is_named_after_the_sandbox_within_the_interface_name_limit() -> None:
    name = veth_name("0123456789abcdef" * 4)
    assert name == "akl0123456789ab"
    assert len(name) <= 15


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (BridgeConfig(bridge="a-bridge-name-too-long"), "bridge name .* is not a valid interface"),
        (BridgeConfig(bridge=""), "bridge name '' is not a valid interface"),
        (BridgeConfig(pod_cidr="10.0.0.0/99"), "pod CIDR '10.0.0.0/99'"),
        (BridgeConfig(pod_cidr="fd00::/64"), "pod CIDR fd00::/64: must be IPv4"),
        (BridgeConfig(pod_cidr_v6="10.0.0.0/24"), "IPv6 pod CIDR 10.0.0.0/24: not an IPv6"),
        (BridgeConfig(pod_cidr_v6="fd00::/124"), "IPv6 pod CIDR fd00::/124: too small"),
        (BridgeConfig(pod_cidr_v6="fd00::/200"), "IPv6 pod CIDR 'fd00::/200'"),
    ],
)
def test_a_bad_bridge_configuration_is_refused_naming_the_setting(
    config: BridgeConfig, message: str
) -> None:
    with pytest.raises(errors.NetworkError, match=message):
        BridgePlugin(config)


@pytest.mark.anyio
async def test_the_bridge_backend_reports_no_ip_for_a_sandbox_it_never_set_up(
    tmp_path: Path,
) -> None:
    plugin = BridgePlugin(BridgeConfig(state_dir=tmp_path))
    assert await plugin.get_pod_network_status(sandbox_id="f" * 64) == PodNetwork()


@pytest.mark.anyio
async def test_the_bridge_backend_refuses_a_sandbox_without_a_network_namespace(
    tmp_path: Path,
) -> None:
    plugin = BridgePlugin(BridgeConfig(state_dir=tmp_path))
    request = PodNetworkRequest(sandbox_id="f" * 64, pod_name="p", namespace="d", uid="u")
    with pytest.raises(errors.NetworkError, match="needs the network namespace of sandbox ffff"):
        await plugin.setup_pod(request)


@pytest.mark.anyio
async def test_off_loop_work_runs_in_another_thread_while_the_loop_goes_on() -> None:
    import threading
    import time

    from asynckubelet.network import off_loop

    loop_thread = threading.get_ident()
    ticks: list[float] = []

    async def blocking_work() -> int:
        # A netlink request waiting for the RTNL lock blocks its thread like this.
        time.sleep(0.3)  # noqa: ASYNC251  (the blocking the test is about)
        return threading.get_ident()

    async def ticker() -> None:
        while True:
            ticks.append(time.monotonic())
            await anyio.sleep(0.01)

    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        worker_thread = await off_loop(blocking_work)
        tg.cancel_scope.cancel()
    assert worker_thread != loop_thread
    # Held by the work, the loop would have ticked once; going on, about 30 times.
    assert len(ticks) >= 3


@pytest.mark.anyio
async def test_off_loop_passes_the_work_s_error_on() -> None:
    from asynckubelet.network import off_loop

    async def failing() -> None:
        raise errors.NetworkError("veth vanished")

    with pytest.raises(errors.NetworkError, match="veth vanished"):
        await off_loop(failing)


class _FakeRoute:
    """The few rtnetlink calls :meth:`BridgePlugin._add_veth` makes, answering each
    ``link("add")`` with the next of ``adds`` (an errno raised as the kernel's error, or
    None: made)."""

    def __init__(self, adds: list[int | None], links: dict[str, int]) -> None:
        self.adds = adds
        self.links = links
        self.calls: list[tuple[str, dict[str, object]]] = []

    async def link(self, verb: str, **kwargs: object) -> list[dict[str, object]]:
        self.calls.append((verb, kwargs))
        if verb == "get":
            name = str(kwargs["ifname"])
            if name not in self.links:
                raise NetlinkError(errno.ENODEV)
            return [{"index": self.links[name]}]
        if verb == "add":
            code = self.adds.pop(0)
            if code is not None:
                raise NetlinkError(code)
        return []


def _veth_request() -> PodNetworkRequest:
    return PodNetworkRequest(
        sandbox_id="a" * 64, pod_name="p", namespace="default", uid="u", netns_path="/proc/1/ns/net"
    )


@pytest.mark.anyio
async def test_a_veth_is_made_on_the_bridge_and_up_with_the_bridge_looked_up_once(
    tmp_path: Path,
) -> None:
    plugin = BridgePlugin(BridgeConfig(bridge="akltest0", state_dir=tmp_path))
    route = _FakeRoute([None, None], {"akltest0": 7})
    await plugin._add_veth(route, _veth_request())
    await plugin._add_veth(route, _veth_request())
    gets = [c for c in route.calls if c[0] == "get"]
    adds = [kwargs for verb, kwargs in route.calls if verb == "add"]
    assert gets == [("get", {"ifname": "akltest0"})]
    assert all(a["master"] == 7 and a["state"] == "up" and a["kind"] == "veth" for a in adds)
    assert adds[0]["ifname"] == veth_name("a" * 64)


@pytest.mark.anyio
async def test_a_veth_of_the_same_name_is_deleted_and_made_again(tmp_path: Path) -> None:
    plugin = BridgePlugin(BridgeConfig(bridge="akltest0", state_dir=tmp_path))
    host = veth_name("a" * 64)
    route = _FakeRoute([errno.EEXIST, None], {"akltest0": 7, host: 42})
    await plugin._add_veth(route, _veth_request())
    assert [verb for verb, _ in route.calls] == ["get", "add", "get", "del", "add"]
    assert route.calls[3] == ("del", {"index": 42})


@pytest.mark.anyio
async def test_a_bridge_index_the_kernel_refuses_is_looked_up_again_once(tmp_path: Path) -> None:
    plugin = BridgePlugin(BridgeConfig(bridge="akltest0", state_dir=tmp_path))
    route = _FakeRoute([None, errno.EINVAL, None], {"akltest0": 7})
    await plugin._add_veth(route, _veth_request())
    route.links["akltest0"] = 9
    await plugin._add_veth(route, _veth_request())
    adds = [kwargs["master"] for verb, kwargs in route.calls if verb == "add"]
    assert adds == [7, 7, 9]
    refused = _FakeRoute([errno.EINVAL], {"akltest0": 9})
    plugin._bridge_index = None
    with pytest.raises(NetlinkError) as caught:
        await plugin._add_veth(refused, _veth_request())
    assert caught.value.code == errno.EINVAL


@pytest.mark.anyio
async def test_a_veth_name_that_keeps_coming_back_ends_with_an_error(tmp_path: Path) -> None:
    plugin = BridgePlugin(BridgeConfig(bridge="akltest0", state_dir=tmp_path))
    host = veth_name("a" * 64)
    plugin._bridge_index = 7
    route = _FakeRoute([errno.EEXIST, errno.EEXIST, errno.EINVAL], {"akltest0": 7, host: 42})
    with pytest.raises(errors.NetworkError, match=f"veth {host}: a link of that name kept"):
        await plugin._add_veth(route, _veth_request())
