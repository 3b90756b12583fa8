"""The hostile-input corpus every tool is run against (tests/tools/test_hostile_inputs.py).

Values are JSON text, written as a careless or malicious client would send them, so that
NaN, Infinity and escapes reach the server as written (a client library would normalise
them). A new tool adds a valid call to VALID_CALLS; the test then puts every value of the
corpus into each of its arguments (and, for post_card, into every prop of a card).
"""

import json

LONG = 200_000

# A file of the session directory that is a hard link to a file outside it (the test makes
# it): every path argument must refuse it, since its other name may be anything.
HARD_LINKED = "linked.txt"

PATHS = [
    json.dumps(HARD_LINKED),
    '"../../../../etc/passwd"',
    '"/etc/passwd"',
    '"/proc/self/environ"',
    '"/dev/zero"',
    '"/tmp"',
    '"~/.ssh/id_rsa"',
    '"."',
    '".."',
    '"/"',
    '"ok.txt/"',
    '"ok.txt/.."',
    '"./././ok.txt/../../../etc/passwd"',
    '"C:\\\\Windows\\\\system.ini"',
    '"file:///etc/passwd"',
    json.dumps("a/" * 3000 + "ok.txt"),
]

STRINGS = [
    '""',
    '" "',
    '"\\u0000"',
    '"ok\\u0000.txt"',
    '"\\u202egnp.exe"',  # right-to-left override
    '"\\u200b\\ufeff"',  # zero-width space, byte order mark
    '"e\\u0301\\u0301\\u0301"',  # combining marks
    '"\\ud83d\\udca5 \\ud83d\\udd25"',  # emoji, as surrogate pairs
    '"<img src=x onerror=alert(1)>"',
    '"</script><script>alert(1)</script>"',
    '"${jndi:ldap://x/a} %s%n {{7*7}}"',
    '"line one\\nline two\\r\\n\\t"',
    '"@channel @here <!everyone>"',
    json.dumps("x" * LONG),
]

NUMBERS = ["NaN", "Infinity", "-Infinity", "1e999", "-1e999", "0", "-0", "1e-400", "9007199254740993", "-1", "3.5"]

SHAPES = ["null", "true", "false", "[]", "{}", '["x"]', '{"a": "b"}', "[" * 60 + "]" * 60]

# Names that look like shortcodes: skin tones Slack spells with "::", colons left open, lone
# punctuation of the shortcode alphabet, an invisible joiner inside a real name.
NAMES = ['":+1::skin-tone-2:"', '"thumbs_up:"', '":::"', '"\'"', '"+"', '"-"', '"thumbs\u2060up"', '"HEART"']

CORPUS = PATHS + STRINGS + NUMBERS + SHAPES + NAMES

# Values no JSON parser should accept as they are; the server answers a JSON-RPC parse
# error before any tool runs.
UNPARSEABLE = ['"\\ud800"', '"\\udfff x"', "1" + "0" * 5000, "[" * 100_000 + "]" * 100_000]


def _card(**props_by_id) -> dict:
    elements = {
        "root": {"type": "Card", "props": {"title": "Report"}, "children": ["h", "t", "f", "tb", "c", "b"]},
        "h": {"type": "Heading", "props": {"text": "Heading"}},
        "t": {"type": "Text", "props": {"text": "Some *text*"}},
        "f": {"type": "Field", "props": {"label": "Branch", "value": "main"}},
        "tb": {"type": "Table", "props": {"columns": ["a", "b"], "rows": [["1", 2]]}},
        "c": {
            "type": "Chart",
            "props": {
                "kind": "bar",
                "title": "Latency",
                "series": [{"name": "p50", "points": [{"label": "x", "value": 1}]}],
            },
        },
        "b": {"type": "Button", "props": {"label": "Open", "url": "https://example.com/run"}},
    }
    return {"root": "root", "elements": elements, "state": {"k": "v"}}


# A message id the test replaces with one of the agent's own sent messages.
OWN_MESSAGE = 424242
# Thread links the test replaces: the agent's own thread, and another thread of its workspace.
OWN_THREAD_URL = "http://localhost:8000/threads/424242/"
OTHER_THREAD_URL = "http://localhost:8000/threads/434343/"

# One valid call per tool of each server. Every tool a server lists must be here.
VALID_CALLS = {
    "calvin": {
        "send_file": {"path": "ok.txt", "comment": "c", "title": "t", "alt_text": "a"},
        "post_card": {"spec": _card()},
        "request_secret": {"name": "API_TOKEN", "reason": "To call the staging API", "file": False},
        # Waits for a decision nobody makes: the test's short bound keeps the corpus run short.
        "approval_prompt": {
            "tool_name": "Bash",
            "input": {"command": "ls -la", "description": "List files"},
            "tool_use_id": "toolu_01",
        },
        "read_thread": {"url": OWN_THREAD_URL},
        # Asks for an approval nobody gives (default mode): the test's short bound keeps it short.
        "post_thread": {"url": OTHER_THREAD_URL, "text": "Deploy finished"},
        # The test defines repository "api" (a local upstream with docs/plan.md) and checks it out first.
        "checkout_repo": {"repos": ["api", "acme/API"]},
        "spawn_thread": {"task": "Write the client", "brief": "api/docs/plan.md#plan", "model": "fast"},
        # Refused for a session without a host (test_hostile_inputs.py's ALWAYS_REFUSED); tests/previews too.
        "preview": {"port": 8080, "name": "my-app"},
        "unpreview": {"name": "my-app"},
    },
    "nanoclaw": {
        "send_message": {"text": "t", "to": "thread"},
        "send_file": {"path": "ok.txt", "to": "thread", "text": "t", "filename": "f.txt"},
        "edit_message": {"messageId": OWN_MESSAGE, "text": "t"},
        "add_reaction": {"messageId": OWN_MESSAGE, "emoji": "thumbs_up"},
        # Blocking until answered or timed out: the shortest timeout keeps the corpus run short.
        "ask_user_question": {
            "title": "t",
            "question": "q",
            "options": ["a", {"label": "b", "value": "v"}],
            "timeout": 1,
        },
        "send_card": {
            "card": {
                "title": "t",
                "description": "d",
                "children": [{"type": "text", "text": "x"}],
                "actions": [{"label": "Open", "url": "https://example.com"}, {"label": "Pick", "value": "p"}],
            },
            "fallbackText": "f",
        },
        "create_agent": {"name": "helper", "instructions": "i"},
        "install_packages": {"apt": ["jq"], "npm": ["left-pad"], "reason": "r"},
        "add_mcp_server": {"name": "srv", "command": "npx", "args": ["-y", "x"], "env": {"MODE": "fast"}},
    },
}

# Where, inside a valid post_card spec, each corpus value is put in turn (a JSON path).
CARD_SLOTS = [
    ("root",),
    ("elements", "root", "props", "title"),
    ("elements", "root", "children", 0),
    ("elements", "h", "type"),
    ("elements", "h", "props", "text"),
    ("elements", "t", "props", "text"),
    ("elements", "f", "props", "label"),
    ("elements", "f", "props", "value"),
    ("elements", "tb", "props", "columns", 0),
    ("elements", "tb", "props", "rows", 0, 0),
    ("elements", "c", "props", "kind"),
    ("elements", "c", "props", "title"),
    ("elements", "c", "props", "series", 0, "name"),
    ("elements", "c", "props", "series", 0, "points", 0, "label"),
    ("elements", "c", "props", "series", 0, "points", 0, "value"),
    ("elements", "b", "props", "label"),
    ("elements", "b", "props", "url"),
    ("state", "k"),
]

MARK = "__HOSTILE__"


def with_value_at(arguments: dict, path: tuple, value_json: str) -> str:
    """The arguments as JSON text, with `value_json` spliced in verbatim at `path`."""
    copy = json.loads(json.dumps(arguments))
    node = copy
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = MARK
    return json.dumps(copy).replace(json.dumps(MARK), value_json)


def leaf_slots(value, path: tuple = ()) -> list[tuple]:
    """Every place inside a nested argument where a corpus value can go (each dict value, each list item)."""
    if isinstance(value, dict):
        return [slot for key, item in value.items() for slot in leaf_slots(item, (*path, key))] or [path]
    if isinstance(value, list):
        return [slot for i, item in enumerate(value) for slot in leaf_slots(item, (*path, i))] or [path]
    return [path]


# Allow rules (approvals/rules.py): Bash command prefixes no rule may hold, each with the words its
# refusal must give. A shell, interpreter or command runner as a whole, in every spelling.
REFUSED_PREFIXES = [
    ("", "empty"),
    ("   ", "empty"),
    ("\t", "empty"),
    ("bash", "`bash` is a shell"),
    ("sh", "`sh` is a shell"),
    ("zsh", "`zsh` is a shell"),
    ("dash", "`dash` is a shell"),
    ("fish", "`fish` is a shell"),
    ("bash -c", "`bash` is a shell"),
    ("sh -lc", "`sh` is a shell"),
    ("/bin/bash", "`/bin/bash` is a shell"),
    ("/usr/bin/env", "`/usr/bin/env` runs whatever command follows it"),
    ("env", "`env` runs whatever command follows it"),
    ("env FOO=1", "`env` runs whatever command follows it"),
    ("sudo", "`sudo` runs whatever command follows it"),
    ("sudo npm test", "`sudo` runs whatever command follows it"),
    ("xargs", "`xargs` runs whatever command follows it"),
    ("eval", "`eval` runs whatever command follows it"),
    ("exec", "`exec` runs whatever command follows it"),
    ("busybox sh", "`busybox` runs whatever command follows it"),
    ("python", "`python` alone runs any code"),
    ("python3", "`python3` alone runs any code"),
    ("python3 -c", "`python3 -c` runs the code given inline"),
    ("python -c", "`python -c` runs the code given inline"),
    ("python3 -Ic", "`python3 -Ic` runs the code given inline"),
    ("python3 -m", "`python3 -m` runs any module"),
    ("python3 -u", "name the script right after python3"),
    ("/usr/bin/python3", "`/usr/bin/python3` alone runs any code"),
    ("/usr/local/bin/python3.12 -c", "runs the code given inline"),
    ("node", "`node` alone runs any code"),
    ("node -e", "`node -e` runs the code given inline"),
    ("node --eval", "`node --eval` runs the code given inline"),
    ("node -p", "`node -p` runs the code given inline"),
    ("perl -e", "`perl -e` runs the code given inline"),
    ("perl -ne", "`perl -ne` runs the code given inline"),
    ("ruby -e", "`ruby -e` runs the code given inline"),
    ("deno eval", "`deno eval` runs the code given inline"),
    ("deno run", "`deno run` runs any script or package"),
    ("bun -e", "`bun -e` runs the code given inline"),
    ("npx", "`npx` alone runs any code"),
    ("FOO=1", "only sets variables"),
    ("FOO=1 bash", "`bash` is a shell"),
    ("'bash' -c", "written plainly"),
    ('"sh"', "written plainly"),
    ("b\\ash", "written plainly"),
    ("/bin/ba?h", "written plainly"),
    ("$SHELL", "written plainly"),
    ("X=a\\ b bash", "written plainly"),
    ("{bash,-c}", "written plainly"),
    ("time npm test", "shell syntax"),
    ("export BASH_ENV=/tmp/x", "changes the shell itself"),
    ("npm test; rm -rf ~", "`;`"),
    ("npm test && rm -rf ~", "`&`"),
    ("npm test || true", "`|`"),
    ("npm test | sh", "`|`"),
    ("npm test `id`", "a backtick"),
    ("npm test $(id)", "`$(`"),
    ("npm test ${X@P}", "`${`"),
    ("npm test > out", "`>`"),
    ("npm test < in", "`<`"),
    ("npm test\nrm -rf ~", "a line break"),
    ("npm test\rrm", "a carriage return"),
    ("npm test\x00", "control or invisible character"),
    ("npm\u202etest", "control or invisible character"),
    ("npm\u200btest", "control or invisible character"),
    ("echo 'open", "does not close"),
    ("npm test\\", "does not close"),
    ("x" * 501, "at most 500"),
]

# Commands a rule for the prefix `npm test` must never allow: another word, or a second
# command smuggled after the prefix in any spelling. Each is asked about instead.
SMUGGLED_COMMANDS = [
    "npm testing",
    "npm test2",
    "npm tests",
    "npm tes",
    "npm  test",
    "npm run test",
    "xnpm test",
    "npm test; rm -rf ~",
    "npm test ;rm -rf ~",
    "npm test && rm -rf ~",
    "npm test & rm -rf ~",
    "npm test || rm -rf ~",
    "npm test | sh",
    "npm test |& sh",
    "npm test `rm -rf ~`",
    "npm test $(rm -rf ~)",
    "npm test $((1+1))",
    "npm test ${HOME@P}",
    "npm test > ~/.bashrc",
    "npm test >> ~/.bashrc",
    "npm test < /etc/passwd",
    "npm test <(rm -rf ~)",
    "npm test\nrm -rf ~",
    "npm test\r\nrm -rf ~",
    "npm test \\\nrm -rf ~",
    "npm test\x00; rm",
    "npm test\u2028rm -rf ~",
    "npm test\u00a0--watch",
    "npm test\u202e--watch",
]


# Code channels (calvin/workspaces/code_channel_rules.py): channels an admin might type or paste, as
# (kind, channel, words the refusal must give). A Slack channel is its id, a web space a plain slug.
CHANNEL_BINDINGS = [
    ("slack", "C" + "A" * 200, "too long"),
    ("slack", "<#C0123ABCD|general>", "not a Slack channel id"),
    ("slack", "C0123ABCD\n", "not a Slack channel id"),
    ("slack", " C0123ABCD", "not a Slack channel id"),
    ("slack", "../x", "not a Slack channel id"),
    ("slack", "C0123\x00ABCD", "not a Slack channel id"),
    ("slack", "#general", "not a Slack channel id"),
    ("slack", "general", "not a Slack channel id"),
    ("slack", "c0123abcd", "not a Slack channel id"),
    ("slack", "https://acme.slack.com/archives/C0123ABCD", "not a Slack channel id"),
    ("slack", "D0123ABCD", "direct message conversation"),
    ("slack", "C0123ＡBCD", "not a Slack channel id"),  # a fullwidth capital
    ("slack", "", "required"),
    ("web", "Web", "not a space name"),
    ("web", "WEB-APP", "not a space name"),
    ("web", "space:web", "not a space name"),
    ("web", "space:", "not a space name"),
    ("web", "../x", "not a space name"),
    ("web", "web/app", "not a space name"),
    ("web", "web\x00", "not a space name"),
    ("web", "web\n", "not a space name"),
    ("web", "-web", "not a space name"),
    ("web", "wéb", "not a space name"),
    ("web", "w" * 200, "too long"),
    ("web", "", "required"),
    ("chat", "C0123ABCD", "a Slack channel (slack) or a web space (web)"),
]
