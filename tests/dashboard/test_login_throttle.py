"""Login throttling (django-axes) through the real forms over HTTP: the dashboard's and the admin's."""

import os
import socket
import subprocess
import sys
import threading
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import httpx2
import pytest
import uvicorn
from axes.models import AccessAttempt
from django.conf import settings
from django.utils import timezone

from calvin.http_server import proxy_options, trusted_proxies_from, trusted_proxy_list, uvicorn_config
from tests.conftest import free_port, wait_for
from tests.dashboard.conftest import OWNER_PASSWORD, STRANGER_PASSWORD, csrf_token_in, post_login_form
from tests.support.celery_processes import subprocess_database_url

ADMIN_PASSWORD = "pw-admin-123"


def fail_until_locked_out(http, username: str, path: str) -> None:
    """AXES_FAILURE_LIMIT (5) wrong passwords: the form again four times, then the lockout page."""
    for attempt in range(settings.AXES_FAILURE_LIMIT - 1):
        response = post_login_form(http, username, f"wrong-{attempt}", path)
        assert response.status_code == 200, attempt  # the form again, with its error
    assert_locked_out(post_login_form(http, username, "wrong-last", path))
    assert "sessionid" not in http.cookies


def assert_locked_out(response) -> None:
    assert response.status_code == 429
    assert "Too many failed logins" in response.text and "Try again in 15 minutes" in response.text


@pytest.mark.django_db(transaction=True)
def test_after_five_failures_even_the_right_password_is_refused(gateway, workspace, monkeypatch):
    checked = []
    user_class = workspace.members.get().user.__class__
    original = user_class.check_password
    monkeypatch.setattr(user_class, "check_password", lambda user, raw: checked.append(raw) or original(user, raw))
    with httpx2.Client(base_url=gateway, timeout=10) as http:
        fail_until_locked_out(http, "owner", "/accounts/login/")
        assert len(checked) == 5

        response = post_login_form(http, "owner", OWNER_PASSWORD)
        assert_locked_out(response)
        assert len(checked) == 5  # refused without checking the password
        assert "sessionid" not in http.cookies
        assert http.get("/").headers["location"] == "/accounts/login/?next=/"


@pytest.mark.django_db(transaction=True)
def test_the_admin_login_is_throttled_too(gateway, django_user_model):
    django_user_model.objects.create_superuser("root", password=ADMIN_PASSWORD)
    with httpx2.Client(base_url=gateway, timeout=10) as http:
        fail_until_locked_out(http, "root", "/admin/login/")
        assert_locked_out(post_login_form(http, "root", ADMIN_PASSWORD, "/admin/login/"))
        assert "sessionid" not in http.cookies


@pytest.mark.django_db(transaction=True)
def test_a_locked_out_username_does_not_lock_out_another_person(gateway, workspace, other_workspace):
    with httpx2.Client(base_url=gateway, timeout=10) as http:
        fail_until_locked_out(http, "owner", "/accounts/login/")
        assert_locked_out(post_login_form(http, "owner", OWNER_PASSWORD))
    with httpx2.Client(base_url=gateway, timeout=10) as http:  # same address, another username
        response = post_login_form(http, "stranger", STRANGER_PASSWORD)
        assert response.status_code == 302 and response.headers["location"] == "/"


@pytest.mark.django_db(transaction=True)
def test_fewer_failures_than_the_limit_do_not_lock_out(gateway, workspace):
    with httpx2.Client(base_url=gateway, timeout=10) as http:
        for attempt in range(settings.AXES_FAILURE_LIMIT - 1):
            assert post_login_form(http, "owner", f"wrong-{attempt}").status_code == 200
        response = post_login_form(http, "owner", OWNER_PASSWORD)
        assert response.status_code == 302 and response.headers["location"] == "/"


# --- Client addresses: from the socket unless a named proxy forwards them ------------------

ROOT = Path(__file__).resolve().parents[2]
BEHIND_PROXY = "127.0.0.1"  # the tests' client plays the proxy in front of Calvin
OTHER_PROXY = "10.255.0.1"  # a proxy that is not the tests' client


@contextmanager
def serving(*, trusted_proxies: list[str]):
    """Calvin's uvicorn config with these proxies named, on its own port (no lifespan: the
    MCP session manager runs once per process, in the `gateway` fixture's server)."""
    port = free_port()
    config = uvicorn_config(host="127.0.0.1", port=port, trusted_proxies=trusted_proxies, log_level="warning")
    config.lifespan = "off"
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: server.started, timeout=20)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@pytest.fixture
def proxied_gateway():
    with serving(trusted_proxies=[BEHIND_PROXY]) as base:
        yield base


@pytest.fixture(params=["/accounts/login/", "/admin/login/"], ids=["dashboard", "admin"])
def login_path(request):
    return request.param


@pytest.fixture
def root(django_user_model):
    """A superuser: the dashboard's and the admin's forms both log it in."""
    return django_user_model.objects.create_superuser("root", password=ADMIN_PASSWORD)


def attempt(http, username: str, password: str, path: str = "/accounts/login/", *, forwarded_for: str):
    http.headers["X-Forwarded-For"] = forwarded_for
    return post_login_form(http, username, password, path)


def logged_in(response) -> bool:
    return response.status_code == 302 and "sessionid" in response.cookies


def recorded_addresses() -> set[str]:
    return set(AccessAttempt.objects.values_list("ip_address", flat=True))


def fail_with_new_addresses(http, username: str, path: str, count: int) -> list[int]:
    return [
        attempt(http, username, f"wrong-{n}", path, forwarded_for=f"198.51.100.{n}").status_code for n in range(count)
    ]


@pytest.mark.django_db(transaction=True)
def test_without_a_proxy_a_forwarded_for_header_is_not_the_client_address(gateway, root, login_path):
    with httpx2.Client(base_url=gateway, timeout=10) as http:
        statuses = fail_with_new_addresses(http, "root", login_path, 12)
        assert statuses == [200] * 4 + [429] * 8  # one address: the pair's limit (5)
        assert_locked_out(attempt(http, "root", ADMIN_PASSWORD, login_path, forwarded_for="198.51.100.99"))
        assert "sessionid" not in http.cookies
    assert recorded_addresses() == {"127.0.0.1"}


@pytest.mark.django_db(transaction=True)
def test_python_m_calvin_http_server_takes_the_address_from_the_socket(workspace, tmp_path):
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "calvin.http_server", "--port", str(port), "--log-level", "warning"],
        cwd=ROOT,
        env={**os.environ, "DATABASE_URL": subprocess_database_url()},
        stdout=subprocess.DEVNULL,
        stderr=(tmp_path / "server.log").open("wb"),  # the child keeps it open
    )
    try:
        with httpx2.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
            wait_for(lambda: _answers(http), timeout=30)
            assert fail_with_new_addresses(http, "owner", "/accounts/login/", 5) == [200] * 4 + [429]
            assert_locked_out(attempt(http, "owner", OWNER_PASSWORD, forwarded_for="198.51.100.99"))
    finally:
        server.terminate()
        server.wait(timeout=20)
    assert recorded_addresses() == {"127.0.0.1"}, (tmp_path / "server.log").read_text()


def _answers(http) -> bool:
    try:
        return http.get("/accounts/login/").status_code == 200
    except httpx2.TransportError:
        return False


@pytest.mark.django_db(transaction=True)
def test_behind_a_named_proxy_a_spray_over_addresses_locks_the_username_everywhere(proxied_gateway, root, login_path):
    with httpx2.Client(base_url=proxied_gateway, timeout=10) as http:
        statuses = fail_with_new_addresses(http, "root", login_path, 12)
        # Each address is a pair of its own (one failure each); the username's limit (10) locks.
        assert statuses == [200] * 9 + [429] * 3
        assert_locked_out(attempt(http, "root", ADMIN_PASSWORD, login_path, forwarded_for="203.0.113.50"))
        assert "sessionid" not in http.cookies
    assert recorded_addresses() == {f"198.51.100.{n}" for n in range(12)} | {"203.0.113.50"}


@pytest.mark.django_db(transaction=True)
def test_behind_a_named_proxy_the_pair_locks_one_address_and_not_the_others(proxied_gateway, root, login_path):
    with httpx2.Client(base_url=proxied_gateway, timeout=10) as http:
        for n in range(settings.AXES_FAILURE_LIMIT - 1):
            assert attempt(http, "root", f"wrong-{n}", login_path, forwarded_for="198.51.100.7").status_code == 200
        assert_locked_out(attempt(http, "root", "wrong-last", login_path, forwarded_for="198.51.100.7"))
        assert_locked_out(attempt(http, "root", ADMIN_PASSWORD, login_path, forwarded_for="198.51.100.7"))
        # The person, from their own address: a stranger elsewhere cannot lock them out below the username's limit.
        assert logged_in(attempt(http, "root", ADMIN_PASSWORD, login_path, forwarded_for="203.0.113.8"))


@pytest.mark.django_db(transaction=True)
def test_an_address_failing_for_many_usernames_is_locked_out_for_every_username(proxied_gateway, root, login_path):
    limit = settings.CALVIN_LOGIN_ADDRESS_FAILURE_LIMIT
    with httpx2.Client(base_url=proxied_gateway, timeout=10) as http:
        for n in range(limit - 1):
            assert attempt(http, f"user-{n}", "guess", login_path, forwarded_for="198.51.100.9").status_code == 200
        assert_locked_out(attempt(http, f"user-{limit}", "guess", login_path, forwarded_for="198.51.100.9"))
        # Every username from there, the right password too; from elsewhere the person logs in.
        assert_locked_out(attempt(http, "root", ADMIN_PASSWORD, login_path, forwarded_for="198.51.100.9"))
        assert logged_in(attempt(http, "root", ADMIN_PASSWORD, login_path, forwarded_for="203.0.113.8"))


@pytest.mark.django_db(transaction=True)
def test_logging_in_to_ones_own_account_does_not_clear_an_addresses_failures(proxied_gateway, workspace):
    limit = settings.CALVIN_LOGIN_ADDRESS_FAILURE_LIMIT
    with httpx2.Client(base_url=proxied_gateway, timeout=10) as http:
        for n in range(limit - 1):
            assert attempt(http, f"user-{n}", "guess", forwarded_for="198.51.100.9").status_code == 200
        assert logged_in(attempt(http, "owner", OWNER_PASSWORD, forwarded_for="198.51.100.9"))
    with httpx2.Client(base_url=proxied_gateway, timeout=10) as http:
        assert_locked_out(attempt(http, "user-last", "guess", forwarded_for="198.51.100.9"))


@pytest.mark.django_db(transaction=True)
def test_a_sprayed_username_does_not_lock_out_another_workspaces_person(proxied_gateway, workspace, other_workspace):
    with httpx2.Client(base_url=proxied_gateway, timeout=10) as http:
        assert fail_with_new_addresses(http, "owner", "/accounts/login/", 10)[-1] == 429
        assert_locked_out(attempt(http, "owner", OWNER_PASSWORD, forwarded_for="198.51.100.1"))
    with httpx2.Client(base_url=proxied_gateway, timeout=10) as http:  # from one of the sprayed addresses
        assert logged_in(attempt(http, "stranger", STRANGER_PASSWORD, forwarded_for="198.51.100.1"))


@pytest.mark.django_db(transaction=True)
def test_forwarded_headers_from_a_peer_that_is_not_a_named_proxy_are_ignored(root, login_path):
    with serving(trusted_proxies=[OTHER_PROXY]) as base, httpx2.Client(base_url=base, timeout=10) as http:
        assert fail_with_new_addresses(http, "root", login_path, 5) == [200] * 4 + [429]
        assert_locked_out(attempt(http, "root", ADMIN_PASSWORD, login_path, forwarded_for="198.51.100.99"))
    assert recorded_addresses() == {"127.0.0.1"}


def old_failures(*, username: str, address: str, failures: int, minutes_ago: float) -> None:
    attempt = AccessAttempt.objects.create(
        username=username,
        ip_address=address,
        user_agent="spray/1.0",
        http_accept="*/*",
        path_info="/accounts/login/",
        get_data="",
        post_data="",
        failures_since_start=failures,
    )
    AccessAttempt.objects.filter(id=attempt.id).update(attempt_time=timezone.now() - timedelta(minutes=minutes_ago))


@pytest.mark.django_db(transaction=True)
def test_failures_older_than_the_cool_off_count_for_neither_limit(proxied_gateway, root):
    cool_off = settings.AXES_COOLOFF_TIME * 60  # minutes
    old_failures(username="root", address="198.51.100.1", failures=50, minutes_ago=cool_off + 1)
    old_failures(username="someone", address="198.51.100.9", failures=50, minutes_ago=cool_off + 1)
    with httpx2.Client(base_url=proxied_gateway, timeout=10) as http:
        assert logged_in(attempt(http, "root", ADMIN_PASSWORD, forwarded_for="198.51.100.9"))
    old_failures(username="root", address="198.51.100.2", failures=50, minutes_ago=cool_off - 1)
    with httpx2.Client(base_url=proxied_gateway, timeout=10) as http:  # within the cool-off they do
        assert_locked_out(attempt(http, "root", ADMIN_PASSWORD, forwarded_for="198.51.100.9"))


@pytest.mark.django_db(transaction=True)
def test_the_limits_are_the_settings(proxied_gateway, root, settings):
    settings.CALVIN_LOGIN_USERNAME_FAILURE_LIMIT = settings.CALVIN_LOGIN_ADDRESS_FAILURE_LIMIT = 1
    with httpx2.Client(base_url=proxied_gateway, timeout=10) as http:
        assert logged_in(attempt(http, "root", ADMIN_PASSWORD, forwarded_for="198.51.100.1"))  # none failed yet
    with httpx2.Client(base_url=proxied_gateway, timeout=10) as http:
        assert_locked_out(attempt(http, "root", "wrong", forwarded_for="198.51.100.1"))  # at the first failure
    settings.CALVIN_LOGIN_USERNAME_FAILURE_LIMIT, settings.CALVIN_LOGIN_ADDRESS_FAILURE_LIMIT = 5, 2
    with httpx2.Client(base_url=proxied_gateway, timeout=10) as http:
        assert attempt(http, "someone", "wrong", forwarded_for="198.51.100.2").status_code == 200
        assert_locked_out(attempt(http, "else", "wrong", forwarded_for="198.51.100.2"))  # the address's second


def login_claiming_https(base: str) -> int:
    """A login POST whose Origin is https: Django's CSRF check accepts it only if it sees the
    request as https, i.e. only if it believed X-Forwarded-Proto."""
    with httpx2.Client(base_url=base, timeout=10, headers={"X-Forwarded-Proto": "https"}) as http:
        token = csrf_token_in(http.get("/accounts/login/").text)
        https_origin = base.replace("http://", "https://", 1)
        form = {"username": "owner", "password": OWNER_PASSWORD, "csrfmiddlewaretoken": token}
        return http.post("/accounts/login/", data=form, headers={"Origin": https_origin}).status_code


@pytest.mark.django_db(transaction=True)
def test_forwarded_proto_is_believed_only_from_a_named_proxy(gateway, proxied_gateway, workspace):
    assert login_claiming_https(proxied_gateway) == 302  # the named proxy said https
    assert login_claiming_https(gateway) == 403  # no proxy named: the socket's scheme, http
    with serving(trusted_proxies=[OTHER_PROXY]) as base:
        assert login_claiming_https(base) == 403


# --- The servers' proxy options: nothing trusted unless named, and named well ---------------


def test_trusted_proxies_are_addresses_or_networks():
    assert trusted_proxy_list(" 10.0.0.5, 10.1.0.0/16,,::1 ") == ["10.0.0.5/32", "10.1.0.0/16", "::1/128"]
    assert trusted_proxy_list(["192.0.2.1", "2001:db8::/32"]) == ["192.0.2.1/32", "2001:db8::/32"]
    assert trusted_proxy_list("10.0.0.5/24") == ["10.0.0.0/24"]  # the network an address with a mask lies in
    assert trusted_proxy_list("") == [] and trusted_proxy_list([]) == []
    for wrong in ("*", "10.0.0.300", "proxy.internal", "10.0.0.0/33"):
        with pytest.raises(ValueError, match="is not an IP address or network") as refused:
            trusted_proxy_list(f"10.0.0.5,{wrong}")
        assert repr(wrong) in str(refused.value)


def test_uvicorn_reads_no_forwarded_header_unless_proxies_are_named(settings):
    settings.CALVIN_TRUSTED_PROXIES = []
    config = uvicorn_config(host="127.0.0.1", port=1)
    assert config.proxy_headers is False and config.forwarded_allow_ips == []
    config = uvicorn_config(host="127.0.0.1", port=1, trusted_proxies=["10.0.0.5"])
    assert config.proxy_headers is True and config.forwarded_allow_ips == ["10.0.0.5/32"]
    settings.CALVIN_TRUSTED_PROXIES = ["10.0.0.6"]  # the setting, when the caller names none
    assert proxy_options() == {"proxy_headers": True, "forwarded_allow_ips": ["10.0.0.6/32"]}
    assert proxy_options([]) == {"proxy_headers": False, "forwarded_allow_ips": []}  # an explicit "none" wins


def test_the_command_lines_name_proxies_or_trust_none(settings):
    settings.CALVIN_TRUSTED_PROXIES = []
    assert trusted_proxies_from(proxy_headers=False, forwarded_allow_ips=None) == []
    assert trusted_proxies_from(proxy_headers=True, forwarded_allow_ips="10.0.0.5") == ["10.0.0.5/32"]
    with pytest.raises(ValueError, match=r"--proxy-headers needs the proxies' addresses: --forwarded-allow-ips"):
        trusted_proxies_from(proxy_headers=True, forwarded_allow_ips=None)
    with pytest.raises(ValueError, match=r"--proxy-headers needs"):
        trusted_proxies_from(proxy_headers=True, forwarded_allow_ips=" , ")
    with pytest.raises(ValueError, match=r"--forwarded-allow-ips names proxies to trust with --proxy-headers"):
        trusted_proxies_from(proxy_headers=False, forwarded_allow_ips="10.0.0.5")
    settings.CALVIN_TRUSTED_PROXIES = ["10.0.0.6"]
    assert trusted_proxies_from(proxy_headers=False, forwarded_allow_ips=None) == ["10.0.0.6/32"]
    assert trusted_proxies_from(proxy_headers=True, forwarded_allow_ips=None) == ["10.0.0.6/32"]
    assert trusted_proxies_from(proxy_headers=True, forwarded_allow_ips="10.0.0.7") == ["10.0.0.7/32"]


@pytest.fixture
def taken_port():
    """A port something already listens on: a server that wrongly went on to start fails at once."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        yield str(listener.getsockname()[1])


def run(*args: str, var: Path, **env: str) -> subprocess.CompletedProcess:
    """A command on a bare embedded install in `var` (as a laptop's `up`): if it wrongly went on,
    it would touch no database of the tests."""
    dropped = ("DATABASE_URL", "REDIS_URL", "CALVIN_", "SP_STORE_KEY")
    environment = {k: v for k, v in os.environ.items() if not k.startswith(dropped)}
    environment.update(CALVIN_VAR_DIR=str(var), **env)
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(
    ("arguments", "words"),
    [
        (["--proxy-headers"], "--proxy-headers needs the proxies' addresses"),
        (["--forwarded-allow-ips", "10.0.0.5"], "--forwarded-allow-ips names proxies to trust with --proxy-headers"),
        (["--proxy-headers", "--forwarded-allow-ips", "*"], "trusted proxy '*' is not an IP address or network"),
    ],
)
def test_both_servers_refuse_a_proxy_option_that_names_no_proxy(arguments, words, taken_port, tmp_path):
    served = run("-m", "calvin.http_server", "--port", taken_port, *arguments, var=tmp_path)
    assert served.returncode == 2 and words in served.stderr, served.stderr
    up = run("manage.py", "up", "--port", taken_port, *arguments, var=tmp_path)
    assert up.returncode == 1 and f"CommandError: {words}" in up.stderr, up.stderr
    assert "Calvin is starting" not in up.stdout and not (tmp_path / "calvin.sqlite3").exists()  # refused first


def test_a_bad_trusted_proxy_setting_stops_both_servers(taken_port, tmp_path):
    setting = {"CALVIN_TRUSTED_PROXIES": "10.0.0.5,gateway-proxy"}
    words = "trusted proxy 'gateway-proxy' is not an IP address"
    served = run("-m", "calvin.http_server", "--port", taken_port, var=tmp_path, **setting)
    assert served.returncode == 2 and words in served.stderr, served.stderr
    up = run("manage.py", "up", "--port", taken_port, var=tmp_path, **setting)
    assert up.returncode == 1 and f"CommandError: {words}" in up.stderr, up.stderr


def test_a_lockout_limit_below_one_is_refused_when_settings_load(tmp_path):
    for name in ("AXES_FAILURE_LIMIT", "CALVIN_LOGIN_USERNAME_FAILURE_LIMIT", "CALVIN_LOGIN_ADDRESS_FAILURE_LIMIT"):
        checked = run("manage.py", "check", var=tmp_path, **{name: "0"})
        assert checked.returncode == 1, name
        assert f"{name} must be at least 1 (failed logins before a lockout)" in checked.stderr
    for minutes in ("0", "-5"):
        checked = run("manage.py", "check", var=tmp_path, AXES_COOLOFF_MINUTES=minutes)
        assert checked.returncode == 1 and "AXES_COOLOFF_MINUTES must be above 0" in checked.stderr
