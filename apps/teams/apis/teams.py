"""The signed-in user and their teams, for choosing the team other endpoints act on."""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from apps.core.api.pagination import DefaultPagination, paginated_response
from apps.core.api.schema import error_responses
from apps.core.api.views import ApiView
from apps.teams.apis.serializers import MembershipOutput
from apps.teams.request_team import request_user
from apps.teams.selectors import memberships_for_user


class TeamListApi(ApiView):
    pagination_class = DefaultPagination
    OutputSerializer = MembershipOutput

    @extend_schema(
        summary="Your teams, with your role in each",
        responses={200: OutputSerializer(many=True), **error_responses(401, 404)},
        tags=["teams"],
    )
    def get(self, request: Request) -> Response:
        return paginated_response(
            request=request,
            view=self,
            queryset=memberships_for_user(user=request_user(request)),
            serializer_class=self.OutputSerializer,
        )


class MeApi(ApiView):
    class OutputSerializer(serializers.Serializer):
        username = serializers.CharField(source="user.username")
        email = serializers.EmailField(source="user.email")
        teams = MembershipOutput(many=True)

        class Meta:
            ref_name = "Me"

    @extend_schema(
        summary="Who the token or session belongs to",
        responses={200: OutputSerializer, **error_responses(401)},
        tags=["teams"],
    )
    def get(self, request: Request) -> Response:
        me = {"user": request.user, "teams": memberships_for_user(user=request_user(request))}
        return Response(self.OutputSerializer(me).data)
