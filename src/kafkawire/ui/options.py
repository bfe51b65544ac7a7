"""``--ui HOST:PORT`` and ``--ui-token``, as ``kafkawire serve`` and ``kafkawire proxy`` read them (checked
before anything starts: a console that would be open beyond loopback stops the command)."""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class ConsoleOptions:
    host: str
    port: int
    token: str | None


def console_options(address: str, token: str | None) -> ConsoleOptions:
    """``address``: HOST:PORT, or a port alone for 127.0.0.1. Raises ValueError (naming the option) for a bad address, a missing aiohttp, or a non-loopback bind
    without a token."""
    text = address.strip()
    if text.isdigit():  # a port alone: loopback
        text = f"127.0.0.1:{text}"
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port_text = rest[1:] if rest.startswith(":") else ""
    else:
        host, _, port_text = text.rpartition(":")
    if not port_text.isdigit():
        raise ValueError(f"--ui expects HOST:PORT, got {address!r}")
    token = token or os.environ.get("KAFKAWIRE_UI_TOKEN") or None
    try:
        import aiohttp  # noqa: F401
    except ImportError:
        raise ValueError("--ui needs aiohttp: pip install 'kafkawire[ui]'") from None
    from .server import check_bind

    check_bind(host, token)
    return ConsoleOptions(host, int(port_text), token)


__all__ = ["ConsoleOptions", "console_options"]
