"""Channel operations, and a test notification through one."""

from typing import Any

from django.utils import timezone
from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from apps.alerts.access import channel_for_user, team_for_request
from apps.alerts.apis.serializers import (
    ChannelInput,
    ChannelOutput,
    ChannelSecretOutput,
    ChannelUpdateInput,
    NotificationOutput,
)
from apps.alerts.models import Channel
from apps.alerts.selectors.history import channel_last_notification, channels_for_team
from apps.alerts.services.channels import (
    channel_create,
    channel_delete,
    channel_disable,
    channel_enable,
    channel_update,
)
from apps.alerts.services.notifications import notification_test_send
from apps.alerts.views.labels import ChannelRow
from apps.core.api.errors import api_field_names
from apps.core.api.pagination import DefaultPagination
from apps.core.api.views import ApiView
from apps.teams.api_schema import team_schema
from apps.teams.models import Membership
from apps.teams.request_team import membership_for_request, request_user, team_slug_for_request

TAGS = ["alert channels"]
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


def _row(channel: Channel, *, can_write: bool) -> ChannelRow:
    return ChannelRow(channel, channel_last_notification(channel=channel), can_write)


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
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(
            channels_for_team(team=membership.team), request, view=self
        )
        rows = [_row(channel, can_write=membership.can_write) for channel in page or []]
        return paginator.get_paginated_response(ChannelOutput(rows, many=True).data)


class ChannelCreateApi(ApiView):
    InputSerializer = ChannelInput

    @team_schema(
        summary="Add an alert channel",
        description=(
            "An e-mail channel takes `email_to`; a webhook `url`, `format` and optionally "
            "`secret`. A webhook without a secret gets a fresh one, returned in this answer."
        ),
        request=InputSerializer,
        responses={201: ChannelSecretOutput},
        write=True,
        tags=TAGS,
    )
    def post(self, request: Request) -> Response:
        team = team_for_request(request, write=True)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        with api_field_names(CREATE_ERRORS):
            channel = channel_create(team=team, **serializer.validated_data)
        data = ChannelSecretOutput(ChannelRow(channel, None, True)).data
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
        row = _row(channel, can_write=membership.can_write)
        output = ChannelSecretOutput if membership.can_write else ChannelOutput
        return Response(output(row).data)


def _update_fields(data: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in data.items() if key != "enabled"}


class ChannelUpdateApi(ApiView):
    InputSerializer = ChannelUpdateInput

    @team_schema(
        summary="Change an alert channel",
        description=(
            "Only the fields sent change; the kind and slug stay. `enabled: true` puts a "
            "channel disabled after failures back in service, `false` takes it out."
        ),
        request=InputSerializer,
        responses={200: ChannelOutput},
        write=True,
        tags=TAGS,
    )
    def patch(self, request: Request, channel_slug: str) -> Response:
        _, channel = _channel(request, channel_slug, write=True)
        serializer = self.InputSerializer(data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        channel = channel_update(channel=channel, **_update_fields(data))
        if data.get("enabled") is True and not channel.is_enabled:
            channel = channel_enable(channel=channel)
        elif data.get("enabled") is False and channel.is_enabled:
            channel_disable(channel=channel, reason=f"Disabled by {request_user(request)}.")
        return Response(ChannelOutput(_row(channel, can_write=True)).data)


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
            "channel's `last_notification`."
        ),
        request=None,
        responses={202: NotificationOutput},
        write=True,
        tags=TAGS,
    )
    def post(self, request: Request, channel_slug: str) -> Response:
        _, channel = _channel(request, channel_slug, write=True)
        if not channel.is_enabled:
            raise serializers.ValidationError("The channel is disabled: enable it first.")
        notification = notification_test_send(channel=channel, now=timezone.now())
        return Response(NotificationOutput(notification).data, status=status.HTTP_202_ACCEPTED)
