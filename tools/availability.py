"""Which tools each deployment mode offers: seed 000's availability table."""

from django.conf import settings

ONE_MACHINE, SELF_HOSTED, HOSTED = "one-machine", "self-hosted", "hosted"

# Tools offered per mode. A tool offered but refused by the gateway (preview in
# self-hosted mode) is listed here and refused by its service.
OFFERED = {
    "send_file": {ONE_MACHINE, SELF_HOSTED, HOSTED},
    "post_card": {ONE_MACHINE, SELF_HOSTED, HOSTED},
    "checkout_repo": {SELF_HOSTED, HOSTED},
    "spawn_thread": {SELF_HOSTED, HOSTED},
    "read_thread": {SELF_HOSTED, HOSTED},
    "post_thread": {SELF_HOSTED, HOSTED},
    "request_secret": {SELF_HOSTED, HOSTED},
    "preview": {SELF_HOSTED, HOSTED},
    "unpreview": {SELF_HOSTED, HOSTED},
}


def tool_offered(name: str, mode: str | None = None) -> bool:
    return (mode or settings.CALVIN_MODE) in OFFERED.get(name, set())
