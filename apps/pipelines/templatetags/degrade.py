from typing import Any

from django import template

from apps.pipelines.degrade_policy import degrade_policy_text

register = template.Library()


@register.filter
def degrade_policy(policy: dict[str, Any] | None) -> str:
    """A stage's policy in words for its pages. Without ``levers`` every lever acts, which
    the plan's one-line form leaves unsaid."""
    if not policy:
        return "every lever, with the stage's own figures (the default)"
    text = degrade_policy_text(policy)
    return text if "levers" in policy else f"every lever; {text}"
