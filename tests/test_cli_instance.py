"""``--instance NAME``: the name checked, what it derives (state dir, node name, bridge, pod
and Service ranges, listen port, network records) and how: free ranges against the host's
routes and other instances' records, kept in the instance's record; explicit options win."""

from __future__ import annotations

import ipaddress
import json
import os
import re
from pathlib import Path
from typing import Annotated, Any

import pytest
import typer
from typer.testing import CliRunner

from asynckubelet.cli import instance as inst
from asynckubelet.cli.commands import get_output
from asynckubelet.cli.options import (
    ClusterOptions,
    ListenOpt,
    NodeOptions,
    ServiceClusterIPRangeOpt,
    StateDirOpt,
)
from asynckubelet.cli.options.groups import expand
from asynckubelet.network.iptables import (
    forward_chain,
    hostport_chain,
    localnet_chain,
    postrouting_chain,
    reject_chain,
    services_chain,
)
from asynckubelet.network.nftables import table_name
from asynckubelet.testing import FakeRoutes

ALWAYS_FREE = lambda port: True  # noqa: E731

# -- the name --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["a", "web", "ci-4242", "0", "a1-b2", "x" * inst.NAME_MAX])
def test_a_dns_label_of_at_most_32_characters_is_an_instance_name(name: str) -> None:
    assert inst.check_name(name) == name


def test_the_empty_name_is_the_default_instance() -> None:
    assert inst.check_name("") == ""


@pytest.mark.parametrize(
    "name",
    [
        "../x",
        "..",
        ".",
        "a/b",
        "/etc",
        "Web",
        "a_b",
        "a b",
        "a\nb",
        "web\n",
        "\nweb",
        "a\x00b",
        "-a",
        "a-",
        "a.b",
        "é",
        "$(id)",
        "a;rm",
        "*",
    ],
)
def test_a_name_that_is_not_a_dns_label_is_refused_naming_the_flag(name: str) -> None:
    with pytest.raises(inst.InstanceError, match=r"^--instance .*: must be lowercase letters"):
        inst.check_name(name)


def test_a_name_too_long_is_refused_with_its_length_and_shown_cut() -> None:
    with pytest.raises(inst.InstanceError) as refused:
        inst.check_name("a" * 10_000)
    assert str(refused.value) == (
        f"--instance {'a' * inst.NAME_MAX!r}...: must be at most 32 characters, not 10000"
    )


# -- what follows from the name alone -------------------------------------------------------


@pytest.mark.parametrize("length", range(1, inst.NAME_MAX + 1))
def test_the_bridge_and_its_firewall_names_fit_the_kernel_for_every_name_length(
    length: int,
) -> None:
    bridge = inst.bridge_name("b" * length)
    assert bridge.startswith("akl-")
    assert len(bridge) <= 15
    chains = [
        f(bridge)
        for f in (
            forward_chain,
            postrouting_chain,
            hostport_chain,
            localnet_chain,
            services_chain,
            reject_chain,
        )
    ]
    assert max(len(c) for c in chains) <= 28
    assert len(table_name(bridge)) <= 255


def test_a_short_name_is_its_bridge_and_a_long_one_is_cut_and_given_a_hash() -> None:
    assert inst.bridge_name("web") == "akl-web"
    long_a, long_b = inst.bridge_name("staging-node-1"), inst.bridge_name("staging-node-2")
    assert long_a.startswith("akl-stagi-")
    assert long_b.startswith("akl-stagi-")
    assert long_a != long_b


def test_an_instance_never_takes_the_default_bridge_nor_the_veth_names() -> None:
    bridges = {inst.bridge_name(f"n{i}") for i in range(500)}
    assert "akl0" not in bridges
    assert len(bridges) == 500
    assert all(b[3] == "-" for b in bridges)


def test_the_ipv6_pod_cidr_is_the_names_own_and_never_the_defaults() -> None:
    cidrs = {inst.pod_cidr_v6(f"n{i}") for i in range(200)}
    assert "fd00:ac1::/64" not in cidrs
    assert all(ipaddress.ip_network(c).prefixlen == 64 for c in cidrs)
    assert inst.pod_cidr_v6("web") == inst.pod_cidr_v6("web")


def test_state_dir_records_and_node_name_are_under_the_instances_root(tmp_path: Path) -> None:
    root = tmp_path / "instances"
    assert inst.state_dir("web", root=root) == root / "web"
    assert inst.network_state_dir("web", root=root) == root / "web" / "network"
    assert inst.node_name("web", hostname="box") == "box-web"
    assert inst.instances_root(tmp_path) == tmp_path / "instances"


# -- the slot: pod CIDR, Service range, port --------------------------------------------------


def test_the_slot_is_the_same_for_the_same_name_and_outside_the_defaults() -> None:
    first = inst.allocate("web", routes=[], taken=[], port_free=ALWAYS_FREE)
    assert first == inst.allocate("web", routes=[], taken=[], port_free=ALWAYS_FREE)
    pods, services = first.networks()
    assert pods.subnet_of(inst.POD_POOL)
    assert services.subnet_of(inst.SERVICE_POOL)
    assert not pods.overlaps(ipaddress.ip_network("10.137.0.0/16"))
    assert not services.overlaps(ipaddress.ip_network("10.96.0.0/16"))
    assert first.listen == f"127.0.0.1:{first.port}"
    assert first.port != 10255


def test_a_pod_range_a_host_route_overlaps_moves_the_instance_to_the_next_slot() -> None:
    first = inst.allocate("web", routes=[], taken=[], port_free=ALWAYS_FREE)
    route = ipaddress.ip_network(first.pod_cidr)
    moved = inst.allocate("web", routes=[route], taken=[], port_free=ALWAYS_FREE)
    assert moved.slot == (first.slot + 1) % inst.SLOTS


def test_a_service_range_a_host_route_overlaps_moves_it_too() -> None:
    first = inst.allocate("web", routes=[], taken=[], port_free=ALWAYS_FREE)
    route = ipaddress.ip_network(first.service_cluster_ip_range).supernet(new_prefix=20)
    moved = inst.allocate("web", routes=[route], taken=[], port_free=ALWAYS_FREE)
    assert not ipaddress.ip_network(moved.service_cluster_ip_range).overlaps(route)


def test_an_ipv6_route_does_not_hold_an_ipv4_range() -> None:
    first = inst.allocate("web", routes=[], taken=[], port_free=ALWAYS_FREE)
    v6 = [ipaddress.ip_network("::/1"), ipaddress.ip_network("8000::/1")]
    assert inst.allocate("web", routes=v6, taken=[], port_free=ALWAYS_FREE) == first


def test_another_instances_slot_is_never_taken() -> None:
    theirs = inst.allocate("web", routes=[], taken=[], port_free=ALWAYS_FREE)
    mine = inst.allocate("web", routes=[], taken=[theirs], port_free=ALWAYS_FREE)
    assert mine.slot != theirs.slot
    assert not set(mine.networks()) & set(theirs.networks())


def test_a_port_in_use_moves_the_instance_to_the_next_slot() -> None:
    first = inst.allocate("web", routes=[], taken=[], port_free=ALWAYS_FREE)
    moved = inst.allocate("web", routes=[], taken=[], port_free=lambda p: p != first.port)
    assert moved.slot == (first.slot + 1) % inst.SLOTS


def test_a_kubelet_port_in_use_moves_the_instance_to_the_next_slot_too() -> None:
    first = inst.allocate("web", routes=[], taken=[], port_free=ALWAYS_FREE)
    moved = inst.allocate("web", routes=[], taken=[], port_free=lambda p: p != first.kubelet_port)
    assert moved.slot == (first.slot + 1) % inst.SLOTS
    assert first.kubelet_port not in (10250, first.port)


def test_no_free_slot_is_an_error_naming_the_flags_that_choose_instead() -> None:
    routes = [ipaddress.ip_network("10.0.0.0/8")]
    with pytest.raises(inst.InstanceError) as refused:
        inst.allocate("web", routes=routes, taken=[], port_free=ALWAYS_FREE)
    assert "--pod-cidr, --service-cluster-ip-range and --listen" in str(refused.value)


# -- the record ------------------------------------------------------------------------------


def test_a_claim_records_the_slot_and_later_reads_keep_it_whatever_the_routes(
    tmp_path: Path,
) -> None:
    root = tmp_path / "instances"
    routes = FakeRoutes()
    made = inst.resolve("web", root=root, routes=routes, claim=True, port_free=ALWAYS_FREE)
    record = root / "web" / inst.RECORD
    assert json.loads(record.read_text())["slot"] == made.slot
    assert oct(record.stat().st_mode & 0o777) == "0o600"
    routes.destinations = [made.pod_cidr]
    again = inst.resolve("web", root=root, routes=routes, claim=True, port_free=ALWAYS_FREE)
    assert again == made
    assert routes.reads == 1


def test_a_read_without_claim_writes_nothing(tmp_path: Path) -> None:
    root = tmp_path / "instances"
    inst.resolve("web", root=root, routes=FakeRoutes(), claim=False, port_free=ALWAYS_FREE)
    assert not root.exists()


def test_an_instance_claiming_after_another_takes_another_slot_even_with_the_same_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "instances"
    monkeypatch.setattr(inst, "_digest", lambda name: 7)
    a = inst.resolve("a", root=root, routes=FakeRoutes(), claim=True, port_free=ALWAYS_FREE)
    b = inst.resolve("b", root=root, routes=FakeRoutes(), claim=True, port_free=ALWAYS_FREE)
    assert (a.slot, b.slot) == (7, 8)


@pytest.mark.parametrize(
    "content",
    [
        b"not json",
        b"[]",
        b'{"slot": "3"}',
        b'{"slot": 999}',
        b'{"slot": true}',
        b'{"slot": 3, "pod_cidr": "10.0.0.0/8", "service_cluster_ip_range": "x", "port": 1}',
        b" " * (inst.RECORD_MAX_BYTES + 1),
    ],
)
def test_a_record_that_is_not_ours_is_ignored(tmp_path: Path, content: bytes) -> None:
    root = tmp_path / "instances"
    (root / "other").mkdir(parents=True)
    (root / "other" / inst.RECORD).write_bytes(content)
    assert inst.records(root) == {}


def test_directories_with_names_no_instance_has_are_not_instances(tmp_path: Path) -> None:
    root = tmp_path / "instances"
    for name in ("Bad", "a_b", ".hidden", "ok"):
        (root / name).mkdir(parents=True)
    (root / "file").write_text("x")
    os.symlink(tmp_path, root / "link")
    assert inst.names(root) == ["ok"]


def test_the_host_routes_are_read_from_procfs_without_default_routes(tmp_path: Path) -> None:
    v4 = tmp_path / "route"
    v4.write_text(
        "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\tMTU\tWindow\tIRTT\n"
        "eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n"
        "eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n"
        "br\t00008A0A\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n"
        "garbage\n"
    )
    v6 = tmp_path / "ipv6_route"
    v6.write_text(
        "fd000ac1000000000000000000000000 40 00000000000000000000000000000000 00 "
        "00000000000000000000000000000000 00000100 00000001 00000000 00000001 br\n"
        "00000000000000000000000000000000 00 00000000000000000000000000000000 00 "
        "00000000000000000000000000000000 00000400 00000001 00000000 00200200 lo\n"
    )
    routes = inst.HostRoutes(v4=v4, v6=v6).routes()
    assert routes == [
        ipaddress.ip_network("192.0.2.0/24"),
        ipaddress.ip_network("10.138.0.0/16"),
        ipaddress.ip_network("fd00:ac1::/64"),
    ]


def test_missing_route_files_are_no_routes(tmp_path: Path) -> None:
    assert inst.HostRoutes(v4=tmp_path / "no", v6=tmp_path / "none").routes() == []


# -- on the command line ---------------------------------------------------------------------


@pytest.fixture
def instances(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "instances"
    monkeypatch.setattr(inst, "instances_root", lambda base=None: root)
    monkeypatch.setattr(inst, "HostRoutes", lambda: FakeRoutes())
    monkeypatch.setattr(inst, "port_bindable", ALWAYS_FREE)
    monkeypatch.delenv(inst.ENV, raising=False)
    return root


def _seen(command_name: str, args: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    """What a command given ``args`` sees, through the options' own expansion."""
    seen: dict[str, Any] = {}

    def command(
        *,
        state_dir: StateDirOpt = None,
        listen: ListenOpt = "127.0.0.1:10255",
        service_cluster_ip_range: ServiceClusterIPRangeOpt = "10.96.0.0/16",
        node: NodeOptions,
        cluster: ClusterOptions,
        extra: Annotated[int, typer.Option("--extra")] = 0,
    ) -> None:
        seen.update(
            state_dir=state_dir,
            listen=listen,
            services=service_cluster_ip_range,
            node=node,
            kubelet_port=cluster.kubelet_port,
        )

    app = typer.Typer()
    app.command(command_name)(expand(command))
    app.command("other")(lambda: None)
    result = CliRunner().invoke(app, [command_name, *args], env=env)
    seen["result"] = result
    return seen


def _flat(output: str) -> str:
    """Typer's error box as one line of words."""
    return " ".join(re.sub("[│╭╮╰╯─]", " ", output).split())


def test_without_an_instance_every_default_is_as_it_was(instances: Path) -> None:
    seen = _seen("serve", [])
    node = seen["node"]
    assert (seen["state_dir"], seen["listen"], seen["services"], seen["kubelet_port"]) == (
        None,
        "127.0.0.1:10255",
        "10.96.0.0/16",
        10250,
    )
    assert (node.instance, node.bridge, node.pod_cidr, node.node_name) == (
        "",
        "akl0",
        "10.137.0.0/16",
        None,
    )
    assert node.ipv6_pod_cidr() is None
    assert not instances.exists()


@pytest.mark.parametrize("how", ["flag", "variable"])
def test_an_instance_derives_every_default_and_serve_records_it(instances: Path, how: str) -> None:
    args, env = (["--instance", "web"], {}) if how == "flag" else ([], {inst.ENV: "web"})
    seen = _seen("serve", [*args, "--dual-stack"], env)
    assert seen["result"].exit_code == 0, seen["result"].output
    node = seen["node"]
    made = inst.read_record(instances / "web" / inst.RECORD)
    assert made is not None
    assert seen["state_dir"] == instances / "web"
    assert (seen["listen"], seen["services"]) == (made.listen, made.service_cluster_ip_range)
    assert seen["kubelet_port"] == made.kubelet_port
    assert (node.instance, node.bridge, node.pod_cidr) == ("web", "akl-web", made.pod_cidr)
    assert node.network_state_dir == instances / "web" / "network"
    assert node.node_name == inst.node_name("web")
    assert node.ipv6_pod_cidr() == inst.pod_cidr_v6("web")


def test_options_given_win_over_what_the_instance_derives(instances: Path) -> None:
    seen = _seen(
        "serve",
        ["--instance", "web", "--bridge", "mine0", "--listen", "127.0.0.1:9999"],
        {"ASYNCKUBELET_POD_CIDR": "10.99.0.0/24", "ASYNCKUBELET_STATE_DIR": "/srv/node"},
    )
    node = seen["node"]
    assert (node.bridge, node.pod_cidr, seen["listen"], seen["state_dir"]) == (
        "mine0",
        "10.99.0.0/24",
        "127.0.0.1:9999",
        Path("/srv/node"),
    )
    assert node.network_state_dir == instances / "web" / "network"


def test_a_command_that_makes_no_network_records_nothing(instances: Path) -> None:
    seen = _seen("reset", ["--instance", "web"])
    assert seen["result"].exit_code == 0
    assert seen["node"].bridge == "akl-web"
    assert not (instances / "web" / inst.RECORD).exists()


def test_a_bad_instance_is_a_usage_error_before_the_command_runs(instances: Path) -> None:
    seen = _seen("serve", ["--instance", "../x"])
    assert seen["result"].exit_code == 2
    assert "node" not in seen
    assert "--instance '../x': must be lowercase letters" in _flat(seen["result"].output)


def test_no_free_range_is_a_usage_error_naming_the_flags(
    instances: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(inst, "HostRoutes", lambda: FakeRoutes(["10.0.0.0/8"]))
    seen = _seen("serve", ["--instance", "web"])
    assert seen["result"].exit_code == 2
    assert "give --pod-cidr, --service-cluster-ip-range and --listen" in _flat(
        seen["result"].output
    )


def test_the_plain_get_finds_the_instances_daemon_or_leaves_a_bad_name_to_the_cli(
    instances: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(inst, "state_dir", lambda name: instances / name)
    assert get_output._instance_state_dir("web") == str(instances / "web")
    assert get_output._instance_state_dir("") is None
    monkeypatch.setenv(inst.ENV, "db")
    assert get_output._instance_state_dir("") == str(instances / "db")
    with pytest.raises(ValueError, match="must be lowercase"):
        get_output._instance_state_dir("../x")
    assert get_output.through_daemon(["get", "pods", "--instance", "../x"]) is None


def test_doctor_lists_the_default_instance_then_each_named_one(tmp_path: Path) -> None:
    root = tmp_path / "instances"
    made = inst.resolve("web", root=root, routes=FakeRoutes(), claim=True, port_free=ALWAYS_FREE)
    (root / "db").mkdir()
    lines = [f.line() for f in inst.found(root, default_state=tmp_path)]
    assert lines == [
        f"instance (default): not running, state dir {tmp_path}",
        f"instance db: not running, state dir {root / 'db'}, bridge akl-db, no ranges recorded yet",
        f"instance web: not running, state dir {root / 'web'}, bridge akl-web, pod CIDR "
        f"{made.pod_cidr}, Services {made.service_cluster_ip_range}, listen {made.listen}",
    ]


def test_run_counts_what_an_instance_derives_as_defaults_the_daemons_values_replace(
    instances: Path,
) -> None:
    from asynckubelet.cli.commands.run import _given

    seen: dict[str, set[str]] = {}

    def command(*, ctx: typer.Context, node: NodeOptions) -> None:
        seen["given"] = _given(ctx)

    app = typer.Typer()
    app.command("run")(expand(command))
    app.command("other")(lambda: None)
    result = CliRunner().invoke(app, ["run", "--instance", "web", "--pod-cidr", "10.99.0.0/24"])
    assert result.exit_code == 0, result.output
    assert "pod_cidr" in seen["given"]
    assert not {"bridge", "node_name", "network_state_dir"} & seen["given"]
