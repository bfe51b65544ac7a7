"""The kafkawire console: a small web application served by ``kafkawire serve --ui`` and ``kafkawire proxy --ui``.

* :mod:`.tap` -- the bounded, drop-oldest queue through which the broker or proxy publishes its
  request/response pairs (nothing is decoded on their side);
* :mod:`.broker_tap` -- the broker's request handler wrapped to publish to a tap;
* :mod:`.cluster` -- the cluster view: topics, records, consumer groups, a test record, through
  kafkawire's own client;
* :mod:`.server` -- the HTTP side (aiohttp): the front end in ``static/`` (plain ES modules, no build
  step), the JSON API, the live stream (Server-Sent Events), and the token check that keeps a console
  bound beyond loopback closed without one.

Needs the ``ui`` extra (``pip install kafkawire[ui]``: aiohttp).
"""

from __future__ import annotations

from .tap import Tap

__all__ = ["Tap"]
