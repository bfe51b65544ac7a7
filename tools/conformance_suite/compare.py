"""Field-by-field differences between two normalised answers."""

from __future__ import annotations

from dataclasses import dataclass

# Array elements are named by the first of these keys they carry, so that a path reads
# ``topics[events].partitions[0].error_code`` rather than ``topics[3].partitions[0].error_code``.
_ELEMENT_KEYS = (
    "name",
    "topic",
    "topic_name",
    "group_id",
    "resource_name",
    "partition_index",
    "partition",
    "api_key",
    "member_id",
    "key",
    "node_id",
    "broker_id",
)


@dataclass(frozen=True)
class Difference:
    path: str
    kafkawire: object
    kafka: object


def differences(kafkawire, kafka, path: str = "") -> list[Difference]:
    out: list[Difference] = []
    _diff(kafkawire, kafka, path, out)
    return out


def _label(item, index: int) -> str:
    if isinstance(item, dict):
        for key in _ELEMENT_KEYS:
            if key in item and isinstance(item[key], (str, int)):
                return str(item[key])
    return str(index)


def _diff(a, b, path, out):
    if isinstance(a, dict) and isinstance(b, dict):
        for key in list(a) + [k for k in b if k not in a]:
            sub = f"{path}.{key}" if path else key
            if key not in a:
                out.append(Difference(sub, "<absent>", b[key]))
            elif key not in b:
                out.append(Difference(sub, a[key], "<absent>"))
            else:
                _diff(a[key], b[key], sub, out)
        return
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b) and not (a and isinstance(a[0], dict)) and not (b and isinstance(b[0], dict)):
            out.append(Difference(path, a, b))  # lists of scalars: one difference, both lists shown
            return
        labels_a = [_label(x, i) for i, x in enumerate(a)]
        labels_b = [_label(x, i) for i, x in enumerate(b)]
        if len(set(labels_a)) == len(a) and len(set(labels_b)) == len(b) and labels_a != labels_b:
            # elements matched by their key: report which are missing on either side, and a different order
            common = [x for x in labels_a if x in labels_b]
            if common != [x for x in labels_b if x in labels_a]:
                out.append(Difference(f"{path}.<order>", labels_a, labels_b))
            index_b = dict(zip(labels_b, b))
            for label, item in zip(labels_a, a):
                if label in index_b:
                    _diff(item, index_b[label], f"{path}[{label}]", out)
                else:
                    out.append(Difference(f"{path}[{label}]", "<present>", "<absent>"))
            for label in labels_b:
                if label not in labels_a:
                    out.append(Difference(f"{path}[{label}]", "<absent>", "<present>"))
            return
        for i in range(max(len(a), len(b))):
            label = labels_a[i] if i < len(a) else labels_b[i]
            if i >= len(a):
                out.append(Difference(f"{path}[{label}]", "<absent>", "<present>"))
            elif i >= len(b):
                out.append(Difference(f"{path}[{label}]", "<present>", "<absent>"))
            else:
                _diff(a[i], b[i], f"{path}[{label}]", out)
        return
    if type(a) is not type(b) or a != b:
        out.append(Difference(path or "<answer>", a, b))
