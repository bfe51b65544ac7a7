"""ApiVersions negotiation: per API, the highest version both sides support."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

VersionRanges = Mapping[int, tuple[int, int]]


def ranges_from_response(api_keys: Iterable) -> dict[int, tuple[int, int]]:
    """ApiVersionsResponse.api_keys -> {api_key: (min, max)}."""
    return {k.api_key: (k.min_version, k.max_version) for k in api_keys}


def pick_version(ours: tuple[int, int], theirs: tuple[int, int]) -> int | None:
    lo = max(ours[0], theirs[0])
    hi = min(ours[1], theirs[1])
    return hi if lo <= hi else None


def negotiate(ours: VersionRanges, theirs: VersionRanges) -> dict[int, int]:
    """{api_key: version} for every API both sides support at some common version."""
    out = {}
    for key, our_range in ours.items():
        their_range = theirs.get(key)
        if their_range is None:
            continue
        version = pick_version(our_range, their_range)
        if version is not None:
            out[key] = version
    return out


def supported_ranges(include_unstable: bool = False) -> dict[int, tuple[int, int]]:
    """What kafkawire's protocol core can speak: every version of every API in the spec."""
    from .apis import all_apis

    return {
        k: (a.min_version, a.max_version if include_unstable else a.max_stable_version) for k, a in all_apis().items()
    }
