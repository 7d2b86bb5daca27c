"""Serializers of the teams API."""

from rest_framework import serializers

from apps.teams.models import Role


class MembershipOutput(serializers.Serializer):
    slug = serializers.CharField(source="team.slug")
    name = serializers.CharField(source="team.name")
    role = serializers.ChoiceField(choices=Role.choices)

    class Meta:
        ref_name = "TeamMembership"
