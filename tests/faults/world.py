"""Create one fault case's team in the stack's database: ``python -m tests.faults.world``.

Run as a subprocess with the stack's environment, since the test process's own Django
connection points at the shared test database. Prints the ids and the ingest token as
JSON on its last line.

The pipeline's retrieval stage has a 50 ms budget and the case's traces spend 100 ms in
it, so the rule fires once enough samples are in the window (five, 60 s), within seconds
of the first traces, and stays firing for the rest of the case.
"""

import json
import sys

import django


def main(slug: str, receiver_url: str) -> None:
    django.setup()
    from apps.alerts.models import ChannelKind, RuleScope
    from apps.alerts.services.channels import channel_create
    from apps.alerts.services.rules import alert_rule_create
    from apps.pipelines.services import pipeline_create, span_rule_create, stage_create
    from apps.teams.services import ingest_token_create, team_create

    team = team_create(slug=slug, name=slug, owner=None)
    _, token = ingest_token_create(team=team, name="faults", created_by=None)
    pipeline = pipeline_create(
        team=team,
        slug="rag-chat",
        name="RAG chat",
        budget={"p95": 5000},
        match_root_span="POST /chat",
        evaluation_window_s=60,
        min_samples=5,
        close_after=1,
    )
    stage_ids = {}
    for slug_, span_name, budget_ms in (
        ("retrieval", "vector.search", 50),
        ("generation", "llm.chat", 5000),
    ):
        stage = stage_create(pipeline=pipeline, slug=slug_, name=slug_.title(), budget_ms=budget_ms)
        span_rule_create(stage=stage, span_name=span_name)
        stage_ids[slug_] = stage.pk
    channel = channel_create(team=team, slug="hook", kind=ChannelKind.WEBHOOK, url=receiver_url)
    rule = alert_rule_create(
        team=team,
        pipeline=pipeline,
        slug="over-budget",
        channels=[channel],
        scope=RuleScope.ANY_STAGE,
    )
    print(
        json.dumps(
            {
                "team_id": team.pk,
                "token": token,
                "pipeline_id": pipeline.pk,
                "stage_ids": stage_ids,
                "rule_id": rule.pk,
                "channel_id": channel.pk,
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
