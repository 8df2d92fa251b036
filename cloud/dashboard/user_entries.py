"""Writing a dashboard user into cloud.yaml for ``edgewave-cloud add-user``, keeping everything else.

cloud.yaml is an operator's file: comments explain every key, and a program that
loads and dumps it with a plain YAML library would lose them. The entry is put in
with ruamel.yaml's round-trip mode (comments, key order, quoting, ``null`` and the
file's indentation kept), then checked: the new text must read as the old data
plus exactly this user, or nothing is written. The file is replaced atomically (a
temporary file beside it, fsync, rename) with its mode and, where allowed, its
owner, so a reader such as a starting dashboard sees either the old file or the
new one, never half of it.
"""
from __future__ import annotations

import io
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

import yaml
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap
from ruamel.yaml.error import YAMLError
from ruamel.yaml.util import load_yaml_guess_indent


class UserEntryError(ValueError):
    """cloud.yaml cannot take the entry: missing, unreadable, not a mapping, or the name is taken."""


def _round_trip(text: str) -> tuple[YAML, Any]:
    """A round-trip YAML set up like the file (its indentation) and the file's data."""
    try:
        data, indent, sequence_indent = load_yaml_guess_indent(text)
    except YAMLError as exc:
        raise UserEntryError(f"not valid YAML: {exc}") from exc
    rt = YAML()
    rt.preserve_quotes = True
    rt.width = 4096           # never fold a long line the operator wrote on one
    mapping_indent = indent or 2
    offset = sequence_indent or 0
    rt.indent(mapping=mapping_indent, sequence=max(mapping_indent, offset + 2), offset=offset)
    # Keep `null` as written (ruamel would write nothing after the colon).
    rt.representer.add_representer(type(None), lambda r, _: r.represent_scalar("tag:yaml.org,2002:null", "null"))
    return rt, data


def _users_of(data: Any) -> CommentedMap | None:
    """The ``dashboard.users`` mapping, or None where the file has none yet."""
    if data is None:
        return None
    if not isinstance(data, dict):
        raise UserEntryError("the file's top level is not a mapping")
    dashboard = data.get("dashboard")
    if dashboard is None:
        return None
    if not isinstance(dashboard, dict):
        raise UserEntryError("dashboard is not a mapping")
    users = dashboard.get("users")
    if users is not None and not isinstance(users, dict):
        raise UserEntryError("dashboard.users is not a mapping")
    return users


def _read(config: Path) -> str:
    try:
        return config.read_text(encoding="utf-8")
    except OSError as exc:
        raise UserEntryError(f"cannot read {config}: {exc.strerror or exc}") from exc


def check_name_free(config: str | Path, name: str, replace: bool) -> bool:
    """Whether ``name`` is already a user in ``config``; raises if it is and ``replace`` is not set.

    Asked before the password prompt, so nobody types a password for nothing.
    """
    users = _users_of(_round_trip(_read(Path(config)))[1])
    taken = users is not None and name in users
    if taken and not replace:
        raise UserEntryError(f"dashboard.users already has {name!r}; --replace changes its role and password")
    return taken


def with_user(text: str, name: str, entry: dict[str, str]) -> str:
    """``text`` (cloud.yaml) with ``entry`` as ``dashboard.users.<name>``; comments and the rest kept."""
    rt, data = _round_trip(text)
    if data is None:
        data = CommentedMap()
    users = _users_of(data)
    if users is None:
        dashboard = data.get("dashboard")
        if dashboard is None:
            dashboard = data["dashboard"] = CommentedMap()
        users = dashboard["users"] = CommentedMap()
    users.fa.set_block_style()      # `users: {}` grows into a block, not a one-line flow mapping
    users[name] = CommentedMap(entry)
    out = io.StringIO()
    rt.dump(data, out)
    new = out.getvalue()
    _check_only_the_user_changed(text, new, name, entry)
    return new


def _check_only_the_user_changed(old: str, new: str, name: str, entry: dict[str, str]) -> None:
    """Read both with the YAML reader the cloud uses: the new must be the old plus this user, nothing else."""
    before, after = yaml.safe_load(old) or {}, yaml.safe_load(new)
    dashboard = dict(before.get("dashboard") or {})
    dashboard["users"] = {**(dashboard.get("users") or {}), name: entry}
    if after != {**before, "dashboard": dashboard}:
        raise UserEntryError("writing the entry would change more than dashboard.users; add it by hand "
                             "(--print shows it)")


def write_user(config: str | Path, name: str, entry: dict[str, str]) -> None:
    """Put ``entry`` under ``dashboard.users.<name>`` in ``config``, atomically, keeping mode and owner."""
    path = Path(config).resolve()          # a symlinked cloud.yaml: write its target, keep the link
    text = _read(path)
    new = with_user(text, name, entry)
    info = path.stat()
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(new)
            out.flush()
            os.fchmod(out.fileno(), stat.S_IMODE(info.st_mode))
            try:
                os.fchown(out.fileno(), info.st_uid, info.st_gid)
            except PermissionError:
                pass        # not root: the file becomes ours, as any editor's save would make it
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
