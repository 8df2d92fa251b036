"""A pattern's alert text: the title, severity and message its author gives it in the config document.

A pattern in a config document may carry ``ew:title``, ``ew:severity`` and ``ew:message``;
the message is a template over the pattern's variables, ``{name}`` for the value bound to
``?name``, ``{{`` and ``}}`` for braces::

    ew:pattern [ a ew:Pattern ; ew:name "fire" ; ew:query \"\"\"...\"\"\" ;
                 ew:title "Fire" ; ew:severity "critical" ;
                 ew:message "Fire in {room}: {temp} °C, threshold {threshold}" ] .

A template is checked where the pattern is (``edgewave.agent.engine.config_check``): every
name it holds must be a variable the pattern reports, so a document that names another is
refused before it is signed. Templates are read with ``string.Formatter``'s parser and filled
by plain substitution: no attribute, index, conversion or format spec is ever evaluated.
"""
from __future__ import annotations

import re
import string
from dataclasses import dataclass
from typing import Callable, Mapping

MAX_TITLE_CHARS = 200
MAX_MESSAGE_CHARS = 1000
SEVERITY = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,31}\Z")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")     # a SPARQL variable name without '?'


class TemplateError(ValueError):
    """A title, severity or message a gateway's document may not carry; the text says why."""


@dataclass(frozen=True)
class AlertText:
    """What a pattern's author wrote for people; every field optional."""

    title: str | None = None
    severity: str | None = None
    message: str | None = None


def template_names(template: str) -> list[str]:
    """The variable names a message template holds, in order; TemplateError if it is malformed."""
    if len(template) > MAX_MESSAGE_CHARS:
        raise TemplateError(f"message template of {len(template)} characters (at most {MAX_MESSAGE_CHARS})")
    names: list[str] = []
    try:
        pieces = list(string.Formatter().parse(template))
    except ValueError as exc:               # a lone { or }
        raise TemplateError(f"message template {template!r}: {exc} (write {{{{ and }}}} for braces)") from exc
    for _, field, spec, conversion in pieces:
        if field is None:
            continue
        name = field[1:] if field.startswith("?") else field
        if not _NAME.match(name) or spec or conversion:
            raise TemplateError(f"message template {template!r}: {{{field}{'!' + conversion if conversion else ''}"
                                f"{':' + spec if spec else ''}}} is not a variable name")
        names.append(name)
    return names


def check_alert_text(alert: AlertText, pattern: str, binds: list[str]) -> None:
    """Raise TemplateError unless ``alert`` fits a pattern that reports the variables ``binds``."""
    if alert.title is not None and len(alert.title) > MAX_TITLE_CHARS:
        raise TemplateError(f"pattern {pattern}: ew:title of {len(alert.title)} characters "
                            f"(at most {MAX_TITLE_CHARS})")
    if alert.severity is not None and not SEVERITY.match(alert.severity):
        raise TemplateError(f"pattern {pattern}: ew:severity {alert.severity!r} is not a word "
                            "(letters, digits, _ or -, at most 32)")
    if alert.message is None:
        return
    try:
        names = template_names(alert.message)
    except TemplateError as exc:
        raise TemplateError(f"pattern {pattern}: {exc}") from exc
    unbound = [n for n in dict.fromkeys(names) if n not in binds]
    if unbound:
        raise TemplateError(f"pattern {pattern}: its message names ?{', ?'.join(unbound)}, which the pattern does "
                            f"not bind (it binds {', '.join('?' + b for b in binds) or 'nothing'})")


def render(template: str, bindings: Mapping[str, str], show: Callable[[str], str] = str) -> str:
    """The message for one match: each ``{name}`` replaced by ``show`` of its bound term (a
    name the match did not bind stays as written). The template was checked when pushed."""
    out: list[str] = []
    for literal, field, _, _ in string.Formatter().parse(template):
        out.append(literal)
        if field is not None:
            name = field[1:] if field.startswith("?") else field
            out.append(show(bindings[name]) if name in bindings else "{" + field + "}")
    return "".join(out)
