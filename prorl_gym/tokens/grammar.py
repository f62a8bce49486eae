# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Constrained tool-call decoding: a GBNF grammar (llama.cpp's) built from a request's tool schemas.

What vLLM's structured outputs do for `tool_choice: "required"`: the generation must be one or more
tool calls, each naming an offered tool with arguments that match its JSON schema, written in the
model family's format. Here the hermes format (Qwen2.5, Qwen3, Hermes):

    <tool_call>
    {"name": "bash", "arguments": {"command": "pwd"}}
    </tool_call>

JSON is written as the chat template writes it (`tojson`: ", " and ": " separators, properties in the
schema's order), so a constrained turn reads back exactly as a rendered one would. The tags are the
model's special tokens where it has them (`tag_tokens`: llama.cpp's `<tool_call>` token syntax), so
the ids sampled are the ones the template renders, never the tag spelled in pieces.

Schemas: objects with properties (required ones always, optional ones optional, in order), strings,
integers, numbers, booleans, null, enum/const, arrays, anyOf/oneOf, type lists, local $refs; anything
else (a free-form object) any JSON value.
"""

from __future__ import annotations

import json
import re
from typing import Any

from prorl_gym.errors import ProrlError

PRIMITIVES = {
    "ws": '" "?',
    "string": '"\\"" char* "\\""',
    "char": '[^"\\\\\\x7F\\x00-\\x1F] | "\\\\" (["\\\\/bfnrt] | "u" [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F])',
    "integer": '"-"? ("0" | [1-9] [0-9]{0,15})',
    "number": 'integer ("." [0-9]+)? ([eE] [-+]? [0-9]+)?',
    "boolean": '"true" | "false"',
    "null": '"null"',
    "value": "object | array | string | number | boolean | null",
    "object": '"{" ws ( string ":" ws value ( "," ws string ":" ws value )* )? ws "}"',
    "array": '"[" ws ( value ( "," ws value )* )? ws "]"',
}


class GrammarError(ProrlError, ValueError):
    """No grammar for these tools (none offered, or a named tool that is not among them)."""


def tool_call_grammar(
    tools: list[dict],
    only: str | None = None,
    parallel: bool = True,
    open_tag: str = "<tool_call>",
    close_tag: str = "</tool_call>",
    tag_tokens: bool = True,
) -> str:
    """A GBNF grammar whose sentences are hermes tool calls of `tools` (chat-completions tool dicts or
    bare function dicts); `only`: that tool alone (tool_choice naming a function); `parallel`: one or
    more calls (else exactly one)."""
    builder = _Builder()
    functions = [t.get("function", t) for t in tools]
    if only is not None:
        functions = [f for f in functions if f.get("name") == only]
        if not functions:
            raise GrammarError(f"tool_choice names {only!r}, which is not among the tools offered")
    if not functions:
        raise GrammarError("no tools offered: nothing to constrain a tool call to")
    alternatives = []
    for function in functions:
        name = function["name"]
        arguments = builder.schema(function.get("parameters") or {"type": "object"}, function.get("parameters"))
        rule = builder.add(
            f"call-{name}", f'"{{\\"name\\": " {_literal(json.dumps(name))} ", \\"arguments\\": " {arguments} "}}"'
        )
        alternatives.append(rule)
    tag = (lambda t: t) if tag_tokens else _literal
    builder.add("call", f'{tag(open_tag)} "\\n" ({" | ".join(alternatives)}) "\\n" {tag(close_tag)}')
    rules = ['root ::= call ( "\\n" call )*' if parallel else "root ::= call"]
    rules += [f"{name} ::= {body}" for name, body in builder.rules.items()]
    rules += [f"{name} ::= {PRIMITIVES[name]}" for name in sorted(builder.primitives)]
    return "\n".join(rules) + "\n"


def _literal(text: str) -> str:
    """A GBNF string literal matching `text` exactly."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _rule_name(name: str) -> str:
    return re.sub(r"[^a-zA-Z0-9-]+", "-", name).strip("-") or "r"


class _Builder:
    def __init__(self):
        self.rules: dict[str, str] = {}
        self.primitives: set[str] = set()

    def add(self, name: str, body: str) -> str:
        name = _rule_name(name)
        base, n = name, 1
        while name in self.rules and self.rules[name] != body:
            n += 1
            name = f"{base}-{n}"
        self.rules[name] = body
        return name

    def primitive(self, name: str) -> str:
        self.primitives.add(name)
        if name == "string":
            self.primitives.add("char")
        if name == "number":
            self.primitives.add("integer")
        if name in ("value", "object", "array"):  # any JSON: every primitive
            self.primitives |= set(PRIMITIVES)
        return name

    def schema(self, schema: dict[str, Any], root: dict[str, Any] | None, depth: int = 0) -> str:
        """A GBNF expression for the JSON values `schema` allows."""
        if depth > 16:  # a recursive $ref: any value from here on
            return self.primitive("value")
        if "$ref" in schema:
            return self.schema(_resolve(schema["$ref"], root or {}), root, depth + 1)
        if "const" in schema:
            return _literal(json.dumps(schema["const"], ensure_ascii=False))
        if "enum" in schema:
            return "(" + " | ".join(_literal(json.dumps(v, ensure_ascii=False)) for v in schema["enum"]) + ")"
        for key in ("anyOf", "oneOf"):
            if key in schema:
                return "(" + " | ".join(self.schema(s, root, depth + 1) for s in schema[key]) + ")"
        kind = schema.get("type")
        if isinstance(kind, list):
            return "(" + " | ".join(self.schema({**schema, "type": k}, root, depth + 1) for k in kind) + ")"
        if kind == "object" and schema.get("properties"):
            return self._object(schema, root, depth)
        if kind == "array" and isinstance(schema.get("items"), dict):
            item = self.schema(schema["items"], root, depth + 1)
            return f'"[" ( {item} ( ", " {item} )* )? "]"'
        if kind in ("string", "integer", "number", "boolean", "null", "object", "array"):
            return self.primitive(kind)
        return self.primitive("value")

    def _object(self, schema: dict[str, Any], root: dict[str, Any] | None, depth: int) -> str:
        required = set(schema.get("required") or [])
        members = [
            (
                _literal(json.dumps(name, ensure_ascii=False) + ": ") + " " + self.schema(sub, root, depth + 1),
                name in required,
            )
            for name, sub in schema["properties"].items()
        ]
        return '"{" ' + _members(members) + ' "}"'


def _members(members: list[tuple[str, bool]], leading: bool = False) -> str:
    """Properties in order, separated by ", ": required ones always, optional ones optional."""
    if not members:
        return ""
    (first, required), rest = members[0], members[1:]
    comma = '", " ' if leading else ""
    if required:
        after = _members(rest, leading=True)
        return f"{comma}{first} {after}".strip()
    with_first = f"{comma}{first} {_members(rest, leading=True)}".strip()
    without = _members(rest, leading=leading)
    return f"( {with_first} | {without} )" if without else f"( {with_first} )?"


def _resolve(ref: str, root: dict[str, Any]) -> dict[str, Any]:
    if not ref.startswith("#/"):
        raise GrammarError(f"only local $refs are supported, not {ref!r}")
    node: Any = root
    for part in ref[2:].split("/"):
        node = node[part]
    return node
