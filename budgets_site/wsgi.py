import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "budgets_site.settings")

application = get_wsgi_application()

from apps.core.startup import freeze_startup_objects  # noqa: E402 - needs Django set up
from apps.core.statement_timeout import web_statement_timeout_enable  # noqa: E402

freeze_startup_objects()
# Web requests only: workers and management commands keep their own timeouts.
web_statement_timeout_enable()
