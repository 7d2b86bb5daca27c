import io
import textwrap
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from django.db import connection

from apps.pipelines.config_as_code import config_export, pipelines_plan
from apps.pipelines.models import Pipeline, SpanRule, Stage
from apps.teams.models import Team
from tests.builders.configuration import make_pipeline, make_rule, make_stage
from tests.conftest import TeamWorld

RAG = """\
team: acme
pipelines:
  - slug: rag-chat
    name: RAG chat answer
    description: optional text
    match: {service: chat-api, root_span: "POST /chat", attributes: {deployment.environment: prod}}
    budget: {p95: 2500}
    objective: {target: 99.0, threshold_ms: 4000}
    stages:
      - slug: retrieval
        name: Vector retrieval
        budget: {p95: 350}
        match:
          - {attributes: {openinference.span.kind: RETRIEVER}}
          - {span_name: "vector.search*"}
          - {span_name_regex: "^retriever\\\\."}
      - slug: ttft
        name: Time to first token
        budget: {p95: 800}
        match:
          - {span_name: "chat gpt-4o", portion: until_first_token, first_token_event: first_token}
"""


def budgets(*args: str) -> str:
    out = io.StringIO()
    call_command("budgets", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def write(tmp_path: Path, text: str, name: str = "budgets.yaml") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def state(team: Team) -> tuple[str, list[tuple[str, int, datetime]]]:
    """Everything an apply could touch, to prove that nothing was."""
    rows = [
        (model.__name__, pk, updated)
        for model in (Pipeline, Stage, SpanRule)
        for pk, updated in model.objects.order_by("pk").values_list("pk", "updated_at")
    ]
    return config_export(team=team), rows


def test_apply_creates_pipelines_stages_and_rules_in_file_order(world: TeamWorld, tmp_path):
    out = budgets("apply", write(tmp_path, RAG))

    assert out.splitlines()[:3] == [
        "+ pipeline rag-chat",
        "+ stage rag-chat/retrieval",
        "+ stage rag-chat/ttft",
    ]
    assert "Applied 3 changes." in out
    pipeline = Pipeline.objects.get(team=world.team, slug="rag-chat")
    assert pipeline.match_attributes == {"deployment.environment": "prod"}
    assert pipeline.budget == {"p95": 2500}
    assert pipeline.objective_target == Decimal("99.000")
    assert pipeline.objective_threshold_ms == 4000
    assert [s.slug for s in pipeline.stages.order_by("position")] == ["retrieval", "ttft"]
    rules = list(SpanRule.objects.filter(stage__slug="retrieval").order_by("position"))
    assert [(r.span_name, r.name_match) for r in rules] == [
        ("", "glob"),
        ("vector.search*", "glob"),
        ("^retriever\\.", "regex"),
    ]
    assert SpanRule.objects.get(stage__slug="ttft").portion == "until_first_token"


def test_applying_the_same_file_twice_reports_no_changes(world: TeamWorld, tmp_path):
    path = write(tmp_path, RAG)
    budgets("apply", path)
    before = state(world.team)

    out = budgets("apply", path)

    assert out.strip() == "No changes."
    assert state(world.team) == before


def test_export_then_apply_is_a_no_op_with_every_kind_of_field(world: TeamWorld, tmp_path):
    pipeline = make_pipeline(
        world.team,
        "agent",
        name="Agent: plan & act",
        description="Line one\nline two: with a colon\n",
        match_service="agent-api",
        match_root_span="POST /agent*",
        match_attributes={"deployment.environment": "prod", "tier": 2, "beta": True, "w": 0.5},
        budget={"p50": 900, "p99": 6000},
        objective_target=Decimal("99.95"),
        objective_threshold_ms=5000,
    )
    tool = make_stage(pipeline, "tool", name="Tool call", budget_percentile="p99", budget_ms=700)
    make_rule(tool, span_name="^tool\\.(search|fetch)$", name_match="regex", span_kind="client")
    make_rule(tool, attributes={"gen_ai.operation.name": "execute_tool"}, service="tools")
    llm = make_stage(pipeline, "generation", name="Generation", budget_ms=None)
    make_rule(llm, span_name="chat *", portion="after_first_token", first_token_event="token.first")
    make_rule(llm, span_name="yes", span_kind="internal", attributes={"on": "off"})
    make_pipeline(world.team, "plain", name="2024")
    exported = budgets("export", "--team", "acme")

    out = budgets("apply", write(tmp_path, exported))

    assert out.strip() == "No changes."
    assert "portion: whole" not in exported
    assert "first_token_event: first_token" not in exported
    assert "description" in exported.split("slug: plain")[0]
    assert "span_name_regex: ^tool" in exported
    assert "name: '2024'" in exported


def test_export_leaves_out_defaults_and_empty_values(world: TeamWorld):
    pipeline = make_pipeline(world.team, "bare", name="Bare", budget={"p95": 1000})
    stage = make_stage(pipeline, "only", name="Only", budget_ms=None)
    make_rule(stage, span_name="x*")

    exported = budgets("export", "--team", "acme")

    assert exported == textwrap.dedent("""\
        team: acme
        pipelines:
          - slug: bare
            name: Bare
            budget:
              p95: 1000
            stages:
              - slug: only
                name: Only
                match:
                  - span_name: x*
        """)


def test_export_writes_to_a_file_with_output(world: TeamWorld, tmp_path):
    make_pipeline(world.team, "bare")
    target = tmp_path / "out.yaml"

    budgets("export", "--team", "acme", "--output", str(target))

    assert "slug: bare" in target.read_text()


def test_export_of_an_unknown_team_is_an_error(db):
    with pytest.raises(CommandError, match="Unknown team"):
        budgets("export", "--team", "nope")


UPDATES = [
    ("name: RAG chat answer", "name: RAG chat", '~ pipeline rag-chat: name "RAG chat answer"'),
    ("description: optional text", "description: other", "~ pipeline rag-chat: description"),
    (
        "service: chat-api",
        "service: chat",
        '~ pipeline rag-chat: match.service "chat-api" -> "chat"',
    ),
    ('root_span: "POST /chat"', 'root_span: "POST /v2/chat"', "~ pipeline rag-chat: match.root"),
    ("environment: prod}", "environment: dev}", "~ pipeline rag-chat: match.attributes"),
    ("budget: {p95: 2500}", "budget: {p95: 2000}", "~ pipeline rag-chat: budget p95 2500 -> 2000"),
    (
        "budget: {p95: 2500}",
        "budget: {p50: 900, p95: 2500}",
        "~ pipeline rag-chat: budget p50 (none) -> 900",
    ),
    ("target: 99.0", "target: 99.5", "~ pipeline rag-chat: objective 99% under 4000 ms -> 99.5%"),
    ("name: Vector retrieval", "name: Retrieval", '~ stage rag-chat/retrieval: name "Vector'),
    (
        "budget: {p95: 350}",
        "budget: {p95: 400}",
        "~ stage rag-chat/retrieval: budget p95 350 -> 400",
    ),
    (
        "budget: {p95: 350}",
        "budget: {p99: 500}",
        "~ stage rag-chat/retrieval: budget p95 350 -> p99",
    ),
    ("        budget: {p95: 800}\n", "", "~ stage rag-chat/ttft: budget p95 800 -> (none)"),
    ('{span_name: "vector.search*"}', '{span_name: "vector.*"}', "~ rules rag-chat/retrieval: "),
    ("portion: until_first_token", "portion: after_first_token", "~ rules rag-chat/ttft: "),
]


@pytest.mark.parametrize(("old", "new", "expected"), UPDATES)
def test_updates_are_detected_field_by_field(world: TeamWorld, tmp_path, old, new, expected):
    budgets("apply", write(tmp_path, RAG))
    changed = RAG.replace(old, new, 1)
    assert changed != RAG

    out = budgets("apply", write(tmp_path, changed, "changed.yaml"))

    lines = [line for line in out.splitlines() if line[:1] in "+-~"]
    assert len(lines) == 1
    assert lines[0].startswith(expected)
    assert budgets("apply", write(tmp_path, changed, "changed.yaml")).strip() == "No changes."


def test_updated_values_reach_the_database(world: TeamWorld, tmp_path):
    budgets("apply", write(tmp_path, RAG))
    changed = (
        RAG.replace("budget: {p95: 2500}", "budget: {p90: 1800}")
        .replace("    objective: {target: 99.0, threshold_ms: 4000}\n", "")
        .replace("budget: {p95: 350}", "budget: {p99: 500}")
    )

    budgets("apply", write(tmp_path, changed, "changed.yaml"))

    pipeline = Pipeline.objects.get(slug="rag-chat")
    assert pipeline.budget == {"p90": 1800}
    assert pipeline.objective_target is None
    assert pipeline.objective_threshold_ms is None
    stage = pipeline.stages.get(slug="retrieval")
    assert (stage.budget_percentile, stage.budget_ms) == ("p99", 500)


def test_stages_and_rules_missing_from_the_file_are_removed(world: TeamWorld, tmp_path):
    budgets("apply", write(tmp_path, RAG))
    shorter = RAG.split("      - slug: ttft")[0].replace(
        '          - {span_name: "vector.search*"}\n', ""
    )

    out = budgets("apply", write(tmp_path, shorter, "shorter.yaml"))

    assert "- stage rag-chat/ttft" in out
    assert "~ rules rag-chat/retrieval: " in out
    pipeline = Pipeline.objects.get(slug="rag-chat")
    assert [s.slug for s in pipeline.stages.all()] == ["retrieval"]
    rules = SpanRule.objects.filter(stage__pipeline=pipeline).order_by("position")
    assert [(r.position, r.span_name) for r in rules] == [(0, ""), (1, "^retriever\\.")]


def test_stage_order_follows_the_file(world: TeamWorld, tmp_path):
    budgets("apply", write(tmp_path, RAG))
    retrieval, ttft = RAG.split("      - slug: retrieval")[1].split("      - slug: ttft")
    head = RAG.split("      - slug: retrieval")[0]
    swapped = f"{head}      - slug: ttft{ttft}      - slug: retrieval{retrieval}"

    out = budgets("apply", write(tmp_path, swapped, "swapped.yaml"))

    assert out.splitlines()[0] == "~ stages rag-chat: order retrieval, ttft -> ttft, retrieval"
    stages = Pipeline.objects.get(slug="rag-chat").stages.order_by("position")
    assert [s.slug for s in stages] == ["ttft", "retrieval"]
    assert budgets("apply", write(tmp_path, swapped, "swapped.yaml")).strip() == "No changes."


def test_a_stage_inserted_in_the_middle_takes_its_place(world: TeamWorld, tmp_path):
    budgets("apply", write(tmp_path, RAG))
    inserted = RAG.replace(
        "      - slug: ttft",
        "      - slug: rerank\n        name: Rerank\n        match: [{span_name: rerank}]\n"
        "      - slug: ttft",
    )

    out = budgets("apply", write(tmp_path, inserted, "inserted.yaml"))

    assert [line for line in out.splitlines() if line[:1] in "+-~"] == ["+ stage rag-chat/rerank"]
    stages = Pipeline.objects.get(slug="rag-chat").stages.order_by("position")
    assert [(s.slug, s.position) for s in stages] == [
        ("retrieval", 0),
        ("rerank", 1),
        ("ttft", 2),
    ]


def test_deleting_a_stage_and_renaming_another_keeps_the_order(world: TeamWorld, tmp_path):
    pipeline = make_pipeline(world.team, "p", name="P")
    for slug in ("a", "b", "c", "d"):
        make_stage(pipeline, slug, name=slug.upper())
    stages_b_then_c = Stage.objects.filter(slug__in=["b", "c"]).order_by("position")
    assert [s.slug for s in stages_b_then_c] == ["b", "c"]
    text = """\
        team: acme
        pipelines:
          - slug: p
            name: P
            budget: {p95: 2500}
            stages:
              - {slug: b, name: Bee, budget: {p95: 300}}
              - {slug: c, name: C, budget: {p95: 300}}
              - {slug: d, name: Dee, budget: {p95: 300}}
        """

    budgets("apply", write(tmp_path, text))

    assert [(s.slug, s.name) for s in pipeline.stages.order_by("position", "id")] == [
        ("b", "Bee"),
        ("c", "C"),
        ("d", "Dee"),
    ]
    assert budgets("apply", write(tmp_path, text)).strip() == "No changes."


def test_pipelines_missing_from_the_file_are_left_alone_without_prune(world, tmp_path):
    make_pipeline(world.team, "legacy")

    out = budgets("apply", write(tmp_path, RAG))

    assert "= pipeline legacy: not in the file, left alone" in out
    assert Pipeline.objects.filter(team=world.team, slug="legacy").exists()


def test_prune_deletes_the_teams_pipelines_missing_from_the_file(world: TeamWorld, tmp_path):
    make_stage(make_pipeline(world.team, "legacy"), "s")
    make_pipeline(world.other_team, "legacy")

    out = budgets("apply", write(tmp_path, RAG), "--prune")

    assert "- pipeline legacy" in out
    assert not Pipeline.objects.filter(team=world.team, slug="legacy").exists()
    assert Pipeline.objects.filter(team=world.other_team, slug="legacy").exists()


def test_a_file_without_a_pipelines_section_leaves_pipelines_unmanaged(world, tmp_path):
    make_pipeline(world.team, "legacy")

    out = budgets("apply", write(tmp_path, "team: acme\n"), "--prune")

    assert out.strip() == "No changes."
    assert Pipeline.objects.filter(slug="legacy").exists()


def test_dry_run_prints_the_plan_and_changes_nothing(world: TeamWorld, tmp_path):
    make_pipeline(world.team, "legacy")
    before = state(world.team)

    out = budgets("apply", write(tmp_path, RAG), "--dry-run", "--prune")

    assert "+ pipeline rag-chat" in out
    assert "- pipeline legacy" in out
    assert "Dry run: 4 changes, none applied." in out
    assert state(world.team) == before


def test_an_unknown_team_is_an_error_without_create_team(db, tmp_path):
    with pytest.raises(CommandError, match=r"budgets.yaml:1: Unknown team “acme”"):
        budgets("apply", write(tmp_path, RAG))

    assert not Team.objects.exists()


def test_create_team_creates_the_missing_team(db, tmp_path):
    out = budgets("apply", write(tmp_path, RAG), "--create-team")

    assert out.splitlines()[0] == "+ team acme"
    assert Pipeline.objects.filter(team__slug="acme", slug="rag-chat").exists()


def test_create_team_with_dry_run_creates_nothing(db, tmp_path):
    out = budgets("apply", write(tmp_path, RAG), "--create-team", "--dry-run")

    assert "+ team acme" in out
    assert "+ pipeline rag-chat" in out
    assert not Team.objects.exists()


def test_file_dash_reads_standard_input(world: TeamWorld, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO(RAG))

    out = budgets("apply", "-")

    assert "+ pipeline rag-chat" in out
    assert Pipeline.objects.filter(slug="rag-chat").exists()


def test_a_missing_file_is_an_error(db, tmp_path):
    with pytest.raises(CommandError, match="Cannot read"):
        budgets("apply", str(tmp_path / "nope.yaml"))


SECOND = """\
  - slug: second
    name: Second
    budget: {p95: 1000}
"""


def test_a_service_error_in_the_middle_leaves_nothing_changed(world, tmp_path, monkeypatch):
    make_pipeline(world.team, "first", name="First", budget={"p95": 900})
    before = state(world.team)
    text = (
        "team: acme\npipelines:\n  - slug: first\n    name: First renamed\n"
        "    budget: {p95: 950}\n" + SECOND
    )
    real_create = pipelines_plan.pipeline_create

    def failing_create(**kwargs):
        if kwargs["slug"] == "second":
            raise ValidationError({"slug": ["Refused for the test."]})
        return real_create(**kwargs)

    monkeypatch.setattr(pipelines_plan, "pipeline_create", failing_create)

    with pytest.raises(CommandError, match=r"budgets.yaml:6: Cannot apply “\+ pipeline second”"):
        budgets("apply", write(tmp_path, text))

    assert state(world.team) == before
    assert Pipeline.objects.get(slug="first").name == "First"


def test_a_database_conflict_in_the_middle_leaves_nothing_changed(world, tmp_path):
    before = state(world.team)
    with connection.cursor() as cursor:
        # A conflict the planner cannot foresee: the database refuses the second pipeline.
        cursor.execute("""
            CREATE FUNCTION refuse_second() RETURNS trigger AS $$
            BEGIN
              IF NEW.slug = 'second' THEN
                RAISE EXCEPTION 'second is taken' USING ERRCODE = 'unique_violation';
              END IF;
              RETURN NEW;
            END $$ LANGUAGE plpgsql;
            CREATE TRIGGER refuse_second BEFORE INSERT ON pipelines_pipeline
              FOR EACH ROW EXECUTE FUNCTION refuse_second();
        """)
    text = RAG + SECOND

    with pytest.raises(CommandError, match=r"Cannot apply “\+ pipeline second”: the database"):
        budgets("apply", write(tmp_path, text))

    assert state(world.team) == before
    assert not Pipeline.objects.filter(slug="rag-chat").exists()


# --- budget evaluation settings -------------------------------------------------


def evaluation_of(slug: str) -> tuple[int, int, int]:
    pipeline = Pipeline.objects.get(slug=slug)
    return pipeline.evaluation_window_s, pipeline.min_samples, pipeline.close_after


def with_evaluation(evaluation: str) -> str:
    return RAG.replace("    stages:\n", f"    evaluation: {evaluation}\n    stages:\n", 1)


def test_apply_creates_a_pipeline_with_its_evaluation_settings(world: TeamWorld, tmp_path):
    text = with_evaluation("{window_s: 600, min_samples: 50, close_after: 10}")

    out = budgets("apply", write(tmp_path, text))

    assert out.splitlines()[0] == "+ pipeline rag-chat"
    assert evaluation_of("rag-chat") == (600, 50, 10)


def test_evaluation_keys_left_out_of_the_file_take_their_defaults(world: TeamWorld, tmp_path):
    budgets("apply", write(tmp_path, with_evaluation("{close_after: 5}")))

    assert evaluation_of("rag-chat") == (300, 20, 5)


def test_export_then_apply_round_trips_the_evaluation_settings(world: TeamWorld, tmp_path):
    make_pipeline(world.team, "agent", name="Agent", evaluation_window_s=900, close_after=12)
    make_pipeline(world.team, "plain", name="Plain")

    exported = budgets("export", "--team", "acme")

    agent, plain = exported.split("  - slug: plain")
    assert "    evaluation:\n      window_s: 900\n      close_after: 12\n" in agent
    assert "min_samples" not in exported
    assert "evaluation" not in plain
    assert budgets("apply", write(tmp_path, exported)).strip() == "No changes."

    Pipeline.objects.filter(team=world.team).delete()
    budgets("apply", write(tmp_path, exported, "again.yaml"))

    assert evaluation_of("agent") == (900, 20, 12)
    assert evaluation_of("plain") == (300, 20, 3)
    assert budgets("export", "--team", "acme") == exported


def test_a_file_without_evaluation_is_a_no_op_for_pipelines_made_elsewhere(
    world: TeamWorld, tmp_path
):
    make_pipeline(world.team, "bare", name="Bare", budget={"p95": 1000})
    text = """\
        team: acme
        pipelines:
          - slug: bare
            name: Bare
            budget: {p95: 1000}
        """

    assert budgets("apply", write(tmp_path, text)).strip() == "No changes."


EVALUATION_UPDATES = [
    ("{window_s: 600}", ["~ pipeline rag-chat: evaluation.window_s 300 -> 600"], (600, 20, 3)),
    (
        "{min_samples: 5, close_after: 30}",
        [
            "~ pipeline rag-chat: evaluation.min_samples 20 -> 5",
            "~ pipeline rag-chat: evaluation.close_after 3 -> 30",
        ],
        (300, 5, 30),
    ),
    ("{window_s: 300, min_samples: 20, close_after: 3}", [], (300, 20, 3)),
]


@pytest.mark.parametrize(("evaluation", "expected", "stored"), EVALUATION_UPDATES)
def test_evaluation_changes_are_planned_and_applied(
    world: TeamWorld, tmp_path, evaluation, expected, stored
):
    budgets("apply", write(tmp_path, RAG))
    changed = write(tmp_path, with_evaluation(evaluation), "changed.yaml")

    out = budgets("apply", changed)

    assert [line for line in out.splitlines() if line[:1] in "+-~"] == expected
    assert evaluation_of("rag-chat") == stored
    assert budgets("apply", changed).strip() == "No changes."


def test_removing_evaluation_from_the_file_restores_the_defaults(world: TeamWorld, tmp_path):
    budgets("apply", write(tmp_path, with_evaluation("{window_s: 1800, close_after: 6}")))

    out = budgets("apply", write(tmp_path, RAG, "plain.yaml"))

    assert [line for line in out.splitlines() if line[:1] == "~"] == [
        "~ pipeline rag-chat: evaluation.window_s 1800 -> 300",
        "~ pipeline rag-chat: evaluation.close_after 6 -> 3",
    ]
    assert evaluation_of("rag-chat") == (300, 20, 3)


def test_dry_run_of_an_evaluation_change_changes_nothing(world: TeamWorld, tmp_path):
    budgets("apply", write(tmp_path, RAG))

    out = budgets(
        "apply", write(tmp_path, with_evaluation("{window_s: 60}"), "c.yaml"), "--dry-run"
    )

    assert "~ pipeline rag-chat: evaluation.window_s 300 -> 60" in out
    assert evaluation_of("rag-chat") == (300, 20, 3)


ENGINE = """\
team: acme
pipelines:
  - slug: vllm-chat
    name: Chat on our vLLM
    match: {root_span: "POST /chat"}
    budget: {p95: 3000}
    stages:
      - slug: queue
        name: Engine queue
        budget: {p95: 100}
        match:
          - {span_name: llm_request, portion: queue}
      - slug: prefill
        name: Prefill
        budget: {p95: 400}
        match:
          - {span_name: llm_request, portion: prefill}
      - slug: gateway
        name: Network and gateway
        match:
          - {span_name: "chat *", portion: gateway}
      - slug: decode
        name: Decode
        match:
          - {span_name: llm_request, portion: decode}
"""


def test_engine_portions_apply_export_and_apply_again_unchanged(world: TeamWorld, tmp_path):
    budgets("apply", write(tmp_path, ENGINE))

    portions = dict(SpanRule.objects.values_list("stage__slug", "portion"))
    assert portions == {
        "queue": "queue",
        "prefill": "prefill",
        "gateway": "gateway",
        "decode": "decode",
    }
    exported = budgets("export", "--team", "acme")
    assert "portion: queue" in exported
    assert budgets("apply", write(tmp_path, exported, "again.yaml")).strip() == "No changes."


def test_a_stream_budget_applies_shows_in_the_plan_and_exports_unchanged(
    world: TeamWorld, tmp_path
):
    with_budget = ENGINE.replace(
        "        name: Decode\n",
        "        name: Decode\n"
        "        stream_budget: {time_per_output_token: {p95: 40}, max_chunk_gap: {p99: 500}}\n",
    )
    budgets("apply", write(tmp_path, ENGINE))
    out = budgets("apply", write(tmp_path, with_budget, "budgeted.yaml"))

    assert (
        "~ stage vllm-chat/decode: stream budget (none) -> time per output token p95 40 ms; "
        "longest chunk gap p99 500 ms"
    ) in out
    decode = Stage.objects.get(slug="decode")
    assert decode.stream_budget == {
        "time_per_output_token": {"p95": 40},
        "max_chunk_gap": {"p99": 500},
    }
    exported = budgets("export", "--team", "acme")
    assert budgets("apply", write(tmp_path, exported, "again.yaml")).strip() == "No changes."


def test_a_wrong_stream_budget_names_its_line_and_changes_nothing(world: TeamWorld, tmp_path):
    broken = ENGINE.replace(
        "        name: Decode\n",
        "        name: Decode\n        stream_budget:\n          max_chunk_gap: {p99: -5}\n",
    )
    err = io.StringIO()
    with pytest.raises(CommandError):
        call_command("budgets", "apply", write(tmp_path, broken), stdout=io.StringIO(), stderr=err)
    assert not Pipeline.objects.filter(slug="vllm-chat").exists()
    line = broken.splitlines().index("          max_chunk_gap: {p99: -5}") + 1
    assert f".yaml:{line}: max_chunk_gap: whole milliseconds from 1 to 3600000." in err.getvalue()
