"""The traces endpoints in the OpenAPI schema, which generates without a warning."""

import yaml
from django.core.management import call_command
from django.test import Client


def test_the_traces_endpoints_are_documented_read_only(db: None) -> None:
    schema = yaml.safe_load(Client().get("/api/schema/").content)
    paths = schema["paths"]
    for path in (
        "/api/v1/traces/",
        "/api/v1/traces/{trace_hex}/",
        "/api/v1/traces/{trace_hex}/spans/{span_hex}/",
        "/api/v1/traces/unmatched/",
    ):
        assert set(paths[path]) == {"get"}, path
        assert {"bearerAuth": []} in paths[path]["get"]["security"]
        assert {"200", "400", "401", "404"} <= set(paths[path]["get"]["responses"])
    params = {p["name"] for p in paths["/api/v1/traces/"]["get"]["parameters"]}
    assert {"team", "pipeline", "status", "min_duration_ms", "cursor", "page_size"} <= params
    components = schema["components"]["schemas"]
    assert {"TracePage", "TraceDetail", "TraceBreakdown", "UnmatchedTraffic"} <= set(components)
    assert "adds_up" in components["TraceBreakdown"]["properties"]
    # A trace lists its spans without their attributes; one span gives them, cut.
    assert "attributes" not in components["TraceSpan"]["properties"]
    assert {"attributes", "attributes_cut", "events", "entries_truncated"} <= set(
        components["TraceSpanContent"]["properties"]
    )


def test_schema_generation_has_no_warnings(db: None, tmp_path) -> None:
    # --fail-on-warn turns any warning (an operationId collision, say) into an exit.
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "s.yml"))
