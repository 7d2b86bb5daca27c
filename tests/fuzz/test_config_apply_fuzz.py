"""Applying any valid file either changes the team or raises the apply's own errors; an
applied file exported and applied again changes nothing."""

from typing import Any

import pytest
import yaml
from hypothesis import event, given, settings
from hypothesis import strategies as st

from apps.pipelines.config_as_code import (
    ConfigApplyError,
    ConfigInvalid,
    Document,
    config_apply,
    config_export,
    parse_document,
)
from apps.pipelines.environment import COMMAND_LINE
from apps.teams.models import Team
from tests.fuzz.config_documents import SECRET_ENV, full_documents, pipelines_documents
from tests.fuzz.conftest import FUZZ
from tests.fuzz.mutations import mutated

pytestmark = [pytest.mark.fuzz, pytest.mark.django_db]

TEAM = "fuzz-team"
# Each example plans and writes in the database: fewer of them keep the suite quick.
APPLY = settings(FUZZ, max_examples=max(FUZZ.max_examples // 2, 1))


@pytest.fixture(autouse=True)
def _webhook_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SECRET_ENV, "whsec_" + "QUJD" * 8)


def _text(document: Any) -> str:
    return yaml.safe_dump(document, allow_unicode=True, sort_keys=False)


def _read(text: str) -> Document:
    """As ``manage.py budgets apply`` reads a file (it creates teams): variables too."""
    return parse_document(text, environment=COMMAND_LINE)


def _export_changes_nothing() -> None:
    team = Team.objects.get(slug=TEAM)
    # The operator's export and a viewer's (URLs masked), read as the browser reads them.
    for exported in (config_export(team=team, masked=False), config_export(team=team)):
        again = config_apply(document=parse_document(exported), dry_run=True)
        assert again.changes == []


@APPLY
@given(pipelines_documents(TEAM), st.booleans())
def test_a_valid_file_applies_and_its_export_applies_as_no_change(
    document: dict[str, Any], prune: bool
) -> None:
    # Examples share the database: each file is applied over what the last one left.
    config_apply(document=_read(_text(document)), prune=prune, create_team=True)

    _export_changes_nothing()
    plan = config_apply(document=_read(_text(document)), prune=prune, dry_run=True)
    assert plan.changes == []


@APPLY
@given(mutated(full_documents().map(lambda d: {**d, "team": TEAM})), st.booleans())
def test_any_file_that_parses_applies_or_fails_with_its_own_error(
    document: Any, prune: bool
) -> None:
    try:
        parsed = _read(_text(document))
        config_apply(document=parsed, prune=prune, create_team=True)
    except (ConfigInvalid, ConfigApplyError) as exc:
        event(type(exc).__name__)
        return
    event("applied")
    _export_changes_nothing()


def test_the_highest_documented_objective_target_applies() -> None:
    text = (
        f"team: {TEAM}\npipelines:\n  - slug: p\n    name: P\n    budget: {{p95: 100}}\n"
        "    objective: {target: 99.999, threshold_ms: 4000}\n"
    )

    plan = config_apply(document=_read(text), create_team=True)

    assert plan.has_changes


@pytest.mark.parametrize(
    "line",
    [
        '    name: "RAG\\0chat"',
        '    description: "a\\0b"',
        '    match: {attributes: {"a\\0b": 1}}',
        '    match: {attributes: {a: "x\\0"}}',
        "    match: {attributes: {a: .nan}}",
        "    match: {attributes: {a: -.inf}}",
    ],
)
def test_what_postgresql_cannot_store_fails_the_apply_and_changes_nothing(line: str) -> None:
    text = f"team: {TEAM}\npipelines:\n  - slug: rag\n    budget: {{p95: 1}}\n{line}\n"
    if "name:" not in line:
        text += "    name: RAG\n"

    with pytest.raises(ConfigApplyError) as caught:
        config_apply(document=_read(text), create_team=True)

    assert caught.value.line is not None
    assert not Team.objects.filter(slug=TEAM).exists()


@pytest.mark.parametrize(
    "number", ["2.5e+50", "1e16", "-1.7976931348623157e+308", "-0.0", "1e-300"]
)
def test_a_file_with_a_decimal_attribute_applies_once(number: str) -> None:
    text = (
        f"team: {TEAM}\npipelines:\n  - slug: p\n    name: P\n    budget: {{p95: 100}}\n"
        f"    match: {{attributes: {{a: {number}}}}}\n"
    )
    config_apply(document=_read(text), create_team=True)

    again = config_apply(document=_read(text), dry_run=True)

    assert again.changes == []
