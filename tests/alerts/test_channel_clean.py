"""A channel's values are checked by ``channel_clean`` alone: the form, the API and the
configuration file refuse the same addresses and URLs with the same words."""

from typing import Any

import pytest
from django.core.exceptions import ValidationError

from apps.alerts.channel_clean import channel_clean
from apps.alerts.models import Channel
from tests.alerts.test_api import CHANNELS, call, client
from tests.alerts.test_config_as_code import channel_file, errors
from tests.alerts.test_pages import Alerting, build_alerting, html_of, url
from tests.builders.api import error_of
from tests.conftest import TeamWorld, client_for


def test_addresses_are_deduplicated_counted_then_parsed() -> None:
    cleaned = channel_clean({"email_to": [" a@example.com", "A@example.com", "", "b@example.com"]})
    assert cleaned == {"email_to": ["a@example.com", "b@example.com"]}
    too_many = [f"user{i}@example.com" for i in range(Channel.MAX_ADDRESSES)] + ["x"]
    with pytest.raises(ValidationError) as caught:
        channel_clean({"email_to": too_many})
    [error] = caught.value.error_dict["email_to"]
    assert error.code == "too_many"  # counted before "x" is parsed


def test_a_wrong_address_carries_its_position() -> None:
    with pytest.raises(ValidationError) as caught:
        channel_clean({"email_to": ["a@example.com", "oncall"]})
    [error] = caught.value.error_dict["email_to"]
    assert error.params == {"index": 1}


@pytest.fixture
def alerting(world: TeamWorld) -> Alerting:
    return build_alerting(world)


@pytest.mark.parametrize(
    ("kind", "form", "api", "yaml", "said"),
    [
        (
            "email",
            {"addresses": "oncall"},
            {"email_to": ["oncall"]},
            "kind: email\n  to: [oncall]",
            "“oncall” is not an e-mail address.",
        ),
        (
            "webhook",
            {"url": "ftp://hooks.example.com/x", "format": "native"},
            {"url": "ftp://hooks.example.com/x"},
            "kind: webhook\n  url: ftp://hooks.example.com/x",
            "“ftp://hooks.example.com/x” is not an http:// or https:// URL.",
        ),
    ],
)
def test_the_form_the_api_and_the_file_say_the_same(
    alerting: Alerting, kind: str, form: dict[str, str], api: dict[str, Any], yaml: str, said: str
) -> None:
    response = client_for(alerting.world.owner).post(
        url("channel_create", kind=kind), {"slug": "x", **form}
    )
    assert response.status_code == 422
    assert said in html_of(response)

    answer = call(client(alerting, "owner"), "post", CHANNELS, {"slug": "x", "kind": kind, **api})
    assert answer.status_code == 400
    assert said in " ".join(str(m) for m in error_of(answer)["fields"].values())

    [(_, message)] = errors(channel_file(f"- slug: x\n  {yaml}\n"))
    assert said in message
