"""What a card's colour and a column's title promise: a green card only where a figure was
judged within its budget, and a Closed column that never reads "open 3 minutes"."""

import re
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.utils import timezone

from apps.rollups.models import Violation
from tests.builders.api import ApiWorld
from tests.conftest import client_for
from tests.dashboards.test_dashboard_pages import recent  # noqa: F401 - the fixture

MEMBERS = ["owner", "editor", "viewer"]


def kpi_class(html: str, role: str) -> str:
    found = re.search(rf'<div class="(kpi[^"]*)" data-role="{role}">', html)
    assert found, role
    return found.group(1).split()[1] if len(found.group(1).split()) > 1 else ""


def cell(row: str, role: str) -> str:
    found = re.search(rf'data-role="{role}">(.*?)</td>', row, re.S)
    assert found, role
    return " ".join(re.sub(r"<[^>]+>", " ", found.group(1)).split())


def violation(world: ApiWorld, **fields: object) -> Violation:
    now = timezone.now()
    values: dict[str, object] = {
        "team": world.world.team, "pipeline": world.pipeline, "stage": world.retrieval,
        "percentile": "p95", "budget_ms": 400, "window_s": 300, "observed_ms": 650,
        "peak_ms": 900, "sample_count": 80, "opened_at": now - timedelta(minutes=3),
        "last_evaluated_at": now,
    }  # fmt: skip
    values.update(fields)
    return Violation.objects.create(**values)


def test_a_card_is_neutral_unless_its_figure_was_judged() -> None:
    css = (Path(settings.BASE_DIR) / "static" / "css" / "app.css").read_text()
    rule = re.search(r"^\.kpi \{([^}]*)\}", css, re.M)
    assert rule
    assert "var(--ok)" not in rule.group(1)
    assert re.search(r"^\.kpi\.ok \{[^}]*var\(--ok\)", css, re.M)
    assert re.search(r"^\.kpi\.over \{[^}]*var\(--bad\)", css, re.M)


@pytest.mark.parametrize("role", MEMBERS)
def test_the_latest_evaluation_of_an_open_violation_is_red_and_says_why(
    recent: ApiWorld,  # noqa: F811
    role: str,
) -> None:
    open_one = violation(recent, observed_ms=650)
    html = (
        client_for(getattr(recent.world, role))
        .get(f"/teams/acme/violations/{open_one.pk}/")
        .content.decode()
    )
    assert kpi_class(html, "latest") == "over"
    assert kpi_class(html, "state") == "over"
    assert "over its 400 ms budget · 80 samples in 5 min" in html


def test_a_closed_violation_whose_latest_evaluation_is_under_budget_is_green(
    recent: ApiWorld,  # noqa: F811
) -> None:
    now = timezone.now()
    closed = violation(recent, observed_ms=380.5, closed_at=now, last_evaluated_at=now)
    html = client_for(recent.world.viewer).get(f"/teams/acme/violations/{closed.pk}/").content
    page = html.decode()
    assert kpi_class(page, "latest") == "ok"
    assert kpi_class(page, "state") == "ok"
    assert "back under its 400 ms budget" in page


def test_the_pipeline_card_is_red_while_an_end_to_end_violation_is_open(
    recent: ApiWorld,  # noqa: F811
) -> None:
    client = client_for(recent.world.viewer)
    url = "/teams/acme/dashboards/rag-chat/"
    before = client.get(url, {"window": "1h"}).content.decode()
    assert kpi_class(before, "violations") == "ok"
    assert kpi_class(before, "e2e") == "ok"  # its p99 (the page's) is 55 % of the budget
    e2e = violation(recent, stage=None, budget_ms=2500, observed_ms=2712.25)

    html = client.get(url, {"window": "1h"}).content.decode()
    at_p95 = client.get(url, {"window": "1h", "percentile": "p95"}).content.decode()

    # A p95 violation open: the p99 card is no longer green, and names it...
    assert kpi_class(html, "e2e") == ""
    assert kpi_class(html, "violations") == "over"
    link = re.search(r'<a class="over-text" data-role="violating" href="([^"]+)">([^<]+)<', html)
    assert link
    assert link.group(1) == f"/teams/acme/violations/{e2e.pk}/"
    assert link.group(2) == "p95 violating now: 2.71 s over the last 5 min"
    # ... and the p95 card is red, whatever the hour's p95.
    assert kpi_class(at_p95, "e2e") == "over"
    # Traffic and errors are counted, not judged: never green.
    assert kpi_class(html, "traffic") == ""
    assert kpi_class(html, "errors") == ""


def test_the_stage_card_is_red_while_its_violation_is_open(
    recent: ApiWorld,  # noqa: F811
) -> None:
    url = "/teams/acme/dashboards/rag-chat/stages/retrieval/"
    client = client_for(recent.world.viewer)
    violation(recent)
    html = client.get(url, {"window": "1h"}).content.decode()
    assert kpi_class(html, "observed") == "over"
    assert "violating now: 650 ms over the last 5 min" in html
    assert kpi_class(html, "count") == ""


def test_an_open_violation_reads_still_open_in_the_closed_column(
    recent: ApiWorld,  # noqa: F811
) -> None:
    now = timezone.now()
    open_one = violation(recent, opened_at=now - timedelta(minutes=3))
    closed = violation(
        recent, opened_at=now - timedelta(hours=2), closed_at=now - timedelta(hours=1, minutes=55)
    )
    html = client_for(recent.world.viewer).get("/teams/acme/violations/").content.decode()
    assert "<th>Closed (UTC)</th><th>Lasted</th>" in html
    open_row = html.split(f'data-violation="{open_one.pk}"')[1].split("</tr>")[0]
    closed_row = html.split(f'data-violation="{closed.pk}"')[1].split("</tr>")[0]
    assert cell(open_row, "closed") == "still open"
    assert re.fullmatch(r"3 min( [1-9] s)? so far", cell(open_row, "lasted"))
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d", cell(closed_row, "closed"))
    assert cell(closed_row, "lasted") == "5 min"
    assert "open" not in cell(closed_row, "closed")


def test_an_outsider_sees_none_of_it(recent: ApiWorld) -> None:  # noqa: F811
    open_one = violation(recent)
    client = client_for(recent.world.outsider)
    assert client.get(f"/teams/acme/violations/{open_one.pk}/").status_code == 404
    assert client.get("/teams/acme/violations/").status_code == 404
