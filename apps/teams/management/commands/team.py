from argparse import ArgumentParser
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from apps.teams.emails import invitation_url
from apps.teams.forms import TeamCreateForm
from apps.teams.models import Role, Team
from apps.teams.selectors import team_by_slug, user_by_username
from apps.teams.services import invitation_create, membership_add, team_create, user_create


def _error_text(error: ValidationError) -> str:
    return " ".join(error.messages)


class Command(BaseCommand):
    help = (
        "Create teams, invite members, and add members directly from the command line. "
        "add-member is an operator's action: it attaches the user without asking them; "
        "invite asks them by e-mail, as owners do in the app."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")

        create = actions.add_parser("create", help="Create a team without members.")
        create.add_argument("slug")
        create.add_argument("--name", default="", help="Display name; defaults to the slug.")

        add = actions.add_parser(
            "add-member",
            help=(
                "Add a user to a team with a role at once, without their consent (an "
                "operator's action); use invite to ask them instead."
            ),
        )
        add.add_argument("slug")
        add.add_argument("username", help="Username (or email) of the user to add.")
        add.add_argument("--role", required=True, choices=Role.values)
        add.add_argument(
            "--create-user",
            action="store_true",
            help="Create the user first, with no usable password.",
        )
        add.add_argument("--email", default="", help="Email of the user made by --create-user.")

        invite = actions.add_parser(
            "invite",
            help=(
                "E-mail an invitation to join a team; nothing changes until it is accepted. "
                "Prints the link on the last line."
            ),
        )
        invite.add_argument("slug")
        invite.add_argument("email", help="Address to send the invitation to.")
        invite.add_argument("--role", required=True, choices=Role.values)
        invite.add_argument(
            "--invited-by", default="", help="Username shown as the inviter (default: none)."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["action"] == "create":
            self._create(slug=options["slug"], name=options["name"])
        elif options["action"] == "invite":
            self._invite(
                slug=options["slug"],
                email=options["email"],
                role=options["role"],
                invited_by=options["invited_by"],
            )
        else:
            self._add_member(
                slug=options["slug"],
                username=options["username"],
                role=options["role"],
                create_user=options["create_user"],
                email=options["email"],
            )

    def _create(self, *, slug: str, name: str) -> None:
        if team_by_slug(slug=slug) is not None:
            raise CommandError(f"Team “{slug}” already exists.")
        # The web form's checks apply here too, such as slugs reserved for URLs.
        form = TeamCreateForm(data={"slug": slug, "name": name})
        if not form.is_valid():
            raise CommandError(f"Cannot create team “{slug}”: {_form_errors(form)}")
        try:
            team = team_create(slug=form.cleaned_data["slug"], name=form.cleaned_data["name"])
        except ValidationError as exc:
            raise CommandError(f"Cannot create team “{slug}”: {_error_text(exc)}") from exc
        self.stdout.write(f"Created team “{team.slug}” ({team.name}).")
        self.stdout.write(
            f"Add an owner: manage.py team add-member {team.slug} USERNAME --role owner "
            f"(or ask one: manage.py team invite {team.slug} EMAIL --role owner)"
        )

    def _invite(self, *, slug: str, email: str, role: str, invited_by: str) -> None:
        team = _existing_team(slug)
        inviter = None
        if invited_by:
            inviter = user_by_username(username=invited_by)
            if inviter is None:
                raise CommandError(f"No user with the username “{invited_by}”.")
        try:
            # An operator is not held to the inviting user's hourly allowance.
            invitation, raw = invitation_create(
                team=team, email=email, role=role, invited_by=inviter, throttled=False
            )
        except ValidationError as exc:
            raise CommandError(_error_text(exc)) from exc
        self.stdout.write(
            f"Invited {invitation.email} to “{team.slug}” as "
            f"{invitation.get_role_display().lower()}; the e-mail carries this link:"
        )
        # Alone on the last line so scripts can take it with `tail -n 1`.
        self.stdout.write(invitation_url(raw))

    @transaction.atomic
    def _add_member(
        self, *, slug: str, username: str, role: str, create_user: bool, email: str
    ) -> None:
        team = _existing_team(slug)
        if email and not create_user:
            raise CommandError("--email only applies with --create-user.")
        try:
            if create_user:
                user_create(username=username, email=email)
            membership = membership_add(team=team, identifier=username, role=role)
        except ValidationError as exc:
            raise CommandError(_error_text(exc)) from exc
        self.stdout.write(
            f"Added {membership.user} to “{team.slug}” as {membership.get_role_display().lower()}."
        )
        if create_user:
            self.stdout.write(
                f"{membership.user} has no password yet; set one with "
                f"`manage.py changepassword {membership.user}`."
            )


def _existing_team(slug: str) -> Team:
    team = team_by_slug(slug=slug)
    if team is None:
        raise CommandError(f"No team with the slug “{slug}”.")
    return team


def _form_errors(form: TeamCreateForm) -> str:
    return " ".join(str(message) for messages in form.errors.values() for message in messages)
