"""Typed settings from YAML: a mapping bound onto dataclasses, with one error that names the key.

The agent, the cloud and the simulator each read their settings from a YAML file into
dataclasses whose field defaults are the documented defaults. A typo or a wrong type must
stop the program at start-up with the file and the dotted key named, never fall back
silently to a default: ``bind`` rejects unknown keys (suggesting the nearest known one),
checks every value against its field's annotation and the range a field declares with
``setting(...)``, and raises ``SettingsError``.

Binding rules: a key may be written with ``-`` for ``_``; ``null`` is accepted only where
the annotation allows ``None``; an integer is accepted for a float, a float without a
fraction for an integer, and a number or boolean for a string (YAML reads ``password:
123456`` as a number); a mapping or list written empty (``null``) is empty. A section omitted or ``null`` keeps its default; keys a section
omits keep the value of its ``base`` (a section's own default, which may differ from the
class's). A dataclass may list older spellings of its keys in ``SETTINGS_ALIASES``.
"""
from __future__ import annotations

import dataclasses
import difflib
import functools
import os
import types
import typing
from pathlib import Path
from typing import Any, Callable, Iterable, TypeVar

import yaml

T = TypeVar("T")

# Metadata a field carries so that ``bind`` never takes it from YAML (e.g. where the settings came from).
NOT_A_KEY = {"settings_key": False}


class SettingsError(ValueError):
    """Settings that cannot work. The message names the file (when there is one), the dotted
    key and the reason: ``agent.yaml: outbox.policy: expected one of ...``."""

    def __init__(self, reason: str, *, key: str | None = None, source: str | None = None) -> None:
        self.reason = reason
        self.key = key or None
        self.source = source or None
        where = ": ".join(part for part in (self.source, self.key) if part)
        super().__init__(f"{where}: {reason}" if where else reason)

    def in_file(self, source: str | os.PathLike[str]) -> SettingsError:
        """The same error naming the file it came from (unchanged if it names one already)."""
        if self.source:
            return self
        return SettingsError(self.reason, key=self.key, source=str(source))


def setting(default: Any = dataclasses.MISSING, *, default_factory: Any = dataclasses.MISSING,
            minimum: float | None = None, maximum: float | None = None,
            choices: Iterable[Any] | None = None, why: str | None = None) -> Any:
    """A dataclass field whose value ``bind`` checks: inclusive ``minimum``/``maximum``, or one of
    ``choices``; ``why`` is added to the error (what the limit protects)."""
    metadata = {"minimum": minimum, "maximum": maximum, "choices": tuple(choices) if choices is not None else None,
                "why": why}
    if default_factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def check_keys(data: dict[Any, Any], known: Iterable[str], where: str = "") -> None:
    """An error naming the first key of ``data`` not in ``known``, with the nearest known key."""
    known = sorted(known)
    for key in data:
        if str(key) not in known:
            raise SettingsError(_unknown(str(key), known), key=_join(where, str(key)))


def bind(cls: type[T], data: Any, *, key: str = "", base: T | None = None) -> T:
    """``cls`` from a YAML mapping (``None``: ``base`` or the defaults); ``key`` is where the
    mapping stands in the file, for error messages."""
    base = cls() if base is None else base
    if data is None:
        return base
    if not isinstance(data, dict):
        raise SettingsError(f"expected a mapping, got {_shown(data)}", key=key or None)
    data = _resolve_aliases(cls, data, key)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init and f.metadata.get("settings_key", True)}
    hints = _hints(cls)
    values: dict[str, Any] = {}
    for raw_key, value in data.items():
        name = str(raw_key).replace("-", "_")
        path = _join(key, str(raw_key))
        if name not in fields:
            raise SettingsError(_unknown(name, fields), key=path)
        current = getattr(base, name)
        if dataclasses.is_dataclass(current) and not isinstance(current, type):
            values[name] = bind(type(current), value, key=path, base=current)
        else:
            values[name] = _coerce(hints[name], value, path)
            _check_range(fields[name], values[name], path)
    return dataclasses.replace(base, **values)


def read_yaml(path: str | os.PathLike[str]) -> Any:
    """The YAML document in ``path``; a SettingsError when it cannot be read or parsed."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise SettingsError(f"cannot read the file: {exc.strerror or exc}", source=str(path)) from None
    except UnicodeDecodeError as exc:
        raise SettingsError(f"not UTF-8 text: {exc}", source=str(path)) from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SettingsError(f"not valid YAML: {exc}", source=str(path)) from None


def load_yaml(path: str | os.PathLike[str], build: Callable[[Any], T]) -> T:
    """``build`` applied to the YAML document in ``path``; its SettingsErrors name the file."""
    data = read_yaml(path)
    try:
        return build(data)
    except SettingsError as exc:
        raise exc.in_file(path) from None


# -- binding ---------------------------------------------------------------------------------

def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _shown(value: Any) -> str:
    return type(value).__name__ if isinstance(value, (dict, list)) else repr(value)


def _unknown(name: str, known: Iterable[str]) -> str:
    known = sorted(known)
    near = difflib.get_close_matches(name, known, n=1)
    if near:
        return f"unknown key (did you mean {near[0]}?)"
    return f"unknown key (known: {', '.join(known)})"


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _resolve_aliases(cls: type, data: dict[Any, Any], where: str) -> dict[Any, Any]:
    """Older spellings (``tls_ca``) moved onto the key they now stand for (``tls.ca``)."""
    aliases: dict[str, str] = getattr(cls, "SETTINGS_ALIASES", {})
    if not any(old in data for old in aliases):
        return data
    data = dict(data)
    for old, new in aliases.items():
        if old not in data:
            continue
        value = data.pop(old)
        section_name, _, leaf = new.partition(".")
        section = data.get(section_name)
        if section is None:
            section = {}
        elif not isinstance(section, dict):
            raise SettingsError(f"expected a mapping, got {_shown(section)}", key=_join(where, section_name))
        if leaf in section:
            raise SettingsError(f"given twice, also as {_join(where, new)}", key=_join(where, old))
        data[section_name] = {**section, leaf: value}
    return data


def _coerce(hint: Any, value: Any, path: str) -> Any:
    """``value`` checked against a field's type (and converted where the rules above allow)."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        options = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        if value is None and len(options) < len(typing.get_args(hint)):
            return None
        hint = options[0] if len(options) == 1 else Any
        origin = typing.get_origin(hint)
    if value is None and origin in (dict, list, tuple):
        value = {} if origin is dict else []     # `users:` with nothing under it: none
    if value is None:
        raise SettingsError("a value is required", key=path)
    if hint is Any:
        return value
    if dataclasses.is_dataclass(hint):
        return bind(hint, value, key=path)
    if hint is bool:
        if not isinstance(value, bool):
            raise SettingsError(f"expected true or false, got {_shown(value)}", key=path)
        return value
    if hint in (int, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise SettingsError(f"expected a number, got {_shown(value)}", key=path)
        if hint is int and value != int(value):
            raise SettingsError(f"expected an integer, got {value!r}", key=path)
        return hint(value)
    if hint is str:
        if isinstance(value, (dict, list)):
            raise SettingsError(f"expected a string, got {_shown(value)}", key=path)
        return str(value)
    if origin is dict:
        if not isinstance(value, dict):
            raise SettingsError(f"expected a mapping, got {_shown(value)}", key=path)
        _, item = typing.get_args(hint) or (str, Any)
        return {str(k): _coerce(item, v, _join(path, str(k))) for k, v in value.items()}
    if origin in (list, tuple):
        if not isinstance(value, list):
            raise SettingsError(f"expected a list, got {_shown(value)}", key=path)
        item = (typing.get_args(hint) or (Any,))[0]
        items = [_coerce(item, v, f"{path}[{i}]") for i, v in enumerate(value)]
        return items if origin is list else tuple(items)
    if isinstance(hint, type) and not isinstance(value, hint):
        raise SettingsError(f"expected {hint.__name__}, got {_shown(value)}", key=path)
    return value


def _check_range(field: dataclasses.Field[Any], value: Any, path: str) -> None:
    meta = field.metadata
    if value is None or not meta:
        return
    why = f" ({meta['why']})" if meta.get("why") else ""
    choices = meta.get("choices")
    if choices is not None and value not in choices:
        raise SettingsError(f"expected one of {', '.join(map(str, choices))}, got {value!r}{why}", key=path)
    low, high = meta.get("minimum"), meta.get("maximum")
    if (low is not None and value < low) or (high is not None and value > high):
        if high is None:
            wanted = f"at least {low:g}"
        elif low is None:
            wanted = f"at most {high:g}"
        else:
            wanted = f"{low:g} to {high:g}"
        raise SettingsError(f"expected {wanted}, got {value!r}{why}", key=path)
