"""Violations, objective and fit endpoints: access for every caller, filters, pages, numbers."""

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
import yaml
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from apps.pipelines.models import Pipeline, Stage
from apps.rollups.models import Violation
from apps.teams.services import ingest_token_create
from tests.builders.api import ApiWorld, error_of, session_client, token_client
from tests.builders.evaluation_rollups import make_sample, make_trace, put_bucket
from tests.timing import S

LIST = "/api/v1/violations/"
MEMBERS = ["owner", "editor", "viewer"]


def detail(violation: Violation) -> str:
    return f"/api/v1/violations/{violation.pk}/"


def objective(slug: str = "rag-chat") -> str:
    return f"/api/v1/pipelines/{slug}/objective"


def fit(slug: str = "rag-chat") -> str:
    return f"/api/v1/pipelines/{slug}/fit"


def violation(
    pipeline: Pipeline,
    stage: Stage | None,
    *,
    hours_ago: float,
    closed: bool = False,
    **fields: Any,
) -> Violation:
    opened = datetime(2026, 3, 2, 12, tzinfo=UTC) - timedelta(hours=hours_ago)
    values = {
        "percentile": stage.budget_percentile if stage else "p95",
        "budget_ms": stage.budget_ms if stage else 2500,
        "window_s": 300,
        "observed_ms": 420.5,
        "peak_ms": 510.0,
        "sample_count": 240,
        "example_trace_ids": ["ab" * 16],
        **fields,
    }
    return Violation.objects.create(
        team_id=pipeline.team_id,
        pipeline=pipeline,
        stage=stage,
        opened_at=opened,
        last_evaluated_at=opened + timedelta(minutes=5),
        closed_at=opened + timedelta(minutes=10) if closed else None,
        consecutive_ok=3 if closed else 0,
        **values,
    )


@dataclass
class Violations:
    api: ApiWorld
    retrieval_open: Violation
    retrieval_closed: Violation
    e2e_open: Violation
    generation_closed: Violation
    theirs: Violation


@pytest.fixture
def data(api: ApiWorld) -> Violations:
    return Violations(
        api,
        retrieval_open=violation(api.pipeline, api.retrieval, hours_ago=1),
        retrieval_closed=violation(api.pipeline, api.retrieval, hours_ago=5, closed=True),
        e2e_open=violation(api.pipeline, None, hours_ago=2, percentile="p99", budget_ms=4000),
        generation_closed=violation(api.pipeline, api.generation, hours_ago=3, closed=True),
        theirs=violation(api.other_pipeline, api.other_stage, hours_ago=0),
    )


def endpoints(data: Violations) -> list[str]:
    return [LIST, detail(data.retrieval_open), objective(), fit()]


def ids(response: Any) -> list[int]:
    return [v["id"] for v in response.json()["results"]]


@pytest.mark.parametrize("role", MEMBERS)
def test_every_member_reads_every_endpoint_with_a_token(data: Violations, role: str) -> None:
    client = token_client(getattr(data.api.world, role))
    for url in endpoints(data):
        assert client.get(url).status_code == 200, url


def test_a_browser_session_works_too(data: Violations) -> None:
    client = session_client(data.api.world.viewer)
    for url in endpoints(data):
        assert client.get(url).status_code == 200, url


def test_outsider_gets_404_naming_the_team(data: Violations) -> None:
    client = token_client(data.api.world.outsider)
    for url in endpoints(data):
        response = client.get(url, {"team": "acme"})
        assert response.status_code == 404, url
        assert error_of(response)["code"] == "not_found"


def test_outsider_sees_only_their_own_team(data: Violations) -> None:
    client = token_client(data.api.world.outsider)
    assert ids(client.get(LIST)) == [data.theirs.pk]
    assert client.get(detail(data.retrieval_open)).status_code == 404
    assert client.get(detail(data.theirs)).json()["pipeline"] == "rag-chat"
    # Their own pipeline of the same slug answers, never acme's.
    assert client.get(fit()).json()["stages"][0]["budget_ms"] == 300


def test_anonymous_gets_401(data: Violations) -> None:
    for url in endpoints(data):
        response = APIClient().get(url)
        assert response.status_code == 401, url
        assert error_of(response)["code"] == "not_authenticated"


def test_an_ingest_token_gets_401(data: Violations) -> None:
    _, raw = ingest_token_create(team=data.api.world.team, name="otel", created_by=None)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    for url in endpoints(data):
        response = client.get(url)
        assert response.status_code == 401, url
        assert "Ingest tokens can only send spans" in error_of(response)["message"]


def test_writes_are_not_allowed(data: Violations) -> None:
    client = token_client(data.api.world.owner)
    for url in endpoints(data):
        assert client.post(url, {}, format="json").status_code == 405, url
        assert client.delete(url).status_code == 405, url
    assert Violation.objects.count() == 5


def test_the_list_is_newest_first_in_pages(data: Violations) -> None:
    client = token_client(data.api.world.owner)
    body = client.get(LIST, {"page_size": 3}).json()
    assert body["count"] == 4
    assert [v["id"] for v in body["results"]] == [
        data.retrieval_open.pk,
        data.e2e_open.pk,
        data.generation_closed.pk,
    ]
    second = client.get(body["next"]).json()
    assert [v["id"] for v in second["results"]] == [data.retrieval_closed.pk]


def test_a_violation_reads_in_full(data: Violations) -> None:
    body = token_client(data.api.world.viewer).get(detail(data.retrieval_open)).json()
    assert body == {
        "id": data.retrieval_open.pk,
        "pipeline": "rag-chat",
        "scope": "stage",
        "stage": "retrieval",
        "state": "open",
        "percentile": "p95",
        "budget_ms": 400,
        "observed_ms": 420.5,
        "peak_ms": 510.0,
        "sample_count": 240,
        "window_s": 300,
        "opened_at": "2026-03-02T11:00:00Z",
        "last_evaluated_at": "2026-03-02T11:05:00Z",
        "closed_at": None,
        "consecutive_ok": 0,
        "example_trace_ids": ["ab" * 16],
    }
    e2e = token_client(data.api.world.viewer).get(detail(data.e2e_open)).json()
    assert (e2e["scope"], e2e["stage"], e2e["percentile"]) == ("e2e", None, "p99")


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"state": "open"}, ["retrieval_open", "e2e_open"]),
        ({"state": "closed"}, ["generation_closed", "retrieval_closed"]),
        ({"stage": "e2e"}, ["e2e_open"]),
        ({"stage": "retrieval"}, ["retrieval_open", "retrieval_closed"]),
        ({"stage": "retrieval", "state": "closed"}, ["retrieval_closed"]),
        ({"pipeline": "rag-chat", "state": "open"}, ["retrieval_open", "e2e_open"]),
        ({"pipeline": "nowhere"}, []),
    ],
)
def test_filters_narrow_the_list(
    data: Violations, query: dict[str, str], expected: list[str]
) -> None:
    response = token_client(data.api.world.viewer).get(LIST, query)
    assert response.status_code == 200
    assert ids(response) == [getattr(data, name).pk for name in expected]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"state": "sleeping"}, "state"),
        ({"stage": "not a slug"}, "stage"),
        ({"pipeline": "x" * 51}, "pipeline"),
        ({"page_size": "0"}, None),
    ],
)
def test_malformed_filters_are_400_naming_the_field(
    data: Violations, query: dict[str, str], field: str | None
) -> None:
    response = token_client(data.api.world.viewer).get(LIST, query)
    if field is None:
        # DRF falls back to the default page size for a page size it cannot use.
        assert response.status_code == 200
        return
    assert response.status_code == 400
    assert field in error_of(response)["fields"]


def test_unknown_violation_and_pipeline_are_404(data: Violations) -> None:
    client = token_client(data.api.world.owner)
    assert client.get("/api/v1/violations/999999/").status_code == 404
    assert client.get(objective("nowhere")).status_code == 404
    assert client.get(fit("nowhere")).status_code == 404


def test_the_objective_reports_budget_and_burn_rates(api: ApiWorld) -> None:
    Pipeline.objects.filter(pk=api.pipeline.pk).update(
        objective_target=Decimal("99.5"), objective_threshold_ms=3000
    )
    seconds = int(timezone.now().timestamp())
    # The same traffic at every resolution, as the rollup engine writes it: which of
    # them a window uses depends on where "now" falls within the minute.
    for resolution in (10, 60, 3600, 86400):
        start = datetime.fromtimestamp(seconds - seconds % resolution, tz=UTC)
        put_bucket(api.pipeline, None, start, [100.0] * 200, good=198, resolution=resolution)

    body = token_client(api.world.viewer).get(objective()).json()

    assert body["objective"] == {"target": 99.5, "threshold_ms": 3000}
    budget = body["error_budget"]
    assert (budget["period_days"], budget["total"], budget["good"], budget["bad"]) == (
        30,
        200,
        198,
        2,
    )
    assert budget["allowed_bad"] == pytest.approx(1.0)
    assert budget["remaining"] == pytest.approx(-1.0)
    assert [rate["window"] for rate in body["burn_rates"]] == ["5m", "30m", "1h", "6h", "3d"]
    assert body["burn_rates"][0]["bad_fraction"] == pytest.approx(0.01)
    assert body["burn_rates"][0]["burn_rate"] == pytest.approx(2.0)
    # All of it in the last ten seconds: no window has data over half its length yet.
    assert [rate["judged"] for rate in body["burn_rates"]] == [False] * 5
    assert all(0 <= rate["coverage"] <= 0.05 for rate in body["burn_rates"])


def test_a_pipeline_without_an_objective_says_so(api: ApiWorld) -> None:
    body = token_client(api.world.viewer).get(objective()).json()
    assert body["pipeline"] == "rag-chat"
    assert (body["objective"], body["error_budget"], body["burn_rates"]) == (None, None, [])


def test_the_fit_check_reports_stages_and_the_end_to_end_budget(api: ApiWorld) -> None:
    day_ago = int((timezone.now() - timedelta(days=1)).timestamp()) * S
    for i in range(10):
        # Retrieval within 400 ms, generation within 1500 ms; trace 0 over 2500 ms anyway.
        untracked = 2000 if i == 0 else 100
        trace = make_trace(
            api.pipeline, start_ns=day_ago + i, duration_ms=300 + 1000 + untracked,
            untracked_ms=untracked,
        )  # fmt: skip
        make_sample(trace, api.retrieval, 300)
        make_sample(trace, api.generation, 1000)

    body = token_client(api.world.viewer).get(fit()).json()

    assert body["traces"] == 10
    assert body["headroom"] == 0.1
    e2e = body["e2e"]
    assert (e2e["percentile"], e2e["budget_ms"], e2e["over_budget"], e2e["inconsistent"]) == (
        "p99",
        4000,
        0,
        0,
    )
    stages = {stage["slug"]: stage for stage in body["stages"]}
    assert stages["retrieval"]["runs"] == 10
    assert stages["retrieval"]["over_budget"] == 0
    assert stages["retrieval"]["observed_ms"] == 300.0
    assert stages["retrieval"]["suggested_ms"] == 330
    assert stages["generation"]["expected_share"] == pytest.approx(0.01)
    assert body["scale"] == 1.0


def test_the_schema_documents_the_new_endpoints(db: None) -> None:
    schema = yaml.safe_load(Client().get("/api/schema/").content)
    paths = schema["paths"]
    assert {
        "/api/v1/violations/",
        "/api/v1/violations/{violation_id}/",
        "/api/v1/pipelines/{pipeline_slug}/objective",
        "/api/v1/pipelines/{pipeline_slug}/fit",
    } <= set(paths)
    params = {p["name"] for p in paths["/api/v1/violations/"]["get"]["parameters"]}
    assert {"team", "pipeline", "stage", "state", "page", "page_size"} <= params
    assert {"200", "401", "404"} <= set(
        paths["/api/v1/pipelines/{pipeline_slug}/fit"]["get"]["responses"]
    )
