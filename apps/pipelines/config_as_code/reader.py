"""Typed reads from located nodes; every problem is recorded with its line, none raised.

Each section's schema uses these so that a file is checked completely and every
error is reported at once.
"""

import difflib
from collections.abc import Callable, Iterable
from typing import Any

from django.core.exceptions import ValidationError

from apps.pipelines.config_as_code.errors import ConfigError
from apps.pipelines.config_as_code.loader import Item, Mapping, Node, Scalar, Sequence
from apps.pipelines.environment import NOTHING, Environment


def describe(node: Node) -> str:
    if isinstance(node, Mapping):
        return "a mapping"
    if isinstance(node, Sequence):
        return "a list"
    value = node.value
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "text"
    return f"a {type(value).__name__}"


def suggest(word: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" Did you mean “{close[0]}”?" if close else ""


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def is_null(node: Node) -> bool:
    return isinstance(node, Scalar) and node.value is None


class Reader:
    def __init__(
        self, errors: list[ConfigError] | None = None, *, environment: Environment = NOTHING
    ) -> None:
        self.errors: list[ConfigError] = list(errors or [])
        # What a plan should say without refusing the file, one line each.
        self.warnings: list[str] = []
        # The server's environment variables the file may read (see apps/pipelines/environment.py).
        self.environment = environment

    def error(self, line: int, message: str) -> None:
        self.errors.append(ConfigError(line, message))

    def warning(self, line: int, message: str) -> None:
        self.warnings.append(f"! line {line}: {message}")

    def mapping(
        self,
        node: Node,
        *,
        what: str,
        keys: Iterable[str],
        required: Iterable[str] = (),
    ) -> dict[str, Item] | None:
        """The known, non-null entries of a mapping; unknown and missing keys are errors."""
        keys = tuple(keys)
        if not isinstance(node, Mapping):
            self.error(
                node.line, f"{_capital(what)} must be a mapping (key: value), not {describe(node)}."
            )
            return None
        known: dict[str, Item] = {}
        for key, item in node.items.items():
            if key not in keys:
                self.error(
                    item.key_line,
                    f"Unknown key “{key}” in {what}.{suggest(key, keys)}"
                    f" Allowed: {', '.join(keys)}.",
                )
            elif not is_null(item.value):
                known[key] = item
        for key in required:
            if key not in node.items:
                self.error(node.line, f"{_capital(what)} is missing the required key “{key}”.")
            elif key not in known:
                self.error(node.items[key].key_line, f"“{key}” needs a value.")
        return known

    def entries(self, item: Item) -> dict[str, Item]:
        """A mapping whose keys are the user's own (attributes, say), not ours."""
        if not isinstance(item.value, Mapping):
            self.error(
                item.value.line,
                f"“{item.key}” must be a mapping (key: value), not {describe(item.value)}.",
            )
            return {}
        return item.value.items

    def sequence(self, item: Item, *, what: str) -> list[Node]:
        if not isinstance(item.value, Sequence):
            self.error(
                item.value.line,
                f"“{item.key}” must be a list of {what}, not {describe(item.value)}"
                " (start each entry with “- ”).",
            )
            return []
        return item.value.items

    def text(
        self,
        item: Item,
        *,
        max_length: int | None = None,
        allow_empty: bool = False,
        check: Callable[[str], None] | None = None,
    ) -> str | None:
        node = item.value
        if not isinstance(node, Scalar) or not isinstance(node.value, str):
            hint = " (put it in quotes)" if isinstance(node, Scalar) else ""
            self.error(node.line, f"“{item.key}” must be text, not {describe(node)}{hint}.")
            return None
        value = node.value
        if not allow_empty and not value.strip():
            self.error(node.line, f"“{item.key}” must not be empty.")
            return None
        if max_length is not None and len(value) > max_length:
            self.error(node.line, f"“{item.key}” is longer than {max_length} characters.")
            return None
        if check is not None:
            try:
                check(value)
            except ValidationError as exc:
                self.error(node.line, f"“{item.key}”: {' '.join(exc.messages)}")
                return None
        return value

    def choice(self, item: Item, choices: Iterable[str]) -> str | None:
        choices = tuple(choices)
        value = self.text(item)
        if value is None:
            return None
        if value not in choices:
            self.error(
                item.value.line,
                f"Unknown {item.key} “{value}”; use one of {', '.join(choices)}."
                f"{suggest(value, choices)}",
            )
            return None
        return value

    def scalar(self, item: Item) -> Any:
        if not isinstance(item.value, Scalar):
            self.error(
                item.value.line, f"“{item.key}” must be a single value, not {describe(item.value)}."
            )
            return None
        return item.value.value

    def validated(self, line: int, check: Callable[[], Any]) -> Any:
        """Run a shared validator, turning its ValidationError into an error at ``line``."""
        try:
            return check()
        except ValidationError as exc:
            self.error(line, " ".join(exc.messages))
            return None
