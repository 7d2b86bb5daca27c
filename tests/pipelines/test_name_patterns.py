import fnmatch
import logging
import time

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from apps.pipelines.name_patterns import (
    GLOB,
    MAX_PATTERN_LENGTH,
    REGEX,
    name_pattern,
    name_test,
)

CATASTROPHIC = "^(a+)+$"
ALMOST_A_MATCH = "a" * 41 + "!"
GLOB_TEXT = st.text(alphabet="ab.*?[]!-^\\+(é\n", max_size=8)


def test_a_catastrophic_regex_answers_in_linear_time() -> None:
    test = name_test(pattern=CATASTROPHIC, kind=REGEX)
    started = time.process_time()
    assert not test(ALMOST_A_MATCH)
    assert time.process_time() - started < 0.1
    assert test("a" * 41)


@given(glob=GLOB_TEXT, name=st.text(alphabet="ab.?[]!-^\\+(é\n", max_size=6))
@example(glob="[!]]x", name="ax")
@example(glob="[b-a-c]", name="-")
@example(glob="a[b", name="a[b")
def test_a_glob_matches_exactly_what_fnmatchcase_matches(glob: str, name: str) -> None:
    assert name_pattern(pattern=glob, kind=GLOB).test(name) is fnmatch.fnmatchcase(name, glob)


@pytest.mark.parametrize(
    ("pattern", "phrase"),
    [
        (r"(a)\1", "backreferences are not supported (RE2 syntax)"),
        ("(?P<x>a)(?P=x)", "backreferences are not supported (RE2 syntax)"),
        ("(?=x)", "lookahead assertions are not supported (RE2 syntax)"),
        ("a(?!x)", "lookahead assertions are not supported (RE2 syntax)"),
        ("(?<=x)a", "lookbehind assertions are not supported (RE2 syntax)"),
        ("(?>a)", "atomic groups are not supported (RE2 syntax)"),
        ("a++", "possessive quantifiers such as “++” are not supported (RE2 syntax)"),
        ("(?x)a b", "the group “(?x” is not supported; flags are i, m, s and U (RE2 syntax)"),
        (r"caf\u00e9", "write a code point as \\x{…}"),
        ("a{1001}", "the repetition “{1001}” is out of range"),
        ("chat(", "“chat(” has no closing “)” (RE2 syntax)"),
        ("[a-z]{999}", "it is too complex: it compiles to"),
        ("a" * (MAX_PATTERN_LENGTH + 1), "it is longer than 500 characters"),
    ],
)
def test_a_regex_re2_cannot_run_never_matches_and_says_why(pattern: str, phrase: str) -> None:
    compiled = name_pattern(pattern=pattern, kind=REGEX)
    assert compiled.problem is not None
    assert phrase in compiled.problem
    assert not compiled.test("a" * 1000)


def test_pythons_end_of_text_escape_still_means_the_end() -> None:
    test = name_pattern(pattern=r"^chat\Z", kind=REGEX).test
    assert test("chat")
    assert not test("chat\n")
    assert name_pattern(pattern=r"\\Z", kind=REGEX).test("a\\Z")


def test_a_too_complex_glob_never_matches() -> None:
    compiled = name_pattern(pattern="?" * 200, kind=GLOB)
    assert compiled.problem is not None
    assert "too complex" in compiled.problem
    assert not compiled.test("a" * 200)


def test_a_name_is_matched_on_its_first_500_characters() -> None:
    long_name = "a" * 500 + "b"
    assert not name_pattern(pattern="b$", kind=REGEX).test(long_name)
    assert not name_pattern(pattern="*b", kind=GLOB).test(long_name)
    assert name_pattern(pattern="a*", kind=GLOB).test(long_name)
    assert name_pattern(pattern="^a{500}$", kind=REGEX).test(long_name)


def test_a_broken_pattern_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="apps.pipelines.name_patterns"):
        for _ in range(3):
            assert not name_test(pattern=r"(logged)\1", kind=REGEX)("loggedlogged")
    assert [r.getMessage() for r in caplog.records] == [
        "The span-name regex '(logged)\\\\1' never matches:"
        " backreferences are not supported (RE2 syntax)."
    ]
