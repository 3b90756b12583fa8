"""Where previews live, and which Host headers name one."""

import pytest

from calvin.previews.addresses import is_preview_host, preview_domain, preview_name_of, preview_url


def test_under_up_previews_are_their_own_localhost_origins(settings):
    settings.CALVIN_PUBLIC_URL = ""
    settings.CALVIN_PREVIEW_DOMAIN = ""
    assert preview_url("demo") == "http://demo.preview.localhost:8000/"
    settings.CALVIN_PUBLIC_URL = "http://127.0.0.1:8123"
    assert preview_url("demo") == "http://demo.preview.localhost:8123/"


def test_a_hosted_gateway_uses_its_preview_domain_and_scheme(settings):
    settings.CALVIN_PUBLIC_URL = "https://calvin.example.com"
    settings.CALVIN_PREVIEW_DOMAIN = ""
    assert preview_domain() == ""  # not loopback: no previews until the operator names a domain
    settings.CALVIN_PREVIEW_DOMAIN = "preview.example.net"
    assert preview_url("demo") == "https://demo.preview.example.net/"


@pytest.mark.parametrize(
    ("host", "name"),
    [
        ("demo.preview.localhost:8000", "demo"),
        ("demo.preview.localhost", "demo"),
        ("a-1.preview.localhost", "a-1"),
        ("Demo.preview.localhost", None),
        ("demo.preview.localhost.", None),
        ("demo.Preview.localhost", None),
        ("demo:80.preview.localhost", None),
        ("x.demo.preview.localhost", None),
        ("-demo.preview.localhost", None),
        ("preview.localhost", None),
        ("demo.preview.localhost:80x", None),
        ("demo.preview.localhost.evil.com", None),
        ("d" * 64 + ".preview.localhost", None),
    ],
)
def test_only_one_exact_label_names_a_preview(settings, host, name):
    settings.CALVIN_PUBLIC_URL = ""
    settings.CALVIN_PREVIEW_DOMAIN = ""
    assert preview_name_of(host) == name


@pytest.mark.parametrize(
    "host",
    ["DEMO.PREVIEW.LOCALHOST", "demo.preview.localhost.", "demo:80.preview.localhost:8000", "preview.localhost"],
)
def test_every_spelling_under_the_domain_is_the_preview_apps_never_djangos(settings, host):
    settings.CALVIN_PUBLIC_URL = ""
    settings.CALVIN_PREVIEW_DOMAIN = ""
    assert is_preview_host(host)


def test_calvins_own_hosts_are_not_previews(settings):
    settings.CALVIN_PUBLIC_URL = ""
    settings.CALVIN_PREVIEW_DOMAIN = ""
    for host in ("localhost:8000", "127.0.0.1:8000", "[::1]:8000", "preview.localhost.evil.com", "xpreview.localhost"):
        assert not is_preview_host(host)
