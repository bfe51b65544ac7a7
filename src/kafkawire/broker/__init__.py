"""The kafkawire broker: one node that Kafka clients cannot tell from Kafka.

- ``config``: ``server.properties`` keys, defaults, topic config definitions (``BrokerConfig``).
- ``server``: ``Broker`` (state, dispatch, lifecycle), ``start_in_thread`` for tests and notebooks.
- ``dispatch``: API key -> handler table; handler modules in ``handlers`` register themselves.
- ``storage``: the storage contract and its engines (segments on disk, memory).
- ``groups``: the group coordinator (consumer groups).

Run it with ``kafkawire serve``.
"""
