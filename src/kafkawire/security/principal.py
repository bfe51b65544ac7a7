"""The principal of a TLS client: its certificate's subject as an RFC 2253 name, mapped by Kafka's
``ssl.principal.mapping.rules`` (``RULE:pattern/replacement/[L|U]`` entries and ``DEFAULT``, tried in
order; the first whose pattern matches the whole name gives the principal, ``DEFAULT`` the name itself)."""

from __future__ import annotations

import re

import msgspec

_RULE = re.compile(r"\s*(?:(DEFAULT)|RULE:((?:\\/|[^/])*)/((?:\\/|[^/])*)/([LU])?)\s*(?:,|$)")
# short names in the order RFC 2253 and Java's X500Principal use them
_SHORT = {
    "commonName": "CN",
    "organizationalUnitName": "OU",
    "organizationName": "O",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "countryName": "C",
    "domainComponent": "DC",
    "userId": "UID",
    "streetAddress": "STREET",
}


class Rule(msgspec.Struct, frozen=True):
    pattern: re.Pattern | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""


def parse_rules(text: str, key: str = "ssl.principal.mapping.rules") -> list[Rule]:
    """The rules of a ``ssl.principal.mapping.rules`` value; ``ValueError`` naming ``key``."""
    rules: list[Rule] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _RULE.match(text, pos)
        if not m or m.end() == pos:
            raise ValueError(f"{key}: cannot read a rule at {text[pos:]!r} (RULE:pattern/replacement/[LU] or DEFAULT)")
        if m.group(1):
            rules.append(Rule(None))
        else:
            try:
                pattern = re.compile(m.group(2).replace("\\/", "/"))
            except re.error as exc:
                raise ValueError(f"{key}: bad pattern {m.group(2)!r}: {exc}") from None
            # Java's $1 becomes Python's \g<1>
            replacement = re.sub(r"\$(\d+)", r"\\g<\1>", m.group(3).replace("\\/", "/"))
            rules.append(Rule(pattern, replacement, m.group(4) or ""))
        pos = m.end()
    return rules or [Rule(None)]


def apply_rules(rules: list[Rule], name: str) -> str:
    for rule in rules:
        if rule.pattern is None:
            return name
        m = rule.pattern.fullmatch(name)
        if m:
            out = m.expand(rule.replacement)
            return out.lower() if rule.case == "L" else out.upper() if rule.case == "U" else out
    # as Kafka: a name no rule maps is refused (the connection closes), not let in under its raw name
    raise ValueError(f"no ssl.principal.mapping.rules rule applies to {name!r}")


def subject_name(peercert: dict) -> str:
    """RFC 2253 name of ``ssl.SSLSocket.getpeercert()``'s subject (most specific part first)."""
    parts = []
    for rdn in reversed(peercert.get("subject", ())):
        parts.append("+".join(f"{_SHORT.get(k, k)}={_escape(v)}" for k, v in rdn))
    return ",".join(parts)


def _escape(value: str) -> str:
    out = re.sub(r'([,+"\\<>;=])', r"\\\1", value)
    if out.startswith((" ", "#")):
        out = "\\" + out
    return out[:-1] + "\\ " if out.endswith(" ") and len(out) > 1 else out
