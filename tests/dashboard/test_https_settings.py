"""HTTPS settings follow CALVIN_PUBLIC_URL, and `check --deploy` is clean for an https deployment."""

import json
import os
import secrets
import subprocess
import sys

from django.conf import settings

SHOWN = [
    "SECURE_SSL_REDIRECT",
    "SECURE_HSTS_SECONDS",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS",
    "SECURE_HSTS_PRELOAD",
    "SESSION_COOKIE_SECURE",
    "CSRF_COOKIE_SECURE",
    "SECURE_PROXY_SSL_HEADER",
    "CSRF_TRUSTED_ORIGINS",
]


def manage(*args: str, **env: str) -> subprocess.CompletedProcess:
    """manage.py in a fresh process, so settings.py reads this environment (with a proper SECRET_KEY)."""
    environment = {**os.environ, "SECRET_KEY": secrets.token_urlsafe(50), "DEBUG": "false", **env}
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=settings.BASE_DIR,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )


def settings_with(**env: str) -> dict:
    code = "import json; from django.conf import settings as s; "
    code += f"print(json.dumps({{n: getattr(s, n) for n in {SHOWN}}}))"
    done = manage("shell", "-c", code, **env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_check_deploy_is_clean_for_an_https_public_url():
    done = manage("check", "--deploy", "--fail-level", "WARNING", CALVIN_PUBLIC_URL="https://calvin.example.com")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "System check identified no issues" in done.stdout


def test_https_public_url_turns_the_https_settings_on():
    assert settings_with(CALVIN_PUBLIC_URL="https://calvin.example.com") == {
        "SECURE_SSL_REDIRECT": True,
        "SECURE_HSTS_SECONDS": 31536000,
        "SECURE_HSTS_INCLUDE_SUBDOMAINS": True,
        "SECURE_HSTS_PRELOAD": False,  # an operator's decision, never a default
        "SESSION_COOKIE_SECURE": True,
        "CSRF_COOKIE_SECURE": True,
        # Off: the scheme comes from uvicorn, which believes X-Forwarded-Proto only from
        # CALVIN_TRUSTED_PROXIES; Django would believe the header from any client.
        "SECURE_PROXY_SSL_HEADER": None,
        "CSRF_TRUSTED_ORIGINS": ["https://calvin.example.com"],
    }


def test_an_http_public_url_leaves_them_off():
    assert settings_with(CALVIN_PUBLIC_URL="http://127.0.0.1:8000") == {
        "SECURE_SSL_REDIRECT": False,
        "SECURE_HSTS_SECONDS": 0,
        "SECURE_HSTS_INCLUDE_SUBDOMAINS": False,
        "SECURE_HSTS_PRELOAD": False,
        "SESSION_COOKIE_SECURE": False,
        "CSRF_COOKIE_SECURE": False,
        "SECURE_PROXY_SSL_HEADER": None,
        "CSRF_TRUSTED_ORIGINS": ["http://127.0.0.1:8000"],
    }


def test_each_is_settable_from_the_environment():
    chosen = settings_with(
        CALVIN_PUBLIC_URL="https://calvin.example.com",
        SECURE_SSL_REDIRECT="false",  # e.g. the proxy redirects already
        SECURE_HSTS_SECONDS="600",
        SECURE_HSTS_PRELOAD="true",
        SECURE_PROXY_SSL_HEADER="",
        CSRF_TRUSTED_ORIGINS="https://admin.example.com",
    )
    assert chosen["SECURE_SSL_REDIRECT"] is False and chosen["SECURE_HSTS_SECONDS"] == 600
    assert chosen["SECURE_HSTS_PRELOAD"] is True and chosen["SECURE_PROXY_SSL_HEADER"] is None
    assert chosen["CSRF_TRUSTED_ORIGINS"] == ["https://admin.example.com", "https://calvin.example.com"]
    http = settings_with(
        CALVIN_PUBLIC_URL="http://calvin.internal",
        SECURE_SSL_REDIRECT="true",
        SECURE_PROXY_SSL_HEADER="HTTP_X_FORWARDED_PROTO",  # every request comes through a proxy that sets it
    )
    assert http["SECURE_SSL_REDIRECT"] is True
    assert http["SECURE_PROXY_SSL_HEADER"] == ["HTTP_X_FORWARDED_PROTO", "https"]
