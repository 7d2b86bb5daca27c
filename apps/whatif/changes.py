"""The changes a scenario combines, checked against a pipeline's stages.

Written two ways that say the same: the API's objects
(``{"stage": "retrieval", "op": "cache", "hit_ratio": 0.4, "hit_ms": 20}``) and the
page's compact form, one per ``change`` query parameter, so a scenario is a URL
(``retrieval:cache:0.4:20``, ``history:parallel:rewrite``, ``tool:cap:budget``).

Two changes are the run-time client's levers (``docs/runtime.md``): ``hedge`` sends a
second attempt once the stage has run ``ms`` and keeps the first answer
(``retrieval:hedge:300``); ``fallback`` gives up on the stage after ``ms`` and takes a
fallback of ``fallback_ms`` instead (``ttft:fallback:800:300``).
"""

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError

SCALE, SHIFT, CACHE, PARALLEL, REMOVE, CAP = "scale", "shift", "cache", "parallel", "remove", "cap"
HEDGE, FALLBACK = "hedge", "fallback"
OPS = (SCALE, SHIFT, CACHE, PARALLEL, REMOVE, CAP, HEDGE, FALLBACK)
BUDGET = "budget"
MAX_CHANGES = 20
MAX_FACTOR = 100.0
MAX_MS = 600_000.0  # ten minutes: beyond any request a budget is set for


@dataclass(frozen=True)
class Change:
    """One change to one stage. ``ms`` is the shift, the cap (None: cap at the budget),
    the hedge's delay or the fallback's timeout; ``fallback_ms`` the fallback's time."""

    stage: str
    op: str
    factor: float | None = None
    ms: float | None = None
    hit_ratio: float | None = None
    hit_ms: float | None = None
    with_stage: str | None = None
    fallback_ms: float | None = None

    def as_data(self) -> dict[str, Any]:
        """The API's form; a cap at the budget says ``"at": "budget"``."""
        data: dict[str, Any] = {"stage": self.stage, "op": self.op}
        if self.op == SCALE:
            data["factor"] = self.factor
        elif self.op == SHIFT:
            data["ms"] = self.ms
        elif self.op == CACHE:
            data.update(hit_ratio=self.hit_ratio, hit_ms=self.hit_ms)
        elif self.op == PARALLEL:
            data["with"] = self.with_stage
        elif self.op == CAP:
            data.update({"ms": self.ms} if self.ms is not None else {"at": BUDGET})
        elif self.op == HEDGE:
            data["ms"] = self.ms
        elif self.op == FALLBACK:
            data.update(ms=self.ms, fallback_ms=self.fallback_ms)
        return data

    def as_text(self) -> str:
        """The compact form: ``stage:op[:argument…]``."""
        table: dict[str, list[Any]] = {
            SCALE: [self.factor],
            SHIFT: [self.ms],
            CACHE: [self.hit_ratio, self.hit_ms],
            PARALLEL: [self.with_stage],
            REMOVE: [],
            CAP: [BUDGET if self.ms is None else self.ms],
            HEDGE: [self.ms],
            FALLBACK: [self.ms, self.fallback_ms],
        }
        arguments = table[self.op]
        return ":".join([self.stage, self.op, *(_text(a) for a in arguments)])

    def describe(self, names: Mapping[str, str]) -> str:
        name = names.get(self.stage, self.stage)
        if self.op == SCALE:
            return f"{name} × {_text(self.factor)}"  # noqa: RUF001 - the sign, as shown
        if self.op == SHIFT:
            assert self.ms is not None
            sign = "+" if self.ms >= 0 else "−"  # noqa: RUF001 - the minus sign, as shown
            return f"{name} {sign}{_text(abs(self.ms))} ms"
        if self.op == CACHE:
            assert self.hit_ratio is not None
            hits = _text(round(self.hit_ratio * 100, 1))
            return f"{name} cached: {hits} % hits of {_text(self.hit_ms)} ms"
        if self.op == PARALLEL:
            return f"{name} concurrent with {names.get(self.with_stage or '', self.with_stage)}"
        if self.op == REMOVE:
            return f"{name} removed"
        if self.op == HEDGE:
            return f"{name} hedged after {_text(self.ms)} ms"
        if self.op == FALLBACK:
            return (
                f"{name} falls back after {_text(self.ms)} ms to one of "
                f"{_text(self.fallback_ms)} ms"
            )
        return f"{name} capped at {'its budget' if self.ms is None else _text(self.ms) + ' ms'}"


def _text(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _number(data: Mapping[str, Any], key: str, *, low: float, high: float, where: str) -> float:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValidationError(f"{where}: “{key}” must be a number.")
    try:
        number = float(value)
    except ValueError:
        raise ValidationError(f"{where}: “{key}” must be a number.") from None
    if not math.isfinite(number) or not low <= number <= high:
        raise ValidationError(f"{where}: “{key}” must be between {_text(low)} and {_text(high)}.")
    return number


def change_from_data(data: Any, *, stages: Mapping[str, Any], where: str = "change") -> Change:
    """One change from the API's object; ``stages`` maps the pipeline's slugs to stages
    (a stage capped at its budget must have one)."""
    if not isinstance(data, Mapping):
        raise ValidationError(f"{where}: give an object with “stage” and “op”.")
    stage, op = data.get("stage"), data.get("op")
    if not isinstance(stage, str) or stage not in stages:
        known = ", ".join(stages) or "none"
        raise ValidationError(f"{where}: “stage” must be one of this pipeline's stages ({known}).")
    if op not in OPS:
        raise ValidationError(f"{where}: “op” must be one of {', '.join(OPS)}.")
    allowed = {"stage", "op"} | {
        SCALE: {"factor"},
        SHIFT: {"ms"},
        CACHE: {"hit_ratio", "hit_ms"},
        PARALLEL: {"with"},
        REMOVE: set(),
        CAP: {"ms", "at"},
        HEDGE: {"ms"},
        FALLBACK: {"ms", "fallback_ms"},
    }[op]
    unknown = sorted(str(key) for key in data if key not in allowed)
    if unknown:
        raise ValidationError(f"{where}: “{op}” takes no “{unknown[0]}”.")
    if op == SCALE:
        factor = _number(data, "factor", low=0, high=MAX_FACTOR, where=where)
        return Change(stage, op, factor=factor)
    if op == SHIFT:
        return Change(stage, op, ms=_number(data, "ms", low=-MAX_MS, high=MAX_MS, where=where))
    if op == CACHE:
        ratio = _number(data, "hit_ratio", low=0, high=1, where=where)
        hit_ms = _number(data, "hit_ms", low=0, high=MAX_MS, where=where)
        return Change(stage, op, hit_ratio=ratio, hit_ms=hit_ms)
    if op == PARALLEL:
        other = data.get("with")
        if not isinstance(other, str) or other not in stages:
            raise ValidationError(f"{where}: “with” must be another stage of this pipeline.")
        return Change(stage, op, with_stage=other)
    if op == CAP:
        return _cap(data, stage, stages, where)
    if op == HEDGE:
        return Change(stage, op, ms=_number(data, "ms", low=1, high=MAX_MS, where=where))
    if op == FALLBACK:
        after = _number(data, "ms", low=1, high=MAX_MS, where=where)
        instead = _number(data, "fallback_ms", low=0, high=MAX_MS, where=where)
        return Change(stage, op, ms=after, fallback_ms=instead)
    return Change(stage, op)


def _cap(data: Mapping[str, Any], stage: str, stages: Mapping[str, Any], where: str) -> Change:
    if ("ms" in data) == ("at" in data):
        raise ValidationError(f"{where}: a cap takes “ms” or “at”: “budget”, one of them.")
    if "at" in data:
        if data["at"] != BUDGET:
            raise ValidationError(f"{where}: “at” can only be “budget”.")
        if getattr(stages[stage], "budget_ms", None) is None:
            raise ValidationError(f"{where}: stage “{stage}” has no budget to cap it at.")
        return Change(stage, CAP)
    return Change(stage, CAP, ms=_number(data, "ms", low=1, high=MAX_MS, where=where))


def changes_from_data(data: Any, *, stages: Mapping[str, Any]) -> list[Change]:
    if not isinstance(data, list):
        raise ValidationError("“changes” must be a list.")
    if len(data) > MAX_CHANGES:
        raise ValidationError(f"At most {MAX_CHANGES} changes at once.")
    return [
        change_from_data(item, stages=stages, where=f"change {number}")
        for number, item in enumerate(data, start=1)
    ]


def change_texts(changes: Sequence[Mapping[str, Any]]) -> list[str]:
    """Changes as the API writes them, in the compact form of the what-if page's URL."""
    return [_change_of_data(data).as_text() for data in changes]


def _change_of_data(data: Mapping[str, Any]) -> Change:
    # Stored changes are checked already: read as they are, without the stages.
    cap_at_budget = data.get("op") == "cap" and data.get("at") == "budget"
    return Change(
        stage=data["stage"],
        op=data["op"],
        factor=data.get("factor"),
        ms=None if cap_at_budget else data.get("ms"),
        hit_ratio=data.get("hit_ratio"),
        hit_ms=data.get("hit_ms"),
        with_stage=data.get("with"),
        fallback_ms=data.get("fallback_ms"),
    )


_ARGUMENTS = {
    SCALE: ["factor"],
    SHIFT: ["ms"],
    CACHE: ["hit_ratio", "hit_ms"],
    PARALLEL: ["with"],
    REMOVE: [],
    CAP: ["ms"],
    HEDGE: ["ms"],
    FALLBACK: ["ms", "fallback_ms"],
}


def change_from_text(text: str, *, stages: Mapping[str, Any], where: str = "change") -> Change:
    """One change from its compact form, ``stage:op[:argument…]``."""
    parts = text.strip().split(":")
    if len(parts) < 2 or parts[1] not in OPS:
        raise ValidationError(f"{where}: write it as stage:op, e.g. rerank:remove.")
    stage, op, arguments = parts[0], parts[1], parts[2:]
    names = _ARGUMENTS[op]
    if len(arguments) != len(names):
        raise ValidationError(f"{where}: “{op}” takes {len(names)} value(s) after it.")
    data: dict[str, Any] = {"stage": stage, "op": op, **dict(zip(names, arguments, strict=True))}
    if op == CAP and data["ms"] == BUDGET:
        data = {"stage": stage, "op": op, "at": BUDGET}
    return change_from_data(data, stages=stages, where=where)


def changes_from_texts(texts: Iterable[str], *, stages: Mapping[str, Any]) -> list[Change]:
    chosen = [text for text in texts if text.strip()]
    if len(chosen) > MAX_CHANGES:
        raise ValidationError(f"At most {MAX_CHANGES} changes at once.")
    return [
        change_from_text(text, stages=stages, where=f"change {number}")
        for number, text in enumerate(chosen, start=1)
    ]
