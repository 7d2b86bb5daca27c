"""Web requests run under a statement timeout; workers and commands do not."""

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.error import HTTPError
from urllib.request import Request, urlopen

import psycopg
import pytest
from django.db import connection
from django.test import Client

from apps.teams.services import api_token_create
from tests import processes
from tests.builders.configuration import make_pipeline, make_team, make_user
from tests.processes import web_server

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

TIMEOUT_S = 1


def _get(url: str, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    request = Request(url, headers=headers)  # noqa: S310 - a URL of our own test server
    try:
        with urlopen(request, timeout=30) as response:  # noqa: S310
            return response.status, dict(response.headers), response.read()
    except HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


@contextmanager
def _pipelines_locked() -> Iterator[None]:
    """Another session holds the pipelines table: a request reading it waits."""
    with psycopg.connect(processes.test_database_url(), autocommit=False) as blocker:
        blocker.execute("LOCK TABLE pipelines_pipeline IN ACCESS EXCLUSIVE MODE")
        yield
        blocker.rollback()


def test_a_statement_past_the_timeout_answers_503_and_the_worker_serves_the_next(
    tmp_path: Path,
) -> None:
    owner = make_user("olivia")
    make_pipeline(make_team("acme", owner=owner), "rag-chat")
    _, token = api_token_create(user=owner, name="t")
    bearer = {"Authorization": f"Bearer {token}"}
    env = {"WEB_STATEMENT_TIMEOUT_S": str(TIMEOUT_S)}
    with web_server(tmp_path / "web.log", env=env) as server:
        url = f"{server.url}/api/v1/pipelines/?team=acme"
        assert _get(url, bearer)[0] == 200
        with _pipelines_locked():
            started = time.monotonic()
            status, headers, body = _get(url, bearer)
            took = time.monotonic() - started
        # The same single worker and its connection serve the next request.
        after = _get(url, bearer)[0]

    assert status == 503
    assert headers["Retry-After"] == "30"
    assert json.loads(body)["error"]["code"] == "timeout"
    # Cut short at the timeout, not left to gunicorn's worker timeout (60 s).
    assert took < TIMEOUT_S + 5
    assert after == 200


def test_a_page_past_the_timeout_explains_itself(tmp_path: Path) -> None:
    owner = make_user("olivia")
    make_team("acme", owner=owner)
    browser = Client()
    browser.force_login(owner)  # a session stored in the database the server reads
    cookie = {"Cookie": f"sessionid={browser.cookies['sessionid'].value}"}
    env = {"WEB_STATEMENT_TIMEOUT_S": str(TIMEOUT_S)}
    with web_server(tmp_path / "web.log", env=env) as server, _pipelines_locked():
        status, headers, body = _get(f"{server.url}/teams/acme/pipelines/", cookie)

    assert status == 503
    assert headers["Retry-After"] == "30"
    page = body.decode()
    assert "This took too long" in page
    assert "Nothing was changed" in page


def test_workers_and_commands_keep_no_web_timeout(db: None) -> None:
    # The test process is not a web process: its connection is left as PostgreSQL has it.
    with connection.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        assert cursor.fetchone()[0] == "0"
