"""What goes over the wire to and from an OpenAI-compatible server, without any transport:
messages in the chat-completions format, servers' error messages, context-window facts.

Standard library only (the `openai` SDK is imported by openai_backend.py, lazily).
"""
from __future__ import annotations

import json
import re
from typing import Any

from clover_cli.agent.backends.openai_errors import error_detail  # noqa: F401 - re-exported
from clover_cli.agent.parsing import has_open_call, parse_tool_calls, split_thinking


_UNSAFE_NAME = re.compile(r"[^a-zA-Z0-9_-]")
_SAFE_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def wire_names(names: list[str]) -> dict[str, str]:
    """Each tool name -> the name sent to the server: OpenAI's API takes only
    `^[a-zA-Z0-9_-]{1,64}$`, and MCP tools are named `server.tool`. A name that fits is sent as
    it is; any other gets its other characters as `_`, cut to 64, and a `_N` suffix when that
    name is taken, so two tools never share a wire name (the map is one-to-one)."""
    out: dict[str, str] = {}
    used: set[str] = set()
    for name in [n for n in names if _SAFE_NAME.match(n)] + [n for n in names if not _SAFE_NAME.match(n)]:
        if name in out:
            continue
        base = _UNSAFE_NAME.sub("_", name)[:64] or "tool"
        candidate, n = base, 2
        while candidate in used:
            suffix = f"_{n}"
            candidate, n = base[:64 - len(suffix)] + suffix, n + 1
        out[name] = candidate
        used.add(candidate)
    return out


def tool_names(messages: list[dict], tools: list[dict]) -> list[str]:
    """Every tool name a request carries: its schemas' and its history's calls'."""
    names = [str((t.get("function") or {}).get("name", "")) for t in tools if isinstance(t, dict)]
    for m in messages:
        for tc in m.get("tool_calls") or []:
            names.append(str(tc["function"]["name"]))
    return [n for n in names if n]


def to_openai_messages(messages: list[dict], names: dict[str, str] | None = None) -> list[dict]:
    """Canonical messages -> the chat-completions wire format (arguments as JSON strings; call
    markup the model wrote as text is sent as native tool_calls so every server accepts it;
    `names`: wire_names of the request's tools)."""
    names = names or {}
    out = []
    for m in messages:
        role = m.get("role")
        if role == "assistant":
            content = split_thinking(m.get("content") or "")[1].strip()
            msg: dict[str, Any] = {"role": "assistant"}
            if m.get("tool_calls"):
                if has_open_call(content):
                    content = parse_tool_calls(content).text
                msg["tool_calls"] = [{"id": tc["id"], "type": "function",
                                      "function": {"name": names.get(tc["function"]["name"],
                                                                     tc["function"]["name"]),
                                                   "arguments": args_json(tc["function"].get("arguments"))}}
                                     for tc in m["tool_calls"]]
            # "" and never null: llama-cpp-python's assistant message type takes only a string
            # (null is an HTTP 500 listing 7 validation errors), and every server takes ""
            msg["content"] = content
            out.append(msg)
        elif role == "tool":
            out.append({"role": "tool", "tool_call_id": m.get("tool_call_id", ""), "content": m.get("content") or ""})
        else:
            out.append({"role": role, "content": m.get("content") or ""})
    return alternating(out)


def alternating(messages: list[dict]) -> list[dict]:
    """Two user messages in a row (a failed turn resumed with --continue, feedback after a
    partial answer) become one, and so do two assistant messages without calls: chat templates
    that require alternating roles (Gemma, Mistral) answer HTTP 400 otherwise."""
    out: list[dict] = []
    for m in messages:
        prev = out[-1] if out else None
        if (prev is not None and m["role"] == prev["role"] and m["role"] in ("user", "assistant")
                and not prev.get("tool_calls") and isinstance(prev.get("content"), str)
                and isinstance(m.get("content"), str)):
            joined = "\n\n".join(c for c in (prev["content"], m["content"]) if c)
            out[-1] = {**prev, **m, "content": joined}
            continue
        out.append(m)
    return out


def args_json(args: Any) -> str:
    return args if isinstance(args, str) else json.dumps(args or {}, ensure_ascii=False)


def snippet(raw: bytes | str, limit: int = 120) -> str:
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    return " ".join(text.split())[:limit]


# vLLM: "This model's maximum context length is 8192 tokens. However, you requested ..."
# llama.cpp: "the request exceeds the available context size (8192 tokens), try increasing it"
# SGLang: "Input length (9000 tokens) exceeds the maximum allowed length (8192 tokens)"
# OpenAI: "context_length_exceeded"; others: "prompt is too long", "input is too long"
_OVERFLOW = re.compile(r"context length|context size|context window|context_length_exceeded|maximum allowed length|"
                       r"too many tokens|(prompt|input) (is )?too long|exceeds? .*context|max_model_len",
                       re.IGNORECASE)
_WINDOW = re.compile(r"(?:context length|context size|context window|max_model_len)\D{0,40}?(\d{3,7})",
                     re.IGNORECASE)


def is_context_overflow(status: int, detail: str) -> bool:
    """Whether an HTTP error says the prompt did not fit the model's context window."""
    return status in (400, 413, 422) and bool(_OVERFLOW.search(detail))


def window_in_message(detail: str) -> int | None:
    """The context window a length error names, if it names one."""
    m = _WINDOW.search(detail)
    return int(m.group(1)) if m else None


# llama.cpp without --jinja: "tools param requires --jinja flag" (an HTTP 500: a runtime_error in
# tools/server's oaicompat_chat_params_parse); vLLM without --enable-auto-tool-choice: "\"auto\"
# tool choice requires --enable-auto-tool-choice ..."; Ollama: "MODEL does not support tools".
_TOOLS_REFUSED = re.compile(r"tools? param|tool choice|tool_choice|tools are not supported|"
                            r"does not support tools|tool calling is not supported", re.IGNORECASE)
_TOOL_CHOICE = re.compile(r"tool[_ ]choice", re.IGNORECASE)


def refuses_tools(status: int, detail: str) -> bool:
    """Whether an HTTP error says the server cannot take `tools` (so calls must go as text)."""
    return status in (400, 422, 500, 501) and bool(_TOOLS_REFUSED.search(detail))


def refuses_tool_choice(status: int, detail: str) -> bool:
    """Whether an HTTP error refuses the `tool_choice` field itself while tools may still work
    (vLLM's "auto tool choice requires --enable-auto-tool-choice" means no tool calls at all)."""
    return (status in (400, 422, 500, 501) and bool(_TOOL_CHOICE.search(detail))
            and "enable-auto-tool-choice" not in detail and "tools param" not in detail)


def window_from_models(body: Any, model: str) -> int | None:
    """`max_model_len` (vLLM, SGLang) or `context_length`/`context_window` of `model` in a
    `/v1/models` answer; the only model listed counts as this one."""
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        return None
    entries = [d for d in data if isinstance(d, dict)]
    mine = [d for d in entries if d.get("id") == model] or (entries if len(entries) == 1 else [])
    for entry in mine:
        for key in ("max_model_len", "context_length", "context_window", "max_context_length"):
            value = entry.get(key)
            if type(value) is int and value >= 256:
                return value
        meta = entry.get("meta")  # llama.cpp: {"n_ctx_train": ...} (the trained size, not n_ctx)
        if isinstance(meta, dict) and type(meta.get("n_ctx")) is int and meta["n_ctx"] >= 256:
            return meta["n_ctx"]
    return None


def window_from_props(body: Any) -> int | None:
    """llama.cpp's `/props`: `default_generation_settings.n_ctx` (per slot) or `n_ctx`."""
    if not isinstance(body, dict):
        return None
    settings = body.get("default_generation_settings")
    for source in (settings if isinstance(settings, dict) else {}, body):
        value = source.get("n_ctx")
        if type(value) is int and value >= 256:
            return value
    return None


def template_drops_tools(body: Any) -> bool:
    """llama.cpp's `/props` shows the chat template (and, in newer versions, its capabilities):
    a template that cannot take tools drops them without a word."""
    if not isinstance(body, dict):
        return False
    caps = body.get("chat_template_caps")
    if isinstance(caps, dict) and isinstance(caps.get("supports_tools"), bool):
        return not caps["supports_tools"]
    if isinstance(body.get("chat_template_tool_use"), str) and body["chat_template_tool_use"].strip():
        return False
    template = body.get("chat_template")
    return isinstance(template, str) and bool(template.strip()) and "tool" not in template


def all_json(native: tuple) -> bool:
    """Whether every call's arguments are a JSON object (else a cut-off call, see cut_off_as_text)."""
    for call in native:
        try:
            if not isinstance(json.loads(call.arguments or "{}"), dict):
                return False
        except ValueError:
            return False
    return True


def cut_off_as_text(text: str, calls: list[dict[str, str]]) -> str:
    """A completion cut by the token limit in the middle of native tool calls, written as call
    markup, so the agent explains it to the model as cut off (the text path's rule), not as
    arguments that are "not a JSON object"."""
    out = text
    for c in calls:
        out += '\n<tool_call>\n{"name": ' + json.dumps(c["name"]) + ', "arguments": ' + c["arguments"]
        if c is not calls[-1]:
            out += "}\n</tool_call>"
    return out


# `owned_by` of `/v1/models` entries, set by each server's own code (docs/agent.md, "Server
# dialects"): vLLM's and SGLang's ModelCard defaults, llama-server's model list, LM Studio's
# fixed value, llama-cpp-python's server/app.py; Ollama gives the model's namespace ("library").
_OWNED_BY = {"vllm": "vLLM", "sglang": "SGLang", "llamacpp": "llama-server", "organization_owner": "LM Studio",
             "me": "llama-cpp-python", "library": "Ollama"}


def server_dialect(models: Any, props: Any) -> str | None:
    """Which server answers, from its `/v1/models` and `/props` answers (None: not known)."""
    data = models.get("data") if isinstance(models, dict) else None
    owners = {str(d.get("owned_by")) for d in data if isinstance(d, dict)} if isinstance(data, list) else set()
    for owner in owners:
        if owner in _OWNED_BY:
            return _OWNED_BY[owner]
    if isinstance(props, dict) and ("default_generation_settings" in props or "chat_template" in props):
        return "llama-server"
    return None


# A dialect whose tool support the server cannot be asked about, and what it does with `tools`.
DROPS_TOOLS = {"llama-cpp-python": "its chat formats other than functionary and chatml-function-calling "
                                   "drop `tools` without a word, and it cannot say which one it runs"}


# The fewest characters of chat text and JSON schema any tokenizer Clover has met packs into one
# token is about 2.5; the most, about 6 (long English words). A prompt the server counts at fewer
# than one token per 8 characters sent cannot hold what was sent.
CHARS_PER_TOKEN_MAX = 8


def prompt_lacks_tools(prompt_tokens: int, text_chars: int, tools_chars: int) -> bool:
    """Whether a server's own count of a prompt (usage.prompt_tokens) is too small to hold the
    messages' text and the tool schemas sent with them: the chat template dropped the tools."""
    return 0 < prompt_tokens * CHARS_PER_TOKEN_MAX < text_chars + tools_chars
