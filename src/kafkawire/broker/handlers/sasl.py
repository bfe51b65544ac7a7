"""SaslHandshake 0-1, SaslAuthenticate 0-2, and the SCRAM credential APIs (DescribeUserScramCredentials,
AlterUserScramCredentials 0).

On a SASL listener the connection's :class:`~kafkawire.security.authenticator.ConnectionAuthenticator`
decides (see its docstring for Kafka's order of events and failures); these handlers only put its
outcome into the answer and tell the connection what follows: bare tokens after SaslHandshake v0, the
close after a failure (the answer at once, the close ``connection.failed.authentication.delay.ms`` later, as
Kafka delays it: one guess per delay, and a client reads the answer before it sees the close), and
the opening once authenticated (KIP-152 framing: the tokens ride in SaslAuthenticate from v1).
``session_lifetime_ms`` is ``connections.max.reauth.ms`` (0: off): a client re-authenticates with SaslHandshake
v1 and SaslAuthenticate on the open connection (KIP-368), with the same mechanism and principal; after the
lifetime, any other request closes the connection.

On a PLAINTEXT or SSL listener, and on an authenticated connection, both answer what Kafka's request
handler answers there, ILLEGAL_SASL_STATE, so a client configured for SASL gets a clear error instead
of a dropped connection.

SCRAM credentials: as Kafka's controller validates them (UNSUPPORTED_SASL_MECHANISM for an unknown
mechanism, UNACCEPTABLE_CREDENTIAL for an empty user name, iterations outside 4096-16384 or an empty
salt or salted password, DUPLICATE_RESOURCE for a user named twice in one request, RESOURCE_NOT_FOUND
for deleting a credential that does not exist); the good ones are stored at once (one file write).
"""

from __future__ import annotations

from kafkawire.protocol import errors
from kafkawire.protocol.messages import (
    AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsResponse,
    SaslAuthenticateResponse,
    SaslHandshakeResponse,
)
from kafkawire.security.authenticator import SaslState
from kafkawire.security.scram import MECHANISM_BY_ID, MECHANISMS, credential_from_salted
from kafkawire.security.serving import SASL, close_later, opened

from ..dispatch import handles


def _auth(ctx):
    conn = ctx.connection
    return conn.attributes.get(SASL) if conn is not None and hasattr(conn, "attributes") else None


@handles("SaslHandshake", 0, 1)
def sasl_handshake(broker, ctx, body):
    auth = _auth(ctx)
    if auth is None:
        return SaslHandshakeResponse(error_code=errors.ILLEGAL_SASL_STATE, mechanisms=[])
    outcome = auth.handshake(body.mechanism, ctx.api_version)
    mechanisms = list(auth.listener.mechanisms) if outcome.error_code in (0, errors.UNSUPPORTED_SASL_MECHANISM) else []
    answer = SaslHandshakeResponse(error_code=outcome.error_code, mechanisms=mechanisms)
    if outcome.close:
        ctx.connection.close_after_response(
            f"SaslHandshake: {errors.error_for(outcome.error_code).name}", auth.listener.failed_auth_delay_ms / 1000.0
        )
    if auth.state is SaslState.TOKENS:
        ctx.connection.protocol.start_sasl_tokens()  # the next frame is a bare token (no Kafka header)
    return answer


@handles("SaslAuthenticate", 0, 2)
def sasl_authenticate(broker, ctx, body):
    auth = _auth(ctx)
    if auth is None:
        return SaslAuthenticateResponse(
            error_code=errors.ILLEGAL_SASL_STATE,
            error_message="SaslAuthenticate request received after successful authentication",
            auth_bytes=b"",
        )
    if auth.state is SaslState.HANDSHAKE:  # Kafka closes without an answer
        auth.state = SaslState.FAILED
        return close_later(
            auth.listener.failed_auth_delay_ms, "SaslAuthenticate before SaslHandshake (illegal SASL state)"
        )
    outcome = auth.authenticate(bytes(body.auth_bytes))
    answer = SaslAuthenticateResponse(
        error_code=outcome.error_code,
        error_message=outcome.error_message,
        auth_bytes=outcome.token,
        session_lifetime_ms=outcome.session_lifetime_ms,
    )
    if outcome.complete:
        opened(ctx.connection, auth, outcome.session_lifetime_ms)
    elif outcome.close:
        # one guess per delay per connection: nothing more is read while the close waits
        ctx.connection.close_after_response(
            f"SASL authentication failed: {outcome.error_message}", auth.listener.failed_auth_delay_ms / 1000.0
        )
    return answer


@handles("DescribeUserScramCredentials", 0, 0)
def describe_user_scram_credentials(broker, ctx, body):
    R = DescribeUserScramCredentialsResponse
    known = broker.scram_credentials.users()
    if body.users is None or len(body.users) == 0:
        names, duplicates = sorted(known), set()
    else:
        names = [u.name for u in body.users]
        duplicates = {n for n in names if names.count(n) > 1}
        names = list(dict.fromkeys(names))
    results = []
    for name in names:
        if name in duplicates:
            results.append(
                R.DescribeUserScramCredentialsResult(
                    user=name,
                    error_code=errors.DUPLICATE_RESOURCE,
                    error_message=f"Cannot describe SCRAM credentials for the same user twice in a single request: {name}",
                    credential_infos=[],
                )
            )
        elif name not in known:
            results.append(
                R.DescribeUserScramCredentialsResult(
                    user=name,
                    error_code=errors.RESOURCE_NOT_FOUND,
                    error_message=f"Attempt to describe nonexistent credential for user {name}",
                    credential_infos=[],
                )
            )
        else:
            results.append(
                R.DescribeUserScramCredentialsResult(
                    user=name,
                    error_code=0,
                    error_message="",  # Kafka's generated default (a string field defaults to "")
                    credential_infos=[
                        R.CredentialInfo(mechanism=MECHANISMS[m][0], iterations=i)
                        for m, i in sorted(known[name].items())
                    ],
                )
            )
    # the top-level message is Kafka's generated default too: "" rather than null
    return R(throttle_time_ms=0, error_code=0, error_message="", results=results)


@handles("AlterUserScramCredentials", 0, 0)
def alter_user_scram_credentials(broker, ctx, body):
    R = AlterUserScramCredentialsResponse
    store = broker.scram_credentials
    names = [d.name for d in body.deletions] + [u.name for u in body.upsertions]
    # Entries are checked in request order, deletions first, and a user's first failure is its answer, as
    # Kafka 4.4's controller does: a deletion of a credential that does not exist is RESOURCE_NOT_FOUND even
    # when the same user is also upserted (the conformance corpus case upsert-and-delete-same-user); a user
    # named again after a valid entry is DUPLICATE_RESOURCE.
    failed: dict[str, tuple[int, str]] = {}
    duplicate = (errors.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")
    deletes: dict[str, tuple[str, str]] = {}
    upserts: dict[str, tuple[tuple[str, str], object]] = {}
    for d in body.deletions:
        mech = MECHANISM_BY_ID.get(d.mechanism)
        if d.name in failed:
            continue
        if not d.name:
            failed[d.name] = (errors.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
        elif mech is None:
            failed[d.name] = (errors.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
        elif store.get(d.name, mech) is None:
            failed[d.name] = (errors.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")
        elif d.name in deletes:
            del deletes[d.name]
            failed[d.name] = duplicate
        else:
            deletes[d.name] = (d.name, mech)
    for u in body.upsertions:
        mech = MECHANISM_BY_ID.get(u.mechanism)
        if u.name in failed:
            continue
        if u.name in deletes or u.name in upserts:
            deletes.pop(u.name, None)
            upserts.pop(u.name, None)
            failed[u.name] = duplicate
        elif not u.name:
            failed[u.name] = (errors.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
        elif mech is None:
            failed[u.name] = (errors.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
        elif not MECHANISMS[mech][2] <= u.iterations <= MECHANISMS[mech][3]:
            failed[u.name] = (
                errors.UNACCEPTABLE_CREDENTIAL,
                "Too few iterations" if u.iterations < MECHANISMS[mech][2] else "Too many iterations",
            )
        elif not u.salt or not u.salted_password:
            failed[u.name] = (errors.UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty")
        else:
            upserts[u.name] = (
                (u.name, mech),
                credential_from_salted(mech, bytes(u.salted_password), bytes(u.salt), u.iterations),
            )
    # a user with any failed entry changes nothing
    to_delete = {k for name, k in deletes.items() if name not in failed}
    to_upsert = {k: v for name, (k, v) in upserts.items() if name not in failed}
    if to_delete or to_upsert:
        store.apply(to_upsert, to_delete)
    results = []
    for name in dict.fromkeys(names):
        code, message = failed.get(name, (0, None))
        results.append(R.AlterUserScramCredentialsResult(user=name, error_code=code, error_message=message))
    return R(throttle_time_ms=0, results=results)
