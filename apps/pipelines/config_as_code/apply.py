"""Services: plan and apply a configuration file, all in one transaction or not at all."""

from django.core.exceptions import ValidationError
from django.db import DataError, IntegrityError, transaction

from apps.pipelines.config_as_code.document_plan import plan_document
from apps.pipelines.config_as_code.document_schema import Document, parse_document
from apps.pipelines.config_as_code.errors import ConfigApplyError, ConfigError, ConfigInvalid
from apps.pipelines.config_as_code.steps import Plan, PlanOptions, Step
from apps.pipelines.environment import environment_for_team
from apps.teams.models import Team
from apps.teams.services import team_create


class PlanChanged(Exception):
    """The database changed since the preview: applying now would do something else."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        super().__init__("The configuration changed since the preview.")


def _messages(exc: ValidationError) -> str:
    if hasattr(exc, "error_dict"):
        return "; ".join(
            f"{field}: {' '.join(messages)}" for field, messages in exc.message_dict.items()
        )
    return " ".join(exc.messages)


def _run(step: Step, team: Team) -> None:
    if step.run is None:
        return
    label = step.lines[0] if step.lines else "reorder stages"
    try:
        step.run(team)
    except ValidationError as exc:
        raise ConfigApplyError(f"Cannot apply “{label}”: {_messages(exc)}", line=step.line) from exc
    # DataError: text the database cannot hold, such as a double-quoted "\0" (NUL).
    except (IntegrityError, DataError) as exc:
        raise ConfigApplyError(
            f"Cannot apply “{label}”: the database refused it ({exc}).".replace("\n", " "),
            line=step.line,
        ) from exc


def config_apply(
    *,
    document: Document,
    prune: bool = False,
    dry_run: bool = False,
    create_team: bool = False,
    expected_digest: str | None = None,
) -> Plan:
    """Bring the team's configuration to ``document``; return the plan that was (or would be) run.

    The plan is made and run inside one transaction with the team row locked, so
    concurrent applies to one team queue up and a failure anywhere changes nothing.
    With ``expected_digest`` (from a preview), raise PlanChanged instead of applying
    a plan that differs from the one the user saw.
    """
    with transaction.atomic():
        team = Team.objects.select_for_update().filter(slug=document.team).first()
        if team is None and not create_team:
            raise ConfigApplyError(
                f"Unknown team “{document.team}”. Create it first (or pass --create-team).",
                line=document.team_line,
            )
        plan = plan_document(team=team, document=document, options=PlanOptions(prune=prune))
        if team is None:
            plan.steps.insert(0, Step([f"+ team {document.team}"], None, document.team_line))
        if expected_digest is not None and plan.digest() != expected_digest:
            raise PlanChanged(plan)
        if dry_run:
            return plan
        if team is None:
            team = team_create(slug=document.team, name=document.team)
        for step in plan.steps:
            _run(step, team)
    return plan


def config_parse_for_team(*, team: Team, text: str) -> Document:
    """Validate a file uploaded on a team's page; it must name that team. It reads only
    the environment variables the operator allowed for that team."""
    document = parse_document(text, environment=environment_for_team(team_slug=team.slug))
    if document.team != team.slug:
        raise ConfigInvalid(
            [
                ConfigError(
                    document.team_line,
                    f"This file is for team “{document.team}”, not “{team.slug}”: "
                    "cannot apply another team's file here.",
                )
            ]
        )
    return document


def config_preview(*, team: Team, text: str, prune: bool) -> Plan:
    document = config_parse_for_team(team=team, text=text)
    return config_apply(document=document, prune=prune, dry_run=True)


def config_apply_text(*, team: Team, text: str, prune: bool, expected_digest: str) -> Plan:
    document = config_parse_for_team(team=team, text=text)
    return config_apply(document=document, prune=prune, expected_digest=expected_digest)
