from django.apps import AppConfig


class TeamsConfig(AppConfig):
    name = "apps.teams"
    label = "teams"

    def ready(self) -> None:
        from django.contrib.auth.models import User
        from django.contrib.auth.signals import user_login_failed
        from django.db.models.signals import post_save

        from apps.teams import api_schema  # noqa: F401 - registers the Bearer scheme
        from apps.teams.password_changes import tokens_revoke_on_password_change
        from apps.teams.signin_throttle import signin_failure_count

        # Hooks on Django's own code paths (sign-in, saving a user), each one service call.
        user_login_failed.connect(signin_failure_count, dispatch_uid="teams-signin-failures")
        post_save.connect(
            tokens_revoke_on_password_change, sender=User, dispatch_uid="teams-password-change"
        )
