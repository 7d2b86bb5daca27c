"""Channel operations, and a test notification through one."""

from typing import Any

from django.utils import timezone
from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from apps.alerts.access import channel_for_user, team_for_request
from apps.alerts.apis.fields import StrictInput
from apps.alerts.apis.serializers import (
    ChannelCreatedOutput,
    ChannelOutput,
    ChannelSavedOutput,
    ChannelSecretOutput,
    NotificationOutput,
    RecipientOutput,
)
from apps.alerts.labels import channel_row, channel_rows
from apps.alerts.models import Channel, ChannelKind, WebhookFormat
from apps.alerts.selectors.history import channels_for_team
from apps.alerts.selectors.recipients import channel_recipient_statuses
from apps.alerts.services.channels import (
    channel_create,
    channel_delete,
    channel_disable,
    channel_enable,
    channel_update,
)
from apps.alerts.services.notifications import notification_test_send
from apps.alerts.services.recipients import recipient_confirmation_resend
from apps.core.api.errors import api_field_names
from apps.core.api.pagination import DefaultPagination, paginated_response
from apps.core.api.schema import error_responses
from apps.core.api.views import ApiView
from apps.teams.api_errors import rates_as_429
from apps.teams.api_schema import team_schema
from apps.teams.models import Membership
from apps.teams.request_team import membership_for_request, request_user, team_slug_for_request

TAGS = ["alert channels"]
# Mail to people outside the account is counted per hour over all its teams.
RATED = error_responses(429)
# A taken slug is the model's unique constraint, which Django reports for the whole object.
CREATE_ERRORS = {"__all__": "slug"}


def _channel(
    request: Request, channel_slug: str, *, write: bool = False
) -> tuple[Membership, Channel]:
    return channel_for_user(
        user=request_user(request),
        team_slug=team_slug_for_request(request),
        channel_slug=channel_slug,
        write=write,
    )


class ChannelListApi(ApiView):
    pagination_class = DefaultPagination

    @team_schema(
        summary="List the team's alert channels",
        description="Each with its last delivery result. Secrets are never listed.",
        responses={200: ChannelOutput(many=True)},
        tags=TAGS,
    )
    def get(self, request: Request) -> Response:
        membership = membership_for_request(request)
        return paginated_response(
            request=request,
            view=self,
            queryset=channels_for_team(team=membership.team),
            serializer_class=ChannelOutput,
            rows=lambda page: channel_rows(
                team=membership.team, channels=page, can_write=membership.can_write
            ),
        )


class ChannelCreateApi(ApiView):
    class InputSerializer(StrictInput):
        slug = serializers.CharField(max_length=50)
        name = serializers.CharField(max_length=100, allow_blank=True, default="")
        kind = serializers.ChoiceField(choices=ChannelKind.choices)
        email_to = serializers.ListField(
            child=serializers.CharField(max_length=254),
            default=list,
            help_text=f"E-mail addresses, for kind email; at most {Channel.MAX_ADDRESSES}.",
        )
        url = serializers.CharField(
            max_length=2000, allow_blank=True, default="", help_text="For kind webhook: http(s)."
        )
        format = serializers.ChoiceField(
            choices=WebhookFormat.choices, default=WebhookFormat.NATIVE
        )
        secret = serializers.CharField(
            max_length=200,
            allow_blank=True,
            default="",
            write_only=True,
            help_text="Optional signing secret (“whsec_” and base64); left out, one is made.",
        )

        class Meta:
            ref_name = "ChannelInput"

    @team_schema(
        summary="Add an alert channel",
        description=(
            "An e-mail channel takes `email_to`; a webhook `url`, `format` and optionally "
            "`secret`. A webhook without a secret gets a fresh one, returned in this answer. "
            "Each address of an e-mail channel is mailed a confirmation and receives nothing "
            "else until it confirms (see `recipients`); those e-mails count against the "
            "account's hourly allowance (429 past it), and an account holds at most "
            "`ACCOUNT_MAX_CHANNELS` channels over all its teams (400 past it). A webhook URL "
            "is checked by the rule its sends follow: a host that is or resolves to a "
            "private, loopback or link-local address is a 400 on `url` naming the server "
            "setting that would allow it (`WEBHOOK_ALLOWED_HOSTS`, "
            "`WEBHOOK_ALLOW_PRIVATE_IPS`); a host that does not resolve now is saved, with "
            "a line in `warnings`."
        ),
        request=InputSerializer,
        responses={201: ChannelCreatedOutput, **RATED},
        write=True,
        tags=TAGS,
    )
    def post(self, request: Request) -> Response:
        team = team_for_request(request, write=True)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        with api_field_names(CREATE_ERRORS), rates_as_429():
            channel = channel_create(team=team, **serializer.validated_data)
        data = ChannelCreatedOutput(channel_row(channel, can_write=True)).data
        return Response(data, status=status.HTTP_201_CREATED)


class ChannelDetailApi(ApiView):
    @team_schema(
        summary="One alert channel with its last delivery result",
        description="Owners and editors also get the webhook's signing secret.",
        responses={200: ChannelSecretOutput},
        tags=TAGS,
    )
    def get(self, request: Request, channel_slug: str) -> Response:
        membership, channel = _channel(request, channel_slug)
        row = channel_row(channel, can_write=membership.can_write)
        output = ChannelSecretOutput if membership.can_write else ChannelOutput
        return Response(output(row).data)


def _update_fields(data: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in data.items() if key != "enabled"}


class ChannelUpdateApi(ApiView):
    class InputSerializer(StrictInput):
        fixed = {
            "slug": "The slug of a channel cannot change; create another.",
            "kind": "The kind of a channel cannot change; create another.",
        }

        name = serializers.CharField(max_length=100, allow_blank=True, required=False)
        email_to = serializers.ListField(
            child=serializers.CharField(max_length=254), required=False
        )
        url = serializers.CharField(max_length=2000, required=False)
        format = serializers.ChoiceField(choices=WebhookFormat.choices, required=False)
        secret = serializers.CharField(
            max_length=200,
            required=False,
            write_only=True,
            help_text="A new signing secret of your own.",
        )
        enabled = serializers.BooleanField(
            required=False, help_text="true puts a disabled channel back in service."
        )

        class Meta:
            ref_name = "ChannelUpdateInput"

    @team_schema(
        summary="Change an alert channel",
        description=(
            "Only the fields sent change; the kind and slug stay. `enabled: true` puts a "
            "channel disabled after failures back in service, `false` takes it out. New "
            "addresses are mailed a confirmation, as on creation (429 past the allowance); "
            "a new webhook URL is checked as on creation (400 on `url`, or `warnings`)."
        ),
        request=InputSerializer,
        responses={200: ChannelSavedOutput, **RATED},
        write=True,
        tags=TAGS,
    )
    def patch(self, request: Request, channel_slug: str) -> Response:
        _, channel = _channel(request, channel_slug, write=True)
        serializer = self.InputSerializer(data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        with rates_as_429():
            channel = channel_update(channel=channel, **_update_fields(data))
        if data.get("enabled") is True and not channel.is_enabled:
            channel = channel_enable(channel=channel)
        elif data.get("enabled") is False and channel.is_enabled:
            channel_disable(channel=channel, reason=f"Disabled by {request_user(request)}.")
        return Response(ChannelSavedOutput(channel_row(channel, can_write=True)).data)


class ChannelDeleteApi(ApiView):
    @team_schema(
        summary="Delete an alert channel and its delivery history",
        responses={204: OpenApiResponse(description="Deleted.")},
        write=True,
        tags=TAGS,
    )
    def delete(self, request: Request, channel_slug: str) -> Response:
        _, channel = _channel(request, channel_slug, write=True)
        channel_delete(channel=channel)
        return Response(status=status.HTTP_204_NO_CONTENT)


class ChannelTestApi(ApiView):
    @team_schema(
        summary="Send a test notification through a channel",
        description=(
            "The worker delivers it like any notification, with retries; follow it in the "
            "channel's `last_notification`. An e-mail test reaches confirmed addresses only, "
            "and counts against the account's hourly allowance of test e-mails (429 past it)."
        ),
        request=None,
        responses={202: NotificationOutput, **RATED},
        write=True,
        tags=TAGS,
    )
    def post(self, request: Request, channel_slug: str) -> Response:
        _, channel = _channel(request, channel_slug, write=True)
        if not channel.is_enabled:
            raise serializers.ValidationError("The channel is disabled: enable it first.")
        with rates_as_429():
            notification = notification_test_send(channel=channel, now=timezone.now())
        return Response(NotificationOutput(notification).data, status=status.HTTP_202_ACCEPTED)


class ChannelConfirmationResendApi(ApiView):
    class InputSerializer(StrictInput):
        address = serializers.CharField(max_length=254, help_text="One of the channel's addresses.")

        class Meta:
            ref_name = "ChannelRecipientResendInput"

    @team_schema(
        summary="Mail an address of an e-mail channel its confirmation again",
        description=(
            "For an address still waiting: a fresh link, at most once every "
            "`CHANNEL_CONFIRMATION_RESEND_INTERVAL_S` per address and within the account's "
            "hourly allowance of confirmation e-mails (429 with `Retry-After` otherwise). "
            "A confirmed or declined address is a 400: only its owner changes its answer."
        ),
        request=InputSerializer,
        responses={202: RecipientOutput, **RATED},
        write=True,
        tags=TAGS,
    )
    def post(self, request: Request, channel_slug: str) -> Response:
        _, channel = _channel(request, channel_slug, write=True)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        address = serializer.validated_data["address"]
        with rates_as_429():
            recipient_confirmation_resend(channel=channel, address=address, now=timezone.now())
        status_of = next(
            s
            for s in channel_recipient_statuses(channel=channel)
            if s.address.lower() == address.lower()
        )
        return Response(RecipientOutput(status_of).data, status=status.HTTP_202_ACCEPTED)
