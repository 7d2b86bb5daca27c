"""Plain builders for test data; they go through the services like users do."""

from itertools import count
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User

from apps.pipelines.models import NoStageRule, Pipeline, SpanRule, Stage
from apps.pipelines.services import (
    no_stage_rule_create,
    pipeline_create,
    span_rule_create,
    stage_create,
)
from apps.teams.models import EmailProof, Membership, Role, Team
from apps.teams.services import email_verification_record, team_create

PASSWORD = "correct-horse-battery"
_seq = count(1)


def make_user(username: str | None = None, **fields: Any) -> User:
    username = username or f"user{next(_seq)}"
    fields.setdefault("email", f"{username}@example.com")
    return get_user_model().objects.create_user(username=username, password=PASSWORD, **fields)


def verify_email(user: User) -> User:
    """The user's present address counts as verified, as if they had opened the link."""
    email_verification_record(user=user, proof=EmailProof.LINK)
    return user


def make_team(slug: str | None = None, *, owner: User | None = None) -> Team:
    slug = slug or f"team-{next(_seq)}"
    return team_create(slug=slug, name=slug.replace("-", " ").title(), owner=owner)


def add_member(team: Team, user: User, role: str = Role.EDITOR) -> Membership:
    return Membership.objects.create(team=team, user=user, role=role)


def make_pipeline(team: Team, slug: str | None = None, **fields: Any) -> Pipeline:
    slug = slug or f"pipeline-{next(_seq)}"
    fields.setdefault("name", slug.replace("-", " ").title())
    fields.setdefault("budget", {"p95": 2500})
    return pipeline_create(team=team, slug=slug, **fields)


def make_stage(pipeline: Pipeline, slug: str | None = None, **fields: Any) -> Stage:
    slug = slug or f"stage-{next(_seq)}"
    fields.setdefault("name", slug.replace("-", " ").title())
    fields.setdefault("budget_ms", 300)
    return stage_create(pipeline=pipeline, slug=slug, **fields)


def make_rule(stage: Stage, **fields: Any) -> SpanRule:
    if not any(fields.get(k) for k in ("span_name", "attributes", "span_kind", "service")):
        fields["span_name"] = f"{stage.slug}*"
    return span_rule_create(stage=stage, **fields)


def make_no_stage_rule(pipeline: Pipeline, **fields: Any) -> NoStageRule:
    return no_stage_rule_create(pipeline=pipeline, **fields)
