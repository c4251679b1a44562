"""``run`` prints a container's line that came in 16 KiB pieces as one line with one
``pod/container | `` prefix, as ``kubectl logs --prefix`` and ``docker compose`` print
it; a line printed by anything else in between ends it, and the rest of the long line
starts a prefixed line of its own."""

from __future__ import annotations

from output_helpers import RENDERER, child

PIECES = (
    "renderer.log(pod, 'app', LogLine(stream='stdout', text='aa', newline=False))\n"
    "renderer.log(pod, 'app', LogLine(stream='stdout', text='bb', newline=False))\n"
    "renderer.log(pod, 'app', LogLine(stream='stdout', text='cc'))\n"
)


def test_the_pieces_of_a_long_line_are_printed_as_one_line_with_one_prefix() -> None:
    result = child(RENDERER + PIECES)
    assert result.stdout == "web/app | aabbcc\n"


def test_a_long_line_on_a_terminal_has_one_coloured_prefix() -> None:
    result = child(RENDERER + PIECES, FORCE_COLOR="1")
    assert result.stdout == "\x1b[36mweb/app\x1b[0m | aabbcc\n"


def test_another_containers_line_ends_the_open_line_and_the_rest_is_prefixed_again() -> None:
    code = RENDERER + (
        "renderer.log(pod, 'app', LogLine(stream='stdout', text='aa', newline=False))\n"
        "renderer.log(pod, 'side', LogLine(stream='stdout', text='other'))\n"
        "renderer.log(pod, 'app', LogLine(stream='stdout', text='bb'))\n"
        "renderer.log(pod, 'app', LogLine(stream='stderr', text='e', newline=False))\n"
        "renderer.log(pod, 'app', LogLine(stream='stdout', text='last', newline=False))\n"
    )
    result = child(code)
    assert result.stdout == "web/app | aa\nweb/side | other\nweb/app | bb\nweb/app | last"
    assert result.stderr == "web/app | e\n"


def test_a_status_line_ends_the_open_line_first() -> None:
    code = RENDERER + (
        "from lightkube.models.core_v1 import PodStatus\n"
        "renderer.log(pod, 'app', LogLine(stream='stderr', text='done', newline=False))\n"
        "renderer.status(pod, PodStatus(phase='Succeeded'))\n"
    )
    result = child(code)
    assert result.stderr == "web/app | done\npod/web: Succeeded\n"
