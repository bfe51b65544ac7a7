"""Listeners, TLS and SASL for the broker, and TLS and SASL for kafkawire's client.

- :mod:`.listeners` reads Kafka's listener keys and builds each listener's TLS context, refusing (with the
  key named) anything it cannot serve as configured;
- :mod:`.sasl` (PLAIN) and :mod:`.scram` (SCRAM-SHA-256/512, the credential store) are the mechanisms,
  state machines with no I/O; :mod:`.authenticator` is one connection's SASL state as Kafka keeps it;
- :mod:`.principal` maps a client certificate's subject with ``ssl.principal.mapping.rules``;
- :mod:`.serving` plugs them into the asyncio server; :mod:`.certs` makes a throwaway CA for development;
- :mod:`.oauthbearer` validates OAUTHBEARER tokens (unsecured, or signed and checked against a JWKS).

Client side: :mod:`.client` reads Kafka's client properties (``security.protocol``, ``ssl.*``, ``sasl.*``) into
a TLS context and a SASL mechanism; :mod:`.sasl_client` holds the mechanisms, sans-IO.
"""
