"""The preview domain must be an origin of its own: a check refuses a setting that would hand
the agents' pages Calvin's cookies or Calvin's own host."""

from urllib.parse import urlsplit

from django.conf import settings
from django.core import checks

from calvin.chat.links import public_base
from calvin.previews.addresses import preview_domain


def _covers(cookie_domain: str, host: str) -> bool:
    domain = cookie_domain.lower().lstrip(".")
    return host == domain or host.endswith("." + domain)


def preview_domain_problems() -> list[str]:
    domain = preview_domain()
    if not domain:
        return []
    problems = []
    calvin_host = (urlsplit(public_base()).hostname or "").lower()
    if calvin_host == domain or calvin_host.endswith("." + domain):
        problems.append(
            f"CALVIN_PREVIEW_DOMAIN {domain!r} contains Calvin's own host {calvin_host!r}: a preview could be"
            " named to be Calvin's own address. Give previews a domain of their own (preview.example.com)."
        )
    for name in ("SESSION_COOKIE_DOMAIN", "CSRF_COOKIE_DOMAIN"):
        cookie_domain = getattr(settings, name, None)
        if cookie_domain and _covers(cookie_domain, "x." + domain):
            problems.append(
                f"{name} {cookie_domain!r} covers the preview domain {domain!r}: browsers would send Calvin's"
                " cookies to every preview. Leave it unset (host-only cookies) or narrow it."
            )
    return problems


def preview_domain_check(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    return [checks.Error(problem, id="previews.E001") for problem in preview_domain_problems()]
