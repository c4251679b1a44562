"""Images this project makes itself, so pods run on machines that reach no registry.

``build`` compiles the pause program shipped in ``pause/pause.c`` and packs the host's
static busybox, each as a ``docker load`` archive handed to the Docker adapter.
"""
