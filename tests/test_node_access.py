"""Choosing the container a command acts on, and finding the daemon of a state dir."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from lightkube.models.core_v1 import Container, Pod, PodSpec
from lightkube.models.meta_v1 import ObjectMeta

from asynckubelet import errors
from asynckubelet.node.access import (
    DEFAULT_CONTAINER_ANNOTATION,
    daemon_pid,
    default_container,
)


def pod(*names: str, annotations: dict[str, str] | None = None) -> Pod:
    return Pod(
        metadata=ObjectMeta(name="web", namespace="default", annotations=annotations),
        spec=PodSpec(
            containers=[Container(name=n, image="busybox") for n in names],
            initContainers=[Container(name="init", image="busybox")],
        ),
    )


def test_the_only_container_of_a_pod_without_init_containers_is_chosen_without_a_notice() -> None:
    alone = pod("a")
    assert alone.spec is not None
    alone.spec.initContainers = None
    assert default_container(alone, None) == ("a", "")


def test_an_init_container_beside_the_only_container_makes_kubectl_say_which_it_chose() -> None:
    assert default_container(pod("a"), None) == (
        "a",
        'Defaulted container "a" out of: a, init (init)',
    )


def test_the_first_of_several_is_chosen_with_kubectls_notice() -> None:
    assert default_container(pod("a", "b"), None) == (
        "a",
        'Defaulted container "a" out of: a, b, init (init)',
    )


def test_the_default_container_annotation_wins() -> None:
    subject = pod("a", "b", annotations={DEFAULT_CONTAINER_ANNOTATION: "b"})
    assert default_container(subject, None) == ("b", "")


def test_an_init_container_may_be_named() -> None:
    assert default_container(pod("a"), "init") == ("init", "")


def test_an_unknown_container_names_the_valid_ones() -> None:
    with pytest.raises(errors.ContainerNotValid) as caught:
        default_container(pod("a", "b"), "c")
    assert str(caught.value) == "container c is not valid for pod web: choose one of: [a b init]"
    assert isinstance(caught.value, errors.NotFound)


def test_a_state_dir_without_a_pid_file_has_no_daemon(tmp_path: Path) -> None:
    assert daemon_pid(tmp_path) is None


def test_a_pid_file_of_a_live_process_names_it(tmp_path: Path) -> None:
    (tmp_path / "serve.pid").write_text(f"{os.getpid()}\n")
    assert daemon_pid(tmp_path) == os.getpid()


def test_a_stale_pid_file_means_no_daemon(tmp_path: Path) -> None:
    (tmp_path / "serve.pid").write_text("999999999\n")
    assert daemon_pid(tmp_path) is None


def test_the_default_state_dir_is_var_lib_for_root_and_xdg_state_for_others(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from asynckubelet.node import locate

    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert locate.default_state_dir_path() == "/var/lib/asynckubelet"
    assert locate.default_state_dir() == Path("/var/lib/asynckubelet")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    assert locate.default_state_dir_path() == str(tmp_path / "state" / "asynckubelet")
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert locate.default_state_dir() == tmp_path / ".local" / "state" / "asynckubelet"


def test_settling_the_heap_sets_whats_alive_aside_and_collects_the_rest() -> None:
    import gc

    from asynckubelet.node.daemon import settle_heap

    class Cycle:
        def __init__(self) -> None:
            self.me = self

    kept = Cycle()
    dropped = Cycle()
    gone = weakref_to(dropped)
    del dropped
    try:
        settle_heap()
        assert gone() is None
        assert gc.get_freeze_count() > 0
        assert not any(o is kept for o in gc.get_objects())
    finally:
        gc.unfreeze()
    assert any(o is kept for o in gc.get_objects())


def weakref_to(obj: object) -> Any:
    import weakref

    return weakref.ref(obj)
