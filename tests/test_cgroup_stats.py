"""Counters read from cgroup files (a local engine's pod containers, for which the engine's
stats API answers empty), in the engine's stats shape, every path kept under the mount."""

from __future__ import annotations

from pathlib import Path

import pytest

from asynckubelet.node import cgroupstats, usage
from asynckubelet.runtime import naming
from asynckubelet.testing import FakeDocker


def test_proc_cgroup_lines_name_each_controllers_path() -> None:
    text = "4:memory:/docker/abc\n2:cpu,cpuacct:/docker/abc\n0::/docker/abc\n"
    assert cgroupstats.cgroup_paths(text) == {
        "memory": "/docker/abc",
        "cpu": "/docker/abc",
        "cpuacct": "/docker/abc",
        "": "/docker/abc",
    }


def _v1_tree(root: Path, path: str) -> None:
    cpu = root / "cpuacct" / path.lstrip("/")
    memory = root / "memory" / path.lstrip("/")
    cpu.mkdir(parents=True)
    memory.mkdir(parents=True)
    (cpu / "cpuacct.usage").write_text("2500000000\n")
    (memory / "memory.usage_in_bytes").write_text("10485760\n")
    (memory / "memory.stat").write_text(
        "cache 4194304\nrss 6291456\ntotal_rss 6291456\ntotal_inactive_file 2097152\n"
    )


def _v2_tree(root: Path, path: str) -> None:
    directory = root / path.lstrip("/")
    directory.mkdir(parents=True)
    (directory / "cpu.stat").write_text("usage_usec 2500000\nuser_usec 2000000\n")
    (directory / "memory.current").write_text("10485760\n")
    (directory / "memory.stat").write_text("anon 6291456\nfile 4194304\ninactive_file 2097152\n")


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_a_cgroup_reads_as_the_engines_stats(tmp_path: Path, version: str) -> None:
    proc = tmp_path / "proc" / "42"
    proc.mkdir(parents=True)
    root = tmp_path / "cgroup"
    if version == "v1":
        (proc / "cgroup").write_text("4:memory:/pod/c1\n2:cpu,cpuacct:/pod/c1\n")
        _v1_tree(root, "/pod/c1")
    else:
        (proc / "cgroup").write_text("0::/pod/c1\n")
        _v2_tree(root, "/pod/c1")
    sample = cgroupstats.read_sample(42, now=1796605200.0, root=root, proc=tmp_path / "proc")
    assert sample is not None
    found = usage.container_usage("c", sample, start_time=0.0)
    assert found.cpu_seconds == 2.5
    assert found.working_set_bytes == 8 * 2**20
    assert found.rss_bytes == 6291456
    assert found.timestamp == 1796605200.0


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_inside_a_container_the_cgroup_is_found_below_the_mounts_root(
    tmp_path: Path, version: str
) -> None:
    """A node in Docker-in-Docker: ``/proc/<pid>/cgroup`` names the whole path
    (``/docker/OUTER/docker/c1``), the mount shows the outer container's part only."""
    proc = tmp_path / "proc" / "42"
    proc.mkdir(parents=True)
    root = tmp_path / "cgroup"
    if version == "v1":
        whole = "/docker/outer/docker/c1"
        (proc / "cgroup").write_text(f"4:memory:{whole}\n2:cpu,cpuacct:{whole}\n")
        _v1_tree(root, "/docker/c1")
    else:
        (proc / "cgroup").write_text("0::/docker/outer/docker/c1\n")
        _v2_tree(root, "/docker/c1")
    sample = cgroupstats.read_sample(42, now=1796605200.0, root=root, proc=tmp_path / "proc")
    assert sample is not None
    assert usage.container_usage("c", sample, start_time=0.0).cpu_seconds == 2.5


def test_two_samples_give_the_rate_between_them() -> None:
    first = {"read": "2026-12-07T01:00:00Z", "cpu_stats": {"cpu_usage": {"total_usage": 10**9}}}
    second = {
        "read": "2026-12-07T01:00:01Z",
        "cpu_stats": {"cpu_usage": {"total_usage": 10**9 + 25 * 10**7}},
        "memory_stats": {},
    }
    assert usage.cpu_rate(cgroupstats.with_earlier(second, first)) == 250_000_000


@pytest.mark.parametrize("path", ["/../../etc", "/docker/../../../etc"])
def test_a_cgroup_path_leaving_the_mount_is_not_read(tmp_path: Path, path: str) -> None:
    assert cgroupstats._under(tmp_path, "memory", path) is None


def test_a_process_that_is_gone_has_no_sample(tmp_path: Path) -> None:
    assert cgroupstats.read_sample(42, now=0.0, root=tmp_path, proc=tmp_path) is None


def _pod_container(docker: FakeDocker) -> str:
    labels = {
        naming.LABEL_NODE: "n1",
        naming.LABEL_TYPE: naming.TYPE_CONTAINER,
        naming.LABEL_POD_NAME: "web",
        naming.LABEL_POD_NAMESPACE: "default",
        naming.LABEL_POD_UID: "u1",
        naming.LABEL_CONTAINER_NAME: "app",
    }
    return docker.add_container(labels=labels, state="running").id


EMPTY = {"read": "0001-01-01T00:00:00Z", "cpu_stats": {}, "memory_stats": {}}


@pytest.mark.anyio
async def test_a_local_engines_empty_answer_is_replaced_by_the_cgroup_files(
    tmp_path: Path,
) -> None:
    docker = FakeDocker()
    cid = _pod_container(docker)
    docker.stats[cid] = EMPTY
    pid = docker.containers[cid].pid
    (tmp_path / "proc" / str(pid)).mkdir(parents=True)
    (tmp_path / "proc" / str(pid) / "cgroup").write_text("0::/pod/c1\n")
    _v2_tree(tmp_path / "cgroup", "/pod/c1")
    found = await usage.read_usage(
        docker,
        node_name="n1",
        local=True,
        cgroup_root=tmp_path / "cgroup",
        proc=tmp_path / "proc",
        interval=0.0,
    )
    (pod,) = found.pods
    assert pod.working_set_bytes == 8 * 2**20
    assert pod.cpu_seconds == 2.5


@pytest.mark.anyio
async def test_a_remote_engines_empty_answer_leaves_the_container_out() -> None:
    docker = FakeDocker(url="tcp://engine:2376")
    docker.stats[_pod_container(docker)] = EMPTY
    found = await usage.read_usage(docker, node_name="n1", local=False)
    assert found.pods == ()


def _host_v1(root: Path) -> None:
    (root / "cpu,cpuacct").mkdir(parents=True)
    (root / "memory").mkdir()
    (root / "cpu,cpuacct" / "cpuacct.usage").write_text("90000000000\n")
    (root / "memory" / "memory.usage_in_bytes").write_text(f"{3 * 2**30}\n")
    (root / "memory" / "memory.stat").write_text(
        f"total_rss {2**30}\ntotal_inactive_file {2**30}\n"
    )


def _host_v2(root: Path, proc: Path) -> None:
    root.mkdir(parents=True)
    (root / "cgroup.controllers").write_text("cpu memory\n")
    (root / "cpu.stat").write_text("usage_usec 90000000\n")
    (root / "memory.stat").write_text(f"anon {2**30}\ninactive_file {2**30}\n")
    proc.mkdir(parents=True)
    (proc / "meminfo").write_text(
        "MemTotal:       25165824 kB\nMemFree:        22020096 kB\n"
        "Inactive(file):  1048576 kB\nAnonPages:       1048576 kB\n"
    )


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_the_hosts_root_cgroup_reads_as_the_kubelets_node_figures(
    tmp_path: Path, version: str
) -> None:
    """The machine's figures, as cAdvisor reads the root: on v2 the root has no
    ``memory.current`` and its usage is what the kernel does not hold free."""
    root, proc = tmp_path / "cgroup", tmp_path / "proc"
    if version == "v1":
        _host_v1(root)
    else:
        _host_v2(root, proc)
    sample = cgroupstats.read_host(now=1796605200.0, root=root, proc=proc)
    assert sample is not None
    found = usage.container_usage("", sample, start_time=0.0)
    assert found.cpu_seconds == 90.0
    assert found.usage_bytes == 3 * 2**30
    assert found.working_set_bytes == 2 * 2**30
    assert found.rss_bytes == 2**30


def test_a_node_in_a_container_reports_its_containers_cgroup(tmp_path: Path) -> None:
    """The root of a cgroup namespace that is not the machine's has ``memory.current``:
    that is the node's usage, not the machine's ``/proc/meminfo``."""
    root, proc = tmp_path / "cgroup", tmp_path / "proc"
    _host_v2(root, proc)
    (root / "memory.current").write_text(f"{2**29}\n")
    sample = cgroupstats.read_host(now=0.0, root=root, proc=proc)
    assert sample is not None
    assert usage.container_usage("", sample, start_time=0.0).usage_bytes == 2**29


def test_a_root_that_cannot_be_read_has_no_sample(tmp_path: Path) -> None:
    assert cgroupstats.read_host(now=0.0, root=tmp_path / "none", proc=tmp_path) is None
    (tmp_path / "v2").mkdir()
    (tmp_path / "v2" / "cgroup.controllers").write_text("")
    assert cgroupstats.read_host(now=0.0, root=tmp_path / "v2", proc=tmp_path) is None


@pytest.mark.anyio
async def test_a_local_nodes_own_figures_are_the_hosts_and_a_remote_ones_its_pods_sums(
    tmp_path: Path,
) -> None:
    root = tmp_path / "cgroup"
    _host_v1(root)
    docker = FakeDocker()
    cid = _pod_container(docker)
    docker.stats[cid] = {
        "read": "2026-12-07T01:00:01Z",
        "preread": "2026-12-07T01:00:00Z",
        "cpu_stats": {"cpu_usage": {"total_usage": 2 * 10**9}},
        "precpu_stats": {"cpu_usage": {"total_usage": 10**9}},
        "memory_stats": {"usage": 2**20, "stats": {}},
    }

    async def read(*, local: bool) -> usage.NodeUsage:
        return await usage.read_usage(
            docker,
            node_name="n1",
            local=local,
            cgroup_root=root,
            proc=tmp_path / "proc",
            interval=0.05,
        )

    remote = await read(local=False)
    assert (remote.working_set_bytes, remote.nano_cores) == (2**20, 10**9)
    found = await read(local=True)
    assert found.host is not None
    assert found.working_set_bytes == 2 * 2**30
    assert found.usage_bytes == 3 * 2**30
    assert found.cpu_seconds == 90.0
    assert found.nano_cores == 0  # the fake host's counter stands still between samples
    assert found.pods[0].working_set_bytes == 2**20
