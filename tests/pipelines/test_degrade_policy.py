"""A stage's degrade policy: one validator behind the API, the file and the model; the
runtime document carries it to the client."""

import io
import textwrap
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command

from apps.pipelines.config_as_code import ConfigInvalid, parse_document
from apps.pipelines.degrade_policy import degrade_policy_clean, degrade_policy_text
from apps.pipelines.models import Stage
from apps.teams.services import metrics_token_create
from tests.builders.api import ApiWorld, db_state, error_of, token_client
from tests.builders.configuration import make_pipeline, make_stage
from tests.conftest import TeamWorld

RETRIEVAL = "/api/v1/pipelines/rag-chat/stages/retrieval/"


def test_the_policy_is_stored_in_one_order_and_says_itself() -> None:
    clean = degrade_policy_clean(
        {"cap_ms": 250, "levers": ["cap", "skip"], "hedge_after": "p95", "first_token_ms": 800}
    )
    assert list(clean) == ["levers", "first_token_ms", "hedge_after", "cap_ms"]
    assert clean["levers"] == ["skip", "cap"]
    assert degrade_policy_text(clean) == (
        "levers skip, cap; first token 800 ms; hedge after p95; cap 250 ms"
    )
    assert degrade_policy_clean({"levers": []}) == {"levers": []}
    assert degrade_policy_text({}) == "(none)"
    assert degrade_policy_clean(None) == {}


@pytest.mark.parametrize(
    ("policy", "said"),
    [
        ("skip", "mapping"),
        ({"lever": ["skip"]}, "Unknown key lever"),
        ({"levers": "skip"}, "a list of"),
        ({"levers": ["skip", "retry"]}, "no lever retry"),
        ({"first_token_ms": 0}, "first_token_ms"),
        ({"first_token_ms": 600_001}, "first_token_ms"),
        ({"first_token_ms": True}, "first_token_ms"),
        ({"first_token_ms": 1.5}, "first_token_ms"),
        ({"hedge_after": "p42"}, "hedge_after"),
        ({"cap_ms": "250"}, "cap_ms"),
    ],
)
def test_a_wrong_policy_says_which_key(policy: object, said: str) -> None:
    with pytest.raises(ValidationError) as caught:
        degrade_policy_clean(policy)
    assert said in " ".join(caught.value.messages)


def test_the_api_sets_shows_and_refuses_policies(api: ApiWorld) -> None:
    owner = token_client(api.world.owner)
    answer = owner.patch(
        RETRIEVAL, {"degrade": {"levers": ["hedge"], "hedge_after": 300}}, format="json"
    )
    assert answer.status_code == 200, answer.content
    assert answer.json()["degrade"] == {"levers": ["hedge"], "hedge_after": 300}
    assert Stage.objects.get(pk=api.retrieval.pk).degrade == {
        "levers": ["hedge"], "hedge_after": 300,
    }  # fmt: skip
    before = db_state()
    bad = owner.patch(RETRIEVAL, {"degrade": {"levers": ["retry"]}}, format="json")
    assert bad.status_code == 400
    assert "degrade" in error_of(bad)["fields"]
    assert db_state() == before
    viewer = token_client(api.world.viewer).patch(RETRIEVAL, {"degrade": {}}, format="json")
    assert viewer.status_code == 403
    # The outsider's own rag-chat has no retrieval stage of acme's.
    outsider = token_client(api.world.outsider).patch(
        RETRIEVAL + "?team=acme", {"degrade": {}}, format="json"
    )
    assert outsider.status_code in (403, 404)
    assert Stage.objects.get(pk=api.retrieval.pk).degrade == {
        "levers": ["hedge"], "hedge_after": 300,
    }  # fmt: skip


def test_the_file_applies_and_exports_the_policy(world: TeamWorld, tmp_path: Path) -> None:
    text = textwrap.dedent(
        """\
        team: acme
        pipelines:
          - slug: rag
            name: RAG
            budget: {p95: 2500}
            stages:
              - slug: rerank
                name: Rerank
                budget: {p95: 200}
                degrade:
                  levers: [skip, cap]
                  cap_ms: 180
        """
    )
    path = tmp_path / "budgets.yaml"
    path.write_text(text)
    out = io.StringIO()
    call_command("budgets", "apply", str(path), stdout=out, stderr=io.StringIO())
    stage = Stage.objects.get(pipeline__team=world.team, slug="rerank")
    assert stage.degrade == {"levers": ["skip", "cap"], "cap_ms": 180}
    exported = io.StringIO()
    call_command("budgets", "export", "--team", "acme", stdout=exported)
    assert "degrade:" in exported.getvalue()
    path.write_text(exported.getvalue())
    again = io.StringIO()
    call_command("budgets", "apply", str(path), stdout=again, stderr=io.StringIO())
    assert again.getvalue().strip() == "No changes."
    # A change shows in the plan, in words.
    path.write_text(text.replace("cap_ms: 180", "cap_ms: 150"))
    plan = io.StringIO()
    call_command("budgets", "apply", "--dry-run", str(path), stdout=plan, stderr=io.StringIO())
    assert "degrade levers skip, cap; cap 180 ms -> levers skip, cap; cap 150 ms" in (
        plan.getvalue()
    )


@pytest.mark.parametrize(
    ("degrade", "line", "said"),
    [
        ("degrade: skip", 10, "must be a mapping"),
        ("degrade:\n      lever: [skip]", 11, "Unknown key “lever”"),
        ("degrade:\n      levers: [retry]", 11, "no lever retry"),
        ("degrade:\n      cap_ms: -3", 11, "cap_ms"),
        ("degrade:\n      hedge_after: p42", 11, "hedge_after"),
    ],
)
def test_a_wrong_policy_in_the_file_names_its_line(degrade: str, line: int, said: str) -> None:
    text = (
        "team: acme\npipelines:\n- slug: rag\n  name: RAG\n  budget: {p95: 2500}\n"
        "  stages:\n  - slug: rerank\n    name: Rerank\n    budget: {p95: 200}\n    "
        + degrade.replace("\n      ", "\n      ")
        + "\n"
    )
    with pytest.raises(ConfigInvalid) as caught:
        parse_document(text)
    found = [(error.line, error.message) for error in caught.value.errors]
    assert any(at == line and said in message for at, message in found), found


def test_the_runtime_document_carries_the_policy(world: TeamWorld) -> None:
    pipeline = make_pipeline(world.team, "ask", budget={"p95": 2000})
    make_stage(pipeline, "rerank", budget_ms=200, degrade={"levers": ["skip"]})
    _, raw = metrics_token_create(team=world.team, name="client", created_by=None)
    from django.test import Client

    answer = Client().get("/v1/budgets/ask", HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert answer.status_code == 200
    (stage,) = answer.json()["stages"]
    assert stage["degrade"] == {"levers": ["skip"]}
    assert stage["advice"] == {}
