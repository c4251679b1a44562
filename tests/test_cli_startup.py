"""What keeps a command line start cheap: the command tree listed without importing the
commands, option values converted without pydantic, the package's logger disabled without
importing loguru, the Kubernetes models without lightkube's client, ``validate`` without
the event loop or the Docker client."""

from __future__ import annotations

import contextlib
import importlib
import inspect
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import pytest
import typer
import typer.main
from typer.testing import CliRunner

from asynckubelet import _imports
from asynckubelet.cli.app import Command, Group, LazyGroup

app_module = importlib.import_module("asynckubelet.cli.app")
cli_app: typer.Typer = app_module.app
REPO = Path(__file__).resolve().parent.parent


def _commands() -> Iterator[tuple[str, Command]]:
    for name, entry in app_module.TREE.items():
        if isinstance(entry, Group):
            yield from ((f"{name} {sub}", command) for sub, command in entry.commands.items())
        else:
            yield name, entry


@pytest.mark.parametrize(("name", "entry"), list(_commands()), ids=[n for n, _ in _commands()])
def test_the_command_list_shows_the_first_paragraph_of_each_commands_docstring(
    name: str, entry: Command
) -> None:
    module = importlib.import_module(f"asynckubelet.cli.commands.{entry.module}")
    doc = inspect.getdoc(getattr(module, entry.function)) or ""
    assert entry.summary == " ".join(doc.split("\n\n")[0].split()), name


def test_the_group_help_lists_every_command_with_its_summary() -> None:
    result = CliRunner().invoke(cli_app, ["--help"])
    assert result.exit_code == 0
    listed: dict[str, str] = {}
    for line in result.stdout.split("Commands:")[1].splitlines():
        if line[2:3].strip():
            name, _, text = line.strip().partition(" ")
            listed[name] = text
        elif line.strip():
            listed[name] += line
    # Compared without white space: Click wraps lines, also at a hyphen.
    assert {n: "".join(t.split()) for n, t in listed.items()} == {
        n: "".join(e.summary.split()) for n, e in app_module.TREE.items()
    }


def test_a_command_is_loaded_only_when_looked_up() -> None:
    images = app_module.TREE["images"]
    assert isinstance(images, Group)
    group = LazyGroup(name="g", entries={"build-pause": images.commands["build-pause"]})
    assert list(group.commands) == ["build-pause"]
    assert group.commands._loaded == {}  # type: ignore[attr-defined]
    command = group.commands["build-pause"]
    assert command.name == "build-pause"
    assert group.commands["build-pause"] is command


def test_an_unknown_command_is_a_usage_error_naming_it() -> None:
    result = CliRunner().invoke(cli_app, ["rnu"])
    assert result.exit_code == 2
    assert result.stderr == (
        "error: unknown command \"rnu\" (did you mean 'run'?); see 'asynckubelet --help'\n"
    )
    assert "'run'" in result.stderr


# -- option values ---------------------------------------------------------------------------


def _probe_app() -> typer.Typer:
    """A command with one option of each kind the command line uses."""
    one = typer.Typer(add_completion=False, rich_markup_mode=None)

    def probe(
        count: Annotated[int, typer.Option("--count")] = 1,
        ratio: Annotated[float | None, typer.Option("--ratio")] = None,
        name: Annotated[str, typer.Option("--name")] = "x",
        flag: Annotated[bool, typer.Option("--flag", envvar="PROBE_FLAG")] = False,
        where: Annotated[Path | None, typer.Option("--where")] = None,
        files: Annotated[list[str] | None, typer.Argument()] = None,
    ) -> None:
        values: dict[str, object] = {"count": count, "ratio": ratio, "name": name, "flag": flag}
        values["where"] = None if where is None else [type(where).__name__, str(where)]
        values["files"] = files
        print(json.dumps(values))

    one.command("probe", cls=app_module._Command)(probe)
    return one


def _run(args: list[str], env: dict[str, str] | None = None) -> typer.testing.Result:
    return CliRunner().invoke(_probe_app(), args, env=env)


def test_values_are_converted_to_their_types() -> None:
    result = _run(["--count", "3", "--ratio", "0.5", "--where", "/tmp/x", "a", "b"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {
        "count": 3,
        "ratio": 0.5,
        "name": "x",
        "flag": False,
        "where": ["PosixPath", "/tmp/x"],
        "files": ["a", "b"],
    }


@pytest.mark.parametrize(("text", "value"), [("false", False), ("1", True), ("yes", True)])
def test_a_flag_reads_its_environment_variable_as_a_boolean(text: str, value: bool) -> None:
    result = _run([], env={"PROBE_FLAG": text})
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["flag"] is value


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--count", "three"], "Invalid value for '--count': 'three' is not a valid integer."),
        (["--ratio", "1.5x"], "Invalid value for '--ratio': '1.5x' is not a valid float."),
    ],
)
def test_a_value_that_does_not_convert_is_a_usage_error_naming_the_option(
    args: list[str], message: str
) -> None:
    result = _run(args)
    assert result.exit_code == 2
    assert message in result.stderr


def test_a_flag_environment_variable_that_is_no_boolean_is_a_usage_error() -> None:
    result = _run([], env={"PROBE_FLAG": "maybe"})
    assert result.exit_code == 2
    assert "'maybe' is not a valid boolean." in result.stderr


def test_the_command_lines_options_are_all_converted_without_pydantic() -> None:
    group = typer.main.get_command(cli_app)
    assert isinstance(group, LazyGroup)
    kinds = set()
    for name, _ in _commands():
        parent, _, sub = name.partition(" ")
        command = group.commands[parent]
        if sub:
            command = command.commands[sub]  # type: ignore[attr-defined]
        for param in [*command.params, *group.params]:
            kinds.add(type(param._runtime_param).__name__)  # type: ignore[attr-defined]
    assert kinds == {"_Plain"}


# -- import hooks ----------------------------------------------------------------------------


@pytest.fixture
def modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A directory on sys.path for throwaway modules; they leave sys.modules afterwards."""
    monkeypatch.syspath_prepend(str(tmp_path))
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:
        del sys.modules[name]


def test_a_hook_runs_right_after_the_first_import_in_the_order_given(modules: Path) -> None:
    (modules / "akl_hooked.py").write_text("VALUE = 1\n")
    seen: list[tuple[str, int]] = []
    _imports.when_imported("akl_hooked", lambda m: seen.append(("first", m.VALUE)))
    _imports.when_imported("akl_hooked", lambda m: seen.append(("second", m.VALUE)))
    assert seen == []
    import akl_hooked  # type: ignore[import-not-found]

    assert seen == [("first", 1), ("second", 1)]
    assert akl_hooked.VALUE == 1


def test_a_hook_on_a_module_already_imported_runs_at_once(modules: Path) -> None:
    seen: list[str] = []
    _imports.when_imported("json", lambda m: seen.append(m.__name__))
    assert seen == ["json"]


def test_a_deferred_package_runs_its_init_only_when_an_attribute_of_it_is_used(
    modules: Path,
) -> None:
    package = modules / "akl_deferred"
    package.mkdir()
    (package / "__init__.py").write_text(
        "import akl_deferred_log\nakl_deferred_log.RAN.append(1)\nfrom .part import PART\n"
    )
    (package / "part.py").write_text("PART = 'part'\n")
    (modules / "akl_deferred_log.py").write_text("RAN = []\n")
    import akl_deferred_log  # type: ignore[import-not-found]

    _imports.defer_package_init("akl_deferred")
    assert "akl_deferred" not in sys.modules
    import akl_deferred.part  # type: ignore[import-not-found]
    from akl_deferred import part

    assert akl_deferred.part.PART == part.PART == "part"
    assert akl_deferred_log.RAN == []
    from akl_deferred import PART

    assert PART == "part"
    assert akl_deferred_log.RAN == [1]
    with pytest.raises(ImportError):
        from akl_deferred import nothing  # noqa: F401
    assert akl_deferred_log.RAN == [1]


def test_a_module_imported_with_an_environment_sees_it_and_the_process_keeps_its_own(
    modules: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = modules / "akl_envpkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "seen.py").write_text(
        "import os\nSEEN = (os.environ.get('AKL_SET'), os.environ.get('AKL_KEPT'))\n"
    )
    monkeypatch.delenv("AKL_SET", raising=False)
    monkeypatch.setenv("AKL_KEPT", "mine")
    _imports.with_environment("akl_envpkg.seen", {"AKL_SET": "during", "AKL_KEPT": "during"})
    assert "AKL_SET" not in os.environ
    from akl_envpkg import seen  # type: ignore[import-not-found]

    assert seen.SEEN == ("during", "during")
    assert "AKL_SET" not in os.environ
    assert os.environ["AKL_KEPT"] == "mine"


def test_a_module_whose_import_fails_still_leaves_the_environment_as_it_was(
    modules: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (modules / "akl_envfail.py").write_text("raise RuntimeError('broken')\n")
    monkeypatch.delenv("AKL_SET", raising=False)
    _imports.with_environment("akl_envfail", {"AKL_SET": "during"})
    with pytest.raises(RuntimeError, match="broken"):
        import akl_envfail  # type: ignore[import-not-found]  # noqa: F401
    assert "AKL_SET" not in os.environ


_CONTEXTS = (
    "import os, sys\n"
    "from asynckubelet.cli.process import spare_the_ca_bundle\n"
    "spare_the_ca_bundle()\n"
    "import aiodocker\n"
    "from aiohttp import connector\n"
    "print(connector._SSL_CONTEXT_VERIFIED.cert_store_stats()['x509_ca'],"
    " os.environ.get('SSL_CERT_FILE'))\n"
)


def test_the_commands_aiohttp_loads_no_ca_bundle_and_leaves_ssl_cert_file_unset() -> None:
    loaded, variable = _fresh(_CONTEXTS).split()
    assert (loaded, variable) == ("0", "None")


def test_an_ssl_cert_file_the_user_set_is_loaded_as_asked(tmp_path: Path) -> None:
    bundle = Path("/etc/ssl/certs/ca-certificates.crt")
    if not bundle.is_file():
        pytest.skip("no system CA bundle on this machine")
    loaded, variable = _fresh(_CONTEXTS, env={"SSL_CERT_FILE": str(bundle)}).split()
    assert int(loaded) > 0
    assert variable == str(bundle)


def _serving_tls_once(cert: Path, key: Path) -> int:
    """A loopback port whose first connection gets a TLS handshake with ``cert``."""
    import socket
    import ssl
    import threading

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        with server:
            conn, _ = server.accept()
            with contextlib.suppress(OSError), context.wrap_socket(conn, server_side=True):
                pass

    threading.Thread(target=serve, daemon=True).start()
    return int(server.getsockname()[1])


@pytest.mark.parametrize("trusted", [True, False])
def test_without_the_bundle_a_ca_in_the_hashed_directory_still_verifies_a_server(
    tmp_path: Path, trusted: bool
) -> None:
    from asynckubelet.cluster import kubeletauth

    cert, key = kubeletauth.self_signed_pair(
        tmp_path / "pki", node_name="localhost", addresses=["127.0.0.1"]
    )
    hashed = tmp_path / "certs"
    hashed.mkdir()
    if trusted:
        openssl = shutil.which("openssl")
        assert openssl is not None, "openssl, which the README's set-up installs, is missing"
        subject_hash = subprocess.run(
            [openssl, "x509", "-hash", "-noout", "-in", str(cert)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        (hashed / f"{subject_hash}.0").write_bytes(cert.read_bytes())
    port = _serving_tls_once(cert, key)
    out = _fresh(
        "import socket, ssl\n"
        "from asynckubelet.cli.process import spare_the_ca_bundle\n"
        "spare_the_ca_bundle()\n"
        "from aiohttp import connector\n"
        f"with socket.create_connection(('127.0.0.1', {port})) as s:\n"
        "    try:\n"
        "        connector._SSL_CONTEXT_VERIFIED.wrap_socket(s, server_hostname='localhost')\n"
        "        print('verified')\n"
        "    except ssl.SSLCertVerificationError as e:\n"
        "        print(e.reason)\n",
        env={"SSL_CERT_DIR": str(hashed)},
    )
    assert out.strip() == ("verified" if trusted else "CERTIFICATE_VERIFY_FAILED")


def _fresh(code: str, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={"PYTHONPATH": str(REPO), **(env or {})},
        check=True,
    )
    return result.stdout + result.stderr


def test_importing_the_package_loads_neither_loguru_nor_lightkubes_client() -> None:
    out = _fresh(
        "import sys, asynckubelet\n"
        "print(sorted(m for m in ('loguru', 'lightkube.config.kubeconfig', 'httpx2')"
        " if m in sys.modules))\n"
    )
    assert out.strip() == "[]"


def test_importing_the_package_changes_nothing_else_in_the_process() -> None:
    """An embedding program's import system, collector and signal handlers stay as it set
    them, through the package's import and the first use of its public names; its own
    imports of the package's dependencies run their packages' code as usual."""
    out = _fresh(
        "import gc, signal, sys\n"
        "gc.set_threshold(1234, 5, 6)\n"
        "def state():\n"
        "    handlers = {s.name: signal.getsignal(s) for s in signal.Signals\n"
        "                if s not in (signal.SIGKILL, signal.SIGSTOP)}\n"
        "    return (list(sys.meta_path), list(sys.path_hooks), gc.isenabled(),\n"
        "            gc.get_threshold(), gc.get_freeze_count(), handlers)\n"
        "before = state()\n"
        "import asynckubelet\n"
        "from asynckubelet import KubeletConfig, Node, NodeConfig, errors, load_manifests_text\n"
        "from asynckubelet.node import Kubelet\n"
        "from asynckubelet.runtime import RuntimeManager\n"
        "import asynckubelet.cluster.host, asynckubelet.network.bridge\n"
        "after = state()\n"
        "print([i for i, (b, a) in enumerate(zip(before, after)) if b != a])\n"
        "import lightkube.models.core_v1, pyroute2\n"
        "print('lightkube.config.kubeconfig' in sys.modules, hasattr(pyroute2, 'IPRoute'))\n"
    )
    assert out.splitlines() == ["[]", "True True"]


def test_the_command_lines_entry_point_makes_its_own_import_savings() -> None:
    """The savings the package no longer makes for everyone, the command line's entry
    point makes for its own process: lightkube's models load without its client."""
    out = _fresh(
        "import sys\n"
        "from asynckubelet.cli import process\n"
        "process.prepare_imports()\n"
        "from lightkube.models.core_v1 import Pod\n"
        "print('lightkube.config.kubeconfig' in sys.modules)\n"
    )
    assert out.strip() == "False"


_AS_A_PACKAGE_MODULE = (
    "from asynckubelet._logging import logger as ours\n"
    "log = lambda text: exec('ours.warning(text)', "
    "{'__name__': 'asynckubelet.x', 'ours': ours, 'text': text})\n"
)
"""``log(text)``: a warning from a module of the package, as loguru names its records."""


def test_the_package_logs_nothing_until_its_user_enables_it() -> None:
    out = _fresh(
        "import asynckubelet\n"
        f"{_AS_A_PACKAGE_MODULE}"
        "from loguru import logger\n"
        "log('before')\n"
        "logger.enable('asynckubelet')\n"
        "log('after')\n"
    )
    assert "after" in out
    assert "before" not in out


def test_a_program_that_enables_the_package_before_its_first_message_sees_it() -> None:
    out = _fresh(
        "import asynckubelet\n"
        f"{_AS_A_PACKAGE_MODULE}"
        "from loguru import logger\n"
        "logger.enable('asynckubelet')\n"
        "log('first')\n"
    )
    assert "first" in out


def test_a_program_that_disabled_everything_keeps_the_package_quiet() -> None:
    out = _fresh(
        "import asynckubelet\n"
        f"{_AS_A_PACKAGE_MODULE}"
        "from loguru import logger\n"
        "logger.disable('')\n"
        "log('hidden')\n"
        "logger.enable('asynckubelet')\n"
        "log('shown')\n"
    )
    assert "hidden" not in out
    assert "shown" in out


def test_validate_loads_neither_the_event_loop_nor_logging_nor_the_docker_client() -> None:
    out = _fresh(
        "import sys\n"
        "from asynckubelet.cli import process\n"
        "process.prepare_imports()\n"
        "from asynckubelet.cli import app\n"
        "try:\n"
        "    app(['validate', 'examples/hello.yaml'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = ('asyncio', 'loguru', 'pydantic', 'aiohttp', 'aiodocker', 'pyroute2', 'httpx2')\n"
        "print(sorted(h for h in heavy if h in sys.modules))\n"
    )
    assert out.splitlines() == ["accepted: 1 pod, 0 configmaps, 0 secrets, 0 warnings", "[]"]


def test_get_through_the_daemon_loads_no_http_library_nor_dataclasses() -> None:
    """What ``get`` loads before it asks the daemon: each module is a cost that grows
    many times while the engine starts pods."""
    out = _fresh(
        "import sys\n"
        "from asynckubelet.cli.commands import get_output\n"
        "from asynckubelet.api.client import NodeClient\n"
        "from asynckubelet.node.locate import default_state_dir, socket_answers, socket_path\n"
        "from asynckubelet.kubectl.tables import render\n"
        "heavy = ('http.client', 'email.parser', 'ssl', 'dataclasses', 'asyncio', 'typer',\n"
        "         'asynckubelet.hostfs', 'asynckubelet.node.daemon')\n"
        "print(sorted(h for h in heavy if h in sys.modules))\n"
    )
    assert out.strip() == "[]"


def test_get_through_a_daemon_loads_no_typing_pathlib_urllib_nor_threads(
    answering: tuple[Path, list[bytes], list[bytes]],
) -> None:
    """``get pods`` run whole (parsing, finding the socket, asking, printing) against a
    daemon's socket, in a fresh interpreter: it prints the table and loads none of the
    standard library's modules that only other commands need (a sixth of its own time
    at rest, more while the engine starts pods). Modules the interpreter loaded before
    (an editable install's import hook loads ``pathlib``) are left out."""
    path, answers, requests = answering
    table = json.dumps(
        {
            "kind": "Table",
            "columnDefinitions": [{"name": "Name"}, {"name": "Ready"}],
            "rows": [{"cells": ["web", "1/1"], "object": {"metadata": {"name": "web"}}}],
        }
    ).encode()
    answers.append(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(table), table))
    out = _fresh(
        "import sys\n"
        "before = set(sys.modules)\n"
        "from asynckubelet.cli.commands import get_output\n"
        f"code = get_output.through_daemon(['get', 'pods', '--state-dir', {str(path.parent)!r}])\n"
        "heavy = ('typing', 'pathlib', 'urllib.parse', 'threading', 'importlib.util',\n"
        "         'dataclasses', 'asyncio', 'http.client', 'ssl')\n"
        "print(code, sorted(h for h in heavy if h in set(sys.modules) - before))\n"
    )
    assert out.splitlines() == ["NAME   READY", "web    1/1", "0 []"]
    assert requests[0].startswith(b"GET /api/v1/namespaces/default/pods HTTP/1.1\r\n")


def test_the_nodes_own_facts_load_no_cluster_agent_nor_its_http_client() -> None:
    """A local ``serve`` reads its node address from the cluster package's host module;
    that must not bring in the agent, lightkube's client and the kubelet API server."""
    out = _fresh(
        "import sys\n"
        "from asynckubelet.cli import process\n"
        "process.prepare_imports()\n"
        "from asynckubelet.cluster.host import default_node_ip\n"
        "heavy = ('asynckubelet.cluster.agent', 'asynckubelet.cluster.kubeletapi', 'httpx2')\n"
        "print(sorted(h for h in heavy if h in sys.modules))\n"
        "from asynckubelet.cluster import ClusterConfig\n"
        "print(ClusterConfig.__module__)\n"
    )
    assert out.splitlines() == ["[]", "asynckubelet.cluster.agent"]


def test_the_bridge_backends_netlink_loads_only_pyroute2s_rtnetlink() -> None:
    out = _fresh(
        "import sys\n"
        "from asynckubelet.cli import process\n"
        "process.prepare_imports()\n"
        "import asynckubelet.network.bridge as bridge\n"
        "bridge._netlink_error_type()\n"
        "from pyroute2.iproute.linux import AsyncIPRoute\n"
        "print(sorted(m for m in ('pyroute2.ndb', 'pyroute2.ipdb', 'pyroute2.plan9')"
        " if m in sys.modules))\n"
        "from pyroute2 import IPRoute\n"
        "print(IPRoute.__name__, 'pyroute2.ndb' in sys.modules)\n"
    )
    assert out.splitlines() == ["[]", "IPRoute True"]


def test_a_command_starts_with_the_collector_held_and_works_with_it_running() -> None:
    """``main`` holds the cyclic collector while the command starts (its imports); the
    command's event loop runs with the collector on and the start-up's objects frozen."""
    out = _fresh(
        "import gc, json\n"
        "import asynckubelet.cli as cli\n"
        "seen = {}\n"
        "async def work():\n"
        "    return gc.isenabled(), gc.get_freeze_count()\n"
        "def command():\n"
        "    seen['starting'] = gc.isenabled()\n"
        "    from asynckubelet.cli.output import run_async\n"
        "    seen['working'], seen['frozen'] = run_async(work)\n"
        "    seen['after'] = gc.isenabled()\n"
        "    print(json.dumps(seen), flush=True)\n"
        "    return 0\n"
        "cli._command = command\n"
        "cli.main()\n"
    )
    seen = json.loads(out)
    assert seen["starting"] is False
    assert seen["working"] is True
    assert seen["frozen"] > 1000
    assert seen["after"] is True


def test_an_embedding_programs_collector_is_left_as_it_set_it() -> None:
    out = _fresh(
        "import gc\n"
        "from asynckubelet.cli.output import run_async\n"
        "async def work():\n"
        "    return gc.isenabled(), gc.get_freeze_count()\n"
        "print(run_async(work))\n"
        "gc.disable()\n"
        "print(run_async(work))\n"
    )
    assert out.splitlines() == ["(True, 0)", "(False, 0)"]


def test_a_watch_runs_with_the_collector_running() -> None:
    out = _fresh(
        "import gc\n"
        "import asynckubelet.cli.process as cli\n"
        "from asynckubelet.cli.commands import get_output\n"
        "class Client:\n"
        "    def watch(self, *args, **kwargs):\n"
        "        print(gc.isenabled(), gc.get_freeze_count() > 0)\n"
        "        return iter([{'type': 'ERROR', 'object': {'code': 500, 'message': 'gone'}}])\n"
        "cli.hold_collector()\n"
        "try:\n"
        "    get_output.watch(Client(), 'pods', None, where=None, output='name')\n"
        "except Exception as e:\n"
        "    print(e)\n"
    )
    assert out.splitlines() == ["True True", "gone"]
