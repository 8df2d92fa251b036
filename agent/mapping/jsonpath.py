"""The JSONPath subset RML iterators and references may use, compiled once into selectors.

A selector is a function from a JSON value (what ``json.loads`` gives) to the list of
values the path selects, in document order. Supported, and nothing else:

- ``$`` the value itself (for a reference: the current iteration's value);
- ``.name``, ``['name']``, ``["name"]`` a member; ``['a','b']`` several members (a union);
- ``[0]``, ``[-1]`` an array item; ``[*]``, ``.*`` every item or member;
- ``[?(@.key)]`` the items (or members) that have ``key``; ``[?(@.key == 'x')]`` and ``!=``
  with a string, number, ``true``, ``false`` or ``null``; ``@['key']`` spelled either way.

Refused by name, with ``MappingError``: recursive descent ``..``, slices ``[1:3]``, script
expressions ``[(...)]``, and any other filter (functions, ``<``, ``&&``, nested paths):
each would make a selector's cost depend on the payload's shape in ways the agent's
limits do not bound, and none is needed for device payloads.
"""
from __future__ import annotations

import json
import re
from typing import Any, Callable

from .errors import MappingError

Selector = Callable[[Any], list]

_DOT_NAME = re.compile(r"[^.\[\]()'\"\s=!<>&|@$*]+")
_INT = re.compile(r"-?\d+")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")
_ESCAPES = {"'": "'", '"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


def compile_path(path: str) -> Selector:
    """A selector for ``path``; MappingError naming the construct for anything outside the subset."""
    if not isinstance(path, str) or not path.startswith("$"):
        raise MappingError(f"JSONPath {path!r} does not start with '$'")
    steps = _Parser(path).steps()
    return _selector(steps)


def compile_reference(reference: str) -> Selector:
    """A reference as RML writes it: a JSONPath, or (older mappings) a bare member name such as ``Name``."""
    if reference.startswith("$"):
        return compile_path(reference)
    if reference.startswith("["):
        return compile_path("$" + reference)
    return compile_path("$." + reference)


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 1

    def fail(self, what: str) -> MappingError:
        return MappingError(f"JSONPath {self.text!r}: {what} (at character {self.pos})")

    def steps(self) -> list[tuple]:
        text, out = self.text, []
        while self.pos < len(text):
            c = text[self.pos]
            if text.startswith("..", self.pos):
                raise self.fail("recursive descent '..' is not supported")
            if c == ".":
                self.pos += 1
                if text.startswith("*", self.pos):
                    self.pos += 1
                    out.append(("wild",))
                    continue
                m = _DOT_NAME.match(text, self.pos)
                if not m:
                    raise self.fail("a member name must follow '.'")
                self.pos = m.end()
                out.append(("names", (m.group(),)))
            elif c == "[":
                self.pos += 1
                out.append(self.bracket())
            else:
                raise self.fail(f"unexpected {c!r}")
        return out

    def skip_space(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] == " ":
            self.pos += 1

    def expect(self, token: str) -> None:
        self.skip_space()
        if not self.text.startswith(token, self.pos):
            raise self.fail(f"expected {token!r}")
        self.pos += len(token)

    def bracket(self) -> tuple:
        text = self.text
        self.skip_space()
        if text.startswith("*", self.pos):
            self.pos += 1
            self.expect("]")
            return ("wild",)
        if text.startswith("?", self.pos):
            self.pos += 1
            step = self.filter()
            self.expect("]")
            return step
        if text.startswith("(", self.pos):
            raise self.fail("script expressions '[(...)]' are not supported")
        if text.startswith(("'", '"'), self.pos):
            names = [self.string()]
            self.skip_space()
            while text.startswith(",", self.pos):
                self.pos += 1
                self.skip_space()
                names.append(self.string())
                self.skip_space()
            self.expect("]")
            return ("names", tuple(dict.fromkeys(names)))   # a repeated name would select twice
        m = _INT.match(text, self.pos)
        if m:
            self.pos = m.end()
            self.skip_space()
            if text.startswith(":", self.pos):
                raise self.fail("array slices '[a:b]' are not supported")
            indexes = [int(m.group())]
            while text.startswith(",", self.pos):
                self.pos += 1
                self.skip_space()
                m = _INT.match(text, self.pos)
                if not m:
                    raise self.fail("expected an array index")
                self.pos = m.end()
                indexes.append(int(m.group()))
                self.skip_space()
            self.expect("]")
            return ("indexes", tuple(dict.fromkeys(indexes)))
        if text.startswith(":", self.pos):
            raise self.fail("array slices '[a:b]' are not supported")
        raise self.fail("expected '*', a quoted name, an index or a filter '?(...)' in brackets")

    def string(self) -> str:
        text, quote = self.text, self.text[self.pos]
        self.pos += 1
        out = []
        while True:
            if self.pos >= len(text):
                raise self.fail("unterminated string")
            c = text[self.pos]
            if c == quote:
                self.pos += 1
                return "".join(out)
            if c == "\\":
                nxt = text[self.pos + 1:self.pos + 2]
                if nxt not in _ESCAPES:
                    raise self.fail(f"unknown escape '\\{nxt}' in a string")
                out.append(_ESCAPES[nxt])
                self.pos += 2
            else:
                out.append(c)
                self.pos += 1

    def filter(self) -> tuple:
        self.expect("(")
        self.expect("@")
        text = self.text
        if text.startswith(".", self.pos):
            self.pos += 1
            m = _DOT_NAME.match(text, self.pos)
            if not m:
                raise self.fail("a member name must follow '@.'")
            self.pos = m.end()
            key = m.group()
        elif text.startswith("[", self.pos):
            self.pos += 1
            self.skip_space()
            if not text.startswith(("'", '"'), self.pos):
                raise self.fail("a filter reads one member: @.name or @['name']")
            key = self.string()
            self.expect("]")
        else:
            raise self.fail("a filter reads one member: @.name or @['name']")
        self.skip_space()
        if text.startswith(")", self.pos):
            self.pos += 1
            return ("has", key)
        for op in ("==", "!="):
            if text.startswith(op, self.pos):
                self.pos += 2
                self.skip_space()
                value = self.literal()
                self.expect(")")
                return ("compare", key, op, value)
        raise self.fail("only @.name, @.name == literal and @.name != literal filters are supported")

    def literal(self) -> Any:
        text = self.text
        if text.startswith(("'", '"'), self.pos):
            return self.string()
        for word, value in (("true", True), ("false", False), ("null", None)):
            if text.startswith(word, self.pos):
                self.pos += len(word)
                return value
        m = _NUMBER.match(text, self.pos)
        if m:
            self.pos = m.end()
            return json.loads(m.group())
        raise self.fail("expected a string, number, true, false or null")


_MISSING = object()


def _same(a: Any, b: Any) -> bool:
    """JSON equality: a boolean is not a number (``true == 1`` is false)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a == b


def _step(step: tuple) -> Callable[[Any], list]:
    kind = step[0]
    if kind == "names":
        names = step[1]
        if len(names) == 1:
            name = names[0]

            def member(v: Any) -> list:
                if isinstance(v, dict):
                    found = v.get(name, _MISSING)
                    if found is not _MISSING:
                        return [found]
                return []
            return member

        def members(v: Any) -> list:
            return [v[n] for n in names if n in v] if isinstance(v, dict) else []
        return members
    if kind == "indexes":
        indexes = step[1]

        def items(v: Any) -> list:
            if type(v) is not list:
                return []
            size = len(v)
            return [v[i] for i in indexes if -size <= i < size]
        return items
    if kind == "wild":
        def every(v: Any) -> list:
            if type(v) is list:
                return v
            if isinstance(v, dict):
                return list(v.values())
            return []
        return every
    if kind == "has":
        key = step[1]

        def having(v: Any) -> list:
            children = v if type(v) is list else list(v.values()) if isinstance(v, dict) else ()
            return [c for c in children if isinstance(c, dict) and key in c]
        return having
    _, key, op, expected = step
    want = op == "=="

    def comparing(v: Any) -> list:
        children = v if type(v) is list else list(v.values()) if isinstance(v, dict) else ()
        return [c for c in children
                if isinstance(c, dict) and key in c and _same(c[key], expected) is want]
    return comparing


def _selector(steps: list[tuple]) -> Selector:
    if not steps:
        return lambda v: [v]
    if all(s[0] == "names" and len(s[1]) == 1 for s in steps):
        names = tuple(s[1][0] for s in steps)    # a plain chain of members: one walk, no lists

        def chain(v: Any) -> list:
            for name in names:
                if not isinstance(v, dict):
                    return []
                v = v.get(name, _MISSING)
                if v is _MISSING:
                    return []
            return [v]
        return chain
    compiled = [_step(s) for s in steps]
    if len(compiled) == 1:
        return compiled[0]

    def walk(v: Any) -> list:
        nodes = [v]
        for step in compiled:
            nodes = [found for node in nodes for found in step(node)]
            if not nodes:
                break
        return nodes
    return walk
