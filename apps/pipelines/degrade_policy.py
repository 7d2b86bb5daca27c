"""A stage's ``degrade`` policy: which of the run-time client's levers may act on the
stage, and their settings. The server sends it in the runtime document; the client
takes it as the default of each lever (``docs/runtime.md``), so a team can turn a
lever off or move a first-token timeout without deploying its application.

The one validator of the policy: the model, the API and the configuration file all
call ``degrade_policy_clean``.
"""

from typing import Any

from django.core.exceptions import ValidationError

LEVERS = ("skip", "fallback", "hedge", "cap")
KEYS = ("levers", "first_token_ms", "hedge_after", "cap_ms")
MAX_MS = 600_000  # ten minutes: past that no request is waiting
# The percentiles a runtime document observes, which a hedge can wait for.
HEDGE_PERCENTILES = ("p50", "p95", "p99")


def _ms(value: Any, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_MS:
        raise ValidationError(f"{key}: whole milliseconds from 1 to {MAX_MS}.")
    return value


def degrade_policy_clean(value: Any) -> dict[str, Any]:
    """The policy in its stored form (keys in ``KEYS`` order, only those given); raises
    ``ValidationError`` naming the key that is wrong."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValidationError("A degrade policy is a mapping of levers, first_token_ms, …")
    unknown = [str(key)[:40] for key in value if key not in KEYS]
    if unknown:
        raise ValidationError(f"Unknown key {', '.join(sorted(unknown))}: use {', '.join(KEYS)}.")
    clean: dict[str, Any] = {}
    if "levers" in value:
        levers = value["levers"]
        if not isinstance(levers, list) or not all(isinstance(lever, str) for lever in levers):
            raise ValidationError(f"levers: a list of {', '.join(LEVERS)} (empty: none acts).")
        wrong = sorted({lever[:40] for lever in levers if lever not in LEVERS})
        if wrong:
            raise ValidationError(f"levers: no lever {', '.join(wrong)}; use {', '.join(LEVERS)}.")
        clean["levers"] = [lever for lever in LEVERS if lever in levers]
    if "first_token_ms" in value:
        clean["first_token_ms"] = _ms(value["first_token_ms"], "first_token_ms")
    if "hedge_after" in value:
        after = value["hedge_after"]
        if isinstance(after, str):
            if after not in HEDGE_PERCENTILES:
                raise ValidationError(
                    f"hedge_after: one of {', '.join(HEDGE_PERCENTILES)}, or milliseconds."
                )
            clean["hedge_after"] = after
        else:
            clean["hedge_after"] = _ms(after, "hedge_after")
    if "cap_ms" in value:
        clean["cap_ms"] = _ms(value["cap_ms"], "cap_ms")
    return clean


def degrade_policy_validator(value: Any) -> None:
    degrade_policy_clean(value)


def degrade_policy_text(policy: dict[str, Any]) -> str:
    """One line for a plan or a page: ``levers skip, cap; first token 800 ms``."""
    if not policy:
        return "(none)"
    parts = []
    if "levers" in policy:
        parts.append(f"levers {', '.join(policy['levers']) or 'none'}")
    if "first_token_ms" in policy:
        parts.append(f"first token {policy['first_token_ms']} ms")
    if "hedge_after" in policy:
        after = policy["hedge_after"]
        parts.append(f"hedge after {after}{'' if isinstance(after, str) else ' ms'}")
    if "cap_ms" in policy:
        parts.append(f"cap {policy['cap_ms']} ms")
    return "; ".join(parts)
