"""Server time of the configuration pages and API on a large team.

A team with 50 pipelines of 12 stages and 3 rules each; every request goes through
the full Django stack (middleware, auth, templates, serializers) in process.
"""

import time
from typing import Any

from django.db import connection
from django.test import Client
from django.test.utils import setup_test_environment

from bench.report import print_table, summarise, write

PIPELINES = 50
STAGES = 12
RULES = 3
REQUESTS = 100


def _populate() -> tuple[Any, str]:
    from apps.teams.services import api_token_create
    from tests.builders.configuration import (
        make_pipeline,
        make_rule,
        make_stage,
        make_team,
        make_user,
    )

    user = make_user("bench")
    team = make_team("bench", owner=user)
    for p in range(PIPELINES):
        pipeline = make_pipeline(team, f"pipeline-{p:02d}", budget={"p50": 1200, "p95": 2500})
        for s in range(STAGES):
            stage = make_stage(pipeline, f"stage-{s:02d}", budget_ms=100 + s)
            for r in range(RULES):
                make_rule(stage, span_name=f"op.{s}.{r}*", attributes={"k": f"v{r}"})
    _, token = api_token_create(user=user, name="bench")
    return user, token


def _time(client: Client, url: str, headers: dict[str, str] | None = None) -> list[float]:
    client.get(url, headers=headers)  # warm caches and connections
    samples = []
    for _ in range(REQUESTS):
        start = time.perf_counter()
        response = client.get(url, headers=headers)
        samples.append((time.perf_counter() - start) * 1000)
        assert response.status_code == 200, (url, response.status_code)
    return samples


def run() -> None:
    setup_test_environment()
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    try:
        user, token = _populate()
        browser = Client()
        browser.force_login(user)
        api = Client()
        auth = {"Authorization": f"Bearer {token}"}
        rows = {
            "pipeline list page": summarise(_time(browser, "/teams/bench/pipelines/")),
            "pipeline page (12 stages)": summarise(
                _time(browser, "/teams/bench/pipelines/pipeline-07/")
            ),
            "API pipeline list": summarise(_time(api, "/api/v1/pipelines/", auth)),
            "API pipeline detail": summarise(_time(api, "/api/v1/pipelines/pipeline-07/", auth)),
            "YAML export (50 pipelines)": summarise(
                _time(browser, "/teams/bench/config/download/")
            ),
        }
        print_table("Configuration pages and API, server time in process", rows)
        path = write(
            "pages",
            rows,
            {"pipelines": PIPELINES, "stages": STAGES, "rules": RULES, "requests": REQUESTS},
        )
        print(f"\nwritten {path}")
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)
