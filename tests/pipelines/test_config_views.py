import re

import pytest
import yaml
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from apps.pipelines.config_as_code import config_export
from apps.pipelines.config_forms import MAX_CONFIG_BYTES
from apps.pipelines.models import Pipeline
from tests.builders.configuration import make_pipeline, make_stage
from tests.conftest import TeamWorld, client_for

FILE = """\
team: acme
pipelines:
  - slug: rag-chat
    name: RAG chat answer
    budget: {p95: 2500}
    stages:
      - {slug: retrieval, name: Retrieval, budget: {p95: 350}, match: [{span_name: "vector*"}]}
"""


def page_url(team_slug: str = "acme") -> str:
    return reverse("config:page", kwargs={"team_slug": team_slug})


def apply_url(team_slug: str = "acme") -> str:
    return reverse("config:apply", kwargs={"team_slug": team_slug})


def download_url(team_slug: str = "acme") -> str:
    return reverse("config:download", kwargs={"team_slug": team_slug})


def preview(client: Client, text: str = FILE, **extra: object) -> tuple[int, str, str]:
    """POST the text for a preview; return status, body and the Apply token if any."""
    response = client.post(page_url(), {"text": text, **extra})
    body = response.content.decode()
    match = re.search(r'name="token" value="([^"]+)"', body)
    return response.status_code, body, match.group(1) if match else ""


def test_anonymous_users_are_sent_to_log_in(world: TeamWorld):
    for url in (page_url(), download_url()):
        response = Client().get(url)
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("login"))
    response = Client().post(page_url(), {"text": FILE})
    assert response.status_code == 302
    assert not Pipeline.objects.exists()


def test_outsider_gets_404(world: TeamWorld):
    client = client_for(world.outsider)

    assert client.get(page_url()).status_code == 404
    assert client.get(download_url()).status_code == 404
    assert client.post(page_url(), {"text": FILE}).status_code == 404
    assert client.post(apply_url(), {"token": "x"}).status_code == 404
    assert not Pipeline.objects.exists()


def test_viewer_sees_the_current_yaml_and_no_upload_form(world: TeamWorld):
    make_pipeline(world.team, "search", name="Search")

    response = client_for(world.viewer).get(page_url())

    body = response.content.decode()
    assert response.status_code == 200
    assert "slug: search" in body
    assert download_url() in body
    assert 'name="text"' not in body


def test_viewer_gets_403_on_preview_and_apply(world: TeamWorld):
    _, _, token = preview(client_for(world.owner))
    client = client_for(world.viewer)

    assert client.post(page_url(), {"text": FILE}).status_code == 403
    assert client.post(apply_url(), {"token": token}).status_code == 403
    assert not Pipeline.objects.exists()


def test_any_member_can_download_the_yaml(world: TeamWorld):
    make_stage(make_pipeline(world.team, "search", name="Search"), "retrieval")

    response = client_for(world.viewer).get(download_url())

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/yaml")
    assert response["Content-Disposition"] == 'attachment; filename="acme-budgets.yaml"'
    assert response.content.decode() == config_export(team=world.team)
    assert yaml.safe_load(response.content)["pipelines"][0]["stages"][0]["slug"] == "retrieval"


@pytest.mark.parametrize("role", ["owner", "editor"])
def test_writers_preview_then_apply_the_same_document(world: TeamWorld, role: str):
    client = client_for(getattr(world, role))

    status, body, token = preview(client)

    assert status == 200
    assert "+ pipeline rag-chat" in body
    assert "+ stage rag-chat/retrieval" in body
    assert not Pipeline.objects.exists()

    response = client.post(apply_url(), {"token": token}, follow=True)

    assert response.redirect_chain[-1][0] == page_url()
    assert "Applied 2 changes." in response.content.decode()
    pipeline = Pipeline.objects.get(team=world.team, slug="rag-chat")
    assert [s.slug for s in pipeline.stages.all()] == ["retrieval"]


def test_preview_of_an_uploaded_file(world: TeamWorld):
    upload = SimpleUploadedFile("acme.yaml", FILE.encode(), content_type="text/yaml")

    response = client_for(world.editor).post(page_url(), {"file": upload})

    assert response.status_code == 200
    assert "+ pipeline rag-chat" in response.content.decode()
    assert not Pipeline.objects.exists()


def test_htmx_preview_renders_only_the_upload_partial(world: TeamWorld):
    response = client_for(world.owner).post(
        page_url(), {"text": FILE}, headers={"HX-Request": "true"}
    )

    body = response.content.decode()
    assert response.status_code == 200
    assert body.lstrip().startswith('<section id="upload">')
    assert "<html" not in body
    assert "+ pipeline rag-chat" in body


def test_a_file_with_no_changes_offers_no_apply_button(world: TeamWorld):
    client = client_for(world.owner)
    client.post(apply_url(), {"token": preview(client)[2]})

    _, body, token = preview(client)

    assert "No changes." in body
    assert token == ""


def test_prune_is_carried_from_preview_to_apply(world: TeamWorld):
    make_pipeline(world.team, "legacy")
    client = client_for(world.owner)

    _, body, token = preview(client, prune="on")
    assert "- pipeline legacy" in body
    client.post(apply_url(), {"token": token})

    assert not Pipeline.objects.filter(slug="legacy").exists()
    assert Pipeline.objects.filter(slug="rag-chat").exists()


def test_invalid_files_show_every_error_with_its_line(world: TeamWorld):
    text = FILE.replace("budget: {p95: 2500}", "budget: {p95: -1}").replace("span_name:", "span:")

    status, body, token = preview(client_for(world.owner), text)

    assert status == 422
    assert "Line 5: Budget p95 must be positive, not -1." in body
    assert "Line 7: Unknown key “span” in rule." in body
    assert token == ""
    assert not Pipeline.objects.exists()


def test_broken_yaml_shows_the_line_of_the_syntax_error(world: TeamWorld):
    status, body, _ = preview(client_for(world.owner), "team: acme\npipelines: [\n")

    assert status == 422
    assert "Line 3: Invalid YAML" in body


def test_another_teams_file_is_rejected(world: TeamWorld):
    status, body, token = preview(
        client_for(world.owner), FILE.replace("team: acme", "team: globex")
    )

    assert status == 422
    assert "cannot apply another team&#x27;s file here" in body
    assert token == ""
    assert not Pipeline.objects.exists()


def test_an_oversized_upload_is_rejected(world: TeamWorld):
    big = FILE.encode() + b"#" * MAX_CONFIG_BYTES
    upload = SimpleUploadedFile("big.yaml", big, content_type="text/yaml")

    response = client_for(world.owner).post(page_url(), {"file": upload})

    assert response.status_code == 422
    assert "larger than 1 MiB" in response.content.decode()
    assert not Pipeline.objects.exists()


def test_oversized_pasted_text_is_rejected(world: TeamWorld):
    status, body, _ = preview(client_for(world.owner), FILE + "#" * MAX_CONFIG_BYTES)

    assert status == 422
    assert "larger than 1 MiB" in body
    assert not Pipeline.objects.exists()


def test_a_file_that_is_not_utf8_is_rejected(world: TeamWorld):
    upload = SimpleUploadedFile("latin1.yaml", "team: café\n".encode("latin-1"))

    response = client_for(world.owner).post(page_url(), {"file": upload})

    assert response.status_code == 422
    assert "not UTF-8" in response.content.decode()


def test_an_empty_submission_asks_for_a_file(world: TeamWorld):
    status, body, _ = preview(client_for(world.owner), "")

    assert status == 422
    assert "Choose a YAML file or paste its text." in body


def test_a_tampered_token_is_refused(world: TeamWorld):
    client = client_for(world.owner)
    _, _, token = preview(client)

    response = client.post(apply_url(), {"token": token[:-2] + "xx"})

    assert response.status_code == 400
    assert "altered" in response.content.decode()
    assert not Pipeline.objects.exists()


def test_a_token_from_another_team_is_refused(world: TeamWorld):
    _, _, token = preview(client_for(world.owner))
    client = client_for(world.outsider)

    response = client.post(apply_url("globex"), {"token": token})

    assert response.status_code == 400
    assert not Pipeline.objects.exists()


def test_apply_refuses_when_the_state_changed_since_the_preview(world: TeamWorld):
    client = client_for(world.owner)
    _, _, token = preview(client)
    make_pipeline(world.team, "rag-chat", name="Made meanwhile", budget={"p95": 100})

    response = client.post(apply_url(), {"token": token})

    body = response.content.decode()
    assert response.status_code == 200
    assert "changed since your preview" in body
    assert "~ pipeline rag-chat: name" in body
    assert Pipeline.objects.get(slug="rag-chat").name == "Made meanwhile"


def test_viewer_sees_evaluation_settings_in_the_current_yaml(world: TeamWorld):
    make_pipeline(world.team, "search", name="Search", min_samples=100)

    body = client_for(world.viewer).get(page_url()).content.decode()

    assert "evaluation:\n      min_samples: 100" in body


@pytest.mark.parametrize("role", ["owner", "editor"])
def test_writers_preview_and_apply_an_evaluation_change(world: TeamWorld, role: str):
    client = client_for(getattr(world, role))
    client.post(apply_url(), {"token": preview(client)[2]})
    text = FILE.replace("    stages:\n", "    evaluation: {window_s: 900}\n    stages:\n")

    status, body, token = preview(client, text)

    assert status == 200
    assert "~ pipeline rag-chat: evaluation.window_s 300 -&gt; 900" in body
    assert Pipeline.objects.get(slug="rag-chat").evaluation_window_s == 300
    client.post(apply_url(), {"token": token})
    assert Pipeline.objects.get(slug="rag-chat").evaluation_window_s == 900


def test_viewer_gets_403_applying_an_evaluation_change(world: TeamWorld):
    owner = client_for(world.owner)
    owner.post(apply_url(), {"token": preview(owner)[2]})
    text = FILE.replace("    stages:\n", "    evaluation: {window_s: 900}\n    stages:\n")
    _, _, token = preview(owner, text)

    response = client_for(world.viewer).post(apply_url(), {"token": token})

    assert response.status_code == 403
    assert Pipeline.objects.get(slug="rag-chat").evaluation_window_s == 300


def test_an_invalid_evaluation_value_is_shown_with_its_line(world: TeamWorld):
    text = FILE.replace("    stages:\n", "    evaluation: {close_after: 0}\n    stages:\n")

    status, body, token = preview(client_for(world.owner), text)

    assert status == 422
    assert "Line 6: close_after must be between 1 and 360 evaluations, not 0." in body
    assert token == ""
    assert not Pipeline.objects.exists()
