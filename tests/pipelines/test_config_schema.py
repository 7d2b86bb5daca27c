import io
import textwrap
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from hypothesis import given, settings
from hypothesis import strategies as st

from apps.pipelines.config_as_code import ConfigInvalid, config_export, parse_document
from apps.pipelines.config_as_code.document_export import dump_yaml
from apps.pipelines.models import Pipeline, SpanRule, Stage
from tests.builders.configuration import make_pipeline, make_rule, make_stage
from tests.conftest import TeamWorld


def doc(body: str) -> str:
    """A file for team acme whose pipelines section is ``body``; line 3 is body's first line."""
    return "team: acme\npipelines:\n" + textwrap.dedent(body)


def stage_doc(body: str) -> str:
    """One pipeline with stages; line 7 is body's first line."""
    head = "- slug: rag\n  name: RAG\n  budget: {p95: 2500}\n  stages:\n"
    return doc(head + textwrap.indent(textwrap.dedent(body), "    "))


INVALID = [
    pytest.param("team: acme\npipelines: [\n", 3, "Invalid YAML", id="yaml-syntax"),
    pytest.param(
        "team: acme\npipelines:\n  - slug: a\n\tname: b\n", 4, "Invalid YAML", id="yaml-tab"
    ),
    pytest.param("", 1, "The file is empty.", id="empty-file"),
    pytest.param("- team: acme\n", 1, "The file must be a mapping", id="file-is-a-list"),
    pytest.param(
        "team: acme\npipeline: []\n",
        2,
        "Unknown key “pipeline” in the file. Did you mean “pipelines”?",
        id="unknown-top-key",
    ),
    pytest.param(
        doc("- slug: a\n  name: A\n  budget: {p95: 1}\n  descripton: x\n"),
        6,
        "Unknown key “descripton” in pipeline. Did you mean “description”?",
        id="unknown-pipeline-key",
    ),
    pytest.param(
        doc("- slug: a\n  name: A\n  budget: {p95: 1}\n  match: {servce: api}\n"),
        6,
        "Unknown key “servce” in match. Did you mean “service”?",
        id="unknown-match-key",
    ),
    pytest.param(
        doc("- slug: a\n  name: A\n  budget: {p95: 1}\n  evaluation: {window: 600}\n"),
        6,
        "Unknown key “window” in evaluation. Did you mean “window_s”?"
        " Allowed: window_s, min_samples, close_after.",
        id="unknown-evaluation-key",
    ),
    pytest.param(
        doc("- slug: a\n  name: A\n  budget: {p95: 1}\n  evaluation:\n    window_s: 30\n"),
        7,
        "window_s must be between 60 and 3600 seconds, not 30.",
        id="evaluation-window-too-short",
    ),
    pytest.param(
        doc("- slug: a\n  name: A\n  budget: {p95: 1}\n  evaluation: {window_s: 3601}\n"),
        6,
        "window_s must be between 60 and 3600 seconds, not 3601.",
        id="evaluation-window-too-long",
    ),
    pytest.param(
        doc('- slug: a\n  name: A\n  budget: {p95: 1}\n  evaluation: {window_s: "300"}\n'),
        6,
        "window_s must be a whole number of seconds.",
        id="evaluation-window-as-text",
    ),
    pytest.param(
        doc("- slug: a\n  name: A\n  budget: {p95: 1}\n  evaluation: {window_s: 90.5}\n"),
        6,
        "window_s must be a whole number of seconds.",
        id="evaluation-window-fraction",
    ),
    pytest.param(
        doc("- slug: a\n  name: A\n  budget: {p95: 1}\n  evaluation: {window_s: .inf}\n"),
        6,
        "window_s must be a whole number of seconds.",
        id="evaluation-window-infinite",
    ),
    pytest.param(
        doc("- slug: a\n  name: A\n  budget: {p95: 1}\n  evaluation: {min_samples: 0}\n"),
        6,
        "min_samples must be between 1 and 100000 samples, not 0.",
        id="evaluation-min-samples-zero",
    ),
    pytest.param(
        doc("- slug: a\n  name: A\n  budget: {p95: 1}\n  evaluation: {close_after: 361}\n"),
        6,
        "close_after must be between 1 and 360 evaluations, not 361.",
        id="evaluation-close-after-too-many",
    ),
    pytest.param(
        doc("- slug: a\n  name: A\n  budget: {p95: 1}\n  evaluation: {close_after: true}\n"),
        6,
        "close_after must be a whole number of evaluations.",
        id="evaluation-close-after-boolean",
    ),
    pytest.param(
        doc("- slug: a\n  name: A\n  budget: {p95: 1}\n  evaluation:\n    close_after: [3]\n"),
        7,
        "“close_after” must be a single value, not a list.",
        id="evaluation-close-after-list",
    ),
    pytest.param(
        doc("- slug: a\n  name: A\n  budget: {p95: 1}\n  evaluation: 300\n"),
        6,
        "Evaluation must be a mapping (key: value), not a number.",
        id="evaluation-not-a-mapping",
    ),
    pytest.param(
        stage_doc("- slug: s\n  name: S\n  budgte: {p95: 1}\n"),
        9,
        "Unknown key “budgte” in stage. Did you mean “budget”?",
        id="unknown-stage-key",
    ),
    pytest.param(
        stage_doc("- slug: s\n  name: S\n  match:\n    - span_nam: x\n"),
        10,
        "Unknown key “span_nam” in rule. Did you mean “span_name”?",
        id="unknown-rule-key",
    ),
    pytest.param(
        doc(
            "- slug: a\n  name: A\n  budget: {p95: 1}\n  objective: {targt: 99, threshold_ms: 9}\n"
        ),
        6,
        "Unknown key “targt” in objective. Did you mean “target”?",
        id="unknown-objective-key",
    ),
    pytest.param(
        doc("- slug: a\n  name: A\n  budget:\n    p96: 100\n"),
        6,
        "Unknown percentile “p96”; use one of p50, p90, p95, p99.",
        id="unknown-percentile",
    ),
    pytest.param(
        doc("- slug: a\n  name: A\n  budget:\n    p95: -5\n"),
        6,
        "Budget p95 must be positive, not -5.",
        id="negative-budget",
    ),
    pytest.param(
        doc("- slug: a\n  name: A\n  budget:\n    p95: 0\n"),
        6,
        "Budget p95 must be positive, not 0.",
        id="zero-budget",
    ),
    pytest.param(
        doc("- slug: a\n  name: A\n  budget:\n    p95: 2.5\n"),
        6,
        "Budget p95 must be a whole number of milliseconds.",
        id="fractional-budget",
    ),
    pytest.param(
        doc("- slug: a\n  name: A\n  budget:\n    p95: fast\n"),
        6,
        "Budget p95 must be a whole number of milliseconds.",
        id="text-budget",
    ),
    pytest.param(
        doc("- slug: a\n  name: A\n  budget:\n    p95: .inf\n"),
        6,
        "Budget p95 must be a whole number of milliseconds.",
        id="infinite-budget",
    ),
    pytest.param(
        stage_doc("- slug: s\n  name: S\n  budget: {p95: 300, p99: 500}\n"),
        9,
        "A stage budget has exactly one percentile",
        id="stage-budget-two-percentiles",
    ),
    pytest.param(
        doc(
            "- slug: a\n  name: A\n  budget: {p95: 1}\n"
            "- slug: b\n  name: B\n  budget: {p95: 1}\n"
            "- slug: a\n  name: A again\n  budget: {p95: 1}\n"
        ),
        9,
        "Duplicate pipeline slug “a” (first at line 3).",
        id="duplicate-pipeline-slug",
    ),
    pytest.param(
        stage_doc("- {slug: s, name: S}\n- {slug: t, name: T}\n- {slug: s, name: S2}\n"),
        9,
        "Duplicate stage slug “s” in this pipeline (first at line 7).",
        id="duplicate-stage-slug",
    ),
    pytest.param(
        stage_doc("- slug: s\n  name: S\n  match:\n    - span_name_regex: '(unclosed'\n"),
        10,
        "“span_name_regex”: Invalid regular expression “(unclosed”",
        id="invalid-regex",
    ),
    pytest.param(
        stage_doc("- slug: s\n  name: S\n  match:\n    - span_name_regex: '(a)\\1'\n"),
        10,
        "“span_name_regex”: Invalid regular expression “(a)\\1”: backreferences are not"
        " supported (RE2 syntax).",
        id="regex-backreference",
    ),
    pytest.param(
        stage_doc("- slug: s\n  name: S\n  match:\n    - span_name_regex: '^(?=x)'\n"),
        10,
        "“span_name_regex”: Invalid regular expression “^(?=x)”: lookahead assertions are not"
        " supported (RE2 syntax).",
        id="regex-lookahead",
    ),
    pytest.param(
        stage_doc("- slug: s\n  name: S\n  match:\n    - span_name: '" + "?" * 200 + "'\n"),
        10,
        "“span_name”: Invalid glob",
        id="glob-too-complex",
    ),
    pytest.param(
        doc(
            "- slug: a\n  name: A\n  budget: {p95: 1}\n  match: {root_span: '" + "?" * 200 + "'}\n"
        ),
        6,
        "“root_span”: Invalid glob",
        id="root-span-glob-too-complex",
    ),
    pytest.param(
        stage_doc(
            "- slug: s\n  name: S\n  match:\n    - span_name: a*\n      span_name_regex: ^a\n"
        ),
        11,
        "Use span_name (a glob) or span_name_regex, not both in one rule.",
        id="glob-and-regex",
    ),
    pytest.param(
        stage_doc("- slug: s\n  name: S\n  match:\n    - {}\n"),
        10,
        "A rule needs at least one condition",
        id="empty-rule",
    ),
    pytest.param(
        stage_doc("- slug: s\n  name: S\n  match:\n    - {portion: until_first_token}\n"),
        10,
        "A rule needs at least one condition",
        id="rule-with-only-a-portion",
    ),
    pytest.param(
        stage_doc("- slug: s\n  name: S\n  match:\n    - span_name: x\n      portion: half\n"),
        11,
        "Unknown portion “half”; use one of whole, until_first_token, after_first_token, gateway,"
        " queue, prefill, decode.",
        id="bad-portion",
    ),
    pytest.param(
        stage_doc("- slug: s\n  name: S\n  match:\n    - span_name: x\n      span_kind: servr\n"),
        11,
        "Unknown span_kind “servr”; use one of internal, server, client, producer, consumer. "
        "Did you mean “server”?",
        id="bad-span-kind",
    ),
    pytest.param(
        doc("- slug: Rag_Chat\n  name: A\n  budget: {p95: 1}\n"),
        3,
        "“slug”: Use up to 50 lowercase letters",
        id="invalid-slug",
    ),
    pytest.param("team: Acme!\n", 1, "“team”: Use up to 50 lowercase letters", id="bad-team"),
    pytest.param(
        doc("- slug: a\n  name: A\n  budget: {p95: 1}\n  objective:\n    target: 99.5\n"),
        7,
        "An objective needs both a target and a threshold: “threshold_ms” is missing",
        id="objective-without-threshold",
    ),
    pytest.param(
        doc("- slug: a\n  name: A\n  budget: {p95: 1}\n  objective: {threshold_ms: 4000}\n"),
        6,
        "An objective needs both a target and a threshold: “target” is missing",
        id="objective-without-target",
    ),
    pytest.param(
        doc(
            "- slug: a\n  name: A\n  budget: {p95: 1}\n"
            "  objective: {target: 100, threshold_ms: 9}\n"
        ),
        6,
        "The objective target must be between 1 and 99.999, not 100.",
        id="objective-target-out-of-range",
    ),
    pytest.param(
        "team: acme\npipelines:\n  slug: a\n",
        3,
        "“pipelines” must be a list of pipelines, not a mapping",
        id="pipelines-is-a-mapping",
    ),
    pytest.param(
        doc("- slug: a\n  name: A\n  budget: [p95, 100]\n"),
        5,
        "A budget maps one or more of p50/p90/p95/p99 to milliseconds.",
        id="budget-is-a-list",
    ),
    pytest.param(
        doc("- slug: a\n  name: A\n  budget: {p95: 1}\n  match: [service, api]\n"),
        6,
        "Match must be a mapping (key: value), not a list.",
        id="match-is-a-list",
    ),
    pytest.param(
        stage_doc("- slug: s\n  name: S\n  match: {span_name: x}\n"),
        9,
        "“match” must be a list of rules, not a mapping",
        id="stage-match-is-a-mapping",
    ),
    pytest.param(
        doc("- slug: a\n  name: [A]\n  budget: {p95: 1}\n"),
        4,
        "“name” must be text, not a list.",
        id="name-is-a-list",
    ),
    pytest.param(
        doc("- slug: a\n  name: 2024\n  budget: {p95: 1}\n"),
        4,
        "“name” must be text, not a number (put it in quotes).",
        id="name-is-a-number",
    ),
    pytest.param(
        stage_doc("- slug: s\n  name: S\n  match:\n    - attributes: [a, b]\n"),
        10,
        "“attributes” must be a mapping (key: value), not a list.",
        id="attributes-is-a-list",
    ),
    pytest.param(
        stage_doc("- slug: s\n  name: S\n  match:\n    - attributes:\n        a: {b: c}\n"),
        11,
        "“a” must be a single value, not a mapping.",
        id="attribute-value-is-a-mapping",
    ),
    pytest.param(
        "pipelines: []\n", 1, "The file is missing the required key “team”.", id="missing-team"
    ),
    pytest.param(
        doc("- name: A\n  budget: {p95: 1}\n"),
        3,
        "Pipeline is missing the required key “slug”.",
        id="missing-pipeline-slug",
    ),
    pytest.param(
        doc("- slug: a\n  budget: {p95: 1}\n"),
        3,
        "Pipeline is missing the required key “name”.",
        id="missing-pipeline-name",
    ),
    pytest.param(
        doc("- slug: a\n  name: A\n"),
        3,
        "Pipeline is missing the required key “budget”.",
        id="missing-pipeline-budget",
    ),
    pytest.param(
        doc("- slug: a\n  name: A\n  budget:\n"),
        5,
        "“budget” needs a value.",
        id="empty-pipeline-budget",
    ),
    pytest.param(
        stage_doc("- slug: s\n"),
        7,
        "Stage is missing the required key “name”.",
        id="missing-stage-name",
    ),
    pytest.param(
        doc("- slug: a\n  name: A\n  name: B\n  budget: {p95: 1}\n"),
        5,
        "Duplicate key “name” (first at line 4).",
        id="duplicate-yaml-key",
    ),
]


@pytest.mark.parametrize(("text", "line", "message"), INVALID)
def test_invalid_files_are_rejected_with_line_and_reason(text, line, message):
    with pytest.raises(ConfigInvalid) as caught:
        parse_document(text)

    found = [(e.line, e.message) for e in caught.value.errors]
    assert any(at == line and message in said for at, said in found), found


def _state() -> list[object]:
    return [list(model.objects.order_by("pk").values()) for model in (Pipeline, Stage, SpanRule)]


@pytest.mark.parametrize(("text", "line", "message"), INVALID)
def test_the_command_prints_file_line_reason_and_changes_nothing(
    world: TeamWorld, tmp_path: Path, text, line, message
):
    make_rule(make_stage(make_pipeline(world.team, "kept"), "s"), span_name="x")
    before = (_state(), config_export(team=world.team))
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    err = io.StringIO()

    with pytest.raises(CommandError, match="nothing was changed"):
        call_command("budgets", "apply", str(path), "--prune", stdout=io.StringIO(), stderr=err)

    assert f"{path}:{line}: {message}" in err.getvalue()
    assert (_state(), config_export(team=world.team)) == before


def test_every_error_is_reported_not_only_the_first():
    text = (
        stage_doc(
            """\
        - slug: s
          name: S
          budget: {p95: -1}
          match:
            - {}
            - {span_name: x, portion: half}
        - slug: s
          name: again
        """
        )
        + "- slug: Bad Slug\n  name: B\n  budget: {p97: 10}\n"
    )

    with pytest.raises(ConfigInvalid) as caught:
        parse_document(text)

    assert [e.line for e in caught.value.errors] == [9, 11, 12, 13, 15, 17]
    assert caught.value.format("f.yaml")[0] == "f.yaml:9: Budget p95 must be positive, not -1."


def test_a_valid_file_parses_into_its_pipelines():
    document = parse_document(
        stage_doc("- slug: s\n  name: S\n  match:\n    - {span_name: x, span_kind: client}\n")
    )

    (pipeline,) = document.sections["pipelines"].pipelines
    assert document.team == "acme"
    assert [stage.slug for stage in pipeline.stages] == ["s"]
    assert pipeline.stages[0].rules[0].span_kind == "client"
    assert pipeline.stages[0].budget_ms is None


def test_the_example_in_the_documentation_is_valid():
    docs = (Path(__file__).resolve().parents[2] / "docs" / "configuration-as-code.md").read_text()
    example = docs.split("```yaml\n", 1)[1].split("```", 1)[0]

    document = parse_document(example)

    (pipeline,) = document.sections["pipelines"].pipelines
    assert [stage.slug for stage in pipeline.stages] == [
        "retrieval",
        "rerank",
        "ttft",
        "generation",
    ]


@settings(max_examples=300, deadline=None)
@given(
    name=st.text(min_size=1, max_size=100).filter(str.strip),
    description=st.text(max_size=300),
    key=st.text(min_size=1, max_size=30).filter(str.strip),
    value=st.one_of(
        st.text(max_size=30),
        st.integers(),
        st.booleans(),
        st.floats(allow_nan=False, allow_infinity=False),
    ),
)
def test_exported_text_and_values_read_back_unchanged(name, description, key, value):
    data = {
        "team": "acme",
        "pipelines": [
            {
                "slug": "p",
                "name": name,
                "description": description,
                "match": {"attributes": {key: value}},
                "budget": {"p95": 100},
            }
        ],
    }

    (pipeline,) = parse_document(dump_yaml(data)).sections["pipelines"].pipelines

    assert (pipeline.name, pipeline.description) == (name, description)
    assert pipeline.match_attributes == {key: value}
    assert type(pipeline.match_attributes[key]) is type(value)


def test_evaluation_settings_parse_with_defaults_for_the_keys_left_out():
    document = parse_document(
        doc("- slug: a\n  name: A\n  budget: {p95: 1}\n  evaluation: {window_s: 60.0}\n")
        + "- slug: b\n  name: B\n  budget: {p95: 1}\n"
    )

    first, second = document.sections["pipelines"].pipelines
    assert first.evaluation == {"evaluation_window_s": 60, "min_samples": 20, "close_after": 3}
    assert type(first.evaluation["evaluation_window_s"]) is int
    assert second.evaluation == {"evaluation_window_s": 300, "min_samples": 20, "close_after": 3}


def test_every_bad_evaluation_value_is_reported_on_its_own_line():
    text = doc(
        "- slug: a\n  name: A\n  budget: {p95: 1}\n  evaluation:\n"
        "    window_s: 10\n    min_samples: -1\n    close_after: 0\n    closeafter: 3\n"
    )

    with pytest.raises(ConfigInvalid) as caught:
        parse_document(text)

    assert [e.line for e in caught.value.errors] == [7, 8, 9, 10]
