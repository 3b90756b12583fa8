"""Calvin's settings: the one place that reads the environment.

With nothing set, Calvin runs embedded on one machine: SQLite under var/, Celery's
in-memory transport with a worker inside the `up` process, Channels' in-memory layer.
With DATABASE_URL and REDIS_URL it runs as separate, scalable processes.
"""

import base64
import binascii
import fnmatch
import os
import re
import secrets
import sys
from pathlib import Path

import environ

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env")  # optional; a missing file is fine

VAR_DIR = Path(env("CALVIN_VAR_DIR", default=str(BASE_DIR / "var")))
# Its keys, database, logs and stored files are nobody else's (calvin/private_files.py).
VAR_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)


def _embedded_secret_key() -> str:
    # A laptop install keeps one generated key across restarts; production sets SECRET_KEY.
    path = VAR_DIR / "secret_key"
    try:
        # Mode 0600 from the start (no moment readable by others), never over another file.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text().strip()
    with os.fdopen(fd, "w") as file:
        file.write(secrets.token_urlsafe(50))
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
# Without SP_STORE_KEY, the key `up` generated into VAR_DIR/vault_key on an embedded install,
# so every process started with this var dir (web, worker, host, any manage.py command) uses
# it, like var/secret_key. Settings never generate it themselves: a production process must
# not quietly start encrypting with a key nobody keeps.
VAULT_KEY_FILE = VAR_DIR / "vault_key"


def _vault_key_from_file() -> list[str]:
    return [key] if VAULT_KEY_FILE.exists() and (key := VAULT_KEY_FILE.read_text().strip()) else []


def _vault_key_problem(keys: list[str], origin: str) -> str | None:
    """What is wrong with the configured keys (never quoting one), or None."""
    for number, raw in enumerate(keys, start=1):
        try:
            key = base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4))
        except (binascii.Error, ValueError):
            key = b""
        if len(key) != 32:
            return (
                f"key {number} of {origin} is not 32 bytes of urlsafe base64;"
                " make a key with `python manage.py vault_key`"
            )
    if not keys and CALVIN_MODE == "hosted" and env("DATABASE_URL", default=""):
        return (
            "SP_STORE_KEY is not set: a hosted gateway (CALVIN_MODE=hosted with DATABASE_URL) needs a key"
            " to encrypt secrets. Make one with `python manage.py vault_key`, keep a copy where you keep"
            " database backups (secrets are lost without it), and set SP_STORE_KEY to it for every"
            " gateway process (web, worker, beat)."
        )
    return None


_KEYS_FROM_ENV = [key.strip() for key in env.list("SP_STORE_KEY", default=[]) if key.strip()]
SP_STORE_KEY = _KEYS_FROM_ENV or _vault_key_from_file()
# Refuse to start here, while the settings load: the web (uvicorn) and the worker (celery)
# run no system checks and none of Calvin's code before they serve. The one process that
# must start without a usable key is the one that makes it, and Django finds a project's
# command only once the settings have loaded, so `manage.py vault_key` is recognised by its
# command line (sys.argv) -- only that exact command, nothing that merely contains the word.
_MAKING_A_VAULT_KEY = Path(sys.argv[0]).name == "manage.py" and sys.argv[1:2] == ["vault_key"]
_KEY_PROBLEM = _vault_key_problem(SP_STORE_KEY, "SP_STORE_KEY" if _KEYS_FROM_ENV else str(VAULT_KEY_FILE))
if _KEY_PROBLEM and not _MAKING_A_VAULT_KEY:
    raise environ.ImproperlyConfigured(_KEY_PROBLEM)

INSTALLED_APPS = [
    "calvin.admin_apps.CalvinAdminConfig",  # django.contrib.admin, open to workspace owners and admins
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "django_celery_beat",
    "calvin.workspaces",
    "calvin.chat",
    "sessions.apps.AgentSessionsConfig",
    "tools",
    "approvals",
    "secrets_vault",
    "calvin.dashboard",
    "calvin.accounts",
    "calvin.audit",
    "calvin.previews",
    "calvin.api",
    "calvin.schedules",
    "ninja",  # its Swagger UI's files, served from here (no CDN is reachable, and the CSP allows none)
    "axes",
    "csp",
]

MIDDLEWARE = [
    "calvin.health.ProbeMiddleware",  # /healthz and /readyz before host checks and the HTTPS redirect
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "calvin.audit.context.AuditOriginMiddleware",  # the client address and channel for audit rows
    "calvin.api.problems.ApiProblemsMiddleware",  # under /api/: every error a problem document, never HTML
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "axes.middleware.AxesMiddleware",  # last, as django-axes asks: turns a lockout into its page
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
                "calvin.dashboard.context_processors.workspaces",  # the header's workspace and switcher
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

# Transports checkout_repo's clone URLs may use (git's GIT_ALLOW_PROTOCOL names). "file" (a
# local path) reads the host's own disks: allowed by default only in the embedded mode, a laptop.
CALVIN_REPOSITORY_SCHEMES = tuple(
    env.list("CALVIN_REPOSITORY_SCHEMES", default=["https", "ssh", "git", *(["file"] if EMBEDDED else [])])
)

CELERY_BROKER_URL = REDIS_URL or "memory://"
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_DEFAULT_QUEUE = env("CALVIN_QUEUE", default="calvin")
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
# The sweep re-queues calls a dead worker left "applying" and pending calls whose enqueue was lost.
CALVIN_SWEEP_SECONDS = env.float("CALVIN_SWEEP_SECONDS", default=15.0)
CALVIN_STUCK_APPLYING_SECONDS = env.float("CALVIN_STUCK_APPLYING_SECONDS", default=60.0)
CALVIN_LOST_PENDING_SECONDS = env.float("CALVIN_LOST_PENDING_SECONDS", default=30.0)
# An approval nobody decided this long after it was asked reminds the people who may decide, once (0: never).
CALVIN_APPROVAL_REMIND_MINUTES = env.float("CALVIN_APPROVAL_REMIND_MINUTES", default=30.0)
# Scheduled tasks (calvin/schedules): how often beat looks for due ones; the shortest interval a
# recurrence may have (a cron firing every minute is refused); failures in a row that pause a task.
CALVIN_TASK_TICK_SECONDS = env.float("CALVIN_TASK_TICK_SECONDS", default=10.0)
CALVIN_TASK_MIN_INTERVAL_SECONDS = env.int("CALVIN_TASK_MIN_INTERVAL_SECONDS", default=300)
CALVIN_TASK_PAUSE_AFTER_FAILURES = env.int("CALVIN_TASK_PAUSE_AFTER_FAILURES", default=3)
CELERY_BEAT_SCHEDULE = {
    "tool-calls-sweep": {"task": "tools.tasks.sweep_tool_calls", "schedule": CALVIN_SWEEP_SECONDS},
    # Expires approvals nobody decided within their workspace's timeout; posts cards whose post was lost.
    "approvals-sweep": {"task": "approvals.tasks.sweep_approvals", "schedule": CALVIN_SWEEP_SECONDS},
    # Reminds the people who may decide of approvals waiting longer than CALVIN_APPROVAL_REMIND_MINUTES.
    "approvals-remind": {"task": "approvals.tasks.remind_approvals", "schedule": CALVIN_SWEEP_SECONDS},
    # Queues again the turns of hosts whose heartbeat lapsed (also done on every host heartbeat).
    "hosts-sweep": {"task": "sessions.tasks.sweep_hosts", "schedule": CALVIN_SWEEP_SECONDS},
    # Queues again the drains of Slack lanes whose posts wait with nobody serving them (a lost drain).
    # Queues again Slack events whose task was lost; forgets handled ones after CALVIN_SLACK_EVENTS_KEEP_DAYS.
    "slack-events-sweep": {
        "task": "calvin.chat.slack.inbound_tasks.sweep_slack_events",
        "schedule": CALVIN_SWEEP_SECONDS,
    },
    "slack-lanes-sweep": {
        "task": "calvin.chat.slack.outbox_tasks.sweep_slack_lanes",
        "schedule": CALVIN_SWEEP_SECONDS,
    },
    # Marks previews past their expiry ended (they are not served already), each with an audit row.
    "previews-sweep": {"task": "calvin.previews.tasks.sweep_previews", "schedule": CALVIN_SWEEP_SECONDS},
    # Deletes audit events older than CALVIN_AUDIT_KEEP_DAYS, in batches.
    "audit-forget": {"task": "calvin.audit.tasks.forget_old_audit_events", "schedule": 3600.0},
    # Fires scheduled tasks whose time has come (each slot claimed once, however many beats run).
    "scheduled-tasks-fire": {"task": "calvin.schedules.tasks.fire_due_tasks", "schedule": CALVIN_TASK_TICK_SECONDS},
    # Forgets live events older than CALVIN_LIVE_KEEP_HOURS (a page that missed those reloads).
    "live-forget": {"task": "calvin.dashboard.tasks.forget_old_live_events", "schedule": 600.0},
}
# Channel kind -> chat adapter class. A deployment (or a test) can plug in another platform.
CALVIN_CHAT_ADAPTERS = {
    "web": "calvin.chat.web.WebChannel",
    "slack": "calvin.chat.slack.adapter.SlackChannel",
    **env.json("CALVIN_CHAT_ADAPTERS", default={}),
}

# Slack. Hosted: an OAuth install per Slack team (SLACK_CLIENT_ID / SLACK_CLIENT_SECRET).
# One team: SLACK_BOT_TOKEN + SLACK_SIGNING_SECRET, its events belonging to the workspace
# CALVIN_SLACK_WORKSPACE names (default the demo workspace `up` makes).
SLACK_API_URL = env("SLACK_API_URL", default="https://slack.com/api/")
SLACK_SIGNING_SECRET = env("SLACK_SIGNING_SECRET", default="")
SLACK_BOT_TOKEN = env("SLACK_BOT_TOKEN", default="")
SLACK_CLIENT_ID = env("SLACK_CLIENT_ID", default="")
SLACK_CLIENT_SECRET = env("SLACK_CLIENT_SECRET", default="")
SLACK_AUTHORIZE_URL = env("SLACK_AUTHORIZE_URL", default="https://slack.com/oauth/v2/authorize")
SLACK_BOT_SCOPES = env.list(
    "SLACK_BOT_SCOPES",
    default=[
        "app_mentions:read",
        "channels:history",
        "groups:history",
        "im:history",
        "im:write",
        "chat:write",
        "commands",
        "files:write",
        "reactions:write",
        "users:read",
    ],
)
CALVIN_SLACK_WORKSPACE = env("CALVIN_SLACK_WORKSPACE", default="demo")
# Slack takes about one message a second per channel: each channel's lane waits this long
# between posts, so bursts leave in order without running into 429s.
CALVIN_SLACK_CHANNEL_PACE_SECONDS = env.float("CALVIN_SLACK_CHANNEL_PACE_SECONDS", default=1.0)
# One Web API request's timeout; a post that times out is retried after asking Slack whether it arrived.
CALVIN_SLACK_HTTP_TIMEOUT = env.float("CALVIN_SLACK_HTTP_TIMEOUT", default=10.0)
# A post that failed this many times (5xx, timeouts) is given up, and the agent and the thread are told.
CALVIN_SLACK_POST_ATTEMPTS = env.int("CALVIN_SLACK_POST_ATTEMPTS", default=6)
# Slack retries an event for about an hour: rows kept longer only serve the audit, then go.
CALVIN_SLACK_EVENTS_KEEP_DAYS = env.float("CALVIN_SLACK_EVENTS_KEEP_DAYS", default=7.0)
# Slack's limit on conversations.replies and conversations.history for apps outside its
# Marketplace: one call a minute per team and method, 15 messages a call. A Marketplace app
# (Tier 3: about 50 a minute, 1,000 a call) may set 1.2 and 200; 0 makes no claim at all.
CALVIN_SLACK_READ_INTERVAL_SECONDS = env.float("CALVIN_SLACK_READ_INTERVAL_SECONDS", default=60.0)
CALVIN_SLACK_READ_PAGE = env.int("CALVIN_SLACK_READ_PAGE", default=15)

# A host's answer to a file request arrives in 256 KiB chunks on one channel: room for 100 MiB + 1.
HOST_REPLY_CAPACITY = {"hostreply*": 500, "preview*": 200}
# A host's consumer takes every preview stream's data to that host (each stream bounded by its
# flow-control window) besides its own messages.
CHANNEL_CAPACITY = 1000
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {
                # channels_redis polls with a 5 s blocking read; redis-py 8's default 5 s
                # socket timeout would cut every idle websocket consumer off at 5 s. redis-py's
                # pool holds 100 connections and then raises: hundreds of pages closing at once
                # (a deploy, a network blip) each leave their groups at the same moment.
                "hosts": [
                    {
                        "address": REDIS_URL,
                        "socket_timeout": 30,
                        "max_connections": env.int("CALVIN_CHANNEL_LAYER_CONNECTIONS", default=2000),
                    }
                ],
                "prefix": env("CALVIN_CHANNEL_PREFIX", default="calvin"),
                "channel_capacity": HOST_REPLY_CAPACITY,
                "capacity": CHANNEL_CAPACITY,
            },
        }
    }
else:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels.layers.InMemoryChannelLayer",
            # Unlike channels_redis, Channels' in-memory layer does not compile its capacity
            # patterns: give it compiled (pattern, capacity) pairs.
            "CONFIG": {
                "channel_capacity": [(re.compile(fnmatch.translate(p)), n) for p, n in HOST_REPLY_CAPACITY.items()],
                "capacity": CHANNEL_CAPACITY,
            },
        }
    }

# Shared counters (refusal rate limits, login throttling) must be shared by every web process.
if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": env("CALVIN_CHANNEL_PREFIX", default="calvin"),
        }
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

# Email (sign-up verification, invitations, password resets). EMAIL_URL as django-environ reads
# it (smtp+tls://user:password@host:587, consolemail://, filemail:///path); without it the
# console backend: under embedded `up` a newcomer reads the links in the log.
vars().update({k: v for k, v in env.email_url("EMAIL_URL", default="consolemail://").items() if v is not None})
DEFAULT_FROM_EMAIL = env("DEFAULT_FROM_EMAIL", default="Calvin <calvin@localhost>")
# Audit events older than this many days are removed by the audit sweep.
CALVIN_AUDIT_KEEP_DAYS = env.int("CALVIN_AUDIT_KEEP_DAYS", default=365)
# Live events (what open pages catch up on after a reconnect) are kept this many hours.
CALVIN_LIVE_KEEP_HOURS = env.float("CALVIN_LIVE_KEEP_HOURS", default=24.0)
# Each live socket looks this often for events whose push was lost, and sends them from the log.
CALVIN_LIVE_CHECK_SECONDS = env.float("CALVIN_LIVE_CHECK_SECONDS", default=5.0)
# How many workspaces one person may own (create); superusers are not limited.
CALVIN_WORKSPACES_PER_PERSON = env.int("CALVIN_WORKSPACES_PER_PERSON", default=10)
# How many invitations one workspace may make in 24 hours (each sends an email); resends of one
# invitation are limited to one a minute.
CALVIN_INVITATIONS_PER_DAY = env.int("CALVIN_INVITATIONS_PER_DAY", default=50)
# The most a workspace's owners and admins may set each quota limit to (their plan), as JSON,
# e.g. {"concurrent_sessions": 20, "turns_per_day": 5000}; a limit not named: the model's default.
# Superusers set any value.
CALVIN_QUOTA_CEILING = env.json("CALVIN_QUOTA_CEILING", default={})
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "dashboard:home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

# A thread page's websocket re-checks its person's access this often (and on every event it
# is sent): a membership removed where no push is made (a shell, another process) closes it.
try:
    CALVIN_SOCKET_RECHECK_SECONDS = env.float("CALVIN_SOCKET_RECHECK_SECONDS", default=30.0)
except ValueError:
    CALVIN_SOCKET_RECHECK_SECONDS = float("nan")
if not 0 < CALVIN_SOCKET_RECHECK_SECONDS < float("inf"):  # NaN fails this too
    _given = env.str("CALVIN_SOCKET_RECHECK_SECONDS")
    raise environ.ImproperlyConfigured(
        f"CALVIN_SOCKET_RECHECK_SECONDS must be a positive number of seconds, not {_given!r}"
    )
STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
MEDIA_ROOT = Path(env("MEDIA_ROOT", default=str(VAR_DIR / "media")))
# Stored files (send_file's copies) and their directories are the gateway's alone.
FILE_UPLOAD_PERMISSIONS = 0o600
FILE_UPLOAD_DIRECTORY_PERMISSIONS = 0o700

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"client_errors_short": {"()": "calvin.log_filters.ClientErrorsWithoutTraceback"}},
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env("LOG_LEVEL", default="INFO")},
    "loggers": {
        # A 403 or 404 is one line ("Forbidden (Permission denied): /threads/7/"), not a traceback.
        "django.request": {"filters": ["client_errors_short"]},
        "django.security.csrf": {"filters": ["client_errors_short"]},
        # The MCP SDK logs every rejected argument at INFO; keep the console readable.
        "mcp": {"level": "WARNING"},
    },
}

# Where session directories live on a runner host (the embedded runner is this machine).
CALVIN_SESSIONS_DIR = Path(env("CALVIN_SESSIONS_DIR", default=str(VAR_DIR / "sessions")))
# Each session gets its own temp directory under this root (its runner's TMPDIR); the
# machine's shared /tmp is never "the system temp directory" of a session.
CALVIN_SESSIONS_TMP_DIR = Path(env("CALVIN_SESSIONS_TMP_DIR", default=str(VAR_DIR / "session-tmp")))
# File secrets (request_secret's `file: true`) are written under here, one 0700 directory per
# session: outside every session directory and temp directory, so no tool can read them out.
CALVIN_SECRET_FILES_DIR = Path(env("CALVIN_SECRET_FILES_DIR", default=str(VAR_DIR / "secret-files")))
# Refused tool calls a runner may make per minute before its calls are paused (cheap to
# refuse, but a refused send_file still costs a walk and maybe a copy).
CALVIN_REFUSALS_PER_MINUTE = env.int("CALVIN_REFUSALS_PER_MINUTE", default=30)
# How long approval_prompt waits for a person to decide a Claude Code permission prompt; then the
# approval expires (sooner when the workspace's approval timeout is shorter) and Claude Code is told so.
CALVIN_APPROVAL_PROMPT_WAIT_SECONDS = env.float("CALVIN_APPROVAL_PROMPT_WAIT_SECONDS", default=600.0)
CALVIN_SERVE_STATIC = env.bool("CALVIN_SERVE_STATIC", default=True)
# Celery's Django fixup closes the worker's DB connection around every task unless told to reuse it.
# Reusing it is safe because calvin/celery.py drops a broken or expired one around every task.
CELERY_DB_REUSE_MAX = env.int("CELERY_DB_REUSE_MAX", default=1000)

# --- Security: logins, CSP, HTTPS ------------------------------------------------------
# Login throttling (django-axes) on every login form (dashboard and admin): after
# AXES_FAILURE_LIMIT failures for one username from one address, that pair is refused
# for the cool-off without its password being checked, even the right one. Calvin's
# handler (calvin/dashboard/login_throttle.py) adds two counters over the same attempts:
# a username refused from every address after CALVIN_LOGIN_USERNAME_FAILURE_LIMIT failures
# (a spray over many addresses at one account), and an address refused for every username
# after CALVIN_LOGIN_ADDRESS_FAILURE_LIMIT (one address trying many accounts).
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",  # first: it refuses a locked-out pair before any password check
    # Django's ModelBackend, by username or by email in any case (calvin/accounts/backends.py).
    "calvin.accounts.backends.EmailOrUsernameBackend",
]
AXES_FAILURE_LIMIT = env.int("AXES_FAILURE_LIMIT", default=5)
AXES_COOLOFF_TIME = env.float("AXES_COOLOFF_MINUTES", default=15) / 60  # axes reads a number as hours
# Username and address together: a stranger cannot lock a person out from elsewhere.
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_HANDLER = "calvin.dashboard.login_throttle.LoginThrottleHandler"
# Failures counted under the typed username's normal form: "Ann@X.com" and "ann@x.com" are one.
AXES_USERNAME_CALLABLE = "calvin.accounts.identity.axes_username"
CALVIN_LOGIN_USERNAME_FAILURE_LIMIT = env.int("CALVIN_LOGIN_USERNAME_FAILURE_LIMIT", default=10)
CALVIN_LOGIN_ADDRESS_FAILURE_LIMIT = env.int("CALVIN_LOGIN_ADDRESS_FAILURE_LIMIT", default=20)
for _name in ("AXES_FAILURE_LIMIT", "CALVIN_LOGIN_USERNAME_FAILURE_LIMIT", "CALVIN_LOGIN_ADDRESS_FAILURE_LIMIT"):
    if globals()[_name] < 1:
        raise environ.ImproperlyConfigured(f"{_name} must be at least 1 (failed logins before a lockout)")
if AXES_COOLOFF_TIME <= 0:  # 0 would forget every failure at once: no throttling at all
    raise environ.ImproperlyConfigured("AXES_COOLOFF_MINUTES must be above 0 (how long a lockout lasts)")
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "calvin.dashboard.views.login_locked_out"
AXES_VERBOSE = env.bool("AXES_VERBOSE", default=False)  # its banner and per-login lines are noise in `up`

# Content-Security-Policy (django-csp): scripts and styles only from this site's static
# files, never inline, so markup an agent smuggled into a page could not run.
_PUBLIC_ORIGIN = "/".join(CALVIN_PUBLIC_URL.split("/", 3)[:3]) if CALVIN_PUBLIC_URL else ""
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'"],
        # The thread page's websocket: 'self' covers ws(s) to the same host in CSP 3 browsers;
        # the public URL's ws(s) origin is named for the others.
        "connect-src": ["'self'", *([_PUBLIC_ORIGIN.replace("http", "ws", 1)] if _PUBLIC_ORIGIN else [])],
        "object-src": ["'none'"],
        "base-uri": ["'none'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}

# HTTPS: on by default when the public URL is https, each settable from the environment.
_HTTPS = CALVIN_PUBLIC_URL.startswith("https://")
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=_HTTPS)
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=365 * 24 * 3600 if _HTTPS else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=_HTTPS)
SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=False)
SESSION_COOKIE_SECURE = env.bool("SESSION_COOKIE_SECURE", default=_HTTPS)
CSRF_COOKIE_SECURE = env.bool("CSRF_COOKIE_SECURE", default=_HTTPS)
# The proxies in front of Calvin (addresses or CIDR networks), "" when clients connect
# directly. uvicorn (calvin/http_server.py, `up`) takes a request's client address and
# scheme from X-Forwarded-For / X-Forwarded-Proto only when the peer is one of these, so
# behind a TLS-terminating proxy the scheme is https without any header Django trusts
# from every peer. SECURE_PROXY_SSL_HEADER is therefore off unless set: Django would take
# it from any client that can reach the server directly.
CALVIN_TRUSTED_PROXIES = env.list("CALVIN_TRUSTED_PROXIES", default=[])
_PROXY_SSL_HEADER = env("SECURE_PROXY_SSL_HEADER", default="")
SECURE_PROXY_SSL_HEADER = (_PROXY_SSL_HEADER, "https") if _PROXY_SSL_HEADER else None
if not SECURE_HSTS_PRELOAD:
    # Preloading makes browsers hard-code HTTPS for the domain and all its subdomains and is
    # slow to undo: the operator's decision (SECURE_HSTS_PRELOAD), so its deploy warning is quiet.
    SILENCED_SYSTEM_CHECKS = ["security.W021"]
if _PUBLIC_ORIGIN:
    CSRF_TRUSTED_ORIGINS = [*CSRF_TRUSTED_ORIGINS, _PUBLIC_ORIGIN]
# --- end of Security: logins, CSP, HTTPS -----------------------------------------------

# Host daemons (sessions/hosts.py): a host heartbeats every CALVIN_HOST_HEARTBEAT_SECONDS; one
# silent for CALVIN_HOST_LAPSE_SECONDS has its turns queued again for another host.
CALVIN_HOST_HEARTBEAT_SECONDS = env.float("CALVIN_HOST_HEARTBEAT_SECONDS", default=10.0)
CALVIN_HOST_LAPSE_SECONDS = env.float("CALVIN_HOST_LAPSE_SECONDS", default=35.0)
# A queued turn no connected host can take is said in its thread after this long (a host that is
# only reconnecting should not make noise); a turn its host lapsed under is said at once.
CALVIN_HOST_WAIT_NOTICE_SECONDS = env.float("CALVIN_HOST_WAIT_NOTICE_SECONDS", default=10.0)
# Previews (preview/unpreview): https://<name>.<CALVIN_PREVIEW_DOMAIN>/, a wildcard DNS name
# pointed at the gateway, never the dashboard's own host or a parent of it. Empty: on a loopback
# gateway (`up`) "preview.localhost" (browsers resolve *.localhost to this machine); elsewhere
# previews are refused until it is set.
CALVIN_PREVIEW_DOMAIN = env("CALVIN_PREVIEW_DOMAIN", default="").strip().lower().rstrip(".")
# A request's line and headers beyond this are answered 431; a preview server's response head
# beyond this is answered 502.
CALVIN_PREVIEW_MAX_REQUEST_HEAD_BYTES = env.int("CALVIN_PREVIEW_MAX_REQUEST_HEAD_BYTES", default=32 * 1024)
CALVIN_PREVIEW_MAX_RESPONSE_HEAD_BYTES = env.int("CALVIN_PREVIEW_MAX_RESPONSE_HEAD_BYTES", default=64 * 1024)
# A request body (an upload) beyond this is answered 413; it is streamed, never held whole.
CALVIN_PREVIEW_MAX_BODY_BYTES = env.int("CALVIN_PREVIEW_MAX_BODY_BYTES", default=1024**3)
# Requests per preview per minute, across the gateway's processes (a dev server's first page
# load fetches hundreds of modules); beyond it 429 with Retry-After.
CALVIN_PREVIEW_REQUESTS_PER_MINUTE = env.int("CALVIN_PREVIEW_REQUESTS_PER_MINUTE", default=3000)
# How long the session's host may take to open a connection to the preview's server.
CALVIN_PREVIEW_OPEN_SECONDS = env.float("CALVIN_PREVIEW_OPEN_SECONDS", default=10.0)
# A members-only preview's access cookie lasts this long before the person is sent to log in again.
CALVIN_PREVIEW_ACCESS_SECONDS = env.int("CALVIN_PREVIEW_ACCESS_SECONDS", default=12 * 3600)
# A turn that runs longer is stopped by its host (no session stays "running" forever).
CALVIN_TURN_TIMEOUT_SECONDS = env.float("CALVIN_TURN_TIMEOUT_SECONDS", default=3600.0)
# The gateway's own bound: a turn still running this long after the timeout is ended by the
# hosts sweep (a host that heartbeats but never reports the end cannot hold a session running).
CALVIN_TURN_GRACE_SECONDS = env.float("CALVIN_TURN_GRACE_SECONDS", default=120.0)
# How long a host-local request (send_file's bytes) may take before the tool call fails.
CALVIN_HOST_REQUEST_SECONDS = env.float("CALVIN_HOST_REQUEST_SECONDS", default=60.0)
# checkout_repo and spawn_thread's git work on a host: each clone or fetch is killed after this.
CALVIN_GIT_TIMEOUT_SECONDS = env.float("CALVIN_GIT_TIMEOUT_SECONDS", default=120.0)
# `manage.py host` (sessions/host/daemon.py) on a machine that runs agents: where the gateway
# is, the host token made in the admin, and where the daemon keeps session directories.
CALVIN_GATEWAY_URL = env("CALVIN_GATEWAY_URL", default="http://127.0.0.1:8000")
CALVIN_HOST_TOKEN = env("CALVIN_HOST_TOKEN", default="")
CALVIN_HOST_NAME = env("CALVIN_HOST_NAME", default="")
CALVIN_HOST_CAPACITY = env.int("CALVIN_HOST_CAPACITY", default=4)
CALVIN_HOST_DIR = Path(env("CALVIN_HOST_DIR", default=str(VAR_DIR / "host")))
# A host daemon running as root runs each agent as this unprivileged user and group (outside
# its sandbox; 65534 is 'nobody'), so root-only files stay unreadable to agents.
CALVIN_AGENT_UID = env.int("CALVIN_AGENT_UID", default=65534)
CALVIN_AGENT_GID = env.int("CALVIN_AGENT_GID", default=65534)
# Where bubblewrap does not work a host refuses to run agents, unless the operator allows
# agents to run with process isolation only (they then see the host as the daemon's user does).
CALVIN_ALLOW_UNSANDBOXED = env.bool("CALVIN_ALLOW_UNSANDBOXED", default=False)
