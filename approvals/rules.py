"""Allow rules' patterns: which Bash command prefixes a person may allow-list, and which commands a
prefix matches. Pure functions, no ORM (approvals/rule_services.py stores and applies the rules).

A Bash rule allows a command that starts with the exact prefix a person chose, on a word
boundary, and holds nothing after it that could start another command: no `;`, `&`, `|`,
backtick, `$(`, `${`, redirection or line break. So `npm test` matches `npm test -- --watch`,
never `npm testing` nor `npm test; rm -rf ~`. The prefix itself holds none of them, and never
names a shell, an interpreter or a command runner as a whole (`bash`, `python -c`, `sudo`...):
such a rule would allow any command at all.
"""

import re
import shlex
import unicodedata
from pathlib import PurePosixPath

BASH = "Bash"  # Claude Code's shell tool: its rules name a command prefix
MAX_PREFIX = 500
DEFAULT_WORDS = 2  # the prefix offered by default (Slack's buttons take it as it is)

# Anywhere in a prefix, or after it in a matched command: the start of a second command, a
# substitution that runs one, or a redirection. `&` and `|` cover `&&`, `||` and a background job;
# `${` covers `${X@P}`, which expands a variable's value as a prompt, command substitutions and all.
SMUGGLERS = (";", "&", "|", "`", "$(", "${", ">", "<", "\n", "\r")
# Words a command can start with: a prefix's command word must be written as plainly, so that
# nobody can disguise a shell as something else ('ba'sh, b\ash, /bin/ba?h, $SHELL, {bash,x}).
PLAIN_WORD = re.compile(r"[A-Za-z0-9._+@%:,/~-]+")
ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
# Words bash reads as syntax, not as a command to run.
RESERVED = frozenset(
    {"!", "{", "}", "[[", "]]", "if", "then", "else", "elif", "fi", "case", "esac", "for", "select", "while"}
    | {"until", "do", "done", "function", "coproc", "time"}
)
SHELLS = frozenset(
    {"bash", "sh", "zsh", "dash", "fish", "ksh", "mksh", "ash", "csh", "tcsh", "rbash", "pwsh", "powershell"}
    | {"nu", "elvish", "xonsh"}
)
# Programs that run whatever command (or file of commands) follows them.
RUNNERS = frozenset(
    {"env", "sudo", "su", "doas", "pkexec", "runuser", "xargs", "eval", "exec", "command", "builtin", "source"}
    | {".", "nohup", "nice", "ionice", "timeout", "stdbuf", "setsid", "chroot", "unshare", "nsenter", "taskset"}
    | {"watch", "strace", "ltrace", "flock", "parallel", "script", "chronic", "unbuffer", "expect", "trap"}
    | {"busybox", "fc", "mapfile", "readarray"}
)
# Builtins that change the shell itself, which decides what later commands run (BASH_ENV, a
# function named like a command, a loaded builtin).
SHELL_STATE = frozenset({"export", "declare", "typeset", "readonly", "local", "set", "shopt", "alias", "enable"})
# Interpreters (and package runners) with the options that run code given inline. The script,
# module or package must follow them at once: `python3 manage.py`, `python3 -m pytest`, `npx jest`.
INTERPRETERS = {
    "python": {"-c"},
    "pypy": {"-c"},
    "node": {"-e", "-p", "--eval", "--print"},
    "nodejs": {"-e", "-p", "--eval", "--print"},
    "perl": {"-e", "-E"},
    "ruby": {"-e"},
    "irb": set(),
    "php": {"-r"},
    "lua": {"-e"},
    "luajit": {"-e"},
    "rscript": {"-e"},
    "osascript": {"-e"},
    "tclsh": set(),
    "wish": set(),
    "ts-node": {"-e", "-p", "--eval", "--print"},
    "tsx": {"-e", "-p", "--eval", "--print"},
    "awk": set(),
    "gawk": set(),
    "mawk": set(),
    "nawk": set(),
    "npx": set(),
    "bunx": set(),
    "pnpx": set(),
    "uvx": set(),
    "deno": {"-e", "--eval"},
    "bun": {"-e", "-p", "--eval", "--print"},
}
# Subcommands that run code given inline, and those that run whatever script or package follows.
INLINE_SUBCOMMANDS = {"deno": {"eval", "repl"}, "bun": {"exec", "repl"}}
TARGET_SUBCOMMANDS = {"deno": {"run", "x", "serve"}, "bun": {"run", "x"}}
VERSIONED = re.compile(r"(python|pypy|perl|ruby|php|lua|node)[0-9][0-9.]*")


class PrefixRefused(ValueError):
    """A prefix no rule may hold; the text says why."""


def _invisible(char: str) -> bool:
    return unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp", "Co", "Cs", "Cn")


def _smuggler(text: str) -> str | None:
    """The first thing in the text that could start another command (or a control character)."""
    for token in SMUGGLERS:
        if token in text:
            return token
    return next((c for c in text if _invisible(c) and c != "\t"), None)


def _shown(token: str) -> str:
    return {"\n": "a line break", "\r": "a carriage return", "`": "a backtick"}.get(token, f"`{token}`")


def _program(word: str) -> str:
    """What a command word runs, by name: a path's last part, lowercase, without a version."""
    name = PurePosixPath(word).name.lower() if "/" in word else word.lower()
    versioned = VERSIONED.fullmatch(name)
    return versioned.group(1) if versioned else name


def prefix_refusal(prefix: str) -> str | None:
    """Why `prefix` cannot be a Bash rule's prefix, or None when it can."""
    if not prefix or not prefix.strip():
        return "the prefix is empty: a Bash rule names the command's leading words"
    if len(prefix) > MAX_PREFIX:
        return f"the prefix is {len(prefix)} characters long; at most {MAX_PREFIX}"
    if any(_invisible(c) and c not in "\n\r" for c in prefix):
        return "the prefix holds a control or invisible character (a NUL, say): it must read as it runs"
    smuggler = _smuggler(prefix)
    if smuggler is not None:
        return (
            f"the prefix holds {_shown(smuggler)}, which chains, substitutes or redirects commands: a prefix is"
            " one command's leading words"
        )
    try:
        words = shlex.split(prefix)
    except ValueError:
        return "the prefix has a quote or an escape it does not close"
    commands = [w for w in words if not ASSIGNMENT.match(w)]
    if not commands:
        return "the prefix only sets variables: it would allow any command after them"
    written = next((w for w in prefix.split() if not ASSIGNMENT.match(w)), "")
    # As written and as the shell reads it, the same plain word: no quoting or escape changes it.
    if written != commands[0] or not PLAIN_WORD.fullmatch(written):
        return (
            "the command the prefix runs must be written plainly (letters, digits and . _ - + / @ % : , ~; no"
            " quotes, escapes, $, globs or braces), so that it is clear which program it is"
        )
    program, rest = _program(commands[0]), commands[1:]
    if program in RESERVED:
        return f"the prefix starts with `{commands[0]}`, which is shell syntax rather than a command"
    if program in RUNNERS:
        return f"`{commands[0]}` runs whatever command follows it: allow that command itself instead"
    if program in SHELL_STATE:
        return f"`{commands[0]}` changes the shell itself, which decides what later commands run"
    if program in SHELLS:
        if not rest or rest[0].startswith("-"):
            return (
                f"`{commands[0]}` is a shell: allowed as a whole it would run any command. Name the script right"
                f" after it ({commands[0]} scripts/test.sh)"
            )
        return None
    if program in INTERPRETERS:
        return _interpreter_refusal(commands[0], program, rest)
    return None


def _interpreter_refusal(word: str, program: str, rest: list[str]) -> str | None:
    inline = INTERPRETERS[program]
    for option in rest:
        if not option.startswith("-"):
            break
        flag = option.split("=", 1)[0]
        # A cluster of short flags (python3 -Ic, perl -ne) runs inline code if one of them does.
        clustered = not flag.startswith("--") and any(f"-{c}" in inline for c in flag[1:])
        if flag in inline or clustered:
            return f"`{word} {option}` runs the code given inline, which may be anything"
    if not rest:
        return f"`{word}` alone runs any code: name the script (or module, or package) right after it"
    if program.startswith("py") and rest[0] == "-m":
        return None if len(rest) > 1 else f"`{word} -m` runs any module: name it right after -m"
    if rest[0].startswith("-"):
        return (
            f"`{word} {rest[0]}`: name the script right after {word} ({word} <script>), since options before it"
            " could run other code"
        )
    subcommand = rest[0]
    if subcommand in INLINE_SUBCOMMANDS.get(program, ()):
        return f"`{word} {subcommand}` runs the code given inline, which may be anything"
    if subcommand in TARGET_SUBCOMMANDS.get(program, ()):
        if len(rest) < 2 or rest[1].startswith("-"):
            return f"`{word} {subcommand}` runs any script or package: name it right after {subcommand}"
    return None


def prefix_check(prefix: str) -> str:
    """The prefix as stored (the ends' spaces and tabs dropped), or PrefixRefused saying why."""
    prefix = prefix.strip(" \t")
    refusal = prefix_refusal(prefix)
    if refusal is not None:
        raise PrefixRefused(refusal)
    return prefix


def command_matches(prefix: str, command) -> bool:
    """Whether a Bash rule with `prefix` allows `command`: the exact prefix, then nothing or a
    space or tab and more words, none of which could start another command."""
    if not isinstance(command, str) or not prefix:
        return False
    command = command.lstrip(" \t")
    if not command.startswith(prefix):
        return False
    rest = command[len(prefix) :]
    if rest and rest[0] not in " \t":
        return False  # `npm testing` is another word than `npm test`
    return _smuggler(command) is None


def command_refusal(command) -> str | None:
    """Why no rule can allow this command (it is no text, or it chains or substitutes commands), or None."""
    if not isinstance(command, str) or not command.strip():
        return "it has no command"
    smuggler = _smuggler(command)
    if smuggler is not None:
        return f"it holds {_shown(smuggler)}, which chains, substitutes or redirects commands"
    return None


def command_of(tool_input) -> str | None:
    """The command of a Bash tool use's input, when it is one."""
    command = tool_input.get("command") if isinstance(tool_input, dict) else None
    return command if isinstance(command, str) else None


def prefix_default(command: str, words: int = DEFAULT_WORDS) -> str:
    """The command's leading words offered as a rule's prefix: up to `words` plain words (and any
    variables set before them), stopping before an option, a quote or anything that is not plain."""
    command = command.lstrip(" \t")
    end = taken = 0
    for word in re.finditer(r"[^ \t]+", command):
        text = word.group()
        if command[end : word.start()].strip(" \t") or not PLAIN_WORD.fullmatch(text.split("=", 1)[-1] or "x"):
            break
        if text.startswith("-") or _smuggler(text) is not None:
            break
        end = word.end()
        if not ASSIGNMENT.match(text):
            taken += 1
        if taken == words:
            break
    return command[:end] if end <= MAX_PREFIX else ""


def rule_label(tool_name: str, prefix: str) -> str:
    """How a rule is named on cards and in the admin: 'Bash: npm test', 'WebFetch: every use'."""
    return f"{tool_name}: {prefix}" if prefix else f"{tool_name}: every use"
