"""Allow rules' patterns (approvals/rules.py), one rule at a time: which Bash prefixes are refused
and why, which commands a prefix matches, and the leading words a card offers."""

import pytest

from approvals.rules import MAX_PREFIX, command_matches, command_refusal, prefix_check, prefix_default, prefix_refusal
from tests.hostile import REFUSED_PREFIXES, SMUGGLED_COMMANDS


@pytest.mark.parametrize(("prefix", "why"), REFUSED_PREFIXES, ids=lambda v: repr(v)[:40])
def test_a_refused_prefix_says_why(prefix, why):
    refusal = prefix_refusal(prefix)
    assert refusal is not None, f"{prefix!r} would be allowed"
    assert why in refusal


@pytest.mark.parametrize(
    "prefix",
    [
        "npm test",
        "npm run build",
        "git status",
        "make lint",
        "pytest tests/api",
        "cargo test --workspace",
        "bash scripts/test.sh",
        "sh ./ci.sh",
        "python3 manage.py test",
        "python -m pytest",
        "/usr/bin/python3 tools/gen.py",
        "node scripts/build.js",
        "deno test",
        "deno run main.ts",
        "bun test",
        "npx jest",
        "FOO=1 npm test",
        'git commit -m "fix the bug"',
        "./node_modules/.bin/jest",
        "x" * MAX_PREFIX,
    ],
)
def test_a_narrow_prefix_is_allowed(prefix):
    assert prefix_refusal(prefix) is None
    assert prefix_check(f"  {prefix} ") == prefix


@pytest.mark.parametrize("command", SMUGGLED_COMMANDS, ids=lambda v: repr(v)[:40])
def test_a_smuggled_or_other_command_does_not_match(command):
    assert not command_matches("npm test", command)


@pytest.mark.parametrize(
    "command", ["npm test", "npm test -- --watch", "npm test\t--ci", "  npm test", "npm test $HOME 'a b' \"c\""]
)
def test_the_prefix_and_more_words_match(command):
    assert command_matches("npm test", command)


def test_what_is_no_command_never_matches():
    for command in (None, 3, ["npm", "test"], {"command": "npm test"}):
        assert not command_matches("npm test", command)
    assert not command_matches("", "npm test")


@pytest.mark.parametrize(
    ("command", "offered"),
    [
        ("npm test -- --watch", "npm test"),
        ("git push origin main", "git push"),
        ("ls -la", "ls"),
        ("python3 -c 'print(1)'", "python3"),
        ('echo "hello world"', "echo"),
        ("FOO=1 npm run build", "FOO=1 npm run"),
        ("rm *.log", "rm"),
        ("  make all", "make all"),
        ("x" * (MAX_PREFIX + 1), ""),
    ],
)
def test_the_words_a_card_offers(command, offered):
    assert prefix_default(command) == offered


def test_a_command_no_rule_can_match_says_why():
    assert command_refusal("npm ci && npm test") == "it holds `&`, which chains, substitutes or redirects commands"
    assert command_refusal("  ") == "it has no command"
    assert command_refusal(None) == "it has no command"
    assert command_refusal("npm test -- --watch") is None
