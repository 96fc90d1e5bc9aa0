"""The commands' range types (ptsl.cli.whole, ptsl.cli.real): a number in range is taken, any
other text is one line saying what is allowed, and the values each names as ``outside`` (the
ones the entry-point test walks every numeric argument with) are refused."""

from __future__ import annotations

import argparse

import pytest

from ptsl.cli import real, whole

KINDS = {"whole(1)": whole(1), "whole(0, 5)": whole(0, 5), "real(0)": real(0),
         "real(0, 1)": real(0, 1), "real(0, 1, inclusive)": real(0, 1, inclusive=True)}


def test_a_number_in_range_is_taken():
    assert whole(1)("3") == 3 and whole(0, 5)("5") == 5 and whole(0, 5)("0") == 0
    assert real(0)("0.5") == 0.5 and real(0, 1)("0.999") == 0.999
    assert real(0, 1, inclusive=True)("0") == 0.0 and real(0, 1, inclusive=True)("1") == 1.0


@pytest.mark.parametrize("kind, text, allowed", [
    ("whole(1)", "0", "a whole number >= 1"),
    ("whole(1)", "1.5", "a whole number >= 1"),
    ("whole(0, 5)", "6", "a whole number from 0 to 5"),
    ("real(0)", "nan", "a number above 0"),
    ("real(0)", "x", "a number above 0"),
    ("real(0, 1)", "1", "a number between 0 and 1, both excluded"),
    ("real(0, 1, inclusive)", "1.01", "a number from 0 to 1"),
])
def test_other_text_is_one_line_saying_what_is_allowed(kind, text, allowed):
    with pytest.raises(argparse.ArgumentTypeError) as err:
        KINDS[kind](text)
    assert str(err.value) == f"{text!r}; allowed: {allowed}"


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_outside_values_are_refused(kind):
    assert len(KINDS[kind].outside) == (1 if kind in ("whole(1)", "real(0)") else 2)
    for text in KINDS[kind].outside:
        with pytest.raises(argparse.ArgumentTypeError):
            KINDS[kind](text)
