"""YAML text to a tree of nodes that remember the line they start on.

``yaml.compose`` keeps each node's start mark; plain ``yaml.safe_load`` would
lose them, and errors could no longer point at the offending line.
"""

from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml.constructor import ConstructorError, SafeConstructor

from apps.pipelines.config_as_code.errors import ConfigError, ConfigInvalid

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# Anchors and aliases are allowed, but expanding them must stay bounded.
MAX_NODES = 200_000
MAX_DEPTH = 64


@dataclass
class Scalar:
    line: int
    value: Any


@dataclass
class Item:
    key: str
    key_line: int
    value: "Node"


@dataclass
class Mapping:
    line: int
    items: dict[str, Item] = field(default_factory=dict)


@dataclass
class Sequence:
    line: int
    items: list["Node"] = field(default_factory=list)


Node = Scalar | Mapping | Sequence


def _line(node: yaml.Node) -> int:
    return node.start_mark.line + 1


class _Converter:
    def __init__(self) -> None:
        self.constructor = SafeConstructor()
        self.errors: list[ConfigError] = []
        self.budget = MAX_NODES

    def convert(self, node: yaml.Node, depth: int = 0) -> Node:
        self.budget -= 1
        if self.budget < 0 or depth > MAX_DEPTH:
            raise ConfigInvalid(
                [ConfigError(_line(node), "The document is nested too deeply or too large.")]
            )
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node, depth)
        if isinstance(node, yaml.SequenceNode):
            return Sequence(_line(node), [self.convert(item, depth + 1) for item in node.value])
        try:
            value = self.constructor.construct_object(node, deep=True)
        except ConstructorError as exc:
            self.errors.append(ConfigError(_line(node), f"Cannot read this value: {exc.problem}."))
            value = None
        except ValueError as exc:
            self.errors.append(ConfigError(_line(node), f"Cannot read this value: {exc}."))
            value = None
        except (LookupError, AttributeError, TypeError):
            # SafeConstructor meets text that does not fit an explicit tag (an empty
            # ``!!bool`` or ``!!int``, a ``!!timestamp`` that is no date) with whatever
            # its parsing happens to raise.
            self.errors.append(ConfigError(_line(node), f"Cannot read this value as {node.tag}."))
            value = None
        return Scalar(_line(node), value)

    def _mapping(self, node: yaml.MappingNode, depth: int) -> Mapping:
        mapping = Mapping(_line(node))
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                self.errors.append(ConfigError(_line(key_node), "Keys must be plain text."))
                continue
            key = str(key_node.value)
            if key in mapping.items:
                first = mapping.items[key].key_line
                self.errors.append(
                    ConfigError(_line(key_node), f"Duplicate key “{key}” (first at line {first}).")
                )
                continue
            mapping.items[key] = Item(key, _line(key_node), self.convert(value_node, depth + 1))
        return mapping


def _yaml_error(exc: yaml.YAMLError) -> ConfigError:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    line = mark.line + 1 if mark is not None else 1
    parts = [getattr(exc, "context", None), getattr(exc, "problem", None)]
    reason = ", ".join(p for p in parts if p) or str(exc)
    return ConfigError(line, f"Invalid YAML: {reason}.")


def load_yaml(text: str) -> tuple[Node, list[ConfigError]]:
    """Parse one YAML document into nodes, with the problems found on the way.

    Broken YAML raises ConfigInvalid at once; duplicate keys and unreadable values
    are returned so that validation can report them beside its own findings.
    """
    try:
        root = yaml.compose(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        raise ConfigInvalid([_yaml_error(exc)]) from None
    except UnicodeEncodeError as exc:
        # Lone surrogates: what undecodable bytes become on a stdin read with
        # surrogateescape (the POSIX locale). The parser wants UTF-8.
        line = text.count("\n", 0, exc.start) + 1
        raise ConfigInvalid([ConfigError(line, "The file is not valid UTF-8 text.")]) from None
    if root is None:
        raise ConfigInvalid([ConfigError(1, "The file is empty.")])
    converter = _Converter()
    tree = converter.convert(root)
    return tree, converter.errors
