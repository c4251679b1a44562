"""The private dockerd's name is its containerd namespace, checked before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from asynckubelet.docker.engine import Dockerd


@pytest.mark.parametrize("name", ["akl", "asynckubelet", "akltest-0f3a9c1e", "a.b_c-d", "x" * 68])
def test_a_containerd_namespace_name_is_accepted(name: str, tmp_path: Path) -> None:
    daemon = Dockerd(root=tmp_path, name=name)
    assert ["--containerd-namespace", name] == daemon.args()[-4:-2]


@pytest.mark.parametrize(
    "name", ["akltest-_ll5m5_b", "akltest-", "-akl", "a--b", "a b", "", "x" * 69, "akl/x"]
)
def test_a_name_containerd_would_refuse_is_refused_before_start(name: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not a valid containerd namespace"):
        Dockerd(root=tmp_path, name=name)
