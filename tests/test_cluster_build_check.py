"""``integration/cluster/build.sh --check`` finds the built control plane and never builds it:
the cluster tests call it (on the host and inside Docker-in-Docker, where the cache is
mounted read-only), so it must not run apt or make, and must say in one line what is missing.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "integration" / "cluster" / "build.sh"
VERSION = "1.20.5+really1.20.2-1.1+deb12u1"
CONTROL_PLANE = ["kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl"]
FORBIDDEN = ["apt-get", "apt-cache", "make", "dpkg-query", "dpkg-deb", "sudo", "go", "flock"]


def _executable(path: Path, body: str = "exit 0") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def stubs(tmp_path: Path) -> Path:
    """A PATH directory where every program that builds or installs records its call."""
    calls = tmp_path / "calls"
    for name in FORBIDDEN:
        _executable(tmp_path / "bin" / name, f'echo "{name} $*" >>{calls}; exit 1')
    for name in ["openssl", "curl"]:
        _executable(tmp_path / "bin" / name)
    return tmp_path / "bin"


def _check(
    tmp_path: Path, stubs: Path, *, programs: str = "control-plane", **env: str
) -> subprocess.CompletedProcess[str]:
    base = {
        "PATH": f"{stubs}:/usr/bin:/bin",
        "AKL_CLUSTER_CACHE": str(tmp_path / "cache"),
        "AKL_KUBERNETES_VERSION": VERSION,
        "AKL_ETCD": str(_executable(tmp_path / "etcd")),
        "ASYNCKUBELET_CLUSTER_PROGRAMS": programs,
        "HOME": str(tmp_path),
    }
    return subprocess.run(
        [str(BUILD), "--check"],
        capture_output=True,
        text=True,
        env={**base, **env},
        timeout=60,
    )


def _calls(tmp_path: Path) -> str:
    calls = tmp_path / "calls"
    return calls.read_text() if calls.exists() else ""


def test_a_complete_cache_is_printed_and_nothing_else_runs(tmp_path: Path, stubs: Path) -> None:
    cache = tmp_path / "cache" / VERSION
    for name in CONTROL_PLANE:
        _executable(cache / name)
    done = _check(tmp_path, stubs)
    assert (done.returncode, done.stdout.strip()) == (0, str(cache))
    assert _calls(tmp_path) == ""


def test_missing_programs_are_named_in_one_line_without_building(
    tmp_path: Path, stubs: Path
) -> None:
    _executable(tmp_path / "cache" / VERSION / "kube-scheduler")
    done = _check(tmp_path, stubs)
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        f"build.sh: kube-apiserver kube-controller-manager kubectl missing from "
        f"{tmp_path / 'cache' / VERSION}"
    ]
    assert _calls(tmp_path) == ""


def test_the_e2e_programs_and_their_spec_list_are_wanted_for_all(
    tmp_path: Path, stubs: Path
) -> None:
    for name in CONTROL_PLANE:
        _executable(tmp_path / "cache" / VERSION / name)
    done = _check(tmp_path, stubs, programs="all")
    assert done.returncode == 1
    assert "e2e.test agnhost nonewprivs nodeconformance-specs.txt missing" in done.stderr
    assert _calls(tmp_path) == ""


def test_a_missing_etcd_is_named_with_its_package(tmp_path: Path, stubs: Path) -> None:
    for name in CONTROL_PLANE:
        _executable(tmp_path / "cache" / VERSION / name)
    done = _check(tmp_path, stubs, AKL_ETCD=str(tmp_path / "no-etcd"))
    assert done.returncode == 1
    assert done.stderr.strip() == "build.sh: etcd (etcd-server) not installed"


def test_an_unknown_version_asks_for_it_without_updating_apt(tmp_path: Path, stubs: Path) -> None:
    _executable(stubs / "apt-cache")
    env = {k: v for k, v in os.environ.items() if k != "AKL_KUBERNETES_VERSION"}
    done = subprocess.run(
        [str(BUILD), "--check"],
        capture_output=True,
        text=True,
        env={**env, "PATH": f"{stubs}:/usr/bin:/bin", "AKL_CLUSTER_CACHE": str(tmp_path)},
        timeout=60,
    )
    assert done.returncode == 1
    assert "set AKL_KUBERNETES_VERSION" in done.stderr
    assert _calls(tmp_path) == ""


def test_other_arguments_are_a_usage_error(tmp_path: Path, stubs: Path) -> None:
    done = subprocess.run([str(BUILD), "--print"], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr.strip()) == (2, "usage: build.sh [--check]")


def test_the_kubelet_alone_is_checked_when_only_it_is_wanted(tmp_path: Path, stubs: Path) -> None:
    cache = tmp_path / "cache" / VERSION
    missing = _check(tmp_path, stubs, programs="kubelet")
    assert missing.returncode == 1
    assert missing.stderr.strip().splitlines() == [f"build.sh: kubelet missing from {cache}"]

    _executable(cache / "kubelet")
    done = _check(tmp_path, stubs, programs="kubelet")
    assert (done.returncode, done.stdout.strip()) == (0, str(cache))
    assert _calls(tmp_path) == ""
