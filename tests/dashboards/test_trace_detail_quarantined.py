"""The page of a trace whose analysis failed answers, says so, and shows what it can."""

from apps.analysis.services.finalize import traces_finalize_due
from apps.ingest.models import TraceState
from tests.conftest import TeamWorld, client_for
from tests.dashboards.test_trace_detail import detail_url
from tests.rollups.hostile import broken_trace, traces_of

BROKEN = 0xB0


def quarantined_trace(world: TeamWorld) -> str:
    broken_trace(world.team, BROKEN)
    traces_finalize_due()
    [trace] = traces_of(world.team, [BROKEN])
    assert trace.state == TraceState.QUARANTINED
    return bytes(trace.trace_id).hex()


def test_the_owner_sees_a_quarantined_trace_with_its_reason_instead_of_an_error(
    world: TeamWorld,
) -> None:
    trace_hex = quarantined_trace(world)

    response = client_for(world.owner).get(detail_url(trace_hex))

    assert response.status_code == 200
    page = response.content.decode()
    assert "quarantined" in page
    assert 'data-role="quarantine"' in page
    assert "AttributeError" in page
    assert 'data-role="analysis-failure"' in page
    assert "stored, but analysis cannot read them" in page  # not "no longer stored"


def test_a_viewer_sees_the_same_page(world: TeamWorld) -> None:
    trace_hex = quarantined_trace(world)

    assert client_for(world.viewer).get(detail_url(trace_hex)).status_code == 200


def test_an_outsider_gets_404_for_a_quarantined_trace(world: TeamWorld) -> None:
    trace_hex = quarantined_trace(world)

    response = client_for(world.outsider).get(detail_url(trace_hex))

    assert response.status_code == 404


def test_the_trace_api_answers_for_a_trace_analysis_cannot_read(world: TeamWorld) -> None:
    trace_hex = quarantined_trace(world)

    response = client_for(world.owner).get(f"/api/v1/traces/{trace_hex}/")

    assert response.status_code == 200
    assert response.json()["state"] == "quarantined"
