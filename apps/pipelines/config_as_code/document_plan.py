from apps.pipelines.config_as_code.document_schema import Document
from apps.pipelines.config_as_code.sections import SECTIONS
from apps.pipelines.config_as_code.steps import Plan, PlanOptions
from apps.teams.models import Team


def plan_document(*, team: Team | None, document: Document, options: PlanOptions) -> Plan:
    """What applying ``document`` would change, section by section; reads only."""
    plan = Plan()
    for section in SECTIONS:
        if section.key in document.sections:
            plan.extend(section.plan(team, document.sections[section.key], options))
    return plan
