"""Docker-in-Docker for the tests: the image scripts beside this file, and Python helpers."""
