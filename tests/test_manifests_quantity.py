"""Resource quantities: the Kubernetes grammar, exact comparison and canonical printing."""

from __future__ import annotations

import pytest

from asynckubelet.manifests.quantity import QuantityError, parse_quantity


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("100m", "100m"),
        ("0.5", "500m"),
        ("1.5", "1500m"),
        ("1000m", "1"),
        ("2000", "2k"),
        ("1500", "1500"),
        ("1Gi", "1Gi"),
        ("1.5Gi", "1536Mi"),
        ("1024Ki", "1Mi"),
        ("0.5Ki", "512"),
        ("1.1Ki", "1126400m"),
        ("1e3", "1e3"),
        ("12e2", "1200"),
        ("1E", "1E"),
        ("1n", "1n"),
        ("0.0000000001", "1n"),
        ("-1", "-1"),
        ("+2M", "2M"),
        ("0", "0"),
        (3, "3"),
        (0.25, "250m"),
    ],
)
def test_quantities_print_in_canonical_form(text: str | int | float, canonical: str) -> None:
    assert str(parse_quantity(text)) == canonical


@pytest.mark.parametrize("text", ["", "abc", "1.2.3", "1Kb", "--1", "1 Gi", "e3", ".", "1e"])
def test_text_outside_the_grammar_is_rejected(text: str) -> None:
    with pytest.raises(QuantityError, match="quantities must match the regular expression"):
        parse_quantity(text)


def test_comparison_is_exact_across_notations() -> None:
    assert parse_quantity("1000m") == parse_quantity("1") == parse_quantity("1e0")
    assert parse_quantity("1Gi") > parse_quantity("1G")
    assert parse_quantity("100m") == parse_quantity("0.1")
    assert parse_quantity("999Mi") < parse_quantity("1Gi")


def test_booleans_are_not_quantities() -> None:
    with pytest.raises(QuantityError):
        parse_quantity(True)
