"""Runtime documents and the configuration file read into figures: what version 1 of
``docs/runtime.md`` allows is taken, anything else is refused with ``DocumentError``, and
a budget read offline (no observed times) keeps deadlines and allowances but never skips
or hedges."""

import copy
import json
import math
from pathlib import Path
from typing import Any

import pytest
from latency_budgets import Attempt, Budgets, DocumentError, PipelineFigures
from latency_budgets.figures import figures_from_document

from tests.client.support import Spans, runtime_document, stage_doc


def document() -> dict[str, Any]:
    return runtime_document(
        "rag-chat",
        deadline_ms=4000,
        stages=[
            stage_doc("rerank", 1, budget_ms=150, p50=80, p95=120, p99=400),
            stage_doc("retrieval", 0, budget_ms=350, p50=120.2, p95=290.8, p99=410.0),
            stage_doc("llm", 2),
        ],
        refresh_s=15,
    )


def test_a_version_1_document_is_read_in_pipeline_order() -> None:
    figures = figures_from_document(document())
    assert isinstance(figures, PipelineFigures)
    assert figures.slug == "rag-chat"
    assert figures.deadline_ms == 4000.0
    assert figures.refresh_s == 15.0
    assert [stage.slug for stage in figures.stages] == ["retrieval", "rerank", "llm"]
    retrieval = figures.stage("retrieval")
    assert retrieval is not None
    assert retrieval.budget_ms == 350.0
    assert retrieval.budget_percentile == "p95"
    assert (retrieval.observed.p50, retrieval.observed.p95, retrieval.observed.p99) == (
        120.2,
        290.8,
        410.0,
    )
    llm = figures.stage("llm")
    assert llm is not None
    assert llm.budget_ms is None
    assert llm.observed.p50 is None
    assert figures.observed.count == 5120


def test_the_documents_own_example_is_read() -> None:
    """The example in docs/runtime.md, as written there."""
    text = Path(__file__).resolve().parents[2].joinpath("docs", "runtime.md").read_text()
    example = text.split("```json\n", 1)[1].split("```", 1)[0]
    figures = figures_from_document(json.loads(example))
    assert figures.slug == "rag-chat"
    assert figures.deadline_ms == 4000.0
    stage = figures.stage("retrieval")
    assert stage is not None
    assert stage.budget_ms == 350.0


def _set(path: str, value: Any) -> dict[str, Any]:
    doc = copy.deepcopy(document())
    target: Any = doc
    *parents, last = path.split(".")
    for key in parents:
        target = target[int(key)] if isinstance(target, list) else target[key]
    if isinstance(target, list):
        target[int(last)] = value
    else:
        target[last] = value
    return doc


@pytest.mark.parametrize(
    "doc",
    [
        _set("version", 2),
        _set("version", True),
        _set("version", "1"),
        _set("version", None),
        _set("pipeline", ""),
        _set("pipeline", 7),
        _set("deadline_ms", -1),
        _set("deadline_ms", 0),
        _set("deadline_ms", "4000"),
        _set("deadline_ms", math.nan),
        _set("deadline_ms", math.inf),
        _set("deadline_ms", 10**400),  # an integer no float can hold
        _set("refresh_s", 0),
        _set("stages", {"stage": "retrieval"}),
        _set("stages.0", "retrieval"),
        _set("stages.0.stage", None),
        _set("stages.0.position", "1"),
        _set("stages.0.position", True),
        _set("stages.0.budget", 350),
        _set("stages.0.budget.percentile", "p42"),
        _set("stages.0.budget.ms", -350),
        _set("stages.0.observed.p99", "slow"),
        _set("stages.0.observed.p50", 10**309),
        _set("stages.0.observed.count", -1),
        _set("stages.0.observed.count", 1.5),
        _set("observed", [1, 2]),
        [document()],
        "rag-chat",
        None,
    ],
)
def test_a_document_outside_version_1_is_refused(doc: Any) -> None:
    with pytest.raises(DocumentError):
        figures_from_document(doc)


CONFIGURATION = """\
team: acme
pipelines:
  - slug: rag-chat
    name: RAG chat answer
    match: {service: chat-api, root_span: "POST /chat"}
    budget: {p95: 2500}
    objective: {target: 99.0, threshold_ms: 4000}
    stages:
      - slug: retrieval
        name: Vector retrieval
        budget: {p95: 350}
      - slug: rerank
        name: Rerank
      - slug: llm
        name: Answer
        budget: {p99: 3000}
  - slug: batch
    name: Batch
    budget: {p50: 800, p95: 2000, p99: 6000}
"""


def test_a_configuration_file_gives_deadlines_and_allowances_but_no_observed_times(
    tmp_path: Path, spans: Spans
) -> None:
    path = tmp_path / "budgets.yaml"
    path.write_text(CONFIGURATION)
    budgets = Budgets.from_file(path, tracer_provider=spans.provider)
    calls: list[int] = []

    def answer(attempt: Attempt) -> str:
        calls.append(attempt.number)
        return "one"

    with budgets.request("rag-chat") as req:
        # The objective's threshold is the deadline.
        assert 3950 < req.remaining_ms <= 4000
        assert req.timeout_for("retrieval") == 350.0
        assert req.timeout_for("llm") == 3000.0
        assert 3900 < req.timeout_for("rerank") <= 4000
        assert not req.should_skip("rerank")
        # No p95 to hedge after: one attempt, no decision.
        assert req.hedge(answer, stage="llm") == "one"
    with budgets.request("rag-chat", budget_ms=1) as req:
        while not req.expired:
            pass
        assert not req.should_skip("retrieval")  # expired, yet nothing observed to say so
    # Without an objective: the highest budgeted percentile.
    with budgets.request("batch") as req:
        assert 5950 < req.remaining_ms <= 6000
    assert calls == [1]
    assert budgets.ledger.counts() == {}
    assert spans.decisions() == []


def test_a_json_configuration_file_is_read_as_well(tmp_path: Path) -> None:
    path = tmp_path / "budgets.json"
    path.write_text(
        json.dumps({"pipelines": [{"slug": "ask", "budget": {"p90": 1500}, "stages": []}]})
    )
    with Budgets.from_file(path).request("ask") as req:
        assert 1450 < req.remaining_ms <= 1500


@pytest.mark.parametrize(
    "text",
    [
        "team: acme\n",
        "pipelines: {rag-chat: {}}\n",
        "- one\n- two\n",
        "pipelines:\n  - slug: x\n    budget: {p95: -5}\n",
        "pipelines:\n  - slug: x\n    budget: {p95: 100}\n    stages:\n"
        "      - slug: a\n        budget: {p50: 10, p95: 20}\n",
    ],
)
def test_a_configuration_file_without_usable_pipelines_is_refused(
    tmp_path: Path, text: str
) -> None:
    path = tmp_path / "budgets.yaml"
    path.write_text(text)
    with pytest.raises(DocumentError):
        Budgets.from_file(path)
