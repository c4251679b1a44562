"""``-o yaml`` as kubectl prints it: go-yaml's quoting and block styles, keys sorted."""

from __future__ import annotations

import yaml

from asynckubelet.cli.commands.get_output import kubectl_yaml

DOCUMENT = {
    "metadata": {
        "name": "web",
        "annotations": {
            "port": "8080",
            "flag": "true",
            "empty": "",
            "colon": "a: b",
            "last-applied": '{"kind":"Pod"}\n',
            "greeting": "héllo",
            "plain": "plain text",
        },
    },
    "spec": {"replicas": 3, "args": ["1", 2]},
}


def test_strings_are_quoted_and_blocked_as_kubectl_prints_them() -> None:
    assert kubectl_yaml(DOCUMENT).splitlines() == [
        "metadata:",
        "  annotations:",
        "    colon: 'a: b'",
        '    empty: ""',
        '    flag: "true"',
        "    greeting: héllo",
        "    last-applied: |",
        '      {"kind":"Pod"}',
        "    plain: plain text",
        '    port: "8080"',
        "  name: web",
        "spec:",
        "  args:",
        '  - "1"',
        "  - 2",
        "  replicas: 3",
    ]


def test_what_is_printed_reads_back_as_the_same_document() -> None:
    assert yaml.safe_load(kubectl_yaml(DOCUMENT)) == DOCUMENT
