"""``kafkawire certs DIR``: a throwaway CA, broker and client certificates for local TLS (see
kafkawire.security.certs)."""

from __future__ import annotations

import argparse


def configure(parser: argparse.ArgumentParser, name: str = "certs") -> None:
    parser.add_argument("directory", help="where to write the CA, broker and client files (created if missing)")
    parser.add_argument("--password", default="kafkawire", help="password of the PKCS12 stores (default kafkawire)")
    parser.add_argument(
        "--host",
        action="append",
        default=[],
        help="another name or address for the broker certificate (repeatable); "
        "localhost, 127.0.0.1 and ::1 are always in it",
    )
    parser.add_argument("--client-cn", default="client", help="common name of the client certificate")
    parser.add_argument("--days", type=int, default=365, help="validity (default 365)")


def run(args) -> int:
    from kafkawire.security.certs import create

    files = create(
        args.directory, password=args.password, hosts=tuple(args.host), client_cn=args.client_cn, days=args.days
    )
    for name in sorted(files):
        print(files[name])
    print("for development only: anyone with ca-key.pem can mint certificates this CA vouches for")
    return 0
