from django.urls import path

from apps.alerts.views import recipients

# Outside any team: whoever holds the link in the e-mail answers, signed in or not.
urlpatterns = [
    path("<str:token>/", recipients.recipient_page, name="recipient"),
    path(
        "<str:token>/unsubscribe/", recipients.recipient_unsubscribe, name="recipient_unsubscribe"
    ),
]
