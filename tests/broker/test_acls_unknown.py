"""ACL requests naming the UNKNOWN value (0) of an enum: Kafka 4.4 cannot parse them and closes the
connection; kafkawire does the same (and logs why). Other codes get SECURITY_DISABLED."""

from __future__ import annotations

import pytest

from kafkawire.protocol import errors, message_class

from .conftest import RawClient
from .reference import reference_client  # noqa: F401  (a fixture, used by name)

D, C, X = (message_class(n) for n in ("DescribeAclsRequest", "CreateAclsRequest", "DeleteAclsRequest"))
GOOD = {"rt": 2, "pt": 3, "op": 3, "perm": 3}


def _requests(g):
    return [
        D(
            resource_type_filter=g["rt"],
            pattern_type_filter=g["pt"],
            operation=g["op"],
            permission_type=g["perm"],
            resource_name_filter=None,
            principal_filter=None,
            host_filter=None,
        ),
        C(
            creations=[
                C.AclCreation(
                    resource_type=2,
                    resource_name="t",
                    resource_pattern_type=3,
                    principal="User:a",
                    host="*",
                    operation=3,
                    permission_type=3,
                ),
                C.AclCreation(
                    resource_type=g["rt"],
                    resource_name="t",
                    resource_pattern_type=g["pt"],
                    principal="User:a",
                    host="*",
                    operation=g["op"],
                    permission_type=g["perm"],
                ),
            ]
        ),
        X(
            filters=[
                X.DeleteAclsFilter(
                    resource_type_filter=g["rt"],
                    pattern_type_filter=g["pt"],
                    operation=g["op"],
                    permission_type=g["perm"],
                    resource_name_filter=None,
                    principal_filter=None,
                    host_filter=None,
                )
            ]
        ),
    ]


VARIANTS = {"valid": GOOD, "operation-99": {**GOOD, "op": 99}, **{f"{k}-unknown": {**GOOD, k: 0} for k in GOOD}}


def _outcomes(address, g, version):
    """Per request: "closed", or the error codes of the answer."""
    out = []
    for body in _requests(g):
        c = RawClient(address)
        try:
            try:
                res = c.call(body, version)
            except (ConnectionError, OSError):  # EOF or reset: closed without an answer
                out.append("closed")
                continue
            codes = (
                [getattr(res, "error_code", None)]
                + [r.error_code for r in getattr(res, "results", [])]
                + [r.error_code for r in getattr(res, "filter_results", [])]
            )
            out.append(codes)
        finally:
            c.close()
    return out


@pytest.mark.parametrize(
    "variant,version", [(name, v) for name in VARIANTS for v in range(4) if not (v == 0 and name == "pt-unknown")]
)  # v0: no pattern type
def test_unknown_enum_values_close_the_connection(broker, variant, version, caplog):
    got = _outcomes(broker.address, VARIANTS[variant], version)
    if variant.endswith("-unknown"):
        assert got == ["closed"] * 3
        assert any("names UNKNOWN" in r.getMessage() for r in caplog.records)
    else:
        sd = errors.SECURITY_DISABLED
        assert got == [[sd], [None, sd, sd], [None, sd]]


def test_as_the_reference_kafka(broker, reference_kafka):
    for name, g in VARIANTS.items():
        for version in (1, 3):
            ours = _outcomes(broker.address, g, version)
            theirs = _outcomes((reference_kafka.host, reference_kafka.port), g, version)
            assert ours == theirs, (name, version)
