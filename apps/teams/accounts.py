"""Accounts: the user whose allowances a team draws on.

Anyone may sign up, and a signed-up user may create teams. A cap counted per team
would multiply with every team an account creates, so the caps that protect the
others (teams, pipelines, the ingest rate and backlog share, ingest tokens, alert
channels, test sends, invitations, what-if runs) are counted per account: over every
team that account created. A team an operator made on the server (``manage.py team
create``, ``budgets apply --create-team``) has no account and is one of its own.
"""

from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db.models import QuerySet

from apps.teams.models import Team
from apps.teams.ratelimit import RateExceeded, rate_take, wait_words
from apps.teams.selectors import user_email_verified


@dataclass(frozen=True)
class Account:
    """Whose allowance a team uses: a user's, or the team's own."""

    user_id: int | None
    team_id: int

    @property
    def key(self) -> str:
        """A stable name for counters kept in the cache and for grouping in SQL."""
        if self.user_id is not None:
            return f"user:{self.user_id}"
        return f"team:{self.team_id}"


def account_of(*, team: Team) -> Account:
    return Account(user_id=team.account_id, team_id=team.pk)


def account_key_for(*, team_id: int, account_id: int | None) -> str:
    """The same key as ``Account.key``, from the two columns (for rows read in bulk)."""
    return Account(user_id=account_id, team_id=team_id).key


def account_teams(*, team: Team) -> QuerySet[Team]:
    """Every team sharing ``team``'s account, ``team`` included."""
    if team.account_id is None:
        return Team.objects.filter(pk=team.pk)
    return Team.objects.filter(account_id=team.account_id)


def account_lock(*, team: Team) -> None:
    """Serialise counting against one account until the transaction ends.

    Two requests of one account, on two of its teams, must not both pass a check that
    only one of them may pass: they meet on the account's user row (or the team's).
    Call inside ``transaction.atomic``.
    """
    if team.account_id is not None:
        list(User.objects.select_for_update().filter(pk=team.account_id).values_list("pk"))
    else:
        list(Team.objects.select_for_update().filter(pk=team.pk).values_list("pk"))


def account_cap_error(
    *, what: str, used: int, cap: int, setting: str, code: str
) -> ValidationError:
    """One wording for every per-account cap: what is held, the cap, and its setting."""
    return ValidationError(
        f"The teams of this account already hold {used} {what}, the most one account may "
        f"hold ({setting}={cap}). Remove one first, or ask the operator for more.",
        code=code,
    )


def account_verified(*, team: Team) -> bool:
    """Whether the team's account showed it reads its e-mail address: only then may the
    names it chose (team, channel, pipeline, stage, inviter) go into mail to others. A
    team an operator made on the server is vouched for by the operator."""
    if team.account_id is None:
        return True
    account = team.account
    return account is not None and user_email_verified(user=account)


def account_rate_take(*, team: Team, what: str, setting: str, amount: int = 1) -> None:
    """Take ``amount`` of the hourly allowance ``setting`` of ``team``'s account, shared
    by all its teams; raise RateExceeded (taking nothing) when they do not fit."""
    limit: int = getattr(settings, setting)
    key = f"accounts:{setting.lower()}:{account_of(team=team).key}"
    wait, left = rate_take(key, limit=limit, amount=amount)
    if not wait:
        return
    spent = f"have {left} left; this needs {amount}" if left else "have sent them all"
    raise RateExceeded(
        f"The teams of this account may send {limit} {what} an hour ({setting}={limit}) "
        f"and {spent}. Try again in {wait_words(wait)}.",
        retry_after_s=wait,
    )
