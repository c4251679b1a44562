"""The issuer given to ``asynckubelet run`` (flag or environment) is the ``iss`` of the
projected service-account token the pod reads, verified with the node's public key."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import jwt
import pytest

from asynckubelet.node.volumes import default_root
from integration.harness import BUSYBOX_IMAGE, PAUSE_IMAGE

REPO = Path(__file__).resolve().parent.parent

POD = f"""
apiVersion: v1
kind: Pod
metadata: {{name: issued}}
spec:
  restartPolicy: Never
  volumes:
  - name: token
    projected:
      sources: [{{serviceAccountToken: {{path: token, expirationSeconds: 600}}}}]
  containers:
  - name: show
    image: {BUSYBOX_IMAGE}
    command: [cat, /var/run/secrets/tokens/token]
    volumeMounts: [{{name: token, mountPath: /var/run/secrets/tokens}}]
"""


@pytest.mark.parametrize(
    ("flag", "env", "issuer"),
    [
        (["--service-account-issuer", "https://flag.example"], {}, "https://flag.example"),
        ([], {"ASYNCKUBELET_SERVICE_ACCOUNT_ISSUER": "https://env.example"}, "https://env.example"),
    ],
    ids=["flag", "environment"],
)
def test_run_issues_the_pods_token_under_the_configured_issuer(
    docker_engine: object,
    test_images: dict[str, str],
    node_name: str,
    tmp_path: Path,
    flag: list[str],
    env: dict[str, str],
    issuer: str,
) -> None:
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(POD)
    base = {k: v for k, v in os.environ.items() if k != "ASYNCKUBELET_SERVICE_ACCOUNT_ISSUER"}
    try:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "asynckubelet",
                "run",
                str(manifest),
                "--node-name",
                node_name,
                "--pause-image",
                PAUSE_IMAGE,
                "--no-color",
                *flag,
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env={**base, **env, "PYTHONPATH": str(REPO)},
        )
        assert proc.returncode == 0, proc.stderr
        prefix, _, token = proc.stdout.strip().partition(" | ")
        assert prefix == "issued/show"
        keys = default_root(node_name).parent / "serviceaccount"
        public = (keys / "signing-key.pub").read_bytes()
        claims = jwt.decode(token, public, algorithms=["RS256"], audience=issuer)
        assert (claims["iss"], claims["aud"]) == (issuer, [issuer])
    finally:
        shutil.rmtree(default_root(node_name).parent, ignore_errors=True)
