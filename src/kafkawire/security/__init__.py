"""Listeners, TLS and SASL for the broker.

- :mod:`.listeners` reads Kafka's listener keys and builds each listener's TLS context, refusing (with the
  key named) anything it cannot serve as configured;
- :mod:`.sasl` (PLAIN) and :mod:`.scram` (SCRAM-SHA-256/512, the credential store) are the mechanisms,
  state machines with no I/O; :mod:`.authenticator` is one connection's SASL state as Kafka keeps it;
- :mod:`.principal` maps a client certificate's subject with ``ssl.principal.mapping.rules``;
- :mod:`.serving` plugs them into the asyncio server; :mod:`.certs` makes a throwaway CA for development.
"""
