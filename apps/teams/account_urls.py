from django.contrib.auth import views as auth_views
from django.urls import path

from apps.teams.views import accounts, email

urlpatterns = [
    path("login/", accounts.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("password/", auth_views.PasswordChangeView.as_view(), name="password_change"),
    path(
        "password/done/",
        auth_views.PasswordChangeDoneView.as_view(),
        name="password_change_done",
    ),
    path("signup/", accounts.signup, name="signup"),
    path("invitations/<str:token>/", accounts.invitation, name="invitation"),
    path("email/", email.account_email, name="account_email"),
    path("email/send/", email.account_email_send, name="account_email_send"),
    path("email/verify/<str:token>/", email.account_email_verify, name="account_email_verify"),
]
