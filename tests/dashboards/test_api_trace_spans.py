"""One span's attributes and events from the traces API: every member reads them, each
value cut past the display limit with its length given; nobody reads another team's."""

import pytest

from tests.builders.api import error_of, token_client
from tests.builders.ingested_traces import (
    GLOBEX_SPAN,
    LONG_CHARS,
    TOOL,
    Detailed,
    build_detailed,
)
from tests.builders.spans import LLM
from tests.conftest import TeamWorld
from tests.timing import MS

MEMBERS = ["owner", "editor", "viewer"]
DISPLAY_CHARS = 2000  # TRACE_VALUE_DISPLAY_CHARS by default


@pytest.fixture
def detailed(world: TeamWorld) -> Detailed:
    return build_detailed(world)


def span_url(trace_hex: str, span_id: int | str) -> str:
    span_hex = span_id if isinstance(span_id, str) else f"{span_id:016x}"
    return f"/api/v1/traces/{trace_hex}/spans/{span_hex}/"


@pytest.mark.parametrize("role", MEMBERS)
def test_every_member_reads_a_spans_attributes_and_events(detailed: Detailed, role: str) -> None:
    client = token_client(getattr(detailed.world, role))

    body = client.get(span_url(detailed.trace_hex, LLM)).json()

    assert body == {
        "trace_id": detailed.trace_hex,
        "span_id": f"{LLM:016x}",
        "attributes": {"gen_ai.operation.name": "chat"},
        "attributes_cut": {},
        "events": [
            {"name": "first_token", "time_offset_ns": 200 * MS, "attributes": {},
             "attributes_cut": {}},
        ],
        "value_chars": DISPLAY_CHARS,
        "entries": 2,
        "entries_truncated": False,
    }  # fmt: skip


def test_a_long_value_comes_cut_with_its_full_length(detailed: Detailed) -> None:
    body = token_client(detailed.world.viewer).get(span_url(detailed.trace_hex, TOOL)).json()

    assert body["attributes"] == {
        "tool.input": detailed.long_value[:DISPLAY_CHARS],
        "tool.args": ["a", "b"],
        "tool.retries": 2,
    }
    assert body["attributes_cut"] == {"tool.input": LONG_CHARS}
    [retry] = body["events"]
    assert (retry["name"], retry["time_offset_ns"]) == ("retry", 10 * MS)
    assert retry["attributes"] == {
        "reason": "timeout",
        "payload": detailed.long_value[:DISPLAY_CHARS],
    }
    assert retry["attributes_cut"] == {"payload": LONG_CHARS}


def test_past_the_most_entries_the_first_come_and_it_says_so(
    detailed: Detailed, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("apps.ingest.selectors.span_details.MAX_SHOWN_VALUES", 2)

    body = token_client(detailed.world.viewer).get(span_url(detailed.trace_hex, TOOL)).json()

    # Attributes in key order, then the event's.
    assert list(body["attributes"]) == ["tool.args", "tool.input"]
    assert body["events"] == []
    assert (body["entries"], body["entries_truncated"]) == (5, True)


def test_an_outsider_gets_404(detailed: Detailed) -> None:
    response = token_client(detailed.world.outsider).get(
        span_url(detailed.trace_hex, LLM), {"team": "acme"}
    )
    assert response.status_code == 404
    assert error_of(response)["code"] == "not_found"


def test_a_span_of_another_teams_trace_is_a_404(detailed: Detailed) -> None:
    owner = token_client(detailed.world.owner)
    # globex's trace, asked for under acme; globex's span, asked for in acme's trace.
    for url in (
        span_url(detailed.theirs_hex, GLOBEX_SPAN),
        span_url(detailed.trace_hex, GLOBEX_SPAN),
    ):
        response = owner.get(url)
        assert response.status_code == 404, url
        assert "only globex" not in response.content.decode()
    outsider = token_client(detailed.world.outsider)
    assert outsider.get(span_url(detailed.theirs_hex, GLOBEX_SPAN)).status_code == 200


@pytest.mark.parametrize(
    "span_hex", ["zz", "0" * 15, "0" * 17, "f" * 16, "0x" + "0" * 14, "%20" * 16]
)
def test_an_unknown_or_malformed_span_id_is_a_404(detailed: Detailed, span_hex: str) -> None:
    response = token_client(detailed.world.viewer).get(span_url(detailed.trace_hex, span_hex))
    assert response.status_code == 404
    assert error_of(response)["code"] == "not_found"


def test_an_upper_case_span_id_finds_the_span(detailed: Detailed) -> None:
    url = span_url(detailed.trace_hex.upper(), f"{LLM:016X}")
    body = token_client(detailed.world.viewer).get(url).json()
    assert body["span_id"] == f"{LLM:016x}"
