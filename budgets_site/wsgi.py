import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "budgets_site.settings")

application = get_wsgi_application()

from apps.core.startup import freeze_startup_objects  # noqa: E402 - needs Django set up

freeze_startup_objects()
