"""Settings, all from the environment (twelve-factor).

Every value can be given as ``NAME`` or, for secrets mounted as files, ``NAME_FILE``.
With nothing set the app runs on an embedded default: a private PostgreSQL server and a
broker that needs no server, both under ``var/``.
"""

import os
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import environ
from csp.constants import NONE, SELF, UNSAFE_INLINE
from django.core.exceptions import ImproperlyConfigured
from django.core.management.utils import get_random_secret_key
from kombu import Queue
from kombu import transport as kombu_transports

from apps.alerts.webhook_hosts import host_rule
from apps.core import embedded_postgres
from apps.pipelines.environment import secret_env_prefix

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.FileAwareEnv()
VAR_DIR = Path(env.str("VAR_DIR", default=str(BASE_DIR / "var")))
VAR_DIR.mkdir(parents=True, exist_ok=True)

# --- Core ---------------------------------------------------------------------
DEBUG = env.bool("DEBUG", default=False)
SITE_URL = env.str("SITE_URL", default="http://localhost:8000").rstrip("/")
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[SITE_URL])


def _secret_key() -> str:
    """A real key in production; in development one generated once and kept under var/."""
    key = env.str("SECRET_KEY", default="")
    if key:
        return key
    if not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY (or SECRET_KEY_FILE) is required when DEBUG is off.")
    path = VAR_DIR / "secret_key"
    if not path.exists():
        path.write_text(get_random_secret_key())
        path.chmod(0o600)
    return path.read_text().strip()


SECRET_KEY = _secret_key()

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django_htmx",
    "template_partials",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "axes",
    "apps.core",
    "apps.teams",
    "apps.pipelines",
    "apps.ingest",
    "apps.analysis",
    "apps.rollups",
    "apps.alerts",
    "apps.whatif",
    "apps.dashboards",
    "apps.runtime",
    "apps.demo",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "csp.middleware.CSPMiddleware",
    # A statement past WEB_STATEMENT_TIMEOUT_S answers a page saying so (503), not a 500.
    "apps.core.statement_timeout.StatementTimeoutMiddleware",
    # Last, as django-axes asks: it turns a refused sign-in into its lockout page.
    "axes.middleware.AxesMiddleware",
]

# Content-Security-Policy: scripts only from our own static files (htmx from django-htmx,
# no inline script, no eval: htmx is configured for it in base.html). Style attributes
# stay allowed for the widths of server-drawn bars.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        "style-src-attr": [UNSAFE_INLINE],
        "img-src": [SELF, "data:"],
        "connect-src": [SELF],
        "font-src": [SELF],
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    }
}

ROOT_URLCONF = "budgets_site.urls"
WSGI_APPLICATION = "budgets_site.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "apps.teams.context_processors.teams",
            ],
        },
    }
]

# --- Database: PostgreSQL, named by DATABASE_URL or the embedded server under var/ ---
# Only its address is computed here: `make db` (python -m apps.core.embedded_postgres
# start) runs the embedded server, and production, which sets DATABASE_URL, never has one.
if env.str("DATABASE_URL", default=""):
    DATABASES = {"default": env.db_url("DATABASE_URL")}
    if DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql":
        # One SQL dialect: partitions, binary COPY, SKIP LOCKED and percentile_disc
        # have no fallback elsewhere.
        raise ImproperlyConfigured(
            "DATABASE_URL must name a PostgreSQL database (postgres://user:password@host:port/"
            f"name); it names {DATABASES['default']['ENGINE'].rsplit('.', 1)[-1]}. Leave it "
            "unset to use the embedded PostgreSQL server under var/."
        )
else:
    _embedded = embedded_postgres.server_at(var_dir=VAR_DIR)
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": embedded_postgres.DATABASE,
            "USER": embedded_postgres.SUPERUSER,
            "HOST": str(_embedded.socket_dir),
            "PORT": str(embedded_postgres.PORT),
        }
    }
DATABASES["default"].setdefault("CONN_MAX_AGE", env.int("CONN_MAX_AGE", default=60))
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
# Longest statement of a web request (apps/core/statement_timeout.py): past it the request
# answers 503 instead of holding a web worker and a database backend. Workers and
# management commands are not held to it. 0 turns it off.
WEB_STATEMENT_TIMEOUT_S = env.float("WEB_STATEMENT_TIMEOUT_S", default=5.0)
if WEB_STATEMENT_TIMEOUT_S < 0:
    raise ImproperlyConfigured(
        f"WEB_STATEMENT_TIMEOUT_S must be at least 0; it is {WEB_STATEMENT_TIMEOUT_S:g}."
    )
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Cache: Redis when REDIS_URL is set, process memory otherwise ---------------
REDIS_URL = env.str("REDIS_URL", default="")
if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "apps.core.redis_cache.ReusingRedisCache",
            "LOCATION": REDIS_URL,
        }
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

# --- Auth ---------------------------------------------------------------------
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"
# django-axes' backend first: it refuses a locked-out sign-in before any password is
# checked. API tokens and sessions never pass through authenticate(), so it leaves them be.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

# --- Internationalization -------------------------------------------------------
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

# --- Static files: served by WhiteNoise, no separate server needed --------------
STATIC_URL = "static/"
STATIC_ROOT = Path(env.str("STATIC_ROOT", default=str(VAR_DIR / "staticfiles")))
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "django.contrib.staticfiles.storage.StaticFilesStorage"
            if DEBUG
            else "whitenoise.storage.CompressedManifestStaticFilesStorage"
        )
    },
}

# --- Email: SMTP via EMAIL_URL; in development one line in the log per message --------
# Mail carries working links (invitations, confirmations): printed to a production log,
# they work for whoever reads it. So production names its mail server, or asks for the
# console by name (EMAIL_URL=consolemail://) knowing that.
if not DEBUG and not env.str("EMAIL_URL", default=""):
    raise ImproperlyConfigured(
        "EMAIL_URL is required when DEBUG is off, e.g. smtp+tls://user:pass@smtp.example.com"
        ":587. EMAIL_URL=consolemail:// prints mail to the log instead: its invitation and "
        "confirmation links then work for anyone who can read the log."
    )
if env.str("EMAIL_URL", default=""):
    vars().update(env.email_url("EMAIL_URL"))
else:
    # Development without a mail server (`make run`): a line in the log per message (to,
    # subject), the whole message in a file under EMAIL_FILE_PATH; EMAIL_URL=consolemail://
    # prints them whole instead.
    EMAIL_BACKEND = "apps.core.mail_backends.OneLineEmailBackend"
    EMAIL_FILE_PATH = env.str("EMAIL_FILE_PATH", default=str(VAR_DIR / "mail"))
DEFAULT_FROM_EMAIL = env.str("DEFAULT_FROM_EMAIL", default="Latency Budgets <budgets@localhost>")
SERVER_EMAIL = DEFAULT_FROM_EMAIL

# --- Security: strict unless DEBUG; behind a TLS-terminating proxy in production --
# X-Forwarded-Proto is trusted only when the operator says a proxy sets it: where gunicorn
# faces clients directly, anyone could send it and pass for HTTPS.
SECURE_PROXY_SSL_HEADER = (
    ("HTTP_X_FORWARDED_PROTO", "https")
    if env.bool("USE_X_FORWARDED_PROTO", default=False)
    else None
)
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=not DEBUG)
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=0 if DEBUG else 31536000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=not DEBUG)
SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=False)
# Preloading cannot be undone quickly, so it is opt-in and its reminder is silenced.
SILENCED_SYSTEM_CHECKS = [] if SECURE_HSTS_PRELOAD else ["security.W021"]
SESSION_COOKIE_SECURE = env.bool("SESSION_COOKIE_SECURE", default=not DEBUG)
CSRF_COOKIE_SECURE = env.bool("CSRF_COOKIE_SECURE", default=not DEBUG)
X_FRAME_OPTIONS = "DENY"

# --- REST API -------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "apps.teams.authentication.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_THROTTLE_CLASSES": ["apps.teams.api_throttling.ApiRateThrottle"],
    "DEFAULT_PAGINATION_CLASS": "apps.core.api.pagination.DefaultPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "apps.core.api.errors.exception_handler",
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"]
    + (["rest_framework.renderers.BrowsableAPIRenderer"] if DEBUG else []),
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Latency Budgets API",
    "DESCRIPTION": "Pipelines, stages, span rules and latency budgets of a team.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    # Swagger UI from the installed sidecar package, never a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Choice sets that share a field name ("status", "kind") with another's get names of
    # their own; the channels' kind keeps the one it had before another "kind" came.
    "ENUM_NAME_OVERRIDES": {
        "RecomputeStatusEnum": "apps.analysis.models.RecomputeStatus",
        "KindEnum": "apps.alerts.models.ChannelKind",
        "StageReasonKindEnum": "apps.analysis.stage_reasons.REASON_KINDS",
    },
}

# --- Celery: Redis in production, kombu's filesystem transport by default -------
BROKER_DIR = VAR_DIR / "broker"
# The host named, though the transport needs none: kombu warns in every process otherwise.
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default="filesystem://localhost/")
if CELERY_BROKER_URL.startswith("filesystem://"):
    # Our subclass writes each message whole (see apps/core/filesystem_broker.py); the
    # alias reaches every process that reads these settings, and every Connection.
    kombu_transports.TRANSPORT_ALIASES["filesystem"] = "apps.core.filesystem_broker:Transport"
    for sub in ("queue", "processed"):
        (BROKER_DIR / sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(BROKER_DIR / "queue"),
        "data_folder_out": str(BROKER_DIR / "queue"),
        "processed_folder": str(BROKER_DIR / "processed"),
        "store_processed": False,
        "control_folder": str(BROKER_DIR / "control"),
        # A worker holding its one prefetched task polls again only after this long once
        # it is done; kombu's 1 s would cap a worker near one task a second, under what
        # the beat alone enqueues (finalize, rollups, budgets, alerts).
        "polling_interval": 0.1,
    }
    (BROKER_DIR / "control").mkdir(parents=True, exist_ok=True)
else:
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TIMEZONE = TIME_ZONE
# A task is acknowledged after it ran, so a worker that dies mid-task leaves the
# message for another worker; tasks are idempotent, so a second run is harmless.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Celery's Django fix-up closes the database connection around every task unless
# this is set; connections are then kept like the web's (CONN_MAX_AGE, checked before
# each task by budgets_site.celery) and renewed after this many tasks at the latest.
CELERY_DB_REUSE_MAX = 1000
CELERY_TASK_TIME_LIMIT = env.int("CELERY_TASK_TIME_LIMIT", default=300)
CELERY_TASK_SOFT_TIME_LIMIT = env.int("CELERY_TASK_SOFT_TIME_LIMIT", default=240)
CELERY_TASK_QUEUES = tuple(
    Queue(name, routing_key=name) for name in ("ingest", "rollup", "alerts", "whatif")
)
CELERY_TASK_DEFAULT_QUEUE = "rollup"
CELERY_TASK_ROUTES = {
    "apps.ingest.*": {"queue": "ingest"},
    # Turning spans into analyzed traces shares ingestion's queue. A busy run each second
    # would otherwise sit in front of the rollup passes in their queue until they
    # expired; in a queue of its own, the worker takes from both in turn.
    "apps.analysis.*": {"queue": "ingest"},
    "apps.rollups.*": {"queue": "rollup"},
    "apps.alerts.*": {"queue": "alerts"},
    # Replays take a second or two each: never in front of ingestion, rollups or alerts.
    "apps.whatif.*": {"queue": "whatif"},
    # So do the steps of a recompute, which analyse stored traces again in batches.
    "apps.analysis.tasks.recompute_pipeline": {"queue": "whatif"},
    "apps.core.*": {"queue": "rollup"},
}
CELERY_BEAT_SCHEDULE = {
    "worker-heartbeat": {"task": "apps.core.tasks.record_heartbeat", "schedule": 30.0},
    # Safety net: requests schedule draining themselves; this catches anything missed.
    "ingest-drain": {"task": "apps.ingest.tasks.drain_raw_batches", "schedule": 5.0},
    "traces-finalize": {"task": "apps.analysis.tasks.finalize_quiet_traces", "schedule": 1.0},
    "storage-maintain": {"task": "apps.ingest.tasks.maintain_storage", "schedule": 3600.0},
    # Safety net: finalize passes that wrote samples enqueue a rollup pass themselves.
    "rollups-process": {"task": "apps.rollups.tasks.process_dirty_rollups", "schedule": 2.0},
    "rollups-expire": {"task": "apps.rollups.tasks.expire_rollups", "schedule": 600.0},
    # Budgets over each pipeline's sliding window: violations open and close.
    "budgets-evaluate": {"task": "apps.rollups.tasks.evaluate_budgets", "schedule": 10.0},
    # Alert rules over violations and burn rates: pending, firing, reminders, no data.
    "alerts-evaluate": {"task": "apps.alerts.tasks.evaluate_alerts", "schedule": 10.0},
    # Safety net: deliveries are enqueued when written and when a retry is due.
    "alerts-deliver-due": {"task": "apps.alerts.tasks.deliver_due_notifications", "schedule": 5.0},
    # Safety net and retries of the e-mails asking channel addresses to confirm.
    "alerts-confirmations-due": {
        "task": "apps.alerts.tasks.send_due_confirmations",
        "schedule": 30.0,
    },
    "whatif-expire": {"task": "apps.whatif.tasks.expire_whatif_runs", "schedule": 3600.0},
    "whatif-advice": {"task": "apps.whatif.tasks.request_advice_runs", "schedule": 600.0},
    # Safety net: a recompute whose worker died, or whose next step was lost, goes on.
    "recomputes-resume": {"task": "apps.analysis.tasks.resume_recomputes", "schedule": 30.0},
}
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")

# --- Ingestion and trace assembly ---------------------------------------------------


def _at_least(least: float, name: str, value: float) -> float:
    """A numeric setting checked at start-up: a negative time or a zero cap is a typo,
    and it should stop the process with its name rather than make ingestion misbehave."""
    if value < least:
        raise ImproperlyConfigured(f"{name} must be at least {least:g}; it is {value:g}.")
    return value


def _int(name: str, *, default: int, least: int) -> int:
    return int(_at_least(least, name, env.int(name, default=default)))


def _seconds(name: str, *, default: float) -> float:
    return _at_least(0, name, env.float(name, default=default))


def _entries(name: str, check: Callable[[str], object]) -> list[str]:
    """A comma-separated list whose every entry ``check`` accepts, or the process stops
    with the setting's name and what is wrong."""
    entries: list[str] = env.list(name, default=[])
    for entry in entries:
        try:
            check(entry)
        except ValueError as exc:
            raise ImproperlyConfigured(f"{name}: {exc}.") from None
    return entries


# Caps apply to the body as sent and again after decompression.
INGEST_MAX_BODY_BYTES = _int("INGEST_MAX_BODY_BYTES", default=8 * 1024 * 1024, least=1)
INGEST_MAX_DECOMPRESSED_BYTES = _int(
    "INGEST_MAX_DECOMPRESSED_BYTES", default=32 * 1024 * 1024, least=1
)

# --- OTLP/gRPC ingest (docs/ingestion.md): its own process, `manage.py serve_otlp_grpc` --
# Where it listens (4317 is OTLP/gRPC's registered port) and how many calls it serves at
# once; past OTLP_GRPC_MAX_CONCURRENT calls in flight it answers RESOURCE_EXHAUSTED.
OTLP_GRPC_HOST = env.str("OTLP_GRPC_HOST", default="127.0.0.1")
OTLP_GRPC_PORT = _int("OTLP_GRPC_PORT", default=4317, least=0)
OTLP_GRPC_THREADS = _int("OTLP_GRPC_THREADS", default=8, least=1)
OTLP_GRPC_MAX_CONCURRENT = _int("OTLP_GRPC_MAX_CONCURRENT", default=64, least=1)
# TLS: a PEM certificate chain and its key; both unset, the port speaks plain HTTP/2 (put
# it behind a TLS-terminating proxy, or on a private network).
OTLP_GRPC_TLS_CERT_FILE = env.str("OTLP_GRPC_TLS_CERT_FILE", default="")
OTLP_GRPC_TLS_KEY_FILE = env.str("OTLP_GRPC_TLS_KEY_FILE", default="")
if bool(OTLP_GRPC_TLS_CERT_FILE) != bool(OTLP_GRPC_TLS_KEY_FILE):
    raise ImproperlyConfigured(
        "Set both OTLP_GRPC_TLS_CERT_FILE and OTLP_GRPC_TLS_KEY_FILE, or neither."
    )
# What one span may hold (see apps/ingest/decoding/limits.py), in characters. Past the
# name, attribute-count and size limits a span is rejected with its reason in
# partial_success; longer values are truncated, extra events dropped, as the SDK does.
INGEST_MAX_SPAN_NAME_LENGTH = _int("INGEST_MAX_SPAN_NAME_LENGTH", default=1024, least=1)
INGEST_MAX_SPAN_ATTRIBUTES = _int("INGEST_MAX_SPAN_ATTRIBUTES", default=256, least=1)
INGEST_MAX_ATTRIBUTE_KEY_LENGTH = _int("INGEST_MAX_ATTRIBUTE_KEY_LENGTH", default=256, least=1)
INGEST_MAX_ATTRIBUTE_VALUE_LENGTH = _int(
    "INGEST_MAX_ATTRIBUTE_VALUE_LENGTH", default=16_384, least=1
)
INGEST_MAX_SPAN_EVENTS = _int("INGEST_MAX_SPAN_EVENTS", default=128, least=0)
INGEST_MAX_SPAN_SIZE = _int("INGEST_MAX_SPAN_SIZE", default=1024 * 1024, least=1)
# A trace holds at most this many spans and this many bytes of names, attributes and
# events (plus its root, should that come last): the trace page, the rule tester and
# analysis load a whole trace, so this bounds what one trace costs any of them. 16 MiB
# holds a long agent run of a few hundred LLM calls with their prompts and completions
# (values are cut at INGEST_MAX_ATTRIBUTE_VALUE_LENGTH); an ordinary trace is a few KB.
# Spans past either are refused (partial_success once the trace is known to be full) and
# counted on the trace.
INGEST_MAX_SPANS_PER_TRACE = _int("INGEST_MAX_SPANS_PER_TRACE", default=10_000, least=1)
INGEST_MAX_TRACE_BYTES = _int("INGEST_MAX_TRACE_BYTES", default=16 * 1024 * 1024, least=1)
# The caps below are counted per account (apps/teams/accounts.py), over all the teams it
# created: counted per team, they would multiply with every team an account creates.
# Spans per second per account averaged over a few seconds, whatever the number of its
# teams and tokens; 0 turns the limit off.
INGEST_RATE_LIMIT_SPANS = _int("INGEST_RATE_LIMIT_SPANS", default=50_000, least=0)
# Live (unrevoked) ingest tokens an account's teams may hold together; 0 turns the cap off.
INGEST_TOKENS_PER_ACCOUNT = _int("INGEST_TOKENS_PER_ACCOUNT", default=20, least=0)
# Accepted spans not yet stored. An account holding more than its cap is told to retry
# later (503); past the total cap, so is every account holding more than an even share of
# it. 0 turns a cap off.
INGEST_MAX_BACKLOG_SPANS = _int("INGEST_MAX_BACKLOG_SPANS", default=2_000_000, least=0)
INGEST_MAX_BACKLOG_SPANS_PER_ACCOUNT = _int(
    "INGEST_MAX_BACKLOG_SPANS_PER_ACCOUNT", default=500_000, least=0
)
# Bytes of accepted spans (as stored) an account may send per UTC day; past it, 429 until
# midnight UTC. It bounds the disk one free account fills over the retention. 16 GiB lets
# `make run`'s demo (5 traces/s, ~3.3 KB each: 1.4 GB a day) and a busy pipeline (10
# requests/s all day with a few KB of prompt and completion on its LLM spans, ~8 KB a
# trace: 7 GB a day) run all day with room to spare. 0 turns the quota off.
INGEST_MAX_BYTES_PER_ACCOUNT_PER_DAY = _int(
    "INGEST_MAX_BYTES_PER_ACCOUNT_PER_DAY", default=16 * 1024**3, least=0
)
# One ingest task stores up to this many spans from many coalesced requests.
INGEST_DRAIN_MAX_SPANS = _int("INGEST_DRAIN_MAX_SPANS", default=20_000, least=1)
# … and up to this many bytes of stored batches, so that its memory stays bounded
# whatever the spans hold (a batch larger than this is drained alone).
INGEST_DRAIN_MAX_BYTES = _int("INGEST_DRAIN_MAX_BYTES", default=64 * 1024 * 1024, least=1)
# Drains running at once (each one claims different batches with SKIP LOCKED).
INGEST_DRAIN_CONCURRENCY = _int("INGEST_DRAIN_CONCURRENCY", default=1, least=1)
TRACE_IDLE_SECONDS = _seconds("TRACE_IDLE_SECONDS", default=10.0)
# A trace with its root gets its stage samples after this long without new spans, then
# is final once TRACE_IDLE_SECONDS pass; a span in between recomputes it.
TRACE_SETTLE_SECONDS = _seconds("TRACE_SETTLE_SECONDS", default=2.0)
TRACE_MAX_WAIT_SECONDS = _seconds("TRACE_MAX_WAIT_SECONDS", default=300.0)
# The worker rewrites a 10 s rollup bucket once it has been dirty this long, and then at
# most once per this period while its traces are analyzed: each rewrite reads all of the
# bucket's samples, so rewriting it after every finalize pass read each sample about ten
# times. Dashboards and budget checks see a trace up to this much later; 0 rewrites a
# bucket at the first pass after its samples change.
ROLLUP_SETTLE_SECONDS = _seconds("ROLLUP_SETTLE_SECONDS", default=3.0)
# Isolation of the shared passes (see apps/core/quarantine.py): one trace's analysis
# running past this is interrupted and the trace quarantined; 0 turns the budget off.
TRACE_ANALYSIS_TIME_BUDGET_S = _seconds("TRACE_ANALYSIS_TIME_BUDGET_S", default=5.0)
# An item whose passes died (the worker killed, out of memory) this many times is
# quarantined; after a first death it is processed alone (apps/core/crash_guard.py).
PASS_CRASH_STRIKES = _int("PASS_CRASH_STRIKES", default=2, least=1)
# One analysis pass loads the spans of up to this many spans' and bytes' worth of traces
# (a larger trace is analyzed alone).
ANALYSIS_PASS_MAX_SPANS = _int("ANALYSIS_PASS_MAX_SPANS", default=50_000, least=1)
ANALYSIS_PASS_MAX_BYTES = _int("ANALYSIS_PASS_MAX_BYTES", default=128 * 1024 * 1024, least=1)
# Any one statement of a drain, finalization, rollup or evaluation pass; an item whose
# statement runs past it is quarantined instead of holding the pass.
PASS_STATEMENT_TIMEOUT_S = _at_least(
    1, "PASS_STATEMENT_TIMEOUT_S", env.float("PASS_STATEMENT_TIMEOUT_S", default=60.0)
)
SPAN_RETENTION_DAYS = _int("SPAN_RETENTION_DAYS", default=7, least=1)
# Where spans are kept (docs/scaling.md): empty for PostgreSQL's day partitions in
# DATABASE_URL, or ``clickhouse://user:password@host:9000/database?cluster=name`` for a
# ClickHouse cluster, PostgreSQL staying the control plane.
SPAN_STORE_URL = env.str("SPAN_STORE_URL", default="")
SAMPLE_RETENTION_DAYS = _int("SAMPLE_RETENTION_DAYS", default=30, least=1)

# --- Reading stored spans: what one page, API call or rule test may load -------------
# A span may hold a megabyte of attributes: readers load span skeletons and only the
# attributes the rules compare, each span counted as 1 KiB plus those texts (see
# docs/dashboards.md, "What one request holds"). These bound what is left, whatever a
# team sent. A trace's page or API answer reads at most this much of the trace, and so
# holds at most about three times it; a trace past it shows its stored breakdown.
TRACE_VIEW_MAX_BYTES = _int("TRACE_VIEW_MAX_BYTES", default=16 * 1024 * 1024, least=65536)
# A span's details show each attribute value up to this many characters, cut past it
# with its full length stated.
TRACE_VALUE_DISPLAY_CHARS = _int("TRACE_VALUE_DISPLAY_CHARS", default=2000, least=100)
# The rule tester reads the newest traces whole until this much, and says how far back.
RULE_TEST_MAX_BYTES = _int("RULE_TEST_MAX_BYTES", default=16 * 1024 * 1024, least=65536)
# The unmatched spans of a pipeline read its newest traces whole until this much (the
# attributes that say what a span is included), and say how far back.
UNMATCHED_SPANS_MAX_BYTES = _int("UNMATCHED_SPANS_MAX_BYTES", default=16 * 1024 * 1024, least=65536)

# --- Alerts: webhook and email deliveries ----------------------------------------
# Webhook targets resolving to private, loopback or link-local addresses are refused at
# connect time (SSRF), unless allowed everywhere or for the receivers listed here, each as
# scheme://host:port, for every team or one (team-slug=scheme://host:port; see
# apps/alerts/webhook_hosts.py): a bare host, which once meant any port, stops start-up.
WEBHOOK_ALLOW_PRIVATE_IPS = env.bool("WEBHOOK_ALLOW_PRIVATE_IPS", default=False)
WEBHOOK_ALLOWED_HOSTS = _entries("WEBHOOK_ALLOWED_HOSTS", host_rule)
WEBHOOK_CONNECT_TIMEOUT_S = _at_least(
    0.1, "WEBHOOK_CONNECT_TIMEOUT_S", env.float("WEBHOOK_CONNECT_TIMEOUT_S", default=5.0)
)
WEBHOOK_TIMEOUT_S = _at_least(
    0.1, "WEBHOOK_TIMEOUT_S", env.float("WEBHOOK_TIMEOUT_S", default=15.0)
)
# At most this much of a receiver's answer is read; its start is kept with the attempt.
WEBHOOK_MAX_RESPONSE_BYTES = _int("WEBHOOK_MAX_RESPONSE_BYTES", default=65536, least=1024)
# Deliveries of one team in flight at once; keep it below the alerts workers' concurrency,
# so that one team's slow receivers never hold them all. 0 turns the share off.
ALERT_DELIVERIES_PER_TEAM = _int("ALERT_DELIVERIES_PER_TEAM", default=1, least=0)
# A burn-rate window (the objective's 5 min … 3 d) is judged only once the pipeline's data
# covers at least this share of it: a fresh pipeline's first minutes are not three days of
# burn. Between 0 (judge at once) and 1 (only a window full of data).
BURN_RATE_MIN_COVERAGE = _at_least(
    0, "BURN_RATE_MIN_COVERAGE", env.float("BURN_RATE_MIN_COVERAGE", default=0.5)
)
if BURN_RATE_MIN_COVERAGE > 1:
    raise ImproperlyConfigured(
        f"BURN_RATE_MIN_COVERAGE is a share of a window, at most 1; it is "
        f"{BURN_RATE_MIN_COVERAGE:g}."
    )
# Permanent failures in a row after which a channel is disabled and the owners are told.
ALERT_CHANNEL_DISABLE_AFTER = _int("ALERT_CHANNEL_DISABLE_AFTER", default=3, least=1)
# Every address of an e-mail channel gets a confirmation link first, and nothing else
# until it confirms (docs/alerts.md): the link confirms for this many days (declining
# works for ever), and writers may send it again at most this often per address.
CHANNEL_CONFIRMATION_EXPIRY_DAYS = _int("CHANNEL_CONFIRMATION_EXPIRY_DAYS", default=7, least=1)
CHANNEL_CONFIRMATION_RESEND_INTERVAL_S = _int(
    "CHANNEL_CONFIRMATION_RESEND_INTERVAL_S", default=300, least=0
)

# --- Configuration as code (docs/configuration-as-code.md) -------------------------
# A file's secret_env names a variable of the server's environment. Only the command line
# (manage.py budgets apply) reads any; a file applied in the browser reads only variables
# starting with these prefixes, each for every team or one (team-slug=PREFIX), since any
# member of any team writes it. Empty by default: the browser reads none.
CONFIG_SECRET_ENV_PREFIXES = _entries("CONFIG_SECRET_ENV_PREFIXES", secret_env_prefix)

# --- Accounts: sign-up, sign-in throttling, invitations (docs/accounts.md) ----------
# Anyone may sign up unless this is off; production usually turns it off and invites.
# A pending invitation's link opens sign-up for its invitee either way.
ALLOW_SIGNUP = env.bool("ALLOW_SIGNUP", default=True)
# Sign-up attempts per client address per hour; 0 turns the limit off.
SIGNUP_RATE_PER_HOUR = _int("SIGNUP_RATE_PER_HOUR", default=10, least=0)
# Reverse proxies in front that append to X-Forwarded-For: without the count, every
# client behind them would share the proxy's address in the limits above and below, and
# ten wrong passwords would lock a username out for everyone. Production must say (0
# when gunicorn faces clients directly): a wrong guess here is a lockout for all.
if not DEBUG and not env.str("CLIENT_IP_PROXY_COUNT", default=""):
    raise ImproperlyConfigured(
        "CLIENT_IP_PROXY_COUNT is required when DEBUG is off: the number of reverse proxies "
        "in front of the app that append to X-Forwarded-For (1 behind one load balancer, "
        "as docs/deployment.md sets it up; 0 when clients connect to gunicorn directly)."
    )
CLIENT_IP_PROXY_COUNT = _int("CLIENT_IP_PROXY_COUNT", default=0, least=0)
# Failed sign-ins in a row for one username from one address before both are locked
# out together for the cool-off (the same username from elsewhere still may sign in).
LOGIN_FAILURE_LIMIT = _int("LOGIN_FAILURE_LIMIT", default=10, least=1)
LOGIN_LOCKOUT_MINUTES = _int("LOGIN_LOCKOUT_MINUTES", default=15, least=1)
# Failed sign-ins from one address, whatever the usernames, within LOGIN_LOCKOUT_MINUTES
# before signing in from it pauses (apps/teams/signin_throttle.py): spraying one password
# over many usernames. Well above the per-username limit, for offices behind one address.
LOGIN_FAILURES_PER_ADDRESS = _int("LOGIN_FAILURES_PER_ADDRESS", default=30, least=1)
AXES_FAILURE_LIMIT = LOGIN_FAILURE_LIMIT
AXES_COOLOFF_TIME = timedelta(minutes=LOGIN_LOCKOUT_MINUTES)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
# Attempts while locked out do not push the end of the lockout further away.
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_LOCKOUT_CALLABLE = "apps.teams.views.accounts.login_locked_out"
AXES_CLIENT_IP_CALLABLE = "apps.teams.client_ip.client_ip_address"
# Failures are kept (AccessAttempt); a row for every successful sign-in is not.
AXES_DISABLE_ACCESS_LOG = True
INVITATION_EXPIRY_DAYS = _int("INVITATION_EXPIRY_DAYS", default=7, least=1)
# An invitation is e-mailed again at most this often, however often resend is pressed.
INVITATION_RESEND_INTERVAL_S = _int("INVITATION_RESEND_INTERVAL_S", default=300, least=0)
# Invitation e-mails (new and resent) one user may send per hour; 0 turns the limit off.
INVITATION_SENDS_PER_HOUR = _int("INVITATION_SENDS_PER_HOUR", default=30, least=0)
# A user's address is verified by a signed link mailed to it (docs/accounts.md), which
# works this many hours; one user may have it mailed this many times an hour (0: no limit).
EMAIL_VERIFICATION_EXPIRY_HOURS = _int("EMAIL_VERIFICATION_EXPIRY_HOURS", default=48, least=1)
EMAIL_VERIFICATION_SENDS_PER_HOUR = _int("EMAIL_VERIFICATION_SENDS_PER_HOUR", default=5, least=0)

# --- REST API allowances (apps/teams/api_throttling.py) -------------------------------
# Requests a minute per API token (a signed-in session counts as one), and per user
# account over all its tokens, since a user may mint many; past either: 429. 0: no limit.
API_REQUESTS_PER_MINUTE_PER_TOKEN = _int("API_REQUESTS_PER_MINUTE_PER_TOKEN", default=120, least=0)
API_REQUESTS_PER_MINUTE_PER_ACCOUNT = _int(
    "API_REQUESTS_PER_MINUTE_PER_ACCOUNT", default=300, least=0
)

# --- Prometheus scrapes of /metrics (docs/metrics.md) -------------------------------
# Live metrics tokens an account's teams may hold together; 0 turns the cap off.
METRICS_TOKENS_PER_ACCOUNT = _int("METRICS_TOKENS_PER_ACCOUNT", default=20, least=0)
# Scrapes a minute per metrics token, and per account over all its teams' tokens; past
# either: 429 with Retry-After. One a second per token leaves room for a 5 s interval from
# a few Prometheus replicas. 0: no limit.
METRICS_SCRAPES_PER_MINUTE_PER_TOKEN = _int(
    "METRICS_SCRAPES_PER_MINUTE_PER_TOKEN", default=60, least=0
)
METRICS_SCRAPES_PER_MINUTE_PER_ACCOUNT = _int(
    "METRICS_SCRAPES_PER_MINUTE_PER_ACCOUNT", default=300, least=0
)
# A team's figures are computed once and served to every scrape for this long, whatever
# the number of scrapers; 0 computes each scrape.
METRICS_CACHE_SECONDS = _int("METRICS_CACHE_SECONDS", default=15, least=0)
# What one scrape holds (about 15 series a stage): pipelines and stages past these, in
# name and stage order, are left out and counted in latency_budget_scrape_omitted.
METRICS_MAX_PIPELINES = _int("METRICS_MAX_PIPELINES", default=200, least=1)
METRICS_MAX_STAGES = _int("METRICS_MAX_STAGES", default=2000, least=1)

# --- Runtime documents for the client library (docs/runtime.md) -------------------
# Documents a minute per account, over all its teams' applications and instances; past
# it: 429 with Retry-After. A thousand instances refreshing every 30 s ask 2,000. 0: no limit.
RUNTIME_REQUESTS_PER_MINUTE_PER_ACCOUNT = _int(
    "RUNTIME_REQUESTS_PER_MINUTE_PER_ACCOUNT", default=6000, least=0
)
# A pipeline's document is computed once and served to every client for this long.
RUNTIME_DOCUMENT_CACHE_SECONDS = _int("RUNTIME_DOCUMENT_CACHE_SECONDS", default=10, least=0)
# The observed figures cover this many seconds back from now (10-second aligned).
RUNTIME_WINDOW_SECONDS = _int("RUNTIME_WINDOW_SECONDS", default=900, least=60)
# How often a client should ask again (the document's refresh_s).
RUNTIME_REFRESH_SECONDS = _int("RUNTIME_REFRESH_SECONDS", default=30, least=1)
# The share of requests a client runs without levers (the holdout, whose stage times say
# what the levers save), in percent; 0 turns it off.
RUNTIME_HOLDOUT_PERCENT = env.float("RUNTIME_HOLDOUT_PERCENT", default=2.0)
if not 0 <= RUNTIME_HOLDOUT_PERCENT <= 100:
    raise ImproperlyConfigured("RUNTIME_HOLDOUT_PERCENT is a share from 0 to 100.")
# The holdout's stage times (a document's uncut figures) cover this many seconds back:
# longer than the observed window, the holdout being a small share of the requests.
RUNTIME_UNCUT_WINDOW_SECONDS = _int("RUNTIME_UNCUT_WINDOW_SECONDS", default=3600, least=60)

# --- Accounts: what one user account may hold over all the teams it created ----------
# Anyone may sign up and create teams, so the caps that protect everyone else are
# counted per account, never per team (apps/teams/accounts.py); 0 turns a cap off.
ACCOUNT_MAX_TEAMS = _int("ACCOUNT_MAX_TEAMS", default=10, least=0)
ACCOUNT_MAX_PIPELINES = _int("ACCOUNT_MAX_PIPELINES", default=100, least=0)
# Alert channels, of every kind: each e-mail channel may hold 20 addresses.
ACCOUNT_MAX_CHANNELS = _int("ACCOUNT_MAX_CHANNELS", default=50, least=0)
# Mail to people outside the account, per hour over all its teams (0: no limit): the
# confirmation e-mails of channel addresses (a channel of 20 needs 20), test sends of
# e-mail channels, and invitations (each inviting user also has INVITATION_SENDS_PER_HOUR).
ACCOUNT_CONFIRMATIONS_PER_HOUR = _int("ACCOUNT_CONFIRMATIONS_PER_HOUR", default=50, least=0)
ACCOUNT_EMAIL_TESTS_PER_HOUR = _int("ACCOUNT_EMAIL_TESTS_PER_HOUR", default=20, least=0)
ACCOUNT_INVITATIONS_PER_HOUR = _int("ACCOUNT_INVITATIONS_PER_HOUR", default=30, least=0)
# Span rules one pipeline may hold, its stages' and its no-stage rules together: every
# span of its traces is tried against each (apps/analysis/stage_matching.py).
PIPELINE_MAX_RULES = _int("PIPELINE_MAX_RULES", default=200, least=0)

# --- What-if: replays of a pipeline's traces under changes (docs/whatif.md) ---------
# A replay's sample holds at most this many spans (a trace is never cut: past the budget
# further traces are left out), which bounds a worker's memory whatever a team sends.
WHATIF_MAX_SPANS = _int("WHATIF_MAX_SPANS", default=400_000, least=1000)
# … and reads at most this much of them (counted as for TRACE_VIEW_MAX_BYTES: ordinary
# spans weigh about 1.1 KiB, so the span budget binds first), so that heavy skeletons
# cannot take a worker either.
WHATIF_MAX_BYTES = _int("WHATIF_MAX_BYTES", default=512 * 1024 * 1024, least=1024 * 1024)
# Runs one account (all the teams it created) may have waiting or running at once; more
# are answered 429, so one account's questions never queue in front of everyone's.
WHATIF_RUNS_PER_ACCOUNT = _int("WHATIF_RUNS_PER_ACCOUNT", default=2, least=1)
# A run not finished this long after it was asked (or claimed) is asked again; one whose
# worker died this many times fails instead of taking another worker down.
WHATIF_RUN_TIMEOUT_S = _int("WHATIF_RUN_TIMEOUT_S", default=120, least=10)
WHATIF_MAX_ATTEMPTS = _int("WHATIF_MAX_ATTEMPTS", default=2, least=1)
# Answers are kept and reused for the same question for this long.
WHATIF_RESULT_TTL_S = _int("WHATIF_RESULT_TTL_S", default=86400, least=60)

# --- Recompute: a pipeline's recent traces analysed again after its rules changed -----
# (docs/recompute.md). How far back one recompute may reach, in hours; the page offers
# 1, 3, 6, 12, 24, 48, 72 and 168 hours up to it, and the cap itself. Only stored spans
# can be analysed again, so it may not reach past SPAN_RETENTION_DAYS.
RECOMPUTE_MAX_HOURS = _int("RECOMPUTE_MAX_HOURS", default=24, least=1)
if RECOMPUTE_MAX_HOURS > SPAN_RETENTION_DAYS * 24:
    raise ImproperlyConfigured(
        f"RECOMPUTE_MAX_HOURS ({RECOMPUTE_MAX_HOURS}) reaches past the spans kept "
        f"(SPAN_RETENTION_DAYS={SPAN_RETENTION_DAYS}, {SPAN_RETENTION_DAYS * 24} hours): "
        "traces whose spans are gone cannot be recomputed."
    )

# --- Settings renamed or removed ----------------------------------------------------
# A deployment still setting one is stopped with what to set instead, rather than left
# running on a default it did not choose.
RETIRED_SETTINGS = {
    "WHATIF_RUNS_PER_TEAM": "it is now WHATIF_RUNS_PER_ACCOUNT, counted over all the "
    "teams of an account",
    "WHATIF_WAIT_S": "the API no longer waits for a what-if run: it answers 202 at once",
    "WHATIF_PAGE_WAIT_S": "the what-if page no longer waits for its runs: it polls",
    "INGEST_TOKENS_PER_TEAM": "it is now INGEST_TOKENS_PER_ACCOUNT, counted over all the "
    "teams of an account",
    "INGEST_MAX_BACKLOG_SPANS_PER_TEAM": "it is now INGEST_MAX_BACKLOG_SPANS_PER_ACCOUNT, "
    "counted over all the teams of an account",
}
for _name, _instead in RETIRED_SETTINGS.items():
    if _name in os.environ or f"{_name}_FILE" in os.environ:
        raise ImproperlyConfigured(f"{_name} is no longer read: {_instead}.")

# --- Logging --------------------------------------------------------------------
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        # Django's defaults give its loggers a console handler of their own in DEBUG (every
        # django.* line would show twice, once without time or level) and an ADMINS mail,
        # which we do not use: ours is the one console handler.
        "django": {"handlers": [], "propagate": True},
        # The development server's line per request: 2xx and 3xx are INFO, 4xx WARNING and
        # 5xx ERROR, so WARNING keeps a busy demo readable without hiding failures.
        "django.server": {
            "level": env.str("REQUEST_LOG_LEVEL", default="INFO"),
            "propagate": True,
        },
        # django-axes writes a line at INFO for every sign-in (and its version at start);
        # lockouts are WARNING, so the request level keeps them and drops the routine.
        "axes": {"level": env.str("REQUEST_LOG_LEVEL", default="INFO"), "propagate": True},
    },
}
