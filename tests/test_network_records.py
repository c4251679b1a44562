"""The pod network's records are private to the node's user (0600 files in 0700
directories, wider directories below the state directory tightened, the state directory
itself left as the administrator made it), and they go under ``--network-state-dir``:
``run`` beside a daemon uses the daemon's."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from asynckubelet import errors
from asynckubelet.cli.options import NodeOptions
from asynckubelet.network import DEFAULT_STATE_DIR
from asynckubelet.network.bridge import BridgeConfig, BridgePlugin
from asynckubelet.network.ipam import FileIPAM
from asynckubelet.network.records import PodRecords, private_dir, write_private
from asynckubelet.testing import FakeDocker

SID = "a" * 64


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def modes_below(root: Path) -> dict[str, int]:
    """Relative path -> mode of everything below ``root``."""
    return {str(path.relative_to(root)): mode(path) for path in sorted(root.rglob("*"))}


@pytest.fixture(params=[0o022, 0o000], ids=["umask-022", "umask-000"])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    """Run the test under a usual and an open umask; the records' modes must not care."""
    old = os.umask(int(request.param))
    try:
        yield int(request.param)
    finally:
        os.umask(old)


def test_a_missing_state_dir_and_the_directories_below_it_are_made_0700(
    tmp_path: Path, umask: int
) -> None:
    root = tmp_path / "made" / "network"
    private_dir(root, root / "akl0" / "ipam")
    assert mode(root) == 0o700
    assert modes_below(root) == {"akl0": 0o700, "akl0/ipam": 0o700}


def test_wider_directories_below_the_state_dir_are_tightened_and_the_state_dir_left(
    tmp_path: Path, umask: int
) -> None:
    root = tmp_path / "shared"
    (root / "akl0" / "pods").mkdir(parents=True)
    for path in (root, root / "akl0", root / "akl0" / "pods"):
        path.chmod(0o755)
    (root / "akl0" / "pods").chmod(0o775)
    private_dir(root, root / "akl0" / "pods")
    assert mode(root) == 0o755
    assert modes_below(root) == {"akl0": 0o700, "akl0/pods": 0o700}


def test_a_directory_outside_the_state_dir_or_a_file_in_the_way_is_refused(
    tmp_path: Path,
) -> None:
    with pytest.raises(errors.NetworkError, match="not under the network state directory"):
        private_dir(tmp_path / "network", tmp_path / "elsewhere")
    (tmp_path / "network").mkdir()
    (tmp_path / "network" / "akl0").write_text("")
    with pytest.raises(errors.NetworkError, match=r"akl0: .*not a directory"):
        private_dir(tmp_path / "network", tmp_path / "network" / "akl0" / "ipam")


def test_a_record_is_written_0600_even_over_a_wider_one(tmp_path: Path, umask: int) -> None:
    path = tmp_path / "10.137.0.2"
    path.write_text("old")
    path.chmod(0o644)
    write_private(path, "sandbox\nengine")
    assert (path.read_text(), mode(path)) == ("sandbox\nengine", 0o600)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["10.137.0.2"]


@pytest.mark.anyio
async def test_ipam_allocations_are_0600_in_a_0700_pool(tmp_path: Path, umask: int) -> None:
    root = tmp_path / "network"
    (root / "akl0" / "ipam").mkdir(parents=True)
    (root / "akl0" / "ipam").chmod(0o755)
    (root / "akl0").chmod(0o755)
    ipam = FileIPAM(directory=root / "akl0" / "ipam", subnet="10.137.0.0/24", root=root)
    allocation = await ipam.allocate(sandbox_id=SID, engine="engine-1")
    assert modes_below(root) == {
        "akl0": 0o700,
        "akl0/ipam": 0o700,
        f"akl0/ipam/{allocation.address}": 0o600,
        "akl0/ipam/last_reserved_ip": 0o600,
        "akl0/ipam/lock": 0o600,
    }


def test_pod_records_are_0600_in_a_0700_directory(tmp_path: Path, umask: int) -> None:
    root = tmp_path / "network"
    records = PodRecords(root=root, directory=root / "akl0" / "pods")
    records.write(SID, {"sandbox_id": SID, "engine": "engine-1", "ready": False})
    assert records.read(SID) == {"sandbox_id": SID, "engine": "engine-1", "ready": False}
    assert records.engines() == {SID: "engine-1"}
    assert modes_below(root) == {"akl0": 0o700, "akl0/pods": 0o700, f"akl0/pods/{SID}.json": 0o600}
    records.drop(SID)
    assert records.sandboxes() == []


@pytest.mark.anyio
async def test_the_nodes_bridge_network_keeps_its_records_under_the_network_state_dir(
    tmp_path: Path,
) -> None:
    bridge = f"akr{os.getpid() % 100000}"
    records = tmp_path / "records"
    node = NodeOptions(network="bridge", bridge=bridge, network_state_dir=records)
    plugin = node.network_plugin(FakeDocker(), node_name="n1")
    assert isinstance(plugin, BridgePlugin)
    allocation = await plugin.ipam.allocate(sandbox_id=SID, engine="e")
    plugin.records.write(SID, {"sandbox_id": SID, "ip": allocation.address})
    assert set(modes_below(records)) == {
        bridge,
        f"{bridge}/ipam",
        f"{bridge}/ipam/{allocation.address}",
        f"{bridge}/ipam/last_reserved_ip",
        f"{bridge}/ipam/lock",
        f"{bridge}/pods",
        f"{bridge}/pods/{SID}.json",
    }
    assert not (DEFAULT_STATE_DIR / bridge).exists()
    assert BridgePlugin(BridgeConfig(bridge=bridge, state_dir=records)).records.sandboxes() == [SID]


@pytest.mark.parametrize(
    ("published", "given", "expected"),
    [
        ({"network_state_dir": "/srv/akl-net"}, set(), Path("/srv/akl-net")),
        ({"network_state_dir": "/srv/akl-net"}, {"network_state_dir"}, DEFAULT_STATE_DIR),
        ({}, set(), DEFAULT_STATE_DIR),
    ],
)
def test_run_beside_a_daemon_allocates_from_the_daemons_records(
    published: dict[str, str], given: set[str], expected: Path
) -> None:
    from asynckubelet.cli.commands.run import _daemon_defaults

    node = _daemon_defaults(NodeOptions(), {"node_name": "n1", **published}, given=given)
    assert node.network_state_dir == expected


def test_serve_publishes_its_network_state_dir_and_seccomp_default(tmp_path: Path) -> None:
    from asynckubelet.cli.nodeconfig import network_config
    from asynckubelet.node.kubelet import KubeletConfig
    from asynckubelet.nodeapp.node import published_info

    node = NodeOptions(network_state_dir=tmp_path / "records", seccomp_default=False)
    info = published_info(
        KubeletConfig(node_name="n1", seccomp_default=node.seccomp_default),
        network_config(node),
        network_name="bridge",
        listen="http://127.0.0.1:10255",
        docker_url="unix:///run/docker.sock",
        socket=tmp_path / "api.sock",
    ).to_json()
    assert (info["network_state_dir"], info["seccomp_default"]) == (
        str(tmp_path / "records"),
        False,
    )
