"""A what-if sample reads its traces whole until its span budget or its byte budget, and
its answer says which stopped it and how much it read."""

import time

import pytest
from django.test import override_settings

from apps.analysis.span_projection import SPAN_OBJECT_BYTES
from apps.whatif.selectors.sample import trace_sample
from tests.builders.api import token_client
from tests.whatif.conftest import Chat

pytestmark = pytest.mark.django_db(transaction=True)

URL = "/api/v1/pipelines/rag-chat/whatif?team=acme"


def whole_sample_bytes(chat: Chat) -> tuple[int, int]:
    """What a sample of every trace of the window reads, in bytes and spans."""
    now = int(time.time())
    sample = trace_sample(pipeline=chat.pipeline, start=now - 3600, end=now + 300)
    assert (sample.traces, sample.left_out, sample.left_out_by) == (chat.sent.traces, 0, "")
    return sample.bytes_read, sample.spans


def test_a_sample_stops_at_its_byte_budget_and_says_so(chat: Chat, eager: None) -> None:
    whole, _ = whole_sample_bytes(chat)
    budget = whole // 2

    with override_settings(WHATIF_MAX_BYTES=budget):
        response = token_client(chat.world.viewer).post(
            URL, {**chat.window, "changes": []}, format="json"
        )

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["left_out_by"] == "bytes"
    assert 0 < body["traces"] < chat.sent.traces
    assert body["traces"] + body["left_out"] == body["traces_in_window"] == chat.sent.traces
    # Whole traces only: the next one would have gone past the budget.
    assert budget - whole / chat.sent.traces * 3 < body["bytes_read"] <= budget


def test_a_sample_within_both_budgets_says_what_it_read(chat: Chat, eager: None) -> None:
    whole, spans = whole_sample_bytes(chat)

    body = token_client(chat.world.viewer).post(URL, {**chat.window, "changes": []}, format="json")

    assert body.json()["left_out_by"] == ""
    assert (body.json()["bytes_read"], body.json()["spans"]) == (whole, spans)
    # Skeletons and the few attributes the rules compare: some hundred bytes of text a span.
    assert whole - spans * SPAN_OBJECT_BYTES < spans * 200


def test_the_span_budget_still_stops_a_sample_first(chat: Chat) -> None:
    _, spans = whole_sample_bytes(chat)
    now = int(time.time())
    with override_settings(WHATIF_MAX_SPANS=spans // 3):
        sample = trace_sample(pipeline=chat.pipeline, start=now - 3600, end=now + 300)
    assert sample.left_out_by == "spans"
    assert sample.spans <= spans // 3
    assert sample.traces + sample.left_out == chat.sent.traces


def test_batches_of_a_few_traces_read_the_same_sample(
    chat: Chat, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole, spans = whole_sample_bytes(chat)
    # Batches of about three traces' bytes: the sample reads on from where each stopped.
    monkeypatch.setattr(
        "apps.whatif.selectors.sample.LOAD_BATCH_BYTES", whole * 3 // chat.sent.traces
    )
    now = int(time.time())
    sample = trace_sample(pipeline=chat.pipeline, start=now - 3600, end=now + 300)
    assert (sample.traces, sample.spans, sample.bytes_read) == (chat.sent.traces, spans, whole)
    assert sample.left_out_by == ""
    # A trace heavier than a batch ends the sample there.
    monkeypatch.setattr("apps.whatif.selectors.sample.LOAD_BATCH_BYTES", 1000)
    sample = trace_sample(pipeline=chat.pipeline, start=now - 3600, end=now + 300)
    assert (sample.traces, sample.left_out, sample.left_out_by) == (0, chat.sent.traces, "bytes")
