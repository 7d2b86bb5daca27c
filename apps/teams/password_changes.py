"""A changed password revokes its owner's API tokens, whichever way it changed.

Passwords change through Django's own code (the password page, the admin,
``manage.py changepassword``), so the one hook that sees every change is the user's
save. ``set_password`` keeps the new password in ``_password`` until the save that
stores it; Django's silent re-hash of an unchanged password on sign-in clears it first,
so an upgraded hasher revokes nothing.
"""

from typing import Any

from django.contrib.auth.models import User

from apps.teams.services.tokens import api_tokens_revoke_for_password_change


def tokens_revoke_on_password_change(
    sender: type[User], instance: User, created: bool, **kwargs: Any
) -> None:
    if created or getattr(instance, "_password", None) is None:
        return
    api_tokens_revoke_for_password_change(user_id=instance.pk)
