"""The record of the ports a node publishes, and what a node reads of its neighbours':
only running nodes count, the earliest publisher holds a port, a hostile record is read
bounded and filtered."""

from __future__ import annotations

import json
from pathlib import Path

from asynckubelet.node.neighbours import MAX_BYTES, RECORD, Neighbours, Published


def node(root: Path, name: str, *, alive: set[str] | None = None, now: float = 100.0) -> Neighbours:
    running = alive if alive is not None else {"a", "b", "c"}
    return Neighbours(
        state_dir=root / name,
        node_name=f"host-{name}",
        root=root,
        alive=lambda state: state.name in running,
        clock=lambda: now,
    )


def test_a_running_neighbours_published_port_is_seen_with_its_node(tmp_path: Path) -> None:
    node(tmp_path, "a").record([("TCP", 30080), ("UDP", 30053)])
    assert node(tmp_path, "b").published() == {
        ("TCP", 30080): Published(100.0, "host-a"),
        ("UDP", 30053): Published(100.0, "host-a"),
    }


def test_a_node_does_not_see_its_own_ports(tmp_path: Path) -> None:
    a = node(tmp_path, "a")
    a.record([("TCP", 30080)])
    assert a.published() == {}


def test_a_stopped_or_crashed_neighbours_record_holds_nothing(tmp_path: Path) -> None:
    node(tmp_path, "a").record([("TCP", 30080)])
    assert node(tmp_path, "b", alive={"b"}).published() == {}


def test_the_default_instances_state_dir_counts(tmp_path: Path) -> None:
    default = tmp_path / "state"
    root = default / "instances"
    Neighbours(
        state_dir=default, node_name="host", root=root, alive=lambda s: True, clock=lambda: 7.0
    ).record([("TCP", 30080)])
    b = Neighbours(state_dir=root / "b", node_name="host-b", root=root, alive=lambda s: True)
    assert b.states() == [default]
    assert b.published() == {("TCP", 30080): Published(7.0, "host")}


def test_the_earliest_publisher_of_a_port_holds_it(tmp_path: Path) -> None:
    node(tmp_path, "a", now=200.0).record([("TCP", 30080)])
    node(tmp_path, "c", now=150.0).record([("TCP", 30080)])
    b = node(tmp_path, "b", now=180.0)
    assert b.published() == {("TCP", 30080): Published(150.0, "host-c")}
    b.record([("TCP", 30080)])
    assert b.holds(("TCP", 30080), Published(150.0, "host-c"))
    assert not b.holds(("TCP", 30080), Published(200.0, "host-a"))
    assert b.holds(("TCP", 30081), Published(200.0, "host-a"))


def test_a_kept_port_keeps_its_time_and_a_restarted_node_reads_it_back(tmp_path: Path) -> None:
    node(tmp_path, "a", now=100.0).record([("TCP", 30080)])
    again = node(tmp_path, "a", now=500.0)
    again.record([("TCP", 30080), ("TCP", 30081)])
    assert node(tmp_path, "b").published() == {
        ("TCP", 30080): Published(100.0, "host-a"),
        ("TCP", 30081): Published(500.0, "host-a"),
    }


def test_clear_removes_the_record(tmp_path: Path) -> None:
    a = node(tmp_path, "a")
    a.record([("TCP", 30080)])
    a.clear()
    assert not (tmp_path / "a" / RECORD).exists()
    assert node(tmp_path, "b").published() == {}


def test_a_hostile_record_gives_only_well_formed_ports(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / RECORD).write_text(
        json.dumps(
            {
                "node": "host-a",
                "ports": [
                    {"protocol": "TCP", "port": 30080, "since": 1},
                    {"protocol": "ICMP", "port": 30081, "since": 1},
                    {"protocol": "TCP", "port": 70000, "since": 1},
                    {"protocol": "TCP", "port": True, "since": 1},
                    {"protocol": "TCP", "port": 30082, "since": "x"},
                    "TCP/30083",
                ],
            }
        )
    )
    assert node(tmp_path, "b").published() == {("TCP", 30080): Published(1.0, "host-a")}


def test_a_record_naming_no_valid_node_or_too_big_is_ignored(tmp_path: Path) -> None:
    ports = [{"protocol": "TCP", "port": 30080, "since": 1}]
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / RECORD).write_text(json.dumps({"node": "x\nInjected", "ports": ports}))
    (tmp_path / "c").mkdir()
    big = {"node": "host-c", "ports": ports, "pad": "x" * MAX_BYTES}
    (tmp_path / "c" / RECORD).write_text(json.dumps(big))
    assert node(tmp_path, "b").published() == {}


def test_only_state_dirs_named_as_instances_are_read(tmp_path: Path) -> None:
    (tmp_path / "Bad").mkdir()
    (tmp_path / ".lock").write_text("")
    (tmp_path / "a").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "a")
    assert node(tmp_path, "b").states() == [tmp_path.parent, tmp_path / "a"]


def test_without_a_root_no_neighbour_is_looked_for(tmp_path: Path) -> None:
    node(tmp_path, "a").record([("TCP", 30080)])
    alone = Neighbours(state_dir=tmp_path / "b", node_name="host-b", root=None)
    assert alone.published() == {}
