from django.contrib import admin
from django.http import HttpRequest

from apps.teams.models import (
    ApiToken,
    EmailVerification,
    IngestToken,
    Invitation,
    Membership,
    MetricsToken,
    Team,
)


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    raw_id_fields = ["user"]


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "account", "created_at"]
    search_fields = ["slug", "name", "account__username"]
    raw_id_fields = ["account"]
    inlines = [MembershipInline]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = [
        "name", "user", "prefix", "created_at", "last_used_at", "expires_at", "revoked_at",
    ]  # fmt: skip
    readonly_fields = ["prefix", "digest"]
    raw_id_fields = ["user"]


@admin.register(IngestToken)
class IngestTokenAdmin(admin.ModelAdmin):
    list_display = [
        "name",
        "team",
        "prefix",
        "created_by",
        "created_at",
        "last_used_at",
        "revoked_at",
    ]
    list_filter = ["revoked_at"]
    search_fields = ["name", "prefix", "team__slug"]
    readonly_fields = ["prefix", "digest", "created_by", "last_used_at"]
    raw_id_fields = ["team"]

    # The plain token exists only at creation, so tokens are made where it can be shown:
    # the team's ingest token page or `manage.py ingest_token create`.
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


@admin.register(MetricsToken)
class MetricsTokenAdmin(admin.ModelAdmin):
    list_display = [
        "name", "team", "prefix", "created_by", "created_at", "last_used_at", "revoked_at",
    ]  # fmt: skip
    list_filter = ["revoked_at"]
    search_fields = ["name", "prefix", "team__slug"]
    readonly_fields = ["prefix", "digest", "created_by", "last_used_at"]
    raw_id_fields = ["team"]

    # As ingest tokens: made where the plain token can be shown, the team's metrics page.
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


@admin.register(Invitation)
class InvitationAdmin(admin.ModelAdmin):
    list_display = ["email", "team", "role", "invited_by", "sent_at", "expires_at", "accepted_at"]
    list_filter = ["role"]
    search_fields = ["email", "team__slug"]
    readonly_fields = ["digest", "invited_by", "accepted_by", "accepted_at", "sent_at"]
    raw_id_fields = ["team"]

    # The link's token exists only when it is e-mailed: invitations are made where it
    # is sent, the team's members page or `manage.py team invite`.
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


@admin.register(EmailVerification)
class EmailVerificationAdmin(admin.ModelAdmin):
    list_display = ["user", "email", "proof", "verified_at"]
    search_fields = ["user__username", "email"]
    readonly_fields = ["user", "email", "proof", "verified_at"]

    # Only the user proves their address; an operator may delete a row to unverify it.
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False
