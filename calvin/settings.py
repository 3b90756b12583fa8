"""Calvin's settings: the one place that reads the environment.

With nothing set, Calvin runs embedded on one machine: SQLite under var/, Celery's
in-memory transport with a worker inside the `up` process, Channels' in-memory layer.
With DATABASE_URL and REDIS_URL it runs as separate, scalable processes.
"""

import secrets
from pathlib import Path

import environ

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env")  # optional; a missing file is fine

VAR_DIR = Path(env("CALVIN_VAR_DIR", default=str(BASE_DIR / "var")))
VAR_DIR.mkdir(parents=True, exist_ok=True)


def _embedded_secret_key() -> str:
    # A laptop install keeps one generated key across restarts; production sets SECRET_KEY.
    path = VAR_DIR / "secret_key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


SECRET_KEY = env("SECRET_KEY", default=None) or _embedded_secret_key()
DEBUG = env.bool("DEBUG", default=False)
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

# one-machine | self-hosted | hosted: tool availability follows seed 000's table.
CALVIN_MODE = env("CALVIN_MODE", default="hosted")
if CALVIN_MODE not in ("one-machine", "self-hosted", "hosted"):
    raise environ.ImproperlyConfigured(f"CALVIN_MODE must be one-machine, self-hosted or hosted, not {CALVIN_MODE!r}")
# Public base URL used in links the platform prints (dashboard, .mcp.json).
CALVIN_PUBLIC_URL = env("CALVIN_PUBLIC_URL", default="")
# Encryption keys for secrets: the first encrypts, all decrypt. Empty: no vault.
SP_STORE_KEY = env.list("SP_STORE_KEY", default=[])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "django_celery_beat",
    "calvin.workspaces",
    "sessions.apps.AgentSessionsConfig",
    "tools",
    "approvals",
    "secrets_vault",
    "calvin.dashboard",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "calvin.urls"
ASGI_APPLICATION = "calvin.asgi.application"

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
            ],
        },
    },
]

DATABASES = {
    "default": env.db("DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'calvin.sqlite3'}"),
}
DATABASES["default"].setdefault("CONN_MAX_AGE", 60)
# No health-check query per request: close_old_connections() drops a connection after an error.
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # Web, worker and beat share one file in the embedded mode; wait rather than fail.
    DATABASES["default"].setdefault("OPTIONS", {}).update({"timeout": 20, "transaction_mode": "IMMEDIATE"})
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env("REDIS_URL", default="")
EMBEDDED = not REDIS_URL

CELERY_BROKER_URL = REDIS_URL or "memory://"
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_DEFAULT_QUEUE = env("CALVIN_QUEUE", default="calvin")
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_BEAT_SCHEDULE = {
    "tool-calls-sweep": {"task": "tools.tasks.sweep_tool_calls", "schedule": 15.0},
}

if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {
                # channels_redis polls with a 5 s blocking read; redis-py 8's default 5 s
                # socket timeout would cut every idle websocket consumer off at 5 s.
                "hosts": [{"address": REDIS_URL, "socket_timeout": 30}],
                "prefix": env("CALVIN_CHANNEL_PREFIX", default="calvin"),
            },
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "dashboard:home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
MEDIA_ROOT = Path(env("MEDIA_ROOT", default=str(VAR_DIR / "media")))

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env("LOG_LEVEL", default="INFO")},
    "loggers": {
        # The MCP SDK logs every rejected argument at INFO; keep the console readable.
        "mcp": {"level": "WARNING"},
    },
}

# Where session directories live on a runner host (the embedded runner is this machine).
CALVIN_SESSIONS_DIR = Path(env("CALVIN_SESSIONS_DIR", default=str(VAR_DIR / "sessions")))
CALVIN_SERVE_STATIC = env.bool("CALVIN_SERVE_STATIC", default=True)
# Celery's Django fixup closes the worker's DB connection around every task unless told to reuse it.
CELERY_DB_REUSE_MAX = env.int("CELERY_DB_REUSE_MAX", default=1000)
