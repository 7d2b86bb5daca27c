"""Configuration as code: a pipeline's ``no_stage:`` rules parsed with the span rules'
checks, planned, applied, exported and read back unchanged."""

import io
from pathlib import Path

import pytest
from django.core.management import call_command

from apps.pipelines.config_as_code import ConfigInvalid, config_export, parse_document
from apps.pipelines.models import NoStageRule, Pipeline
from tests.builders.configuration import make_no_stage_rule, make_pipeline, make_rule, make_stage
from tests.conftest import TeamWorld

RAG = """\
team: acme
pipelines:
  - slug: rag-chat
    name: RAG chat answer
    budget: {p95: 2500}
    stages:
      - slug: retrieval
        name: Retrieval
        match: [{span_name: retrieval}]
    no_stage:
      - {span_name: cache flush}
      - {span_name_regex: "^audit\\\\.", service: auditor, span_kind: producer}
      - attributes: {background: true}
"""


def budgets(*args: str) -> str:
    out = io.StringIO()
    call_command("budgets", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "budgets.yaml"
    path.write_text(text)
    return str(path)


def rules(slug: str = "rag-chat") -> list[tuple[str, str, dict, str, str, int]]:
    return [
        (r.span_name, r.name_match, r.attributes, r.span_kind, r.service, r.position)
        for r in NoStageRule.objects.filter(pipeline__slug=slug).order_by("position")
    ]


def test_a_new_pipeline_gets_its_no_stage_rules_in_file_order(world: TeamWorld, tmp_path):
    out = budgets("apply", write(tmp_path, RAG))

    assert out.splitlines()[:3] == [
        "+ pipeline rag-chat",
        "+ stage rag-chat/retrieval",
        "+ no_stage rag-chat: name = cache flush; name ~ ^audit\\., kind=producer, "
        "service=auditor; background=True",
    ]
    assert rules() == [
        ("cache flush", "glob", {}, "", "", 0),
        ("^audit\\.", "regex", {}, "producer", "auditor", 1),
        ("", "glob", {"background": True}, "", "", 2),
    ]


def test_applying_it_again_changes_nothing(world: TeamWorld, tmp_path):
    path = write(tmp_path, RAG)
    budgets("apply", path)
    updated = list(NoStageRule.objects.values_list("pk", "updated_at"))

    assert budgets("apply", path).strip() == "No changes."
    assert list(NoStageRule.objects.values_list("pk", "updated_at")) == updated


def test_a_changed_list_is_planned_by_position_and_applied(world: TeamWorld, tmp_path):
    budgets("apply", write(tmp_path, RAG))
    changed = RAG.replace("{span_name: cache flush}", "{span_name: cache *}").replace(
        "      - attributes: {background: true}\n", ""
    )

    plan = budgets("apply", "--dry-run", write(tmp_path, changed))
    assert plan.splitlines()[0] == (
        "~ no_stage rag-chat: #1 name = cache flush -> name = cache *; #3 background=True -> (none)"
    )
    assert len(rules()) == 3  # a dry run changes nothing

    budgets("apply", write(tmp_path, changed))
    assert [rule[0] for rule in rules()] == ["cache *", "^audit\\."]


def test_leaving_the_key_out_deletes_the_pipeline_s_no_stage_rules(world: TeamWorld, tmp_path):
    budgets("apply", write(tmp_path, RAG))
    without = RAG.split("    no_stage:")[0]

    out = budgets("apply", write(tmp_path, without))

    assert out.startswith("~ no_stage rag-chat: #1 name = cache flush -> (none)")
    assert rules() == []


def test_export_writes_them_minimal_and_reads_back_unchanged(world: TeamWorld, tmp_path):
    pipeline = make_pipeline(world.team, "agent", name="Agent")
    make_rule(make_stage(pipeline, "tool"), span_name="tool *")
    make_no_stage_rule(pipeline, span_name="flush")
    make_no_stage_rule(pipeline, attributes={"job": "warm", "n": 2}, service="cron")
    make_pipeline(world.team, "plain", name="Plain")  # none: no key

    exported = config_export(team=world.team)

    assert (
        "    no_stage:\n"
        "      - span_name: flush\n"
        "      - attributes:\n"
        "          job: warm\n"
        "          n: 2\n"
        "        service: cron\n"
        "  - slug: plain\n"
    ) in exported
    assert exported.count("no_stage:") == 1
    assert "portion" not in exported.split("no_stage:")[1]
    assert budgets("apply", write(tmp_path, exported)).strip() == "No changes."


INVALID = [
    (
        "      - {span_name: x, portion: after_first_token}\n",
        "Unknown key “portion” in no-stage rule",
    ),
    ("      - {span_name: x, first_token_event: t}\n", "Unknown key “first_token_event”"),
    ("      - {}\n", "A no-stage rule needs at least one condition"),
    ("      - {attributes: {}}\n", "A no-stage rule needs at least one condition"),
    ("      - {span_name_regex: '(a)\\1'}\n", "backreferences are not supported"),
    ("      - {span_name: x, span_name_regex: y}\n", "not both in one rule"),
    ("      - {span_kind: sideways}\n", "sideways"),
    ("      - {attributes: {k: [1, 2]}}\n", "“k”"),
    ("      - span_name\n", "must be a mapping"),
]


@pytest.mark.parametrize(("entry", "message"), INVALID)
def test_a_bad_no_stage_rule_is_refused_with_its_line(entry: str, message: str):
    text = RAG.split("    no_stage:")[0] + "    no_stage:\n      - {service: ok}\n" + entry

    with pytest.raises(ConfigInvalid) as caught:
        parse_document(text)

    found = [(error.line, error.message) for error in caught.value.errors]
    assert any(line == 12 and message in said for line, said in found), found


def test_no_stage_must_be_a_list():
    text = RAG.split("    no_stage:")[0] + "    no_stage: {span_name: x}\n"
    with pytest.raises(ConfigInvalid, match="must be a list of no-stage rules"):
        parse_document(text)


def test_an_invalid_file_changes_nothing(world: TeamWorld, tmp_path):
    budgets("apply", write(tmp_path, RAG))
    before = (rules(), config_export(team=world.team))
    broken = RAG.replace("{span_name: cache flush}", "{span_name: cache flush, portion: whole}")

    with pytest.raises(Exception, match="nothing was changed"):
        budgets("apply", write(tmp_path, broken))

    assert (rules(), config_export(team=world.team)) == before
    assert Pipeline.objects.count() == 1
