"""Kubernetes resource quantities (``100m``, ``1Gi``, ``1e3``, ``0.5``), exactly.

Requests are compared with limits and printed back in error messages, and the API server
prints them in its canonical form (``1.5Gi`` reads back as ``1536Mi``, ``0.5`` as ``500m``).
Values are held as exact fractions so that comparison never suffers from float rounding,
and the canonical form follows apimachinery's ``Quantity.String()``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from fractions import Fraction
from functools import total_ordering

__all__ = [
    "MAX_DIGITS",
    "MAX_EXPONENT_DIGITS",
    "QUANTITY_FORMAT_MESSAGE",
    "Quantity",
    "QuantityError",
    "QuantityFormat",
    "parse_quantity",
]

QUANTITY_FORMAT_MESSAGE = (
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
)

_NUMBER = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?")
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_SUFFIX = {exp: suffix for suffix, exp in _DECIMAL.items()}
_BINARY_SUFFIX = {exp: suffix for suffix, exp in _BINARY.items()}
_EXPONENT = re.compile(r"[eE]([+-]?[0-9]+)")
_NANO = Fraction(1, 10**9)
MAX_DIGITS = 1000
MAX_EXPONENT_DIGITS = 3
"""A quantity's digits and exponent digits are bounded (the API server bounds neither) so
that reading and printing one costs microseconds: ``1e999`` is already far beyond any
resource a node has."""


class QuantityError(ValueError):
    """The text is not a Kubernetes quantity."""


class QuantityFormat(Enum):
    DECIMAL_SI = "DecimalSI"
    BINARY_SI = "BinarySI"
    DECIMAL_EXPONENT = "DecimalExponent"


@total_ordering
@dataclass(frozen=True)
class Quantity:
    """An exact quantity and the notation it was written in."""

    value: Fraction
    format: QuantityFormat

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self.value < other.value

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self.value == other.value

    def __hash__(self) -> int:
        return hash(self.value)

    def is_integer(self) -> bool:
        return self.value.denominator == 1

    def __str__(self) -> str:
        return _canonical(self.value, self.format)


def parse_quantity(text: str | int | float) -> Quantity:  # noqa: C901  (mirrors apimachinery ParseQuantity)
    """Parse like apimachinery's ``ParseQuantity``; raise :class:`QuantityError`."""
    if isinstance(text, bool):
        raise QuantityError(QUANTITY_FORMAT_MESSAGE)
    if isinstance(text, int):
        return Quantity(Fraction(text), QuantityFormat.DECIMAL_SI)
    if isinstance(text, float):
        if text != text or text in (float("inf"), float("-inf")):
            raise QuantityError(QUANTITY_FORMAT_MESSAGE)
        return Quantity(_round_up_to_nano(Fraction(text)), QuantityFormat.DECIMAL_SI)
    match = _NUMBER.match(text)
    if match is None or not text:
        raise QuantityError(QUANTITY_FORMAT_MESSAGE)
    sign, whole, frac = match.group(1), match.group(2), match.group(3) or ""
    if not whole and not frac:
        raise QuantityError(QUANTITY_FORMAT_MESSAGE)
    if len(whole) + len(frac) > MAX_DIGITS:
        raise QuantityError(f"must have at most {MAX_DIGITS} digits")
    number = Fraction(int(whole or "0")) + (
        Fraction(int(frac), 10 ** len(frac)) if frac else Fraction(0)
    )
    if sign == "-":
        number = -number
    suffix = text[match.end() :]
    if suffix in _BINARY:
        value, fmt = number * 1024 ** _BINARY[suffix], QuantityFormat.BINARY_SI
    elif suffix in _DECIMAL:
        value, fmt = number * Fraction(10) ** _DECIMAL[suffix], QuantityFormat.DECIMAL_SI
    else:
        exp = _EXPONENT.fullmatch(suffix)
        if exp is None:
            raise QuantityError(QUANTITY_FORMAT_MESSAGE)
        if len(exp.group(1).lstrip("+-")) > MAX_EXPONENT_DIGITS:
            raise QuantityError(f"must have an exponent of at most {MAX_EXPONENT_DIGITS} digits")
        value = number * Fraction(10) ** int(exp.group(1))
        fmt = QuantityFormat.DECIMAL_EXPONENT
    return Quantity(_round_up_to_nano(value), fmt)


def _round_up_to_nano(value: Fraction) -> Fraction:
    scaled = value / _NANO
    if scaled.denominator == 1:
        return value
    magnitude = -(-abs(scaled.numerator) // scaled.denominator)
    return Fraction(magnitude if value > 0 else -magnitude) * _NANO


def _strip_thousands(n: int) -> tuple[int, int]:
    """``n`` without its trailing groups of three zeros, and how many there were. The count
    is bounded by the factors of two in ``n`` (cheap to read off), so ``1e999`` costs one or a
    few divisions, not three hundred."""
    lo, hi = 0, ((n & -n).bit_length() - 1) // 3
    if hi and n % 1000**hi == 0:
        lo = hi
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if n % 1000**mid == 0:
            lo = mid
        else:
            hi = mid - 1
    return n // 1000**lo, lo


def _canonical(value: Fraction, fmt: QuantityFormat) -> str:
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    magnitude = abs(value)
    if fmt is QuantityFormat.BINARY_SI and (magnitude < 1024 or magnitude.denominator != 1):
        fmt = QuantityFormat.DECIMAL_SI
    if fmt is QuantityFormat.BINARY_SI:
        mantissa, exp = int(magnitude), 0
        while exp < 6 and mantissa % 1024 == 0:
            mantissa //= 1024
            exp += 1
        return f"{sign}{mantissa}{_BINARY_SUFFIX.get(exp, '')}"
    exp = -9
    scaled = magnitude * 10**9
    if scaled.denominator == 1:
        mantissa, thousands = _strip_thousands(scaled.numerator)
        scaled, exp = Fraction(mantissa), exp + 3 * thousands
    if fmt is QuantityFormat.DECIMAL_EXPONENT:
        suffix = f"e{exp}" if exp else ""
    else:
        suffix = _DECIMAL_SUFFIX.get(exp, f"e{exp}")
    return f"{sign}{int(scaled)}{suffix}"
