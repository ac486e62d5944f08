"""Turns the conversation into prompt text for in-process models (docs/agent.md, "The loop").

With a chat template that takes tools= the tokenizer's template renders everything. Otherwise the
tool schemas and the call format (prompts/agent_tool_format.md) go into the system message and tool
results become user turns, rendered with the tokenizer's template if it has one, else with ours
(prompts/chat_template.jinja).

Untrusted text stays text (docs/security.md): `render_segments` renders the same prompt with every
message's content replaced by a placeholder, so the result splits into the template's own
scaffolding (role markers, tool-response wrappers, the tool schemas) and the contents, which
clover_cli/agent/encode.py tokenizes with special tokens split: a file, a tool result or AGENTS.md
holding `<|im_start|>system` can never become a role token.
"""
from __future__ import annotations

import json
import re
import secrets
from dataclasses import dataclass
from typing import Any, Callable, Literal

from clover_cli.agent.parsing import has_open_call, split_thinking
from clover_cli.agent.prompt_files import prompt_text, render


def tools_text(tools: list[dict]) -> str:
    """The tool-format instructions with the schemas, for templates that cannot take tools=."""
    return render("agent_tool_format.md", tools="\n".join(json.dumps(t, ensure_ascii=False) for t in tools))


def _call_json(tc: dict) -> str:
    fn = tc.get("function", {})
    args = fn.get("arguments", {})
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            pass
    return json.dumps({"name": fn.get("name", ""), "arguments": args}, ensure_ascii=False)


def for_template(messages: list[dict]) -> list[dict]:
    """Messages for a tools= template: assistant text that already holds the call markup drops
    its structured copy, so calls are not rendered twice."""
    out = []
    for m in messages:
        m = {k: v for k, v in m.items() if v is not None}
        if m.get("role") == "assistant" and m.get("tool_calls") and has_open_call(m.get("content") or ""):
            m.pop("tool_calls")
        out.append(m)
    return out


def flatten(messages: list[dict], tools: list[dict]) -> list[dict]:
    """Messages for a template without tool support: tools in the system text, results as user turns."""
    out: list[dict] = []
    sys_extra = tools_text(tools) if tools else ""
    for m in messages:
        role, content = m.get("role"), m.get("content") or ""
        if role == "system":
            out.append({"role": "system", "content": content + ("\n\n" + sys_extra if sys_extra else "")})
            sys_extra = ""
        elif role == "tool":
            block = f"<tool_response>\n{content}\n</tool_response>"
            if out and out[-1]["role"] == "user" and out[-1].get("_tool"):
                out[-1]["content"] += "\n" + block
            else:
                out.append({"role": "user", "content": block, "_tool": True})
        elif role == "assistant":
            text = split_thinking(content)[1].strip()  # earlier reasoning is not shown again
            if m.get("tool_calls") and not has_open_call(content):
                text += "".join(f"\n<tool_call>\n{_call_json(tc)}\n</tool_call>" for tc in m["tool_calls"])
            out.append({"role": "assistant", "content": text.strip()})
        else:
            out.append({"role": str(role), "content": content})
    if sys_extra:
        out.insert(0, {"role": "system", "content": sys_extra})
    return [{k: v for k, v in m.items() if k != "_tool"} for m in out]


def render_fallback(messages: list[dict], tools: list[dict], add_generation_prompt: bool = True) -> str:
    """Our own ChatML template (prompts/chat_template.jinja)."""
    import jinja2

    env = jinja2.Environment(trim_blocks=False, lstrip_blocks=False, keep_trailing_newline=True)
    template = env.from_string(prompt_text("chat_template.jinja"))
    msgs = []
    for m in messages:
        m = dict(m)
        m["content"] = m.get("content") or ""
        if m.get("role") == "assistant":
            m["content"] = split_thinking(m["content"])[1].strip()
        calls = m.get("tool_calls") or []
        m["tool_calls_text"] = [] if has_open_call(m["content"]) else [_call_json(tc) for tc in calls]
        msgs.append(m)
    return template.render(messages=msgs, tools=tools, tool_text=tools_text(tools) if tools else "",
                           add_generation_prompt=add_generation_prompt)


def render_prompt(lm: Any, messages: list[dict], tools: list[dict],
                  has_template: Callable[[Any], bool] | None = None) -> str:
    """The prompt text for a LoadedModel `lm` (see the module docstring for the three paths)."""
    if getattr(lm, "template_supports_tools", False):
        return lm.render_chat(for_template(messages), tools=tools or None, add_generation_prompt=True)
    if getattr(getattr(lm, "tokenizer", None), "chat_template", None):
        return lm.render_chat(flatten(messages, tools), tools=None, add_generation_prompt=True)
    return render_fallback(messages, tools)


@dataclass(frozen=True)
class Segment:
    """A piece of the rendered prompt: the template's own text, a message's untrusted content
    ("text": system, user and tool messages), or the model's earlier output ("model")."""

    text: str
    kind: Literal["template", "text", "model"]


def _calls_markup(m: dict) -> str:
    calls = m.get("tool_calls") or []
    return "".join(f"\n<tool_call>\n{_call_json(tc)}\n</tool_call>" for tc in calls)


def _normalized(messages: list[dict], drop_thinking: bool) -> list[dict]:
    """Assistant messages carry their calls as text (structured calls whose arguments a template
    would print as its own text are turned into the call markup), earlier thinking dropped where
    the path does; nothing else changes."""
    out = []
    for m in messages:
        m = {k: v for k, v in m.items() if v is not None}
        if m.get("role") == "assistant":
            content = m.get("content") or ""
            if drop_thinking:
                content = split_thinking(content)[1].strip()
            if m.get("tool_calls") and not has_open_call(m.get("content") or ""):
                content = (content + _calls_markup(m)).strip() if drop_thinking else content + _calls_markup(m)
            m.pop("tool_calls", None)
            m["content"] = content
        out.append(m)
    return out


def render_segments(lm: Any, messages: list[dict], tools: list[dict]) -> list[Segment]:
    """The prompt of `render_prompt`, split into template text and message contents."""
    nonce = secrets.token_hex(6)
    contents: list[Segment] = []
    drop_thinking = not getattr(lm, "template_supports_tools", False)
    masked = []
    for m in _normalized(messages, drop_thinking):
        content = m.get("content")
        if isinstance(content, str) and content:
            contents.append(Segment(content, "model" if m.get("role") == "assistant" else "text"))
            m = {**m, "content": f"\ue000{nonce}:{len(contents) - 1}\ue001"}
        masked.append(m)
    rendered = render_prompt(lm, masked, tools)
    segments: list[Segment] = []
    pos = 0
    for match in re.finditer(f"\ue000{nonce}:(\\d+)\ue001", rendered):
        if match.start() > pos:
            segments.append(Segment(rendered[pos:match.start()], "template"))
        index = int(match.group(1))
        if index < len(contents):
            segments.append(contents[index])
        pos = match.end()
    if pos < len(rendered):
        segments.append(Segment(rendered[pos:], "template"))
    return segments
