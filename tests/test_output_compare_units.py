"""How an io test's output is compared with the expected one (graders/verdicts.py outputs_match), per mode."""

from __future__ import annotations

import pytest

from graders.verdicts import outputs_match
from service.models import FloatTolerance

TOL = FloatTolerance(float_tol=1e-6)


@pytest.mark.parametrize(("got", "want", "compare", "match"), [
    ("1\n", "1\n", "exact", True),
    ("1\r\n2\r\n", "1\n2\n", "exact", True),  # Windows line ends are normalised in every mode
    ("1 \n", "1\n", "exact", False),
    ("1\n", "1", "exact", False),
    ("1  \n2\n\n\n", "1\n2", "lines", True),  # trailing spaces and trailing blank lines are ignored
    ("1\n\n2", "1\n2", "lines", False),  # a blank line inside is not
    (" 1", "1", "lines", False),  # nor a leading space
    ("1  \n2\n", "1\n2", None, True),  # no compare given: lines
    ("1   2\n3\t4", "1 2 3 4", "tokens", True),
    ("1 2", "2 1", "tokens", False),
    ("12", "1 2", "tokens", False),
    ("3.0000001 2\n", "3.0 2\n", TOL, True),
    ("3.001", "3.0", TOL, False),
    ("0.0000001", "0.0", TOL, True),  # absolute tolerance near zero
    ("nan", "nan", TOL, True),
    ("nan", "1.0", TOL, False),
    ("1 2", "1", TOL, False),  # a different number of tokens
    ("+007", "7", TOL, True),  # integers compare by value, as text
    ("-0", "0", TOL, True),
    ("7.0", "7", TOL, False),  # an expected integer must come back an integer
    ("123456700", "123456789", TOL, False),  # within 1e-6 relative, and a wrong count
    ("1e-7", "0", TOL, False),
    ("abc", "abc", TOL, True),
    ("abd", "abc", TOL, False),
    ("9" * 5000, "9" * 5000, TOL, True),
    ("9" * 4999 + "8", "9" * 5000, TOL, False),
])
def test_outputs_compare_as_their_mode_says(got, want, compare, match):
    assert outputs_match(got, want, compare) is match
