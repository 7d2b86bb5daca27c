r"""Span-name patterns: a glob or a regular expression, compiled once into a name test.

Every pattern a team writes against span names (a span rule's name, a pipeline's root
span) is compiled here, for the checks on save and for analysis alike. Patterns run on
RE2, whose matching time grows linearly with the name whatever the pattern: on a
backtracking engine ``^(a+)+$`` takes hours on a name of 40 characters, inside a pass
that analyses every team's traces.

- glob: matches the whole name, case sensitive; ``*`` is any run of characters, dots
  included, ``?`` one character, ``[abc]`` or ``[a-z]`` one character of the set and
  ``[!abc]`` one outside it; an unclosed ``[`` and every other character stand for
  themselves (the rules of Python's ``fnmatch.fnmatchcase``).
- regex: RE2 syntax (https://github.com/google/re2/wiki/Syntax), found anywhere in the
  name (anchor it with ``^...$`` to pin the whole name). Unlike Python's ``re`` there are
  no backreferences, lookaround, atomic groups or possessive quantifiers; ``\d``, ``\w``,
  ``\s`` and ``\b`` are ASCII only; ``$`` is the very end of the name and ``{,n}`` is
  literal text (write ``{0,n}``). Python's ``\Z`` is read as RE2's ``\z``.

Bounds, which together bound the cost of one test: a pattern has at most
``MAX_PATTERN_LENGTH`` characters and compiles to at most ``MAX_PROGRAM_SIZE`` RE2
instructions; a name is matched on its first ``MAX_NAME_LENGTH`` characters.

A pattern that cannot run (stored before these checks existed) never matches anything:
``NamePattern.problem`` says why, and ``name_test`` logs it once per process.
"""

import functools
import glob as globbing
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass

import re2
from re2 import _re2

logger = logging.getLogger(__name__)

GLOB = "glob"
REGEX = "regex"
MAX_PATTERN_LENGTH = 500  # SpanRule.span_name; a root span glob has 200
MAX_NAME_LENGTH = 500  # as much of a root span's name as a trace keeps
MAX_PROGRAM_SIZE = 1_000
# Per compiled pattern, program and DFA caches together. A pattern that outgrows its
# DFA cache is still matched in linear time, on a slower engine.
MAX_MEMORY = 2 << 20
SYNTAX = "(RE2 syntax)"

NameTest = Callable[[str], bool]


@dataclass(frozen=True)
class NamePattern:
    test: NameTest
    problem: str | None = None  # why the pattern never matches; None when it compiled


def _never(name: str) -> bool:
    return False


def _options() -> re2.Options:
    options = re2.Options()
    options.max_mem = MAX_MEMORY
    options.never_capture = True  # a test needs yes or no, not groups
    options.log_errors = False  # a bad pattern is its author's error, not the server's
    return options


_OPTIONS = _options()
_ANCHOR = {GLOB: _re2.RE2.Anchor.ANCHOR_BOTH, REGEX: _re2.RE2.Anchor.UNANCHORED}
_NOTHING = r"[^\x00-\x{10FFFF}]"
_ESCAPE = re.compile(r"\\(.)", re.DOTALL)


def _literal(char: str) -> str:
    if not char.isascii() or char.isalnum():
        return char
    return f"\\x{{{ord(char):x}}}"


def exact_glob(name: str, *, max_length: int = MAX_PATTERN_LENGTH) -> str:
    """A glob matching exactly ``name``; one too long for ``max_length`` keeps the start of
    the name and ends in ``*``."""
    escaped = globbing.escape(name)
    if len(escaped) <= max_length:
        return escaped
    cut = max_length - 1
    while len(globbing.escape(name[:cut])) > max_length - 1:
        cut -= 1
    return globbing.escape(name[:cut]) + "*"


def _class_end(glob: str, start: int) -> int:
    """Where the ``]`` closing a class opened just before ``start`` is, or -1.

    A ``]`` first in the class (after any ``!``) is a member, not the end.
    """
    end = start
    if end < len(glob) and glob[end] == "!":
        end += 1
    if end < len(glob) and glob[end] == "]":
        end += 1
    return glob.find("]", end)


def _char_class(body: str) -> str:
    negated = body.startswith("!")
    if negated:
        body = body[1:]
    members = []
    index = 0
    while index < len(body):
        if index + 2 < len(body) and body[index + 1] == "-":
            low, high = body[index], body[index + 2]
            if low <= high:  # fnmatch drops a reversed range such as z-a
                members.append(f"{_literal(low)}-{_literal(high)}")
            index += 3
        else:
            members.append(_literal(body[index]))
            index += 1
    if not members:
        return "." if negated else _NOTHING
    return f"[{'^' if negated else ''}{''.join(members)}]"


def glob_to_regex(glob: str) -> str:
    """An RE2 expression that, anchored at both ends, matches what the glob matches."""
    parts = ["(?s)"]
    index = 0
    while index < len(glob):
        char = glob[index]
        index += 1
        if char == "*":
            if parts[-1] != ".*":
                parts.append(".*")
        elif char == "?":
            parts.append(".")
        elif char == "[" and (end := _class_end(glob, index)) >= 0:
            parts.append(_char_class(glob[index:end]))
            index = end + 1
        else:
            parts.append(_literal(char))
    return "".join(parts)


def _python_end_of_text(pattern: str) -> str:
    # Patterns were once checked by Python's re, which spells the end of the text \Z.
    return _ESCAPE.sub(lambda m: r"\z" if m[1] == "Z" else m[0], pattern)


_GROUPS = {
    "(?=": "lookahead assertions are not supported",
    "(?!": "lookahead assertions are not supported",
    "(?<=": "lookbehind assertions are not supported",
    "(?<!": "lookbehind assertions are not supported",
    "(?>": "atomic groups are not supported",
    "(?#": "comments “(?#…)” are not supported",
    "(?(": "conditional groups are not supported",
    "(?|": "branch reset groups are not supported",
}


def _explain(error: str, pattern: str) -> str:
    """RE2's error (“code: fragment”) as a phrase that names the construct."""
    code, _, part = error.partition(": ")
    if code == "invalid escape sequence":
        if re.fullmatch(r"\\[1-9]", part):
            return f"backreferences are not supported {SYNTAX}"
        if part in (r"\u", r"\U", r"\N"):
            return f"“{part}” is not supported; write a code point as \\x{{…}} {SYNTAX}"
        return f"the escape “{part}” is not supported {SYNTAX}"
    if code == "invalid perl operator":
        if part in _GROUPS:
            return f"{_GROUPS[part]} {SYNTAX}"
        if part == "(?P" and "(?P=" in pattern:
            return f"backreferences are not supported {SYNTAX}"
        return f"the group “{part}” is not supported; flags are i, m, s and U {SYNTAX}"
    if code == "bad repetition operator":
        if part.endswith("+"):
            return f"possessive quantifiers such as “{part}” are not supported {SYNTAX}"
        return f"“{part}” repeats a repetition {SYNTAX}"
    phrases = {
        "invalid repetition size": f"the repetition “{part}” is out of range; counts go"
        " up to 1000, nested counts multiplied",
        "missing ]": f"“{part}” has no closing “]”",
        "missing )": f"“{part}” has no closing “)”",
        "unexpected )": "a “)” has no opening “(”",
        "trailing \\": "the pattern ends in a lone backslash",
        "no argument for repetition operator": f"“{part}” has nothing to repeat",
        "invalid character class": f"unknown character class “{part}”",
        "invalid character class range": f"invalid character class or range “{part}”",
        "invalid named capture group": f"invalid group name in “{part}”",
        "invalid UTF-8": "the pattern is not valid Unicode text",
    }
    return f"{phrases.get(code, error)} {SYNTAX}"


def _runner(match: Callable[..., list[tuple[int, int]]], anchor: object) -> NameTest:
    # The binding's Match, not re2's re-like wrapper: the wrapper maps every match back
    # to str offsets, several times the cost of a yes-or-no answer.
    def test(name: str) -> bool:
        text = name[:MAX_NAME_LENGTH].encode("utf-8", "surrogatepass")
        return match(anchor, text, 0, len(text))[0][0] >= 0

    return test


def _glob_shortcut(glob: str) -> NameTest | None:
    # The commonest globs, a plain name or a plain prefix, need no regular expression.
    stem = glob.removesuffix("*")
    if any(char in stem for char in "*?["):
        return None
    if stem == glob:
        return lambda name: name[:MAX_NAME_LENGTH] == glob
    return lambda name: name.startswith(stem)


@functools.lru_cache(maxsize=256)
def name_pattern(*, pattern: str, kind: str) -> NamePattern:
    """Compile ``pattern`` as a glob or a regex; a pattern that cannot run never matches."""
    if kind not in _ANCHOR:
        raise ValueError(f"Unknown name match {kind!r}.")
    if len(pattern) > MAX_PATTERN_LENGTH:
        return NamePattern(_never, f"it is longer than {MAX_PATTERN_LENGTH} characters")
    expression = glob_to_regex(pattern) if kind == GLOB else _python_end_of_text(pattern)
    regexp = _re2.RE2(expression.encode("utf-8", "surrogatepass"), _OPTIONS)
    if not regexp.ok():
        return NamePattern(_never, _explain(regexp.error().decode(errors="replace"), pattern))
    size = regexp.ProgramSize()
    if size > MAX_PROGRAM_SIZE:
        return NamePattern(
            _never,
            f"it is too complex: it compiles to {size} RE2 instructions, more than"
            f" {MAX_PROGRAM_SIZE} (large repetition counts and classes such as \\pL cost most)",
        )
    shortcut = _glob_shortcut(pattern) if kind == GLOB else None
    return NamePattern(shortcut or _runner(regexp.Match, _ANCHOR[kind]))


@functools.lru_cache(maxsize=1024)
def _report(pattern: str, kind: str, problem: str) -> None:
    # Cached, so each broken pattern is logged once, not on every analysis pass.
    logger.warning("The span-name %s %r never matches: %s.", kind, pattern, problem)


def name_test(*, pattern: str, kind: str) -> NameTest:
    """The test analysis applies to span names; a broken pattern is logged and never matches."""
    compiled = name_pattern(pattern=pattern, kind=kind)
    if compiled.problem is not None:
        _report(pattern, kind, compiled.problem)
    return compiled.test
