"""Watch rules (``watch.asynckubelet.dev/<container>``): parsed as compose's
``develop.watch``, hostile paths and targets refused naming the rule, the first rule that
holds a file deciding, and a sync's tar holding regular files of the context only."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest
import typer

from asynckubelet.cli import devsync
from asynckubelet.errors import ImageBuildError
from asynckubelet.images import watchrules
from asynckubelet.images.contexts import BuildContext

FIELD = "annotation watch.asynckubelet.dev/web"


def _context(tmp_path: Path) -> Path:
    ctx = tmp_path / "web"
    (ctx / "www" / "css").mkdir(parents=True)
    (ctx / "www" / "index.html").write_text("<h1>hi</h1>")
    (ctx / "www" / "css" / "site.css").write_text("h1 {}")
    (ctx / "Dockerfile").write_text("FROM scratch\n")
    return ctx


def _rules(text: str, ctx: Path) -> list[watchrules.WatchRule]:
    return watchrules.parse_rules(
        text, container="web", image="web:dev", context=ctx, field_name=FIELD
    )


RULES = """
- action: sync
  path: www
  target: /srv/www/
  ignore: ["*.swp", "cache/"]
- action: sync+restart
  path: www/css
  target: /etc/css
- action: rebuild
  path: Dockerfile
"""


def test_rules_are_read_as_compose_reads_develop_watch(tmp_path: Path) -> None:
    ctx = _context(tmp_path)
    rules = _rules(RULES, ctx)
    assert [(r.action, r.path, r.target, r.ignore) for r in rules] == [
        ("sync", ctx.resolve() / "www", "/srv/www", ("*.swp", "cache")),
        ("sync+restart", ctx.resolve() / "www" / "css", "/etc/css", ()),
        ("rebuild", ctx.resolve() / "Dockerfile", "", ()),
    ]
    assert rules[1].name == f"{FIELD} rule 2"


def test_the_first_rule_holding_a_file_decides_where_it_goes(tmp_path: Path) -> None:
    ctx = _context(tmp_path).resolve()
    rules = _rules(RULES, ctx)
    found = watchrules.match(ctx / "www" / "css" / "site.css", rules)
    assert found is not None
    assert (found[0].action, found[1]) == ("sync", "/srv/www/css/site.css")
    assert watchrules.match(ctx / "www" / "index.html.swp", rules) is None
    assert watchrules.match(ctx / "www" / "cache" / "x", rules) is None
    rebuild = watchrules.match(ctx / "Dockerfile", rules)
    assert rebuild is not None
    assert rebuild[0].action == "rebuild"
    assert watchrules.match(ctx / "README", rules) is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- {action: sync, path: ../etc, target: /x}", "path '../etc' must not hold '..'"),
        ("- {action: sync, path: www/../../x, target: /x}", "must not hold '..'"),
        ("- {action: sync, path: /etc, target: /x}", "path '/etc' must be relative"),
        ("- {action: sync, path: www, target: srv}", "target 'srv' must be an absolute path"),
        ("- {action: sync, path: www, target: /srv/../etc}", "must not hold '..'"),
        ('- {action: sync, path: www, target: "/a\\nb"}', "is not a usable path"),
        ("- {action: sync, path: www}", "target must be an absolute path"),
        ("- {action: copy, path: www, target: /x}", "action 'copy' is not one of"),
        ("- {action: sync, path: www, target: /x, mode: 7}", "unknown key 'mode'"),
        ("- {action: rebuild, path: www, target: /x}", "a rebuild rule takes no target"),
        ("- {action: sync, path: www, target: /x, ignore: [1]}", "ignore pattern 1"),
        ("action: sync", "must be a YAML list of rules"),
        ("- [", "not a YAML list of rules"),
    ],
)
def test_hostile_rules_are_refused_naming_the_rule(tmp_path: Path, text: str, message: str) -> None:
    ctx = _context(tmp_path)
    with pytest.raises(ImageBuildError, match=FIELD) as caught:
        _rules(text, ctx)
    assert message in str(caught.value)


def test_a_path_leading_out_of_the_context_through_a_symlink_is_refused(tmp_path: Path) -> None:
    ctx = _context(tmp_path)
    (tmp_path / "secrets").mkdir()
    (ctx / "escape").symlink_to(tmp_path / "secrets")
    with pytest.raises(ImageBuildError) as caught:
        _rules("- {action: sync, path: escape, target: /x}", ctx)
    assert str(caught.value).startswith(f"{FIELD} rule 1: path 'escape' leads outside")


def test_too_many_rules_are_refused(tmp_path: Path) -> None:
    ctx = _context(tmp_path)
    text = "\n".join(["- {action: rebuild, path: www}"] * (watchrules.MAX_RULES + 1))
    with pytest.raises(ImageBuildError, match="more than"):
        _rules(text, ctx)


def test_a_sync_tar_holds_the_files_at_their_targets(tmp_path: Path) -> None:
    ctx = _context(tmp_path)
    data = watchrules.sync_tar([(ctx / "www" / "index.html", "/srv/www/index.html")], context=ctx)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        members = tar.getmembers()
        assert [(m.name, m.uid, m.isfile()) for m in members] == [("srv/www/index.html", 0, True)]
        handle = tar.extractfile(members[0])
        assert handle is not None
        assert handle.read() == b"<h1>hi</h1>"


def test_a_sync_refuses_links_and_files_outside_the_context(tmp_path: Path) -> None:
    ctx = _context(tmp_path)
    (tmp_path / "secret").write_text("s")
    (ctx / "www" / "link").symlink_to(tmp_path / "secret")
    with pytest.raises(ImageBuildError, match="outside the build context"):
        watchrules.sync_tar([(ctx / "www" / "link", "/x")], context=ctx)
    (ctx / "www" / "inner").symlink_to(ctx / "www" / "index.html")
    with pytest.raises(ImageBuildError, match="cannot be read"):
        watchrules.sync_tar([(ctx / "www" / "inner", "/x")], context=ctx)
    files = [(ctx / "www" / "index.html", "/a"), (ctx / "Dockerfile", "/b")]
    with pytest.raises(ImageBuildError, match="more than 1 files"):
        watchrules.sync_tar(files, context=ctx, max_files=1)
    with pytest.raises(ImageBuildError, match="cannot be synced to '/'"):
        watchrules.sync_tar([(ctx / "www" / "index.html", "/")], context=ctx)
    with pytest.raises(ImageBuildError, match="more than 4 bytes"):
        watchrules.sync_tar([(ctx / "www" / "index.html", "/a")], context=ctx, max_bytes=4)


def _specs(annotation: str) -> list[tuple[dict[str, str], list[dict[str, str]]]]:
    return [({"watch.asynckubelet.dev/web": annotation}, [{"name": "web", "image": "web:dev"}])]


def test_a_change_is_synced_applied_or_ignored_by_its_rule(tmp_path: Path) -> None:
    ctx = _context(tmp_path).resolve()
    contexts = {"web:dev": BuildContext("web:dev", ctx, "Dockerfile")}
    rules = devsync.rules_of_specs(_specs(RULES), contexts)
    manifest = str(tmp_path / "web.yaml")

    synced = devsync.plan([str(ctx / "www" / "index.html")], rules, [ctx])
    assert not synced.apply
    assert synced.syncs == {
        ("web", "web:dev", "sync"): [(ctx / "www" / "index.html", "/srv/www/index.html")]
    }
    assert devsync.plan([str(ctx / "Dockerfile")], rules, [ctx]).apply
    assert devsync.plan([manifest], rules, [ctx]).apply
    ignored = devsync.plan([str(ctx / "www" / "a.swp"), str(ctx / "www" / "gone")], rules, [ctx])
    assert (ignored.apply, ignored.syncs) == (False, {})
    assert devsync.plan([str(ctx / "www" / "index.html")], [], [ctx]).apply


def test_a_rule_for_a_missing_container_or_image_without_context_is_refused(
    tmp_path: Path,
) -> None:
    ctx = _context(tmp_path).resolve()
    specs = [({"watch.asynckubelet.dev/api": RULES}, [{"name": "web", "image": "web:dev"}])]
    with pytest.raises(typer.TyperException, match="/api: the pod has no container 'api'"):
        devsync.rules_of_specs(specs, {"web:dev": BuildContext("web:dev", ctx, "Dockerfile")})
    with pytest.raises(typer.TyperException, match="image 'web:dev' has no build context"):
        devsync.rules_of_specs(_specs(RULES), {})
    escaping = "- {action: sync, path: ../../etc, target: /etc}"
    with pytest.raises(typer.TyperException, match=r"/web rule 1: path '\.\./\.\./etc' must not"):
        devsync.rules_of_specs(
            _specs(escaping), {"web:dev": BuildContext("web:dev", ctx, "Dockerfile")}
        )
