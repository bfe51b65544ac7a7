"""The ``kafkawire`` command: one sub-command per module, imported only when used."""

from __future__ import annotations

import argparse
import gc
import importlib
import sys

# sub-command -> module in kafkawire.cli providing configure(parser) and run(args) -> int
COMMANDS = {
    "serve": ("serve", "run the broker (default: 127.0.0.1:9092, data in ./kafkawire-data)"),
    "check": ("check", "verify every batch's CRC and the indexes of a data directory, offline"),
    "logs": ("logs", "show what a data directory holds, or decode its files (--dump), offline"),
    "decode": ("decode", "annotate the bytes of a request or response"),
    "pcap": ("pcap", "dissect Kafka traffic in a pcap/pcapng capture"),
    "certs": ("certs", "create a throwaway CA, broker and client certificates for local TLS development"),
    "proxy": ("proxy", "a transparent Kafka proxy that shows every request and response passing"),
    "produce": ("client_commands", "produce records from stdin to a topic"),
    "consume": ("client_commands", "consume records from a topic to stdout"),
    "topics": ("client_commands", "list, create, delete and describe topics"),
    "apis": ("client_commands", "show the API versions a broker supports"),
}


def build_parser(argv: list[str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kafkawire", description="Kafka's wire protocol, broker and tools")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    wanted = next((a for a in argv if not a.startswith("-")), None)
    # a command given: the others' parsers would only serve the top-level help, not asked for unless -h comes
    # first (their help lines cost a parser and a help formatter each at every start)
    only_wanted = wanted in COMMANDS and not {"-h", "--help"} & set(argv[: argv.index(wanted)])
    for name, (module, help_text) in COMMANDS.items():
        if only_wanted and name != wanted:
            continue
        p = sub.add_parser(name, help=help_text, description=help_text)
        if name == wanted:  # only the chosen command's module is imported
            mod = importlib.import_module(f"kafkawire.cli.{module}")
            mod.configure(p, name)
            p.set_defaults(_run=mod.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # No cycle collections while the command's module is imported: what an import makes (modules, classes,
    # functions) lives as long as the process, so the ~30 collections the serve command's imports would run
    # (asyncio's among them) find nothing to free. `kafkawire serve` keeps them off until it is listening.
    collecting = gc.isenabled()
    gc.disable()
    try:
        parser = build_parser(argv)
    finally:
        if collecting:
            gc.enable()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    try:
        return int(args._run(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
