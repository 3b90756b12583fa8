"""What a workspace's slug and name may be. Pure Python: the create form and workspace_create
both check them (a slug is the /w/<slug>/ of every page, so it is refused, never rewritten:
a Cyrillic "асme" is not quietly turned into another workspace's "acme")."""

import re
import unicodedata

MIN_SLUG = 2
MAX_SLUG = 50
MAX_NAME = 200
SLUG_RE = re.compile(r"[a-z0-9](?:[a-z0-9-]*[a-z0-9])?")
# Path segments and names Calvin's own pages or a person reading a URL would take for Calvin's.
RESERVED_SLUGS = frozenset(
    {
        "new",
        "admin",
        "api",
        "static",
        "media",
        "accounts",
        "account",
        "auth",
        "login",
        "logout",
        "signup",
        "invite",
        "invitations",
        "slack",
        "mcp",
        "ws",
        "w",
        "workspace",
        "workspaces",
        "threads",
        "settings",
        "people",
        "secrets",
        "healthz",
        "readyz",
        "www",
        "help",
        "support",
        "docs",
        "status",
        "calvin",
        "root",
        "system",
        "null",
        "none",
    }
)
SLUG_RULE = f"{MIN_SLUG} to {MAX_SLUG} of the letters a-z, digits and dashes (not first or last)"


def _character_named(character: str) -> str:
    return f"{character!r} ({unicodedata.name(character, f'U+{ord(character):04X}')})"


def slug_problem(slug: str) -> str | None:
    """Why `slug` cannot be a workspace's slug (already lowercased), or None."""
    if not isinstance(slug, str) or not slug:
        return f"a slug is required: {SLUG_RULE}"
    if len(slug) > MAX_SLUG:
        return f"a slug has at most {MAX_SLUG} characters ({len(slug)} given)"
    foreign = next((c for c in slug if not c.isascii() or not (c.isalnum() or c == "-")), None)
    if foreign is not None:
        return f"a slug is {SLUG_RULE}; {_character_named(foreign)} is not one of them"
    if len(slug) < MIN_SLUG:
        return f"a slug has at least {MIN_SLUG} characters"
    if not SLUG_RE.fullmatch(slug):
        return f"a slug is {SLUG_RULE}"
    if slug in RESERVED_SLUGS:
        return f"{slug!r} is reserved for Calvin's own pages: choose another slug"
    return None


def slug_normalise(slug: str) -> str:
    """ASCII capitals become small letters (ACME is acme); nothing else changes, so anything
    else outside the rule is refused by slug_problem rather than rewritten."""
    return "".join(c.lower() if "A" <= c <= "Z" else c for c in slug) if isinstance(slug, str) else slug


def name_problem(name: str) -> str | None:
    """Why `name` (already stripped) cannot be a workspace's name, or None."""
    if not isinstance(name, str) or not name:
        return "a name is required"
    if len(name) > MAX_NAME:
        return f"a name has at most {MAX_NAME} characters ({len(name)} given)"
    # Control and format characters (NUL, line breaks, right-to-left overrides, zero-width
    # joiners) would make one workspace's name read as another's in the header and the admin.
    hidden = next((c for c in name if unicodedata.category(c) in ("Cc", "Cf")), None)
    if hidden is not None:
        return f"a name cannot hold the invisible character {_character_named(hidden)}"
    return None
