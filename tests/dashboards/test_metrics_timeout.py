"""A scrape whose figures take past the web's statement timeout answers 503 in text, with
Retry-After, and the worker serves the next scrape."""

import time
from pathlib import Path
from urllib.error import HTTPError
from urllib.request import Request, urlopen

import psycopg
import pytest

from apps.teams.services import metrics_token_create
from tests import processes
from tests.builders.configuration import make_pipeline, make_team, make_user
from tests.processes import web_server

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def _get(url: str, token: str) -> tuple[int, dict[str, str], bytes]:
    request = Request(url, headers={"Authorization": f"Bearer {token}"})  # noqa: S310
    try:
        with urlopen(request, timeout=30) as response:  # noqa: S310 - our own test server
            return response.status, dict(response.headers), response.read()
    except HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def test_a_scrape_past_the_statement_timeout_answers_503_in_text(
    tmp_path: Path, clean_cache: None
) -> None:
    owner = make_user("olivia")
    team = make_team("acme", owner=owner)
    make_pipeline(team, "rag-chat")
    _, token = metrics_token_create(team=team, name="p", created_by=owner)
    env = {"WEB_STATEMENT_TIMEOUT_S": "1", "METRICS_CACHE_SECONDS": "0"}
    with web_server(tmp_path / "web.log", env=env) as server:
        url = f"{server.url}/metrics"
        with psycopg.connect(processes.test_database_url(), autocommit=False) as blocker:
            blocker.execute("LOCK TABLE pipelines_pipeline IN ACCESS EXCLUSIVE MODE")
            started = time.monotonic()
            status, headers, body = _get(url, token)
            took = time.monotonic() - started
            blocker.rollback()
        after = _get(url, token)

    assert status == 503
    assert headers["Retry-After"] == "30"
    assert headers["Content-Type"] == "text/plain; charset=utf-8"
    assert b"took too long" in body
    assert took < 6
    assert after[0] == 200
    assert b'latency_budget_pipeline_info{team="acme",pipeline="rag-chat"' in after[2]
