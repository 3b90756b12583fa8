"""Checks every tool's arguments get before any service sees them.

A NUL is refused because PostgreSQL cannot store it in text (SQLite can, so without this
the two would differ); an unpaired surrogate because it cannot be encoded as UTF-8 at
all. Each problem names where it is, so the agent can fix its call.
"""

from pydantic import BaseModel


def _where(path: str, key) -> str:
    return f"{path}[{key}]" if isinstance(key, int) else (f"{path}.{key}" if path else str(key))


def _string_problem(text: str) -> str | None:
    if "\x00" in text:
        return "contains a NUL character (\\u0000)"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "contains an unpaired surrogate (not valid Unicode)"
    return None


def _walk(value, path: str, problems: list[str]) -> None:
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="python")
    if isinstance(value, str):
        problem = _string_problem(value)
        if problem:
            problems.append(f"{path}: {problem}")
    elif isinstance(value, dict):
        for key, item in value.items():
            where = _where(path, key)
            if isinstance(key, str) and (problem := _string_problem(key)):
                problems.append(f"{where} (a key): {problem}")
            _walk(item, where, problems)
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            _walk(item, _where(path, index), problems)


def argument_problems(arguments: dict) -> list[str]:
    problems: list[str] = []
    for name, value in arguments.items():
        _walk(value, name, problems)
    return problems
