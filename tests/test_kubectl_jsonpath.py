"""kubectl's JSONPath dialect: client-go's own test cases (``util/jsonpath``) as tables,
its parse errors, and the bounds that keep a hostile template from hanging."""

from __future__ import annotations

import json
from typing import Any

import pytest

from asynckubelet.kubectl.jsonpath import JSONPath, JSONPathError

TYPES: dict[str, Any] = {
    "bools": [True, False, True, False],
    "integers": [1, 2, 3, 4],
    "floats": [1.0, 2.2, 3.3, 4.0],
    "strings": ["one", "two", "three", "four"],
    "interfaces": [True, "one", 1, 1.1],
    "maps": [
        {"name": "one", "value": 1},
        {"name": "two", "value": 2.02},
        {"name": "three", "value": 3.03},
        {"name": "four", "value": 4.04},
    ],
}

NODES = json.loads(
    """{"kind": "List",
  "items": [
    {"kind": "None",
     "metadata": {"name": "127.0.0.1", "labels": {"kubernetes.io/hostname": "127.0.0.1"}},
     "status": {"capacity": {"cpu": "4"}, "ready": true,
                "addresses": [{"type": "LegacyHostIP", "address": "127.0.0.1"}]}},
    {"kind": "None",
     "metadata": {"name": "127.0.0.2", "labels": {"kubernetes.io/hostname": "127.0.0.2"}},
     "status": {"capacity": {"cpu": "8"}, "ready": false,
                "addresses": [{"type": "LegacyHostIP", "address": "127.0.0.2"},
                              {"type": "another", "address": "127.0.0.3"}]}}],
  "users": [{"name": "myself", "user": {}},
            {"name": "e2e", "user": {"username": "admin", "password": "secret"}}]}"""
)

STORE: dict[str, Any] = {
    "Name": "jsonpath",
    "Book": [
        {"Category": "reference", "Author": "Nigel Rees", "Title": "Sayings", "Price": 8.95},
        {"Category": "fiction", "Author": "Evelyn Waugh", "Title": "Sword", "Price": 12.99},
        {"Category": "fiction", "Author": "Herman Melville", "Title": "Moby", "Price": 8.99},
    ],
    "Bicycle": [
        {"Color": "red", "Price": 19.95, "IsNew": True},
        {"Color": "green", "Price": 20.01, "IsNew": False},
    ],
    "Labels": {"engieer": 10, "web/html": 15, "k8s-app": 20},
    "Employees": {"jason": "manager", "dan": "clerk"},
}

POINTS = json.loads(
    """[{"id": "i1", "x": 4, "y": -5}, {"id": "i2", "x": -2, "y": -5, "z": 1},
        {"id": "i3", "x": 8, "y": 3}, {"id": "i4", "x": -6, "y": -1},
        {"id": "i5", "x": 0, "y": 2, "z": 1}, {"id": "i6", "x": 1, "y": 4},
        {"id": "i7", "x": null, "y": 4}]"""
)

CONTAINERS = {"spec": {"containers": [{"name": f"fake{i}"} for i in range(6)]}}
FOUR = {"spec": {"containers": [{"name": f"fake{i}"} for i in range(4)]}}

PODS = {
    "items": [
        {
            "metadata": {"name": "pod1"},
            "spec": {
                "containers": [
                    {"name": "foo", "another": [{"name": "value1"}, {"name": "value2"}]},
                    {"name": "bar", "another": [{"name": "value1"}, {"name": "value2"}]},
                ]
            },
        },
        {
            "metadata": {"name": "pod2"},
            "spec": {"containers": [{"name": "baz", "another": [{"name": "value1"}]}]},
        },
    ]
}

ANNOTATED = {
    "kind": "List",
    "items": [
        {"kind": "Pod", "metadata": {"name": "pod1", "annotations": {"color": "blue"}}},
        {"kind": "Pod", "metadata": {"name": "pod2"}},
        {"kind": "Pod", "metadata": {"name": "pod3", "annotations": {"color": "green"}}},
        {"kind": "Pod", "metadata": {"name": "pod4", "annotations": {"color": "blue"}}},
    ],
}

RUNNING = {
    "kind": "List",
    "items": [
        {"kind": "Pod", "metadata": {"name": f"pod{i}"}, "status": {"phase": "Running"}}
        for i in (1, 2, 3)
    ]
    + [{"resourceVersion": ""}],
}

CASES: list[tuple[str, Any, str]] = [
    ("{ .bools }", TYPES, "[true,false,true,false]"),
    ("{ .bools[0] }", TYPES, "true"),
    ("{ .bools[-1] }", TYPES, "false"),
    ("{ .bools[0:2] }", TYPES, "true false"),
    ("{ .bools[:2] }", TYPES, "true false"),
    ("{ .bools[:4:2] }", TYPES, "true true"),
    ("{ .integers }", TYPES, "[1,2,3,4]"),
    ("{ .integers[-2] }", TYPES, "3"),
    ("{ .integers[:4:2] }", TYPES, "1 3"),
    ("{ .floats }", TYPES, "[1,2.2,3.3,4]"),
    ("{ .floats[0] }", TYPES, "1"),
    ("{ .floats[-2] }", TYPES, "3.3"),
    ("{ .floats[:4:2] }", TYPES, "1 3.3"),
    ("{ .strings }", TYPES, '["one","two","three","four"]'),
    ("{ .strings[-2] }", TYPES, "three"),
    ("{ .strings[0:2] }", TYPES, "one two"),
    ("{ .interfaces }", TYPES, '[true,"one",1,1.1]'),
    ("{ .interfaces[0:2] }", TYPES, "true one"),
    ("{ .interfaces[:4:2] }", TYPES, "true 1"),
    ("{ .maps[0] }", TYPES, '{"name":"one","value":1}'),
    ("{ .maps[-2] }", TYPES, '{"name":"three","value":3.03}'),
    ("{ .maps[::2] }", TYPES, '{"name":"one","value":1} {"name":"three","value":3.03}'),
    ("{ .maps[1::2] }", TYPES, '{"name":"two","value":2.02} {"name":"four","value":4.04}'),
    ("hello jsonpath", None, "hello jsonpath"),
    ("{..}", [1, 2, 3], "[1,2,3]"),
    ("{[?(@<5)]}", [2, 6, 3, 7], "2 3"),
    ('{"{"}', None, "{"),
    ("{[1,3,4]}", [0, 1, 2, 3, 4], "1 3 4"),
    ("{[0:2]}", ["Monday", "Tudesday"], "Monday Tudesday"),
    ("hello {.Name}", STORE, "hello jsonpath"),
    ("{$.Labels.web/html}", STORE, "15"),
    ("{$.Employees.jason}", STORE, "manager"),
    ("{.Labels.k8s-app}", STORE, "20"),
    ("{.Bicycle[*].Color}", STORE, "red green"),
    ("{.Book[*].Author}", STORE, "Nigel Rees Evelyn Waugh Herman Melville"),
    ("{..Price}", STORE, "19.95 20.01 8.95 12.99 8.99"),
    ("{...Price}", STORE, "19.95 20.01 8.95 12.99 8.99"),
    ("{.Book[-1:].Title}", STORE, "Moby"),
    ("{..Book[2].Author}", STORE, "Herman Melville"),
    ("{.Bicycle[?(@.IsNew==true)].Color}", STORE, "red"),
    ("{[?(@.z)].id}", POINTS, "i2 i5"),
    ("{[0]['id']}", POINTS, "i1"),
    ("{[-1]['x']}", POINTS, "null"),
    ("{range .items[*]}{.metadata.name}, {end}{.kind}", NODES, "127.0.0.1, 127.0.0.2, List"),
    ('{range .items[*]}{.metadata.name}{"\\t"}{end}', NODES, "127.0.0.1\t127.0.0.2\t"),
    ("{.items[*].status.addresses[*].address}", NODES, "127.0.0.1 127.0.0.2 127.0.0.3"),
    (
        "{range .items[*]}{range .status.addresses[*]}{.address}, {end}{end}",
        NODES,
        "127.0.0.1, 127.0.0.2, 127.0.0.3, ",
    ),
    (
        "{.items[*]['metadata.name', 'status.capacity']}",
        NODES,
        '127.0.0.1 127.0.0.2 {"cpu":"4"} {"cpu":"8"}',
    ),
    (
        "{range .items[*]}[{.metadata.name}, {.status.capacity}] {end}",
        NODES,
        '[127.0.0.1, {"cpu":"4"}] [127.0.0.2, {"cpu":"8"}] ',
    ),
    ('{.users[?(@.name=="e2e")].user.password}', NODES, "secret"),
    ("{.items[0].metadata.labels.kubernetes\\.io/hostname}", NODES, "127.0.0.1"),
    ('{.items[?(@.metadata.labels.kubernetes\\.io/hostname=="127.0.0.1")].kind}', NODES, "None"),
    ("{.items[?(@..ready==true)].metadata.name}", NODES, "127.0.0.1"),
    ("{..name}", NODES, "127.0.0.1 127.0.0.2 myself e2e"),
    (
        '{range .items[*]}{.metadata.name}{":"}{range @.spec.containers[*]}{.name}{","}{end}'
        '{"+"}{end}',
        PODS,
        "pod1:foo,bar,+pod2:baz,+",
    ),
    (
        '{range .items[*]}{.metadata.name}{"~"}{range @.spec.containers[*]}{.name}{":"}'
        '{range @.another[*]}{.name}{","}{end}{"+"}{end}{"#"}{end}',
        PODS,
        "pod1~foo:value1,value2,+bar:value1,value2,+#pod2~baz:value1,+#",
    ),
    (
        '{range .items[*]}{.metadata.name}{"\\t"}{range @.spec.containers[*]}{.name}{" "}{end}'
        '{"\\t"}{range @.spec.containers[*]}{.name}{" "}{end}{"\\n"}{end}',
        PODS,
        "pod1\tfoo bar \tfoo bar \npod2\tbaz \tbaz \n",
    ),
    ("{.spec.containers[0].name}", FOUR, "fake0"),
    ("{.spec.containers[0:0].name}", FOUR, ""),
    ("{.spec.containers[0:-1].name}", FOUR, "fake0 fake1 fake2"),
    ("{.spec.containers[-1].name}", FOUR, "fake3"),
    ("{.spec.containers[-1:].name}", FOUR, "fake3"),
    ("{.spec.containers[-2:].name}", FOUR, "fake2 fake3"),
    ("{.spec.containers[-4].name}", FOUR, "fake0"),
    ("{.spec.containers[-4:].name}", FOUR, "fake0 fake1 fake2 fake3"),
    ("{.spec.containers[5:5].name}", FOUR, ""),
    ("{.spec.containers[-5:-5].name}", FOUR, ""),
    ("{.spec.containers[0:].name}", CONTAINERS, "fake0 fake1 fake2 fake3 fake4 fake5"),
    ("{.spec.containers[0:6:].name}", CONTAINERS, "fake0 fake1 fake2 fake3 fake4 fake5"),
    ("{.spec.containers[1:4:2].name}", CONTAINERS, "fake1 fake3"),
    ("{.spec.containers[1:4:4].name}", CONTAINERS, "fake1"),
    ("{.spec.containers[0:6:3].name}", CONTAINERS, "fake0 fake3"),
    ("{.spec.containers[0:6:5].name}", CONTAINERS, "fake0 fake5"),
]


@pytest.mark.parametrize(("template", "data", "expected"), CASES)
def test_templates_print_as_client_go_prints_them(template: str, data: Any, expected: str) -> None:
    assert JSONPath(template, allow_missing_keys=False).execute(data) == expected


ALLOWING_MISSING = [
    ("{.hello}", STORE, ""),
    ("before-{.hello}after", STORE, "before-after"),
    ("{range .items[*]}{.metadata.name}{end}", {"items": []}, ""),
    (
        '{range .items[*]}{.metadata.name}{":"}{range @.spec.containers[*]}{.name}{","}{end}'
        '{"+"}{end}',
        {"items": []},
        "",
    ),
    ('{.items[?(@.metadata.annotations.color=="blue")].metadata.name}', ANNOTATED, "pod1 pod4"),
    (
        '{range .items[?(.status.phase=="Running")]}{.metadata.name}{" is Running\\n"}{end}',
        RUNNING,
        "pod1 is Running\npod2 is Running\npod3 is Running\n",
    ),
]


@pytest.mark.parametrize(("template", "data", "expected"), ALLOWING_MISSING)
def test_missing_keys_print_nothing_when_allowed(template: str, data: Any, expected: str) -> None:
    assert JSONPath(template, allow_missing_keys=True).execute(data) == expected


FAILING = [
    ("{hello}", STORE, "unrecognized identifier hello"),
    ("{.hello}", STORE, "hello is not found"),
    ("{.Labels[0]}", STORE, "map[string]interface {} is not array or slice"),
    ("{.Book[?(@.Price<>10)]}", STORE, "unrecognized filter operator <>"),
    ("{range .Labels.*}{@}{end}{end}", STORE, "not in range, nothing to end"),
    ('{.items[?(@.metadata.annotations.color=="blue")].metadata.name}', ANNOTATED, None),
    ("{.spec.containers[-1:0].name}", FOUR, "starting index 3 is greater than ending index 0"),
    ("{.spec.containers[-5].name}", FOUR, "array index out of bounds: index -1, length 4"),
    ("{.spec.containers[3:1].name}", FOUR, "starting index 3 is greater than ending index 1"),
    ("{.spec.containers[-1:-2].name}", FOUR, "starting index 3 is greater than ending index 2"),
    ("{.spec.containers[0:6:0].name}", CONTAINERS, "step must be > 0"),
    ("{.spec.containers[0:6:-1].name}", CONTAINERS, "step must be > 0"),
    ('{.Book[?(@.Price=="x")]}', STORE, "incompatible types for comparison"),
    ("{.Book[?(@..Price==1)]}", {"Book": [{"a": {"Price": 1}, "Price": 2}]}, None),
]


@pytest.mark.parametrize(("template", "data", "message"), FAILING)
def test_failing_templates_give_client_go_errors(template: str, data: Any, message: str) -> None:
    with pytest.raises(JSONPathError) as raised:
        JSONPath(template, allow_missing_keys=False).execute(data)
    if message is not None:
        assert str(raised.value) == message


PARSE_ERRORS = [
    ("{.hello", "unclosed action"),
    ("{*}", "unrecognized character in action: U+002A '*'"),
    ("{+12.3.0}", "cannot parse number +12.3.0"),
    ("{[1}", "unterminated array"),
    ("{[?(.price]}", "unterminated filter"),
    ("{........}", "invalid multiple recursive descent"),
    ("{....Price}", "invalid multiple recursive descent"),
    ("{\\\\\\}", "unrecognized character in action: U+005C '\\'"),
    ('{"\\q"}', 'unquote string "\\q" error invalid syntax'),
    ('{"abc}', "unterminated quoted string"),
    ("{[a]}", "invalid array index a"),
    ("{[99999999999999999999]}", "array index 99999999999999999999 is not a number"),
    ("{[?(@.a)x}", "unclosed array expect ]"),
]


@pytest.mark.parametrize(("template", "message"), PARSE_ERRORS)
def test_malformed_templates_give_client_go_parse_errors(template: str, message: str) -> None:
    with pytest.raises(JSONPathError) as raised:
        JSONPath(template)
    assert str(raised.value) == message


def test_quoted_filters_keep_parentheses_and_escaped_quotes() -> None:
    data = {"n": [{"os": "()"}, {"os": '("")'}, {"os": "Linux"}, {"os": "{[()]}"}]}
    assert JSONPath('{.n[?(@.os == "()")].os}').execute(data) == "()"
    assert JSONPath('{.n[?(@.os == "(\\"\\")")].os}').execute(data) == '("")'
    assert JSONPath("{.n[?(@.os == 'Linux')].os}").execute(data) == "Linux"
    assert JSONPath('{.n[?(@.os == "{[()]}")].os}').execute(data) == "{[()]}"


def test_wildcard_on_a_map_gives_its_values_by_key() -> None:
    assert JSONPath("{.m.*}").execute({"m": {"b": 2, "a": 1}}) == "1 2"


def test_comparisons_follow_go_ordering() -> None:
    data = {"n": [{"v": 1}, {"v": 5}, {"v": 9}]}
    for op, expected in [("<", "1"), ("<=", "1 5"), (">", "9"), (">=", "5 9"), ("!=", "1 9")]:
        assert JSONPath(f"{{.n[?(@.v{op}5)].v}}").execute(data) == expected


def test_as_json_prints_each_node_as_an_indented_array() -> None:
    out = JSONPath("{.a[*]}").execute({"a": [1, {"b": "<"}]}, as_json=True)
    assert out == '[\n    1,\n    {\n        "b": "\\u003c"\n    }\n]\n'


def test_deep_filter_nesting_is_refused_not_recursed() -> None:
    template = "{" + "[?(" * 5000 + "@.a" + ")]" * 5000 + "}"
    with pytest.raises(JSONPathError):
        JSONPath(template)


def test_deep_range_nesting_is_refused() -> None:
    template = "{range .a[*]}" * 2000 + "{@}" + "{end}" * 2000
    data: Any = 0
    for _ in range(2000):
        data = {"a": [data]}
    with pytest.raises(JSONPathError, match="range nested deeper"):
        JSONPath(template).execute(data)


def test_exploding_recursive_descent_stops_at_the_value_bound() -> None:
    data: Any = 1
    for _ in range(10):
        data = [data, data, data]
    with pytest.raises(JSONPathError, match="more than"):
        JSONPath("{..[*]..[*]..[*]..[*]}").execute(data)


def test_deeply_nested_objects_descend_without_recursion() -> None:
    data: Any = {"name": "leaf"}
    for _ in range(100_000):
        data = {"n": data}
    assert JSONPath("{..name}").execute(data) == "leaf"


def test_huge_slice_bounds_stay_within_the_list() -> None:
    data = {"a": list(range(5))}
    assert JSONPath("{.a[0:5:9223372036854775807]}").execute(data) == "0"
    with pytest.raises(JSONPathError, match="out of bounds"):
        JSONPath("{.a[0:9223372036854775807]}").execute(data)
