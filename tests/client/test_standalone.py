"""The client in a process of its own: it imports without Django (or the OpenTelemetry
SDK), and with no tracer provider set it records nothing yet keeps deadlines, pulls its
levers and counts its decisions."""

import json
import subprocess
import sys

import pytest

from tests.client.support import expected_rest, runtime_document, stage_doc


def run_isolated(code: str, *args: str) -> str:
    """``code`` in a fresh interpreter (``-I``: no PYTHON* variables, no user site, no
    current directory on the path); its standard output."""
    result = subprocess.run(
        [sys.executable, "-I", "-c", code, *args], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_the_client_imports_without_django() -> None:
    run_isolated("import latency_budgets, sys; assert 'django' not in sys.modules")
    run_isolated(
        "import sys, latency_budgets, latency_budgets.levers, latency_budgets.alevers\n"
        "assert not [m for m in sys.modules if m.split('.')[0] == 'django'], 'django'\n"
        "assert 'opentelemetry.sdk' not in sys.modules, 'the SDK'\n"
    )


NO_SDK = """
import json, sys, time
from opentelemetry import trace
from latency_budgets import Budgets

assert type(trace.get_tracer_provider()).__name__ == "ProxyTracerProvider"
budgets = Budgets.from_documents([json.loads(sys.argv[1])])
assert budgets.tracer() is None


def late(attempt):
    attempt.cancelled.wait(5)
    yield "late"


def hedged(attempt):
    if attempt.number == 1:
        attempt.cancelled.wait(5)
    return attempt.role


with budgets.request("rag-chat", budget_ms=1000) as req:
    assert req.span is None
    assert 900 < req.remaining_ms <= 1000
    skipped = req.should_skip("rerank")
    with req.stage("retrieval") as stage:
        assert stage.span is None
        capped = req.cap("retrieval", lambda attempt: attempt.cancelled.wait(5), "capped")
    streamed = list(req.fallback(late, lambda attempt: iter(["small"]), first_token_ms=50,
                                 stage="llm"))
    winner = req.hedge(hedged, after=50, stage="llm")
    try:
        with req.stage("llm"):
            raise TimeoutError
    except TimeoutError:
        pass
print(json.dumps({
    "skipped": skipped,
    "capped": capped,
    "streamed": streamed,
    "winner": winner,
    "decisions": [[d.stage, d.action, d.winner, d.saved_ms] for d in req.decisions],
    "ledger": sorted([*key, count] for key, count in budgets.ledger.counts().items()),
    "sdk": "opentelemetry.sdk" in sys.modules,
}))
"""


def test_without_a_tracer_provider_nothing_is_recorded_and_the_levers_still_work() -> None:
    document = runtime_document(
        "rag-chat",
        stages=[
            stage_doc("retrieval", 0, budget_ms=100, p50=50, p95=80, p99=300),
            stage_doc("rerank", 1, budget_ms=100, p50=900, p95=950, p99=990),
            stage_doc("llm", 2, budget_ms=2000, p50=200, p95=400, p99=1000),
        ],
    )
    seen = json.loads(run_isolated(NO_SDK, json.dumps(document)))
    assert seen["sdk"] is False
    assert seen["skipped"] is True  # 900 + 200 > ~1000
    assert seen["capped"] == "capped"
    assert seen["streamed"] == ["small"]
    assert seen["winner"] == "second"
    decisions = seen["decisions"]
    assert [d[:3] for d in decisions] == [
        ["rerank", "skip", None],
        ["retrieval", "cap", None],
        ["llm", "fallback", "fallback"],
        ["llm", "hedge", "second"],
        ["llm", "timeout", None],
    ]
    # A skip saves the stage's mean by the fit through its p50 900 and p99 990.
    assert decisions[0][3] == pytest.approx(expected_rest(900, 990, 0), rel=1e-3)
    # The rest a retrieval (p50 50, p99 300) is expected to take once past 100 ms.
    assert decisions[1][3] == pytest.approx(expected_rest(50, 300, 100), rel=1e-3)
    assert seen["ledger"] == [
        ["rag-chat", "llm", "fallback", 1],
        ["rag-chat", "llm", "hedge", 1],
        ["rag-chat", "llm", "timeout", 1],
        ["rag-chat", "rerank", "skip", 1],
        ["rag-chat", "retrieval", "cap", 1],
    ]
