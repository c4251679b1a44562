"""The upstream e2e suite's test images, made offline from local material.

The suite names its images through registries that ``KUBE_TEST_REPO_LIST`` remaps
(``test/utils/image/manifest.go``). Every registry is remapped under one loopback address
on which nothing listens, so the node finds each image already loaded, and a pull that a
spec asks for anyway fails on loopback instead of leaving the machine.

- ``agnhost:2.21``: the tree's ``test/images/agnhost`` (version 2.25, whose subcommands
  include 2.21's), static, also at ``/agnhost-2`` as in upstream's image (the entrypoint
  specs run that), with busybox and a ``curl`` for plain GETs (wget);
  ``ENTRYPOINT ["/agnhost"]``, ``CMD ["pause"]``.
- ``busybox:1.29``: Debian's ``busybox-static`` (1.35).
- ``pause:3.2``: the project's own pause program.
- ``nginx:1.14-alpine``: busybox ``httpd`` serving ``/usr/share/nginx/html`` on port 80.
- ``nonewprivs:1.0``: the tree's ``test/images/nonewprivs``, setuid root at
  ``/usr/local/bin/nnp``, its entrypoint.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from asynckubelet.docker import DockerClient
from asynckubelet.images import build as image_build
from asynckubelet.images.build import Entry, File, ImageConfig

REGISTRY = "127.0.0.1:5999/e2e"
"""A loopback address nothing listens on: a pull of any suite image fails at once, here."""

REGISTRY_KEYS = (
    "buildImageRegistry",
    "dockerLibraryRegistry",
    "e2eRegistry",
    "e2eVolumeRegistry",
    "gcAuthenticatedRegistry",
    "gcRegistry",
    "gcrReleaseRegistry",
    "invalidRegistry",
    "privateRegistry",
    "promoterE2eRegistry",
    "sampleRegistry",
    "sigStorageRegistry",
)

AGNHOST = f"{REGISTRY}/agnhost:2.21"
BUSYBOX = f"{REGISTRY}/busybox:1.29"
PAUSE = f"{REGISTRY}/pause:3.2"
NGINX = f"{REGISTRY}/nginx:1.14-alpine"
NONEWPRIVS = f"{REGISTRY}/nonewprivs:1.0"


CURL = """#!/bin/sh
# The GET requests the suite makes with curl (hooks, the networking checks) through busybox
# wget: options are dropped, the last other argument is the URL.
url=""
for arg in "$@"; do
    case "$arg" in -*) ;; *) url="$arg" ;; esac
done
exec wget -q -O - "$url"
"""
"""Upstream's agnhost image (Alpine) has curl, which the suite's hooks and networking
checks run in it; busybox has wget only."""


def repo_list() -> str:
    """The ``KUBE_TEST_REPO_LIST`` YAML: every registry the suite knows, remapped."""
    return "".join(f"{key}: {REGISTRY}\n" for key in REGISTRY_KEYS)


def _busybox_entries(tag: str) -> list[Entry]:
    return image_build.busybox_entries(busybox=Path("/bin/busybox"), image=tag)


async def build_all(docker: DockerClient, *, programs: Path) -> Mapping[str, str]:
    """Make and load every suite image; returns reference -> image id."""
    ids: dict[str, str] = {}
    ids[BUSYBOX] = await image_build.build_busybox_image(docker, tag=BUSYBOX)
    ids[PAUSE] = await image_build.build_pause_image(docker, tag=PAUSE)
    path_env = [f"PATH={image_build.DEFAULT_PATH}"]
    binary = (programs / "agnhost").read_bytes()
    agnhost = File(path="/agnhost", data=binary, mode=0o755)
    agnhost_2 = File(path="/agnhost-2", data=binary, mode=0o755)
    curl = File(path="/usr/bin/curl", data=CURL.encode(), mode=0o755)
    ids[AGNHOST] = await _load(
        docker,
        tag=AGNHOST,
        files=[*_busybox_entries(AGNHOST), agnhost, agnhost_2, curl],
        config=ImageConfig(entrypoint=["/agnhost"], cmd=["pause"], env=path_env),
    )
    page = File(path="/usr/share/nginx/html/index.html", data=b"<h1>nginx</h1>\n")
    ids[NGINX] = await _load(
        docker,
        tag=NGINX,
        files=[*_busybox_entries(NGINX), page],
        config=ImageConfig(
            cmd=["httpd", "-f", "-p", "80", "-h", "/usr/share/nginx/html"], env=path_env
        ),
    )
    nnp = File(path="/usr/local/bin/nnp", data=(programs / "nonewprivs").read_bytes(), mode=0o4755)
    ids[NONEWPRIVS] = await _load(
        docker,
        tag=NONEWPRIVS,
        files=[*_busybox_entries(NONEWPRIVS), nnp],
        config=ImageConfig(entrypoint=["/usr/local/bin/nnp"], env=path_env),
    )
    return ids


async def _load(docker: DockerClient, *, tag: str, files: list[Entry], config: ImageConfig) -> str:
    archive = image_build.image_archive(repo_tag=tag, files=files, config=config)
    await docker.load_image(archive)
    inspected = await docker.inspect_image(tag)
    return str(inspected["Id"])
