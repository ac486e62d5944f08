"""Chat templates rendered as transformers 5.x renders them, without importing transformers.

What a template sees is the same as under `PreTrainedTokenizerBase.apply_chat_template`
(docs/engine.md, "Tokenizer"): a sandboxed Jinja environment (ImmutableSandboxedEnvironment) with
trim_blocks, lstrip_blocks and loop controls; a `tojson` that does not escape HTML and takes
ensure_ascii / indent / separators / sort_keys; `raise_exception`, `strftime_now`, a `dict`
constructor and a `namespace` that refuses underscore names; the `{% generation %}` block (its body
is rendered as is). Messages are made plain dicts with their None-valued keys dropped, a message's
reasoning is offered as both `reasoning_content` and `thinking`, and everything the template sees
is rebuilt from plain JSON types (anything else becomes a "<TypeName>" placeholder).
"""
from __future__ import annotations

import dataclasses
import inspect
import json
from collections.abc import Mapping
from datetime import datetime
from functools import lru_cache
from typing import Any

# The names a message's reasoning may arrive under; templates read the first.
_REASONING_KEYS = ("reasoning_content", "thinking", "reasoning")


@lru_cache(maxsize=16)
def compile_template(source: str):
    """The compiled template (cached per template text)."""
    import jinja2
    import jinja2.ext
    import jinja2.nodes
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class _Generation(jinja2.ext.Extension):
        """`{% generation %}...{% endgeneration %}` marks the assistant's text for training masks;
        rendering keeps its body unchanged (Clover never asks for the mask)."""
        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

        def _body(self, caller):
            return caller()

    class _Dict:
        """`dict(...)` for templates, with no attribute of the real type to reach through."""

        def __call__(self, *args, **kwargs):
            return dict(*args, **kwargs)

        def fromkeys(self, *args, **kwargs):
            return dict.fromkeys(*args, **kwargs)

    class _Namespace(jinja2.utils.Namespace):
        """Jinja's namespace, refusing attribute names that start with an underscore."""

        def __init__(*args, **kwargs):  # noqa: N805 - Jinja's own signature trick (`self` may be a key)
            self, rest = args[0], args[1:]
            attrs = dict(*rest, **kwargs)
            for key in attrs:
                _Namespace._check(key)
            jinja2.utils.Namespace.__init__(self, attrs)

        def __setitem__(self, key, value):
            _Namespace._check(key)
            jinja2.utils.Namespace.__setitem__(self, key, value)

        @staticmethod
        def _check(key):
            if isinstance(key, str) and key.startswith("_"):
                raise jinja2.exceptions.SecurityError(
                    f"Chat templates cannot store underscore-prefixed attributes on a namespace, but got {key!r}. "
                    "Please rename the attribute.")

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.now().strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[_Generation, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals.update(raise_exception=raise_exception, strftime_now=strftime_now, dict=_Dict(),
                       namespace=_Namespace)
    return env.from_string(source)


def _as_dicts(value: Any) -> Any:
    """Message objects (dataclasses, pydantic models) and everything inside them as dicts."""
    if isinstance(value, Mapping):
        return {k: _as_dicts(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_as_dicts(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_as_dicts(v) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _as_dicts(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if callable(getattr(value, "model_dump", None)):
        return _as_dicts(value.model_dump())
    return value


def normalize_messages(conversation: Any) -> list[dict]:
    """Plain dict messages without their None-valued keys (an API's content=None reads as absent)."""
    out = []
    for message in _as_dicts(getattr(conversation, "messages", conversation)):
        if not isinstance(message, dict):
            raise TypeError(f"Chat messages should be dicts, dataclasses or pydantic models, but got {message!r}.")
        out.append({k: v for k, v in message.items() if v is not None})
    return out


def plain_data(value: Any) -> Any:
    """A copy built from JSON types only; any other object becomes the text "<TypeName>"."""
    if value is None or type(value) in (str, int, float, bool):
        return value
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, Mapping):
        return {plain_data(k): plain_data(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain_data(v) for v in value]
    if isinstance(value, tuple):
        return tuple(plain_data(v) for v in value)
    if type(value).__module__ == "numpy" and callable(getattr(value, "item", None)) \
            and getattr(value, "ndim", None) == 0:
        return plain_data(value.item())  # a numpy scalar (np.bool_(False) must stay falsy)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain_data(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if callable(getattr(value, "model_dump", None)):
        return plain_data(value.model_dump())
    return f"<{type(value).__name__}>"


def _alias_reasoning(chat: list) -> list:
    out = []
    for message in chat:
        if isinstance(message, dict):
            reasoning = next((message[k] for k in _REASONING_KEYS if message.get(k) is not None), None)
            if reasoning is not None:
                message = {"thinking": reasoning, **message, "reasoning_content": reasoning}
        out.append(message)
    return out


def _tool_schemas(tools: list | None) -> list | None:
    if tools is None:
        return None
    schemas = []
    for tool in tools:
        if isinstance(tool, dict):
            schemas.append(tool)
        elif inspect.isfunction(tool) or inspect.ismethod(tool):
            # a Python function as a tool: transformers reads its signature and docstring (rare; not
            # on Clover's paths, which pass JSON schemas)
            from transformers.utils import get_json_schema

            schemas.append(get_json_schema(tool))
        else:
            raise ValueError("Tools should either be a JSON schema, or a callable function with type hints "
                             "and a docstring suitable for auto-conversion to a schema.")
    return schemas


def pick_template(templates: str | dict | None, name: str | None, tools: list | None) -> str:
    """The template text to use: `name` (a template's name or a whole template), else the
    tokenizer's own (of several: `tool_use` when tools are given, else `default`)."""
    if isinstance(templates, dict):
        if name is not None and name in templates:
            return templates[name]
        if name is None:
            if tools is not None and "tool_use" in templates:
                return templates["tool_use"]
            if "default" in templates:
                return templates["default"]
            raise ValueError("This model has multiple chat templates with no default specified! Please either pass "
                             "a chat template or the name of the template you wish to use to the `chat_template` "
                             f"argument. Available template names are {sorted(templates)}.")
        return name
    if name is not None:
        return name
    if templates is None:
        raise ValueError("Cannot use chat template functions because tokenizer.chat_template is not set and no "
                         "template argument was passed!")
    return templates


def render(template: str, conversation: Any, *, tools: list | None = None, documents: list | None = None,
           add_generation_prompt: bool = False, **variables: Any) -> str:
    """One conversation rendered with `template`; `variables` are extra template variables."""
    if isinstance(conversation, (list, tuple)) and not conversation:
        raise ValueError("Cannot apply chat template to an empty conversation. Provide at least one message.")
    chat = plain_data(normalize_messages(conversation))
    if documents is not None and not all(isinstance(d, dict) for d in documents):
        raise TypeError("Documents should be a list of dicts with 'title' and 'text' keys!")
    return compile_template(template).render(
        messages=_alias_reasoning(chat), tools=plain_data(_tool_schemas(tools)),
        documents=plain_data(documents), add_generation_prompt=add_generation_prompt,
        **plain_data(variables))
