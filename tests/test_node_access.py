"""Choosing the container a command acts on, and finding the daemon of a state dir."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import builders
import pytest
from lightkube.models.core_v1 import Pod

from asynckubelet import errors
from asynckubelet.node.access import (
    DEFAULT_CONTAINER_ANNOTATION,
    daemon_pid,
    default_container,
)


def pod(*names: str, annotations: dict[str, str] | None = None) -> Pod:
    return builders.pod(
        "web",
        annotations=annotations,
        containers=[builders.container(n) for n in names],
        initContainers=[builders.container("init")],
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


PRIORITY_PROBE = """
import json, os, sys, threading
from asynckubelet.node.daemon import set_priority

before = threading.Thread(target=threading.Event().wait, args=(5,), daemon=True)
before.start()
problems = set_priority(int(sys.argv[1]))
after = []
later = threading.Thread(target=lambda: after.append(os.getpriority(os.PRIO_PROCESS, 0)))
later.start()
later.join()
threads = [os.getpriority(os.PRIO_PROCESS, t) for t in (os.getpid(), before.native_id)]
try:
    with open("/proc/self/autogroup") as f:
        group = f.read().strip()
except FileNotFoundError:
    group = None
print(json.dumps({"problems": problems, "threads": threads, "later": after, "group": group}))
"""


def priority_probe(nice: int, *, prefix: tuple[str, ...] = ()) -> dict[str, Any]:
    """``set_priority(nice)`` in a process of its own session (the autogroup it changes is
    the session's), with a thread started before; what it reports and what it set."""
    import json
    import subprocess
    import sys

    done = subprocess.run(
        [*prefix, sys.executable, "-c", PRIORITY_PROBE, str(nice)],
        capture_output=True,
        text=True,
        check=True,
        start_new_session=True,
    )
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_the_daemons_priority_covers_its_threads_those_it_starts_and_its_session() -> None:
    found = priority_probe(7)
    assert found["problems"] == []
    assert found["threads"] == [7, 7]
    assert found["later"] == [7]
    if found["group"] is not None:
        assert found["group"].endswith("nice 7")


@pytest.mark.skipif(shutil.which("setpriv") is None, reason="needs setpriv (util-linux)")
def test_a_priority_the_daemon_may_not_take_is_reported_and_left_as_it_was() -> None:
    nice = os.getpriority(os.PRIO_PROCESS, 0)
    found = priority_probe(-5, prefix=("setpriv", "--bounding-set", "-sys_nice", "--"))
    assert found["problems"][0] == "cannot set the CPU priority to nice -5 (Permission denied)"
    assert set(found["threads"]) == {nice}
    if found["group"] is not None:
        assert found["problems"][1:] == [
            "cannot set the session's CPU priority to nice -5 (Operation not permitted)"
        ]
        assert not found["group"].endswith("nice -5")


ROOT_GROUP_PROBE = """
import json, os, sys
from asynckubelet.node import daemon

daemon.AUTOGROUP = sys.argv[2]
problems = daemon.set_priority(int(sys.argv[1]))
print(json.dumps({"problems": problems, "thread": os.getpriority(os.PRIO_PROCESS, 0)}))
"""


def test_a_session_in_the_root_group_keeps_the_threads_priority_and_reports_nothing(
    tmp_path: Path,
) -> None:
    """A process whose session init started without ``setsid`` has an empty autogroup file
    (it shares the root group, whose priority the kernel refuses with EINVAL): the threads
    get the priority, the group is left alone and nothing is reported."""
    import json
    import subprocess
    import sys

    root_group = tmp_path / "autogroup"
    root_group.write_text("")
    done = subprocess.run(
        [sys.executable, "-c", ROOT_GROUP_PROBE, "5", str(root_group)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(done.stdout) == {"problems": [], "thread": 5}
    assert root_group.read_text() == ""


SESSION_PROBE = """
import json, sys
from asynckubelet.node import daemon

seen = [daemon.session_priority()]
with daemon.cpu_priority(int(sys.argv[1])) as problems:
    seen.append(daemon.session_priority())
seen.append(daemon.session_priority())
print(json.dumps({"problems": problems, "seen": seen}))
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/autogroup"), reason="no autogroup scheduling")
def test_the_session_gets_its_priority_back_when_the_daemon_ends() -> None:
    import json
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", SESSION_PROBE, "6"],
        capture_output=True,
        text=True,
        check=True,
        start_new_session=True,
    )
    found = json.loads(done.stdout)
    assert found["problems"] == []
    assert found["seen"][1] == 6
    assert found["seen"][0] == found["seen"][2] != 6


ARENA_PROBE = """
import ctypes, json, sys, tempfile, threading
from asynckubelet.node import daemon

took = daemon.limit_malloc_arenas() if sys.argv[1] == "limit" else None
started = threading.Barrier(9)
done = threading.Event()
kept = []


def work():
    kept.append([bytes(4096 + i) for i in range(64)])
    started.wait()
    done.wait()


threads = [threading.Thread(target=work) for _ in range(8)]
for t in threads:
    t.start()
started.wait()
libc = ctypes.CDLL(None)
libc.fopen.restype = ctypes.c_void_p
libc.fopen.argtypes = (ctypes.c_char_p, ctypes.c_char_p)
libc.malloc_info.argtypes = (ctypes.c_int, ctypes.c_void_p)
libc.fclose.argtypes = (ctypes.c_void_p,)
with tempfile.NamedTemporaryFile() as f:
    stream = libc.fopen(f.name.encode(), b"w")
    libc.malloc_info(0, stream)
    libc.fclose(stream)
    arenas = f.read().decode().count("<heap nr=")
done.set()
for t in threads:
    t.join()
print(json.dumps({"took": took, "arenas": arenas}))
"""


def arena_probe(mode: str, **env: str) -> dict[str, Any]:
    """Eight threads allocating at once, in a fresh process; the arenas glibc then has."""
    import json
    import subprocess
    import sys

    environment = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    done = subprocess.run(
        [sys.executable, "-c", ARENA_PROBE, mode],
        capture_output=True,
        text=True,
        check=True,
        env={**environment, **env},
    )
    found: dict[str, Any] = json.loads(done.stdout)
    return found


glibc = pytest.mark.skipif(
    __import__("platform").libc_ver()[0] != "glibc", reason="arenas are glibc's"
)


@glibc
def test_the_daemons_threads_share_two_malloc_arenas() -> None:
    from asynckubelet.node.daemon import MALLOC_ARENAS

    unlimited = arena_probe("none")
    limited = arena_probe("limit")
    assert unlimited["arenas"] > MALLOC_ARENAS
    assert limited == {"took": True, "arenas": MALLOC_ARENAS}


@glibc
def test_a_users_malloc_arena_max_is_left_as_it_is() -> None:
    assert arena_probe("limit", MALLOC_ARENA_MAX="3") == {"took": False, "arenas": 3}


def test_the_daemons_threads_hand_the_interpreter_over_after_a_millisecond() -> None:
    import sys

    from asynckubelet.node.daemon import SWITCH_INTERVAL, quicken_thread_switches

    sys.setswitchinterval(0.005)
    quicken_thread_switches()
    assert sys.getswitchinterval() == pytest.approx(SWITCH_INTERVAL) == 0.001
