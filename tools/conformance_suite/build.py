"""A request for a given version from one version-independent description.

A case describes a request once, as nested dicts of snake_case field names
(``{"topics": [{"name": "t", "topic_id": ID, "partitions": [...]}]}``);
:func:`build` keeps the fields the version has and drops the rest, so that one
description serves every version of the API. A name the message does not have
at any version is an error (a typo must not silently shrink a case).
"""

from __future__ import annotations

from kafkawire.protocol import api_by_name, message_class


def build(api_name: str, version: int, data: dict):
    cls = message_class(api_by_name(api_name).request)
    return _struct(cls, cls, data, version)


def _struct(root, cls, data: dict, version: int):
    fields = {f.attr: f for f in cls._fields}
    kwargs = {}
    for attr, value in data.items():
        f = fields.get(attr)
        if f is None:
            raise KeyError(f"{cls.__qualname__} has no field {attr!r}")
        if not f.present(version):
            continue
        if f.struct is not None and value is not None:
            sub = root._classes[f.struct.name]
            if f.is_array:
                value = [_struct(root, sub, item, version) for item in value]
            elif isinstance(value, dict):
                value = _struct(root, sub, value, version)
        kwargs[attr] = value
    return cls(**kwargs)
