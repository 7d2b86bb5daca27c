"""Teams, accounts and memberships, with each user's default team."""

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q

from apps.teams.accounts import account_cap_error
from apps.teams.models import Membership, Role, Team


@transaction.atomic
def team_create(*, slug: str, name: str, owner: User | None = None) -> Team:
    """A new team; its owner's account is the one whose allowances it draws on.

    An account may create ``ACCOUNT_MAX_TEAMS`` teams; a team made without an owner (an
    operator's, on the server) is not counted against anyone.
    """
    team = Team(slug=slug, name=name or slug, account=owner)
    team.full_clean()
    if owner is not None:
        _team_cap_check(owner)
    team.save()
    if owner is not None:
        membership = Membership.objects.create(team=team, user=owner, role=Role.OWNER)
        membership_default_settle(membership=membership)
    return team


def _team_cap_check(owner: User) -> None:
    cap = settings.ACCOUNT_MAX_TEAMS
    if not cap:
        return
    list(User.objects.select_for_update().filter(pk=owner.pk).values_list("pk"))
    used = Team.objects.filter(account=owner).count()
    if used >= cap:
        raise account_cap_error(
            what="teams", used=used, cap=cap, setting="ACCOUNT_MAX_TEAMS", code="too_many_teams"
        )


def user_create(*, username: str, email: str = "", password: str | None = None) -> User:
    """Create a user; without a password the account cannot sign in until one is set."""
    username = username.strip()
    email = User.objects.normalize_email(email.strip())
    if User.objects.filter(username__iexact=username).exists():
        raise ValidationError({"username": f"The username “{username}” is taken."})
    # Members are invited by email, so an address must lead to one account only.
    if email and User.objects.filter(email__iexact=email).exists():
        raise ValidationError({"email": f"An account with the email “{email}” already exists."})
    user = User(username=username, email=email)
    if password:
        user.set_password(password)
    else:
        user.set_unusable_password()
    user.full_clean()
    user.save()
    return user


def _user_by_identifier(identifier: str) -> User:
    identifier = identifier.strip()
    matches = list(
        User.objects.filter(Q(username__iexact=identifier) | Q(email__iexact=identifier))[:2]
    )
    if len(matches) != 1:
        raise ValidationError(
            {"identifier": f"No single user has the username or email “{identifier}”."}
        )
    return matches[0]


@transaction.atomic
def membership_add(*, team: Team, identifier: str, role: str) -> Membership:
    """Add an existing user, found by username or email, to the team at once.

    An operator's action (``manage.py team add-member``): it asks nobody. Owners in
    the app invite instead (``invitation_create``), and the invitee accepts.
    """
    if role not in Role.values:
        raise ValidationError({"role": f"Unknown role “{role}”."})
    user = _user_by_identifier(identifier)
    if Membership.objects.filter(team=team, user=user).exists():
        raise ValidationError({"identifier": f"{user} is already a member of {team}."})
    membership = Membership.objects.create(team=team, user=user, role=role)
    membership_default_settle(membership=membership)
    return membership


def _lock_user(user_id: int) -> None:
    # Serialises changes to one user's default: the partial unique index allows one.
    list(User.objects.select_for_update().filter(pk=user_id).values_list("pk", flat=True))


@transaction.atomic
def membership_default_settle(*, membership: Membership) -> None:
    """After ``membership`` was created: give its user a default team if they have none.

    A user's first team becomes their default. A user who was in exactly one team
    worked in it without naming it; that team is pinned as the default, so joining
    another one moves nothing. With several teams and no default, nothing changes:
    they name the team, as before, until they choose one.
    """
    _lock_user(membership.user_id)
    others = Membership.objects.filter(user_id=membership.user_id).exclude(pk=membership.pk)
    if others.filter(is_default=True).exists():
        return
    rest = list(others.values_list("pk", flat=True)[:2])
    if len(rest) > 1:
        return
    chosen = rest[0] if rest else membership.pk
    Membership.objects.filter(pk=chosen).update(is_default=True)
    if chosen == membership.pk:
        membership.is_default = True


@transaction.atomic
def membership_default_set(*, membership: Membership) -> Membership:
    """Make this the user's default team: only ever on the user's own request."""
    _lock_user(membership.user_id)
    Membership.objects.filter(user_id=membership.user_id, is_default=True).exclude(
        pk=membership.pk
    ).update(is_default=False)
    if not membership.is_default:
        membership.is_default = True
        membership.save(update_fields=["is_default", "updated_at"])
    return membership


def _owners_left_without(membership: Membership) -> int:
    return (
        Membership.objects.filter(team_id=membership.team_id, role=Role.OWNER)
        .exclude(pk=membership.pk)
        .count()
    )


@transaction.atomic
def membership_change_role(*, membership: Membership, role: str) -> Membership:
    if role not in Role.values:
        raise ValidationError({"role": f"Unknown role “{role}”."})
    # Lock the team's owner rows so two concurrent demotions cannot both pass the check.
    list(Membership.objects.select_for_update().filter(team_id=membership.team_id, role=Role.OWNER))
    if (
        membership.role == Role.OWNER
        and role != Role.OWNER
        and not _owners_left_without(membership)
    ):
        raise ValidationError({"role": "A team needs at least one owner."})
    membership.role = role
    membership.save(update_fields=["role", "updated_at"])
    return membership


@transaction.atomic
def membership_remove(*, membership: Membership) -> None:
    list(Membership.objects.select_for_update().filter(team_id=membership.team_id, role=Role.OWNER))
    if membership.role == Role.OWNER and not _owners_left_without(membership):
        raise ValidationError("The last owner cannot leave; make someone else an owner first.")
    membership.delete()
