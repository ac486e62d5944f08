"""Slash commands typed into the prompt: the table, parsing and completion (no UI here)."""
from __future__ import annotations

from dataclasses import dataclass

from clover_cli.agent.config import check_threshold

# name -> (usage, one-line help); order is the order /help shows.
COMMANDS: dict[str, tuple[str, str]] = {
    "help": ("/help", "List the commands and key bindings."),
    "undo": ("/undo", "Restore the files changed by the agent's last edit."),
    "diff": ("/diff", "Show what the agent changed in this session."),
    "clear": ("/clear", "Forget the conversation and clear the screen."),
    "compact": ("/compact", "Summarise older turns to free context."),
    "model": ("/model [SPEC]", "Show the model, or switch to SPEC (keeps the conversation)."),
    "threshold": ("/threshold X", "Set the block-diffusion commit threshold (0 < X <= 1)."),
    "denoise": ("/denoise", "Toggle the live denoise view of the current block."),
    "approval": ("/approval MODE", "Set approval: ask, auto-edit, yolo or read-only."),
    "sessions": ("/sessions [ID]", "List saved sessions, or resume the session ID."),
    "copy": ("/copy [N]", "Copy the last answer (or its Nth code block) to the clipboard."),
    "theme": ("/theme [NAME]", "List the themes, or switch (light, dark, ...); remembered."),
    "quit": ("/quit", "Save the session and exit."),
}

KEYS: tuple[tuple[str, str], ...] = (
    ("Enter", "send the prompt"),
    ("Ctrl+J / Shift+Enter", "new line in the prompt"),
    ("Up / Down", "prompt history (at the first / last line)"),
    ("Ctrl+R", "search the prompt history (again: older; Enter keeps; Esc cancels)"),
    ("@", "pick a file to mention and attach (Up/Down, Enter/Tab, Esc)"),
    ("Tab", "complete a slash command (focus stays in the prompt)"),
    ("PageUp / PageDown", "scroll the transcript (focus stays in the prompt)"),
    ("Shift+Tab", "move focus to the transcript's panels (typing returns)"),
    ("Esc", "interrupt generation; close the file picker"),
    ("Ctrl+T", "toggle the denoise view"),
    ("Ctrl+C", "interrupt generation; twice to quit"),
    ("Ctrl+Q", "quit"),
    ("y / n / a", "answer an approval: yes / no (+feedback) / always"),
)


class SlashError(ValueError):
    """A slash command that cannot be run as typed; str() is the message for the user."""


@dataclass(frozen=True)
class SlashCommand:
    """A parsed slash command."""

    name: str
    arg: str = ""


def is_slash(text: str) -> bool:
    """True when `text` is a slash command rather than a prompt for the model."""
    stripped = text.strip()
    return stripped.startswith("/") and not stripped.startswith("//") and "\n" not in stripped


def parse(text: str) -> SlashCommand:
    """Parse '/name [arg]'; raises SlashError for an unknown or ambiguous name."""
    body = text.strip()[1:]
    name, _, arg = body.partition(" ")
    name = name.lower()
    if name not in COMMANDS:
        matches = complete("/" + name)
        if len(matches) == 1:
            name = matches[0][1:]
        elif not matches:
            raise SlashError(f"Unknown command /{name}. Type /help for the list.")
        else:
            raise SlashError(f"/{name} is ambiguous: {' '.join(matches)}")
    return SlashCommand(name, arg.strip())


def complete(prefix: str) -> list[str]:
    """The '/command' names that start with `prefix` (which begins with '/')."""
    if not prefix.startswith("/") or " " in prefix:
        return []
    head = prefix[1:].lower()
    return ["/" + name for name in COMMANDS if name.startswith(head)]


def parse_threshold(arg: str) -> float:
    """The /threshold argument as a float; SlashError (the engine's one check's message) if it
    is not a number in (0, 1]."""
    try:
        value: float = int(arg) if arg.strip().isdigit() else float(arg)  # "2" is shown as typed
    except ValueError:
        raise SlashError("Usage: /threshold X with 0 < X <= 1, e.g. /threshold 0.9") from None
    try:
        return check_threshold(value)  # the one (0, 1] check (docs/design.md, Habits)
    except ValueError as exc:
        message = str(exc)
        raise SlashError(message[:1].upper() + message[1:]) from None
