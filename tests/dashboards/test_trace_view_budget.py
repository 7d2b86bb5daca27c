"""A trace whose skeletons weigh more than a page reads shows the breakdown stored when it
was analyzed, says why, and lists no spans; within the budget it is taken apart."""

import pytest
from django.test import override_settings

from tests.builders.api import token_client
from tests.builders.ingested_traces import Explorer
from tests.conftest import client_for
from tests.dashboards.test_trace_detail import cell, detail_url

# Five spans weigh a little more than 5 KiB as read (1 KiB each, and their texts).
UNDER_FIVE_SPANS = 5 * 1024


@pytest.mark.parametrize("role", ["owner", "editor", "viewer"])
def test_past_its_budget_the_page_shows_the_stored_breakdown_and_why(
    explorer: Explorer, role: str
) -> None:
    with override_settings(TRACE_VIEW_MAX_BYTES=UNDER_FIVE_SPANS):
        response = client_for(getattr(explorer.world, role)).get(detail_url(explorer.ok))

    assert response.status_code == 200
    html = response.content.decode()
    assert 'data-role="analysis-failure"' in html
    assert "weigh more than 5.0 KiB, more than a page reads" in html
    assert 'id="waterfall"' not in html
    # The stage samples written at finalization.
    assert cell(html, "retrieval", "wall") == "250 ms"


def test_past_its_budget_the_api_gives_the_stored_breakdown_without_spans(
    explorer: Explorer,
) -> None:
    url = f"/api/v1/traces/{bytes(explorer.ok.trace_id).hex()}/"
    with override_settings(TRACE_VIEW_MAX_BYTES=UNDER_FIVE_SPANS):
        body = token_client(explorer.world.viewer).get(url).json()
    assert (body["breakdown"]["source"], body["spans"]) == ("stage_samples", [])
    assert body["breakdown"]["adds_up"] is True

    within = token_client(explorer.world.viewer).get(url).json()
    assert (within["breakdown"]["source"], len(within["spans"])) == ("spans", 5)
