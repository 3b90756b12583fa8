"""The agent's own MCP servers (add_mcp_server, approved) in its session's .mcp.json.

The gateway stores and sends only what was approved: a `vault:NAME` env value is a
reference, never a value. Here it becomes `${NAME}`, which Claude Code expands from its own
environment when it starts the server (in command, args and env), and the runner puts the
session's secrets in that environment: no secret value is written to .mcp.json. A file
secret's variable holds its file's path, so a reference to one gives the path, as $NAME does.
A server that names a secret the session does not have is left out, and the agent and the
thread are told which name is missing.
"""

VAULT_PREFIX = "vault:"


def _strings(value) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _problem(name: str, server) -> str:
    """Only what the gateway's checks let through runs; anything else is a bug or tampering."""
    if not isinstance(server, dict) or not isinstance(server.get("command"), str) or not server["command"]:
        return f"MCP server {name!r} was not started: its config has no command."
    env = server.get("env") or {}
    if not _strings(server.get("args") or []) or not isinstance(env, dict) or not _strings(list(env.values())):
        return f"MCP server {name!r} was not started: its args or env are not text."
    plain = [
        server["command"],
        *(server.get("args") or []),
        *(v for v in env.values() if not v.startswith(VAULT_PREFIX)),
    ]
    if any("${" in text for text in plain):
        # Claude Code would expand it from the session's environment: a secret the card did not show.
        return f"MCP server {name!r} was not started: '${{' is not allowed in its command, args or plain env values."
    return ""


def agent_servers(spec, *, secrets: set[str], taken: set[str]) -> tuple[dict, list[str]]:
    """(.mcp.json entries, problems) for the agent's servers. `secrets`: the names whose
    values the agent's environment holds; `taken`: the names of Calvin's own servers."""
    servers, problems = {}, []
    for name, server in (spec if isinstance(spec, dict) else {}).items():
        if name in taken:
            problems.append(f"MCP server {name!r} was not started: the name is one of Calvin's own servers.")
            continue
        if problem := _problem(name, server):
            problems.append(problem)
            continue
        env, missing = {}, []
        for key, value in (server.get("env") or {}).items():
            if value.startswith(VAULT_PREFIX):
                secret = value[len(VAULT_PREFIX) :]
                if secret not in secrets:
                    missing.append(secret)
                env[key] = "${" + secret + "}"
            else:
                env[key] = value
        if missing:
            names = ", ".join(sorted(set(missing)))
            problems.append(
                f"MCP server {name!r} was not started: it needs the secret{'s' if len(set(missing)) > 1 else ''} "
                f"{names}, which this session does not have (add it to the vault, or ask for it with request_secret)."
            )
            continue
        servers[name] = {
            "type": "stdio",
            "command": server["command"],
            "args": list(server.get("args") or []),
            "env": env,
        }
    return servers, problems
