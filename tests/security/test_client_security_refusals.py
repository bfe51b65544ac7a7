"""The refusals for the clients test_clients.py checks only for success: aiokafka and kcat. Each must fail fast
with its normal error, on kafkawire as on Kafka 4.4 (the brokers and listeners of test_clients.py)."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time

import pytest

from .test_clients import FAIL_WITHIN, USERS, Target, _protocol, target  # noqa: F401  (target: the brokers)

REFUSALS = [  # (what, listener, mechanism, user, password, client's protocol, aiokafka's logged reason)
    ("wrong password", "SASL_SSL", "SCRAM-SHA-256", "bob", "wrong", None, "SaslAuthenticationFailed"),
    ("unknown user", "SASL_PLAINTEXT", "PLAIN", "mallory", "x", None, "Invalid username or password"),
    ("mechanism not enabled", "PLAINONLY", "SCRAM-SHA-512", "carol", "carol-secret", None, "UnsupportedSaslMechanism"),
    ("TLS to a plaintext listener", "PLAINTEXT", None, None, None, "SSL", "Unable connect"),
    ("no certificate where one is required", "MTLS", None, None, None, None, "closed"),
]


def _aiokafka_error(target: Target, listener, mechanism, user, password, protocol) -> BaseException | None:
    from aiokafka import AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    kwargs: dict = {"bootstrap_servers": target.bootstrap(listener), "request_timeout_ms": 10000}
    kwargs["security_protocol"] = protocol or _protocol(listener)
    if "SSL" in kwargs["security_protocol"]:
        kwargs["ssl_context"] = create_ssl_context(cafile=str(target.certs / "ca.pem"))
    if mechanism:
        kwargs.update(sasl_mechanism=mechanism, sasl_plain_username=user, sasl_plain_password=password)

    async def run():
        producer = AIOKafkaProducer(**kwargs)
        try:
            await producer.start()
        finally:
            await producer.stop()

    try:
        asyncio.run(asyncio.wait_for(run(), FAIL_WITHIN * 2))
    except BaseException as exc:  # noqa: BLE001 - the error is what is checked
        return exc
    return None


@pytest.mark.parametrize(
    "what, listener, mechanism, user, password, protocol, reason", REFUSALS, ids=[r[0] for r in REFUSALS]
)
def test_aiokafka_is_refused_fast_with_its_normal_error(
    target, caplog, what, listener, mechanism, user, password, protocol, reason
):
    """aiokafka's normal error is KafkaConnectionError "Unable to bootstrap", raised at once; the broker's reason
    is in its log (the same words on Kafka 4.4 as on kafkawire)."""
    from aiokafka.errors import KafkaConnectionError

    caplog.set_level("ERROR", logger="aiokafka")
    started = time.monotonic()
    error = _aiokafka_error(target, listener, mechanism, user, password, protocol)
    assert isinstance(error, KafkaConnectionError) and "Unable to bootstrap" in str(error), repr(error)
    assert time.monotonic() - started < FAIL_WITHIN
    logged = [r.getMessage() for r in caplog.records if r.name.startswith("aiokafka") and r.levelname == "ERROR"]
    assert any(reason in m for m in logged), logged


KCAT_REFUSALS = [  # (what, listener, mechanism, user, password, client's protocol, kcat's words)
    ("unknown user", "SASL_PLAINTEXT", "PLAIN", "mallory", "x", None, "Invalid username or password"),
    (
        "mechanism not enabled",
        "PLAINONLY",
        "SCRAM-SHA-512",
        "carol",
        "carol-secret",
        None,
        "Unsupported SASL mechanism",
    ),
    ("TLS to a plaintext listener", "PLAINTEXT", None, None, None, "SSL", "SSL handshake failed"),
]


@pytest.mark.parametrize(
    "what, listener, mechanism, user, password, protocol, words", KCAT_REFUSALS, ids=[r[0] for r in KCAT_REFUSALS]
)
def test_kcat_is_refused_fast_with_its_normal_error(target, what, listener, mechanism, user, password, protocol, words):
    if shutil.which("kcat") is None:  # tools/run-tests installs it; under CI its absence must not pass
        from conftest import reference_unavailable

        reference_unavailable("kcat is not installed")
    args = ["kcat", "-b", target.bootstrap(listener), "-L", "-m", "3"]  # kcat retries until -m seconds
    conf = {"security.protocol": protocol or _protocol(listener)}
    if "SSL" in conf["security.protocol"]:
        conf["ssl.ca.location"] = str(target.certs / "ca.pem")
    if mechanism:
        conf.update({"sasl.mechanisms": mechanism, "sasl.username": user, "sasl.password": password})
    for key, value in conf.items():
        args += ["-X", f"{key}={value}"]
    started = time.monotonic()
    run = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert run.returncode != 0, run.stdout
    assert time.monotonic() - started < FAIL_WITHIN
    assert words in run.stderr, run.stderr
