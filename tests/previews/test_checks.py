"""The preview domain is an origin of its own, or the gateway does not start (a system check)."""

from calvin.previews.checks import preview_domain_check


def problems() -> str:
    return " ".join(error.msg for error in preview_domain_check())


def test_a_preview_domain_of_its_own_passes(settings):
    settings.CALVIN_PUBLIC_URL = "https://calvin.example.com"
    settings.CALVIN_PREVIEW_DOMAIN = "preview.example.net"
    assert preview_domain_check() == []


def test_a_domain_containing_calvins_host_is_refused(settings):
    settings.CALVIN_PUBLIC_URL = "https://calvin.example.com"
    settings.CALVIN_PREVIEW_DOMAIN = "example.com"
    assert "contains Calvin's own host" in problems()  # a preview named "calvin" would be the dashboard


def test_cookie_domains_that_reach_previews_are_refused(settings):
    settings.CALVIN_PUBLIC_URL = "https://calvin.example.com"
    settings.CALVIN_PREVIEW_DOMAIN = "preview.example.com"
    settings.SESSION_COOKIE_DOMAIN = ".example.com"
    assert "SESSION_COOKIE_DOMAIN" in problems()
    settings.SESSION_COOKIE_DOMAIN = None
    settings.CSRF_COOKIE_DOMAIN = "example.com"
    assert "CSRF_COOKIE_DOMAIN" in problems()
    settings.CSRF_COOKIE_DOMAIN = "calvin.example.com"
    assert preview_domain_check() == []


def test_under_up_previews_live_under_preview_localhost(settings):
    settings.CALVIN_PUBLIC_URL = ""
    settings.CALVIN_PREVIEW_DOMAIN = ""
    assert preview_domain_check() == []
