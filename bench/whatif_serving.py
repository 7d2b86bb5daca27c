"""What-if serving: the web side's time, with the replays left to the workers.

A pipeline with 2,000 stored simulator requests (sent through the official OTLP encoder,
stored batches, the drain and the finalization). No worker runs: every request measures
only what the web process does before it answers. In process, through the full Django
stack (middleware, session or token, templates, serializers), ``REQUESTS`` timed
requests per row after one warm-up:

- the page asked a new question (a change it was never asked: two runs created, the
  page drawn pending, polling its panel);
- the panel's poll while the runs are still pending (htmx, naming its runs);
- the page of a question already answered (both runs done: tables, charts, levers);
- the API asked a new question (``202`` with the run to poll) and one answered before
  (``200`` with the answer);
- the API's poll of a pending run (``202``).

Goals (issue: safe to open to the public): the page's server time p95 <= 100 ms, the
API's 202 p95 <= 50 ms. Wall time, and the process's CPU time per request.
"""

import itertools
import os
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import connection
from django.test import Client
from django.test.utils import setup_test_environment
from django.utils import timezone

from bench.report import print_rows, write
from bench.whatif import timed_runs

REQUESTS = int(os.environ.get("BENCH_WHATIF_SERVING_REQUESTS", "60"))
TRACES = 2000
PAGE_MS = 100
API_MS = 50
HTMX = {"HX-Request": "true"}
JSON = "application/json"


def _timed(request: Callable[[int], Any], expect: int) -> dict[str, Any]:
    """``REQUESTS`` requests after a warm-up, each checked for its status."""
    counter = itertools.count()

    def one() -> None:
        response = request(next(counter))
        assert response.status_code == expect, (response.status_code, response.content[:300])

    one()  # warm caches and connections
    return timed_runs(one, REQUESTS)


def _rows() -> dict[str, dict[str, Any]]:
    from apps.teams.services import api_token_create
    from apps.whatif.models import WhatIfRun
    from apps.whatif.services import whatif_run_compute
    from tests.builders.configuration import make_team, make_user
    from tests.builders.demo_traffic import rag_pipeline, send_traffic

    user = make_user("serving")
    team = make_team("serving", owner=user)
    rag_pipeline(team)
    send_traffic(team, traces=TRACES, seed=11)
    _, token = api_token_create(user=user, name="bench")
    browser = Client()
    browser.force_login(user)
    api = Client(headers={"Authorization": f"Bearer {token}"})
    page = "/teams/serving/dashboards/rag-chat/whatif/"
    whatif = "/api/v1/pipelines/rag-chat/whatif?team=serving"

    def new_page(n: int) -> Any:
        # A factor never asked before: a new question, so new runs, as a user editing.
        return browser.get(page, {"window": "1h", "change": f"generation:scale:{0.5 + n / 1000}"})

    def new_api(n: int) -> Any:
        change = [{"stage": "rerank", "op": "scale", "factor": 0.3 + n / 1000}]
        return api.post(whatif, {"window": "1h", "changes": change}, content_type=JSON)

    pending_page = browser.get(page, {"window": "1h", "change": "rerank:remove"})
    runs = WhatIfRun.objects.order_by("-pk")[:2]
    replay = next(run for run in runs if run.kind == "replay")
    levers = next(run for run in runs if run.kind == "levers")
    poll = f"{page}?window=1h&change=rerank%3Aremove&run={replay.pk}&levers_run={levers.pk}"
    assert pending_page.status_code == 200
    first = new_api(REQUESTS + 1)
    assert first.status_code == 202, first.content
    pending_api = first.json()["poll"]
    rows = {
        "page, new question (pending, polls)": _timed(new_page, 200),
        "page panel poll, runs pending (htmx)": _timed(
            lambda n: browser.get(poll, headers=HTMX), 200
        ),
        "API, new question: 202": _timed(new_api, 202),
        "API poll of a pending run: 202": _timed(lambda n: api.get(pending_api), 202),
    }
    for run in (replay, levers):
        whatif_run_compute(run_id=run.pk)
    rows["page, question answered (done)"] = _timed(lambda n: browser.get(poll), 200)
    # Fixed bounds: a window ending "now" would make a new question every 10 s.
    now = timezone.now()
    answered = {
        "from": (now - timedelta(hours=1)).isoformat(),
        "to": (now + timedelta(minutes=5)).isoformat(),
        "changes": [{"stage": "rerank", "op": "remove"}],
    }
    api.post(whatif, answered, content_type=JSON)
    for run in WhatIfRun.objects.filter(status="pending"):
        whatif_run_compute(run_id=run.pk)
    rows["API, question answered before: 200"] = _timed(
        lambda n: api.post(whatif, answered, content_type=JSON), 200
    )
    return rows


def run() -> None:
    setup_test_environment()
    # Every timed request asks a new question; without a worker they all stay in flight.
    settings.WHATIF_RUNS_PER_ACCOUNT = 10**6
    # Hundreds of requests a minute from one token: the allowance is not what is measured.
    settings.API_REQUESTS_PER_MINUTE_PER_TOKEN = settings.API_REQUESTS_PER_MINUTE_PER_ACCOUNT = 0
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    try:
        rows = _rows()
        print_rows(
            f"What-if serving, no worker: server time in process, {TRACES:,} stored traces "
            f"(goals: page p95 <= {PAGE_MS} ms, API 202 p95 <= {API_MS} ms)",
            rows,
            ["runs", "p50_ms", "p95_ms", "max_ms", "cpu_p50_ms"],
        )
        path = write(
            "whatif_serving",
            rows,
            {
                "traces": TRACES,
                "requests": REQUESTS,
                "goals_ms": {"page_p95": PAGE_MS, "api_202_p95": API_MS},
                "cpu_count": os.cpu_count(),
                "load_average_end": os.getloadavg(),
            },
        )
        print(f"wrote {path}")
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)
