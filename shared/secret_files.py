"""Writing files that hold secrets: mode 0600 from the first byte, replaced atomically.

A key or password file must never exist, even for a moment, with the umask's mode
(often 0644), and a reader must never see half of one: the text goes to a temporary
file created 0600 in the same directory, is fsynced, then renamed over the target.
"""
from __future__ import annotations

import os
import secrets
from pathlib import Path

SECRET_MODE = 0o600
SECRET_DIR_MODE = 0o700


def new_secret(nbytes: int = 32) -> str:
    """A random secret as URL-safe text (32 bytes: 256 bits, 43 characters)."""
    return secrets.token_urlsafe(nbytes)


def ensure_private_dir(path: str | os.PathLike[str]) -> Path:
    """Create ``path`` (and parents) if needed; the directory itself ends up mode 0700."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, SECRET_DIR_MODE)
    return path


def write_private(path: str | os.PathLike[str], data: str | bytes, mode: int = SECRET_MODE) -> Path:
    """Write ``data`` to ``path`` atomically with ``mode`` (0600 unless told)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = data.encode() if isinstance(data, str) else data
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(raw)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, mode)       # the umask may have taken bits away at creation
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def read_secret(path: str | os.PathLike[str]) -> str:
    """A secret file's content without surrounding whitespace; an empty file is an error."""
    text = Path(path).read_text().strip()
    if not text:
        raise ValueError(f"{path} is empty")
    return text
