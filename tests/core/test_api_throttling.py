"""The REST API's allowances: per token, and per account over all its tokens."""

import pytest
from django.test import Client

from apps.teams.services import api_token_create
from tests.builders.api import error_of
from tests.conftest import TeamWorld, client_for

LIST = "/api/v1/pipelines/"


@pytest.fixture(autouse=True)
def _fresh_allowances(clean_cache: None, allowance_clock: float) -> None:
    """Allowances are counted in the cache: each test starts with none used."""


def _bearer(token: str) -> Client:
    return Client(headers={"Authorization": f"Bearer {token}"})


def test_two_hundred_quick_calls_from_one_token_meet_429_with_retry_after(
    world: TeamWorld, settings
) -> None:
    settings.API_REQUESTS_PER_MINUTE_PER_TOKEN = 120
    _, raw = api_token_create(user=world.owner, name="ci")
    client = _bearer(raw)

    statuses = [client.get(LIST).status_code for _ in range(200)]

    assert statuses[:120] == [200] * 120
    assert set(statuses[120:]) == {429}
    refused = client.get(LIST)
    assert 1 <= int(refused["Retry-After"]) <= 60
    assert error_of(refused)["code"] == "throttled"
    # Another account's token is served meanwhile.
    _, theirs = api_token_create(user=world.outsider, name="theirs")
    assert _bearer(theirs).get(LIST).status_code == 200


def test_an_account_s_tokens_share_its_allowance(world: TeamWorld, settings) -> None:
    settings.API_REQUESTS_PER_MINUTE_PER_TOKEN = 50
    settings.API_REQUESTS_PER_MINUTE_PER_ACCOUNT = 100
    tokens = [api_token_create(user=world.editor, name=f"t{n}")[1] for n in range(4)]

    served = sum(_bearer(token).get(LIST).status_code == 200 for token in tokens for _ in range(40))

    assert served == 100  # not 4 x 40: the tokens of one account share its allowance
    # A signed-in session of that account is refused too; another member is not.
    assert client_for(world.editor).get(LIST).status_code == 429
    assert client_for(world.viewer).get(LIST).status_code == 200


def test_the_schema_documents_429_and_503_on_every_team_operation(db: None) -> None:
    schema = Client().get("/api/schema/", {"format": "json"}).json()
    missing = [
        f"{method.upper()} {path}"
        for path, operations in schema["paths"].items()
        for method, operation in operations.items()
        if path != "/api/v1/spans" and not {"429", "503"} <= set(operation["responses"])
    ]
    assert not missing
