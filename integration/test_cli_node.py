"""``asynckubelet serve`` with apply/get/describe/logs/exec/delete, end to end on Docker.

``serve`` runs as a subprocess with a temporary state dir, the test's node name and a free
loopback port; the other commands run as a user would run them, as separate processes.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import textwrap
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from integration.harness import BUSYBOX_IMAGE, PAUSE_IMAGE, Engine
from integration.runtime_helpers import finished_syncs
from integration.serve_helpers import Node, UnixHTTPConnection, running_node

WEB = """
apiVersion: v1
kind: Pod
metadata: {name: web, labels: {app: web}}
spec:
  terminationGracePeriodSeconds: 3
  containers:
  - name: a
    image: BUSYBOX
    command: [sh, -c, "trap 'exit 0' TERM; echo hello from a; while true; do sleep 0.2; done"]
    env: [{name: WHO, value: VALUE}]
  - name: b
    image: BUSYBOX
    command: [sh, -c, "trap 'exit 0' TERM; while true; do sleep 0.2; done"]
"""

CRASHER = """
apiVersion: v1
kind: Pod
metadata: {name: crasher}
spec:
  containers:
  - name: c
    image: BUSYBOX
    command: [sh, -c, "echo run at $(cat /proc/sys/kernel/random/uuid); sleep 0.5; exit 3"]
"""

RESTARTED_ONCE = """
apiVersion: v1
kind: Pod
metadata: {name: twice}
spec:
  terminationGracePeriodSeconds: 2
  volumes: [{name: mark, emptyDir: {}}]
  containers:
  - name: c
    image: BUSYBOX
    volumeMounts: [{name: mark, mountPath: /mark}]
    command:
    - sh
    - -c
    - |
      if [ -e /mark/ran ]; then
        echo second run; touch /tmp/said
        trap 'exit 0' TERM; while true; do sleep 0.2; done
      fi
      touch /mark/ran; echo first run; exit 3
    readinessProbe: {exec: {command: [test, -e, /tmp/said]}, periodSeconds: 1}
"""


@pytest.fixture
def node(
    tmp_path: Path, docker_engine: Engine, test_images: dict[str, str], node_name: str
) -> Iterator[Node]:
    with running_node(tmp_path, docker_engine, node_name) as n:
        yield n


def manifest(tmp_path: Path, text: str, *, name: str = "web.yaml", value: str = "one") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).replace("BUSYBOX", BUSYBOX_IMAGE).replace("VALUE", value))
    return path


def apply_web(node: Node, tmp_path: Path, value: str = "one") -> None:
    proc = node.cli(
        "apply", "-f", str(manifest(tmp_path, WEB, value=value)), "--wait", "--timeout", "60"
    )
    assert proc.returncode == 0, proc.stderr + node.log()


def test_apply_wait_starts_the_pod_and_get_shows_kubectls_columns(
    node: Node, tmp_path: Path
) -> None:
    apply_web(node, tmp_path)
    proc = node.cli("get", "pods")
    header, row = proc.stdout.splitlines()
    assert header.split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert row.split()[:4] == ["web", "2/2", "Running", "0"]


def test_get_wide_adds_ip_and_node(node: Node, tmp_path: Path) -> None:
    apply_web(node, tmp_path)
    header, row = node.cli("get", "pods", "-o", "wide").stdout.splitlines()
    assert header.split()[5:] == ["IP", "NODE", "NOMINATED", "NODE", "READINESS", "GATES"]
    assert row.split()[-3:] == [node.node_name, "<none>", "<none>"]


def test_get_yaml_prints_a_v1_pod_with_status(node: Node, tmp_path: Path) -> None:
    apply_web(node, tmp_path)
    pod = yaml.safe_load(node.cli("get", "pods", "web", "-o", "yaml").stdout)
    assert (pod["apiVersion"], pod["kind"], pod["status"]["phase"]) == ("v1", "Pod", "Running")


def test_get_json_lists_pods_of_all_namespaces(node: Node, tmp_path: Path) -> None:
    apply_web(node, tmp_path)
    document = json.loads(node.cli("get", "pods", "-A", "-o", "json").stdout)
    assert [p["metadata"]["name"] for p in document["items"]] == ["web"]


def test_get_of_a_missing_pod_fails_as_kubectl_does(node: Node) -> None:
    proc = node.cli("get", "pods", "nope")
    assert proc.returncode == 1
    assert 'pods "nope" not found' in proc.stderr


def test_an_edited_env_restarts_only_that_container(node: Node, tmp_path: Path) -> None:
    apply_web(node, tmp_path, value="one")
    before = node.containers()
    proc = node.cli(
        "apply", "-f", str(manifest(tmp_path, WEB, value="two")), "--wait", "--timeout", "60"
    )
    assert proc.returncode == 0, proc.stderr
    assert "pod/web configured" in proc.stdout
    after = node.containers()
    assert after["b"] == before["b"]
    assert after["a"] != before["a"]
    assert node.cli("exec", "web", "-c", "a", "--", "sh", "-c", "echo $WHO").stdout == "two\n"


def test_a_static_pod_runs_while_its_file_is_in_the_manifest_directory(
    node: Node, tmp_path: Path
) -> None:
    static = node.state / "manifests" / "web.yaml"
    static.write_text(manifest(tmp_path, WEB).read_text())
    deadline = time.monotonic() + 60
    while set(node.containers()) != {"a", "b"} and time.monotonic() < deadline:
        time.sleep(0.2)
    assert set(node.containers()) == {"a", "b"}
    static.unlink()
    deadline = time.monotonic() + 60
    while node.owned() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert node.owned() == 0


def test_delete_pod_stops_it_and_reports_it(node: Node, tmp_path: Path) -> None:
    apply_web(node, tmp_path)
    proc = node.cli("delete", "pod", "web", "--grace-period", "1")
    assert (proc.returncode, proc.stdout) == (0, 'pod "web" deleted\n')
    assert node.owned() == 0


def test_delete_by_file_removes_its_pods(node: Node, tmp_path: Path) -> None:
    apply_web(node, tmp_path)
    proc = node.cli("delete", "-f", str(tmp_path / "web.yaml"))
    assert proc.returncode == 0, proc.stderr
    assert node.owned() == 0


STUBBORN = """
apiVersion: v1
kind: Pod
metadata: {name: stubborn}
spec:
  terminationGracePeriodSeconds: 10
  containers:
  - name: c
    image: BUSYBOX
    command: [sh, -c, "trap '' TERM; while true; do sleep 0.2; done"]
"""


def test_delete_that_times_out_fails_naming_the_pod_still_there(node: Node, tmp_path: Path) -> None:
    path = manifest(tmp_path, STUBBORN, name="stubborn.yaml")
    assert node.cli("apply", "-f", str(path), "--wait", "--timeout", "60").returncode == 0
    proc = node.cli("delete", "pod", "stubborn", "--timeout", "1")
    assert (proc.returncode, proc.stdout) == (1, ""), proc.stderr
    assert "still present: default/stubborn" in proc.stderr


def test_serve_on_an_address_in_use_fails_naming_it(node: Node, tmp_path: Path) -> None:
    env = {
        **node.env,
        "ASYNCKUBELET_STATE_DIR": str(tmp_path / "second"),
        "ASYNCKUBELET_NODE_NAME": f"{node.node_name}-b",
    }
    listen = f"127.0.0.1:{node.port}"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "asynckubelet",
            "serve",
            "--listen",
            listen,
            "--network",
            "loopback",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[-1].startswith(f"error: cannot listen on {listen}: ")
    assert not (tmp_path / "second" / "serve.pid").exists()


def test_describe_shows_containers_conditions_and_events(node: Node, tmp_path: Path) -> None:
    apply_web(node, tmp_path)
    text = node.cli("describe", "pod", "web").stdout
    assert text.splitlines()[0].split() == ["Name:", "web"]
    assert "Containers:\n  a:\n" in text
    assert "Conditions:" in text
    events = text[text.index("Events:") :]
    assert "Started" in events
    assert "Started container a" in events


def test_logs_prints_the_default_container_with_a_notice(node: Node, tmp_path: Path) -> None:
    apply_web(node, tmp_path)
    proc = node.cli("logs", "web")
    assert proc.stdout == "hello from a\n"
    assert 'Defaulted container "a" out of: a, b' in proc.stderr


def apply_restarted_once(node: Node, tmp_path: Path) -> None:
    """A pod whose container failed once and runs since; Ready once its second instance
    has written its line, so both outputs are there to read."""
    path = manifest(tmp_path, RESTARTED_ONCE, name="twice.yaml")
    proc = node.cli("apply", "-f", str(path), "--wait", "--timeout", "60")
    assert proc.returncode == 0, proc.stderr + node.log()


def wait_for_crash_loop_back_off(node: Node, name: str) -> None:
    deadline = time.monotonic() + 60
    status = ""
    while time.monotonic() < deadline and status != "CrashLoopBackOff":
        lines = node.cli("get", "pods", name).stdout.splitlines()
        status = lines[1].split()[2] if len(lines) > 1 else ""
        time.sleep(0.5)
    assert status == "CrashLoopBackOff"


def test_logs_previous_shows_the_dead_instance(node: Node, tmp_path: Path) -> None:
    apply_restarted_once(node, tmp_path)
    previous = node.cli("logs", "twice", "-p")
    current = node.cli("logs", "twice")
    assert (previous.returncode, previous.stdout) == (0, "first run\n"), previous.stderr
    assert (current.returncode, current.stdout) == (0, "second run\n"), current.stderr


def test_logs_previous_shows_the_instance_that_died_while_it_waits_to_restart(
    node: Node, tmp_path: Path
) -> None:
    proc = node.cli("apply", "-f", str(manifest(tmp_path, CRASHER, name="crasher.yaml")))
    assert proc.returncode == 0, proc.stderr
    wait_for_crash_loop_back_off(node, "crasher")
    previous = node.cli("logs", "crasher", "-p")
    assert previous.returncode == 0, previous.stderr
    assert previous.stdout.startswith("run at ")


def test_logs_previous_without_a_dead_instance_is_an_error(node: Node, tmp_path: Path) -> None:
    apply_web(node, tmp_path)
    proc = node.cli("logs", "web", "-c", "b", "--previous")
    assert proc.returncode == 1
    assert 'previous terminated container "b" in pod "web" not found' in proc.stderr


def test_logs_follow_continues_across_a_restart(node: Node, tmp_path: Path) -> None:
    # Each instance lives 5 s, so the follower is on the first one before it dies (the
    # node restarts it at once, as the kubelet does a first time).
    lasting = CRASHER.replace("sleep 0.5", "sleep 5")
    proc = node.cli("apply", "-f", str(manifest(tmp_path, lasting, name="crasher.yaml")))
    assert proc.returncode == 0
    deadline = time.monotonic() + 60
    while node.cli("logs", "crasher").returncode != 0 and time.monotonic() < deadline:
        time.sleep(0.2)
    follower = subprocess.Popen(
        [sys.executable, "-m", "asynckubelet", "logs", "crasher", "-f"],
        env=node.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    runs: queue.Queue[str] = queue.Queue()

    def read() -> None:
        assert follower.stdout is not None
        for line in follower.stdout:
            if line.startswith("run at "):
                runs.put(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        first, second = runs.get(timeout=90), runs.get(timeout=90)
    finally:
        follower.send_signal(signal.SIGINT)
        follower.wait(timeout=30)
        reader.join(timeout=30)
        for pipe in (follower.stdout, follower.stderr):
            if pipe is not None:
                pipe.close()
    assert first != second


def test_exec_returns_the_commands_exit_code_and_output(node: Node, tmp_path: Path) -> None:
    apply_web(node, tmp_path)
    proc = node.cli("exec", "web", "-c", "a", "--", "sh", "-c", "echo $WHO; echo oops >&2; exit 3")
    assert (proc.returncode, proc.stdout, proc.stderr) == (3, "one\n", "oops\n")


def test_exec_i_passes_stdin(node: Node, tmp_path: Path) -> None:
    apply_web(node, tmp_path)
    proc = node.cli(
        "exec", "-i", "web", "-c", "a", "--", "sh", "-c", "read x; echo got $x", input="hi\n"
    )
    assert (proc.returncode, proc.stdout) == (0, "got hi\n")


def test_exec_t_needs_i_and_a_terminal_as_kubectl_decides(node: Node, tmp_path: Path) -> None:
    apply_web(node, tmp_path)
    probe = ["sh", "-c", "test -t 1 && echo tty || echo no tty; cat"]
    alone = node.cli("exec", "-t", "web", "-c", "a", "--", *probe, input="")
    assert (alone.returncode, alone.stdout, alone.stderr) == (0, "no tty\n", "")
    piped = node.cli("exec", "-it", "web", "-c", "a", "--", *probe, input="hi\n")
    assert (piped.returncode, piped.stdout) == (0, "no tty\nhi\n"), piped.stderr
    assert (
        piped.stderr == "Unable to use a TTY - input is not a terminal or the right kind of file\n"
    )


GREETER = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: greeter}
spec:
  replicas: 2
  selector: {matchLabels: {app: greeter}}
  template:
    metadata: {labels: {app: greeter}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: g
        image: BUSYBOX
        command: ["sh", "-c", "echo hello from $(hostname); exec sleep 3600"]
"""


def test_logs_and_exec_of_a_deployment_use_one_of_its_pods(node: Node, tmp_path: Path) -> None:
    path = tmp_path / "greeter.yaml"
    path.write_text(GREETER.replace("BUSYBOX", BUSYBOX_IMAGE))
    proc = node.cli("apply", "-f", str(path), "--wait", "--timeout", "90")
    assert proc.returncode == 0, proc.stderr + node.log()
    pods = node.cli("get", "pods", "-o", "name").stdout.split()
    assert len(pods) == 2, pods
    logs = node.cli("logs", "deploy/greeter")
    chosen = logs.stderr.strip().removeprefix("Found 2 pods, using ")
    assert logs.returncode == 0, logs.stderr
    assert chosen in pods, logs.stderr
    assert logs.stdout == f"hello from {chosen.removeprefix('pod/')}\n"
    execd = node.cli("exec", "deployment/greeter", "--", "hostname")
    assert (execd.returncode, execd.stdout) == (0, chosen.removeprefix("pod/") + "\n")
    assert node.cli("logs", "rs/nope").stderr.startswith("Error from server (NotFound)")
    described = node.cli("describe", "pods").stdout
    assert sorted(
        line.split()[1] for line in described.splitlines() if line.startswith("Name:")
    ) == sorted(p.removeprefix("pod/") for p in pods)


TEAM = """
apiVersion: v1
kind: Namespace
metadata: {name: team}
---
apiVersion: v1
kind: Pod
metadata: {name: NAME, namespace: team}
spec:
  terminationGracePeriodSeconds: 10
  containers:
  - name: app
    image: BUSYBOX
    command: ["sh", "-c", "trap '' TERM; while true; do sleep 1; done"]
"""


def test_delete_namespace_waits_for_its_pods_and_nothing_new_is_made_in_it_meanwhile(
    node: Node, tmp_path: Path
) -> None:
    first = manifest(tmp_path, TEAM.replace("NAME", "slow"), name="team.yaml")
    proc = node.cli("apply", "-f", str(first), "--wait", "--timeout", "60")
    assert proc.returncode == 0, proc.stderr
    deleting = subprocess.Popen(
        [sys.executable, "-m", "asynckubelet", "delete", "namespace", "team"],
        env=node.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    again = manifest(tmp_path, TEAM.replace("NAME", "late"), name="again.yaml")
    deadline = time.monotonic() + 20
    while True:
        refused = node.cli("apply", "-f", str(again))
        if refused.returncode != 0 or time.monotonic() > deadline:
            break
        # Applied before the deletion began: take the pod back, not the namespace.
        node.cli("delete", "pod", "late", "-n", "team", "--now")
        time.sleep(0.2)
    out, err = deleting.communicate(timeout=60)
    assert refused.returncode == 1
    assert refused.stderr.strip().endswith(
        'pods "late" is forbidden: unable to create new content in namespace team because it '
        "is being terminated"
    )
    assert (deleting.returncode, out, err) == (0, 'namespace "team" deleted\n', "")
    assert node.cli("get", "pods", "-n", "team", "-o", "name").stdout == ""
    assert node.cli("apply", "-f", str(again)).returncode == 0


EXEC = (sys.executable, "-m", "asynckubelet", "exec")


def test_exec_i_with_input_from_dev_null(node: Node, tmp_path: Path) -> None:
    apply_web(node, tmp_path)
    for flags in ("-i", "-it"):
        with open(os.devnull, "rb") as null:
            proc = subprocess.run(
                [*EXEC, flags, "web", "-c", "a", "--", "sh", "-c", "cat; echo end"],
                stdin=null,
                capture_output=True,
                text=True,
                timeout=60,
                env=node.env,
            )
        assert (proc.returncode, proc.stdout) == (0, "end\n"), (flags, proc.stderr)


def test_the_http_endpoint_answers_health_and_keeps_pods_and_logs_to_the_local_api(
    node: Node, tmp_path: Path
) -> None:
    apply_web(node, tmp_path)
    assert node.get("/healthz") == "ok"
    for path in ("/pods", "/containerLogs/default/web/a?tailLines=1"):
        with pytest.raises(urllib.error.HTTPError) as info:
            node.get(path)
        info.value.close()
        assert info.value.code == 404
    status, body = node.api("/api/v1/pods")
    pods = json.loads(body)
    assert (status, pods["kind"]) == (200, "PodList")
    assert [p["metadata"]["name"] for p in pods["items"]] == ["web"]
    log = "/api/v1/namespaces/default/pods/web/log?container=a&tailLines=1"
    assert node.api(log) == (200, "hello from a\n")


def test_metrics_parse_as_prometheus_text(node: Node, tmp_path: Path) -> None:
    apply_web(node, tmp_path)
    families = {f.name: f for f in text_string_to_metric_families(node.get("/metrics"))}
    (running,) = families["kubelet_running_pods"].samples
    assert running.value == 1
    assert "kubelet_pod_start_duration_seconds" in families
    assert "kubelet_pleg_relist_duration_seconds" in families
    assert "process_resident_memory_bytes" in families


def test_a_killed_node_restarted_adopts_every_pod_without_restarts(
    node: Node, tmp_path: Path
) -> None:
    apply_web(node, tmp_path)
    before = node.containers()
    node.stop(signal.SIGKILL)
    node.start()
    deadline = time.monotonic() + 60
    while finished_syncs(node.get("/metrics")) < 1 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert finished_syncs(node.get("/metrics")) >= 1
    assert node.containers() == before
    row = node.cli("get", "pods").stdout.splitlines()[1].split()
    assert row[:4] == ["web", "2/2", "Running", "0"]


def test_apply_rejects_an_invalid_manifest_and_writes_nothing(node: Node, tmp_path: Path) -> None:
    bad = manifest(tmp_path, WEB.replace("name: web", "name: Web_Bad"), name="bad.yaml")
    proc = node.cli("apply", "-f", str(bad))
    assert proc.returncode == 1
    assert proc.stderr.count("metadata.name") == 1
    assert not list((node.state / "objects").glob("*.json"))
    assert node.owned() == 0


def test_apply_wait_fails_with_the_reason_when_the_image_is_missing(
    node: Node, tmp_path: Path
) -> None:
    path = tmp_path / "missing.yaml"
    path.write_text(
        textwrap.dedent(
            """
            apiVersion: v1
            kind: Pod
            metadata: {name: missing}
            spec:
              containers:
              - {name: m, image: akltest.local/missing:1, imagePullPolicy: Never}
            """
        )
    )
    proc = node.cli("apply", "-f", str(path), "--wait", "--timeout", "5")
    assert proc.returncode == 1
    assert "ErrImageNeverPull" in proc.stderr
    assert proc.stderr.count("ErrImageNeverPull") == 1, "the failure is printed once"


def test_exec_it_through_a_pseudo_terminal_follows_the_window_size(
    node: Node, tmp_path: Path
) -> None:
    import fcntl
    import pty
    import select
    import struct
    import termios

    apply_web(node, tmp_path)
    controller, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 33, 111, 0, 0))
    proc = subprocess.Popen(
        [sys.executable, "-m", "asynckubelet", "exec", "-it", "web", "-c", "a", "--", "sh"],
        # The terminal's own size wins over what a parent set for its output's width.
        env={**node.env, "COLUMNS": "80", "LINES": "24"},
        stdin=terminal,
        stdout=terminal,
        stderr=terminal,
        start_new_session=True,
    )
    os.close(terminal)
    os.write(controller, b"stty size; exit 7\n")
    output = b""
    deadline = time.monotonic() + 30
    while proc.poll() is None and time.monotonic() < deadline:
        readable, _, _ = select.select([controller], [], [], 0.2)
        if readable:
            try:
                output += os.read(controller, 4096)
            except OSError:
                break
    proc.wait(timeout=30)
    os.close(controller)
    assert proc.returncode == 7
    assert b"33 111" in output


def test_serve_refuses_a_non_loopback_address_without_the_flag(
    tmp_path: Path, docker_engine: Engine, node_name: str
) -> None:
    n = Node(state=tmp_path / "state", node_name=node_name, port=0, engine=docker_engine)
    proc = n.cli("serve", "--listen", "0.0.0.0:0", timeout=30)
    assert proc.returncode == 2
    assert "--allow-remote" in proc.stderr


def test_doctor_reports_the_engine_and_the_state_dir(
    tmp_path: Path, docker_engine: Engine, test_images: dict[str, str], node_name: str
) -> None:
    n = Node(state=tmp_path / "state", node_name=node_name, port=0, engine=docker_engine)
    proc = n.cli("doctor")
    assert "Docker engine at" in proc.stdout
    assert "version" in proc.stdout
    assert f"pause image {PAUSE_IMAGE}: present" in proc.stdout
    assert f"state dir {tmp_path / 'state'}: writable" in proc.stdout


def test_doctor_gives_a_fix_for_an_unwritable_state_dir(
    tmp_path: Path, docker_engine: Engine, test_images: dict[str, str], node_name: str
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    n = Node(state=blocker / "state", node_name=node_name, port=0, engine=docker_engine)
    proc = n.cli("doctor")
    assert proc.returncode == 1
    assert "not writable" in proc.stdout
    assert "fix: pass --state-dir DIR" in proc.stdout


def test_the_log_api_serves_the_previous_instance(node: Node, tmp_path: Path) -> None:
    apply_restarted_once(node, tmp_path)
    log = "/api/v1/namespaces/default/pods/twice/log?container=c"
    assert node.api(log + "&previous=true") == (200, "first run\n")
    assert node.api(log) == (200, "second run\n")


def test_the_log_api_serves_the_previous_instance_during_back_off(
    node: Node, tmp_path: Path
) -> None:
    proc = node.cli("apply", "-f", str(manifest(tmp_path, CRASHER, name="crasher.yaml")))
    assert proc.returncode == 0, proc.stderr
    wait_for_crash_loop_back_off(node, "crasher")
    status, body = node.api("/api/v1/namespaces/default/pods/crasher/log?previous=true")
    assert status == 200
    assert body.startswith("run at ")


def test_the_log_api_answers_404_for_an_unknown_pod(node: Node) -> None:
    status, body = node.api("/api/v1/namespaces/default/pods/nope/log?container=c")
    assert status == 404
    assert json.loads(body)["reason"] == "NotFound"


def test_get_shows_crash_loop_back_off_and_describe_the_back_off_event(
    node: Node, tmp_path: Path
) -> None:
    proc = node.cli("apply", "-f", str(manifest(tmp_path, CRASHER, name="crasher.yaml")))
    assert proc.returncode == 0
    wait_for_crash_loop_back_off(node, "crasher")
    events = node.cli("describe", "pod", "crasher").stdout.split("Events:")[1]
    assert "BackOff" in events
    assert "Back-off restarting failed container c" in events


def test_logs_tail_and_timestamps_shape_the_output(node: Node, tmp_path: Path) -> None:
    apply_web(node, tmp_path)
    proc = node.cli("logs", "web", "-c", "a", "--tail", "1", "--timestamps", "--since", "1h")
    stamp, text = proc.stdout.rstrip("\n").split(" ", 1)
    assert text == "hello from a"
    assert stamp[:4].isdigit()
    assert stamp.endswith("Z")


def test_the_log_api_follows_until_the_client_leaves(node: Node, tmp_path: Path) -> None:

    apply_web(node, tmp_path)
    connection = UnixHTTPConnection(str(node.state / "api.sock"))
    connection.timeout = 2
    connection.request("GET", "/api/v1/namespaces/default/pods/web/log?container=a&follow=true")
    response = connection.getresponse()
    assert response.readline() == b"hello from a\n"
    with pytest.raises(TimeoutError):
        response.readline()
    connection.close()


GATED = """\
apiVersion: v1
kind: Pod
metadata: {name: gated}
spec:
  terminationGracePeriodSeconds: 2
GATES  containers:
  - name: c
    image: BUSYBOX
    command: [sh, -c, "trap 'exit 0' TERM; while true; do sleep 0.2; done"]
"""


def test_serve_keeps_a_gated_pod_scheduling_gated_until_its_manifest_drops_the_gates(
    node: Node, tmp_path: Path
) -> None:
    gates = "  schedulingGates: [{name: example.com/foo}, {name: example.com/bar}]\n"
    path = manifest(tmp_path, GATED.replace("GATES", gates), name="gated.yaml")
    proc = node.cli("apply", "-f", str(path), "--wait", "--timeout", "60")
    assert proc.returncode == 1
    assert "pod/gated is SchedulingGated" in proc.stderr
    row = node.cli("get", "pods", "gated").stdout.splitlines()[1].split()
    assert row[:4] == ["gated", "0/1", "SchedulingGated", "0"]
    pod = yaml.safe_load(node.cli("get", "pods", "gated", "-o", "yaml").stdout)
    assert pod["status"]["phase"] == "Pending"
    assert [
        {k: c[k] for k in ("type", "status", "reason", "message")}
        for c in pod["status"]["conditions"]
    ] == [
        {
            "type": "PodScheduled",
            "status": "False",
            "reason": "SchedulingGated",
            "message": "Scheduling is blocked due to non-empty scheduling gates",
        }
    ]
    assert node.owned() == 0
    path.write_text(path.read_text().replace(gates, ""))
    proc = node.cli("apply", "-f", str(path), "--wait", "--timeout", "60")
    assert proc.returncode == 0, proc.stderr
    row = node.cli("get", "pods", "gated").stdout.splitlines()[1].split()
    assert row[:4] == ["gated", "1/1", "Running", "0"]


def test_describe_shows_a_gated_pod_on_no_node(node: Node, tmp_path: Path) -> None:
    gates = "  schedulingGates: [{name: example.com/foo}, {name: example.com/bar}]\n"
    path = manifest(tmp_path, GATED.replace("GATES", gates), name="gated.yaml")
    assert node.cli("apply", "-f", str(path)).returncode == 0
    deadline = time.monotonic() + 60
    row: list[str] = []
    while time.monotonic() < deadline and row[2:3] != ["SchedulingGated"]:
        lines = node.cli("get", "pods", "gated", "-o", "wide").stdout.splitlines()
        row = lines[1].split() if len(lines) > 1 else []
        time.sleep(0.3)
    assert row[2:3] == ["SchedulingGated"]
    assert row[-2:] == ["<none>", "<none>"]
    lines = node.cli("describe", "pod", "gated").stdout.splitlines()
    fields = {k: v.strip() for k, _, v in (line.partition(":") for line in lines) if v}
    assert (fields["Node"], fields["Status"]) == ("<none>", "Pending")
    assert "Start Time" not in fields
    conditions = lines[lines.index("Conditions:") + 1 :][:2]
    assert [c.split() for c in conditions] == [["Type", "Status"], ["PodScheduled", "False"]]
    pod = yaml.safe_load(node.cli("get", "pods", "gated", "-o", "yaml").stdout)
    assert "nodeName" not in pod["spec"]


def test_apply_wait_ends_on_a_missing_config_map_after_the_config_timeout(
    node: Node, tmp_path: Path
) -> None:
    path = manifest(
        tmp_path,
        """
        apiVersion: v1
        kind: Pod
        metadata: {name: noconfig}
        spec:
          containers:
          - name: app
            image: BUSYBOX
            env: [{name: X, valueFrom: {configMapKeyRef: {name: x, key: k}}}]
        """,
        name="noconfig.yaml",
    )
    proc = node.cli("apply", "-f", str(path), "--wait", "--timeout", "60", "--config-timeout", "1")
    assert proc.returncode == 1
    assert 'error: pod/noconfig/app: CreateContainerConfigError: configmap "x" not found' in (
        proc.stderr.splitlines()
    )


def test_serve_rejects_a_pod_asking_for_an_extended_resource_it_lacks(
    node: Node, tmp_path: Path
) -> None:
    path = manifest(
        tmp_path,
        """
        apiVersion: v1
        kind: Pod
        metadata: {name: dongle}
        spec:
          containers:
          - {name: app, image: BUSYBOX, resources: {limits: {example.com/dongle: 1}}}
        """,
        name="dongle.yaml",
    )
    proc = node.cli("apply", "-f", str(path), "--wait", "--timeout", "60")
    assert proc.returncode == 1
    assert (
        "pod/dongle: OutOfexample.com/dongle: Pod was rejected: Node didn't have enough "
        "resource: example.com/dongle, requested: 1, used: 0, capacity: 0"
    ) in proc.stderr
    assert node.containers() == {}
