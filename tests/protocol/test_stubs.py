"""The typed stub of the message classes (``protocol/messages.pyi``): fresh, true to the runtime
classes, and usable by a type checker.

The stub is written by ``tools/gen_stubs.py`` from the committed spec; these tests fail while it is
stale, when a class or field it declares differs from the class ``messages.py`` builds, when a value
the codec produces is not of the declared type, and when mypy cannot use it to find a wrong field type.
"""

from __future__ import annotations

import ast
import importlib.util
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from kafkawire.protocol import Message, Struct, message_class
from kafkawire.protocol.schema import message_names

from .strategies import all_pairs, messages

ROOT = Path(__file__).resolve().parents[2]
STUB = ROOT / "src" / "kafkawire" / "protocol" / "messages.pyi"
NAMES = message_names(include_tests=True, include_records=True)


@pytest.fixture(scope="module")
def generator():
    spec = importlib.util.spec_from_file_location("gen_stubs", ROOT / "tools" / "gen_stubs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_stub_is_fresh(generator):
    assert generator.render() == STUB.read_text(), "protocol/messages.pyi is stale: run python tools/gen_stubs.py"


def test_committed_api_keys_and_error_codes_are_fresh(generator):
    for path, text in generator.outputs(STUB).items():
        assert path.read_text() == text, f"protocol/{path.name} is stale: run python tools/gen_stubs.py"


def test_api_key_enum_names_every_api_of_the_registry():
    from kafkawire.protocol import ApiKey, all_apis

    # every capital starts a word in Kafka's API names (no acronyms), as in its ApiKeys constants
    upper = {
        key: "".join("_" + c if c.isupper() and i else c for i, c in enumerate(info.name)).upper()
        for key, info in all_apis().items()
    }
    assert {int(k): k.name for k in ApiKey} == upper
    assert ApiKey.PRODUCE == 0 and ApiKey.API_VERSIONS == 18 and ApiKey(74).name == "LIST_CONFIG_RESOURCES"


def test_error_constants_are_the_error_table():
    from kafkawire.protocol import error_codes, errors
    from kafkawire.protocol.schema import error_table

    assert [(getattr(error_codes, name), name) for _, name, _, _ in error_table()] == [
        (code, name) for code, name, _, _ in error_table()
    ]
    assert error_codes.__all__ == [name for _, name, _, _ in error_table()]
    assert errors.NOT_LEADER_OR_FOLLOWER == 6 and errors.UNKNOWN_SERVER_ERROR == -1
    with pytest.raises(AttributeError):
        errors.NOT_LEADERR  # noqa: B018


def test_check_mode_reports_a_stale_stub(tmp_path, generator):
    out = tmp_path / "messages.pyi"
    assert generator.main(["--out", str(out), "--check"]) == 1  # missing
    assert generator.main(["--out", str(out)]) == 0
    assert generator.main(["--out", str(out), "--check"]) == 0
    out.write_text(out.read_text().replace("    producer_id: int", "    producer_id: str", 1))
    assert generator.main(["--out", str(out), "--check"]) == 1
    assert generator.main(["--out", str(out)]) == 0
    keys = tmp_path / "api_keys.py"
    keys.write_text(keys.read_text().replace("PRODUCE = 0", "PRODUCE = 1"))
    assert generator.main(["--out", str(out), "--check"]) == 1
    assert generator.main(["--out", str(out)]) == 0
    codes = tmp_path / "error_codes.py"
    codes.write_text(codes.read_text().replace("\nNONE = 0\n", "\n"))
    assert generator.main(["--out", str(out), "--check"]) == 1


def test_py_typed_marker_ships_with_the_package():
    import tomllib

    assert (ROOT / "src" / "kafkawire" / "py.typed").is_file()
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "py.typed" in package_data["kafkawire"]
    assert "protocol/messages.pyi" in package_data["kafkawire"]


# -- the stub against the runtime classes -------------------------------------------------------------


def _stub_classes() -> dict[str, tuple[dict[str, str], dict[str, dict[str, str]], list[str]]]:
    """message name -> (its field annotations, nested class name -> field annotations, __init__ keywords)."""

    def fields(node: ast.ClassDef) -> dict[str, str]:
        return {
            s.target.id: ast.unparse(s.annotation)
            for s in node.body
            if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
        }

    def init_keywords(node: ast.ClassDef) -> list[str]:
        init = next(s for s in node.body if isinstance(s, ast.FunctionDef) and s.name == "__init__")
        return [a.arg for a in init.args.kwonlyargs]

    out = {}
    for node in ast.parse(STUB.read_text()).body:
        if isinstance(node, ast.ClassDef) and node.name not in ("Struct", "Message"):
            nested = {s.name: fields(s) for s in node.body if isinstance(s, ast.ClassDef)}
            out[node.name] = (fields(node), nested, init_keywords(node))
    return out


STUB_CLASSES = _stub_classes()


def test_the_stub_declares_every_message_of_the_spec():
    assert list(STUB_CLASSES) == list(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_stub_classes_and_fields_are_the_runtime_ones(name):
    cls = message_class(name)
    root_fields, nested, keywords = STUB_CLASSES[name]
    assert tuple(root_fields) == cls._attrs
    assert keywords == [*cls._attrs, "_unknown_tags"]
    runtime_nested = {n: c for n, c in cls._classes.items() if c is not cls}
    assert set(nested) == set(runtime_nested)
    for struct_name, struct_fields in nested.items():
        assert getattr(cls, struct_name) is runtime_nested[struct_name]
        assert tuple(struct_fields) == runtime_nested[struct_name]._attrs, f"{name}.{struct_name}"


def _conforms(value, annotation: str, root: str) -> bool:
    """Whether a value is of a stub annotation (the few forms the generator writes)."""
    alternatives = [a.strip() for a in annotation.split("|")] if not annotation.startswith("list[") else None
    if annotation.startswith("list[") and annotation.endswith("] | None"):
        return value is None or _conforms(value, annotation[: -len(" | None")], root)
    if alternatives is None:  # list[X]
        inner = annotation[len("list[") : -1]
        return type(value) is list and all(_conforms(v, inner, root) for v in value)
    for alt in alternatives:
        if alt == "None" and value is None:
            return True
        if alt in ("int", "str", "bytes", "float", "bool", "bytearray", "memoryview") and type(value).__name__ == alt:
            return True
        if alt == "UUID" and type(value) is uuid.UUID:
            return True
        if alt.startswith(f"{root}.") and type(value) is getattr(message_class(root), alt.split(".", 1)[1]):
            return _conforms_struct(value, root)
    return False


def _conforms_struct(obj: Struct, root: str) -> bool:
    root_fields, nested, _ = STUB_CLASSES[root]
    declared = root_fields if isinstance(obj, Message) else nested[type(obj).__name__]
    for attr, annotation in declared.items():
        value = getattr(obj, attr)
        assert _conforms(value, annotation, root), f"{type(obj).__qualname__}.{attr} = {value!r} is not {annotation}"
    return True


def test_conformance_check_rejects_values_of_other_types():
    # the checker the next two tests rely on can say no
    assert not _conforms("1", "int", "X")
    assert not _conforms(True, "int", "X")
    assert not _conforms(None, "list[int]", "X")
    assert not _conforms(["a"], "list[int] | None", "X")
    assert not _conforms(memoryview(b""), "bytes", "X")
    assert _conforms(memoryview(b""), "bytes | bytearray | memoryview", "X")
    request = message_class("ApiVersionsRequest")(client_software_name=None)
    with pytest.raises(AssertionError, match="client_software_name"):
        _conforms_struct(request, "ApiVersionsRequest")


@pytest.mark.parametrize("name", NAMES)
def test_defaults_are_of_the_declared_types(name):
    cls = message_class(name)
    assert _conforms_struct(cls(), name)
    for struct_name in STUB_CLASSES[name][1]:
        assert _conforms_struct(getattr(cls, struct_name)(), name)


PAIRS = all_pairs()


@settings(
    max_examples=400,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.data())
def test_decoded_values_are_of_the_declared_types(data):
    name, version = data.draw(st.sampled_from(PAIRS))
    cls = message_class(name)
    msg = data.draw(messages(cls, version))
    assert _conforms_struct(cls.decode(msg.encode(version), version), name)


# -- a type checker reading the stub -----------------------------------------------------------------

GOOD = """\
import uuid
from kafkawire.protocol import message_class
from kafkawire.protocol.messages import ApiVersionsRequest, FetchRequest, MetadataResponse

request = ApiVersionsRequest(client_software_name="app", client_software_version="1.0")
name: str = request.client_software_name
cluster: str | None = request.cluster_id
data: bytes = request.encode(3)
back: ApiVersionsRequest = ApiVersionsRequest.decode(data, 3)
as_dict: dict = back.to_dict()
topic = FetchRequest.FetchTopic(topic_id=uuid.uuid4(), partitions=[FetchRequest.FetchPartition(partition=0)])
fetch = FetchRequest(max_wait_ms=500, topics=[topic])
first: int = fetch.topics[0].partitions[0].partition
response = MetadataResponse.decode(b"", 12)
for t in response.topics:
    topic_name: str | None = t.name
    topic_id: uuid.UUID = t.topic_id
cls = message_class("ApiVersionsRequest")
made: ApiVersionsRequest = cls(client_software_name="x")
from kafkawire.protocol import ApiKey, errors  # noqa: E402
code: int = errors.NOT_LEADER_OR_FOLLOWER
key: int = ApiKey.PRODUCE
"""

BAD = """\
from kafkawire.protocol.messages import ApiVersionsRequest, FetchRequest

request = ApiVersionsRequest(client_software_name=3)
request.node_id = "one"
size: str = request.encode(3)
FetchRequest(max_wait_ms=500, topics=[FetchRequest.FetchPartition()])
FetchRequest(max_wait=500)
request.no_such_field
from kafkawire.protocol import ApiKey, errors  # noqa: E402
errors.NOT_LEADERR
ApiKey.PRODUCEE
"""

BAD_ERRORS = {  # line -> what mypy must say there
    3: 'Argument "client_software_name" to "ApiVersionsRequest" has incompatible type "int"; expected "str"',
    4: 'Incompatible types in assignment (expression has type "str", variable has type "int")',
    5: 'Incompatible types in assignment (expression has type "bytes", variable has type "str")',
    6: 'List item 0 has incompatible type "FetchPartition"; expected "FetchTopic"',
    7: 'Unexpected keyword argument "max_wait" for "FetchRequest"',
    8: '"ApiVersionsRequest" has no attribute "no_such_field"',
    10: 'Module has no attribute "NOT_LEADERR"',
    11: '"type[ApiKey]" has no attribute "PRODUCEE"',
}


@pytest.fixture(scope="module")
def mypy_results(tmp_path_factory):
    mypy = shutil.which("mypy", path=str(Path(sys.executable).parent))
    if mypy is None:
        pytest.fail("mypy is not installed: it is in the test extra (pip install -e '.[test]')")
    work = tmp_path_factory.mktemp("mypy")
    (work / "good.py").write_text(GOOD)
    (work / "bad.py").write_text(BAD)
    result = subprocess.run(
        [
            mypy,
            "--no-error-summary",
            "--show-error-codes",
            "--hide-error-context",
            "--no-color-output",
            "--follow-imports",
            "silent",  # only the two programs' errors: kafkawire's own are tests/quality's
            "--cache-dir",
            str(work / ".cache"),
            "--python-version",
            "3.11",
            "good.py",
            "bad.py",
        ],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=240,
        env={"MYPYPATH": str(ROOT / "src"), "PATH": str(Path(sys.executable).parent)},
    )
    assert result.returncode in (0, 1), result.stdout + result.stderr  # 2: mypy itself failed
    by_file: dict[str, dict[int, list[str]]] = {"good.py": {}, "bad.py": {}}
    for line in result.stdout.splitlines():
        path, lineno, kind, message = line.split(":", 3)
        if kind.strip() == "error":
            by_file[path].setdefault(int(lineno), []).append(message.strip())
    return by_file


def test_mypy_accepts_a_program_using_the_message_classes(mypy_results):
    assert mypy_results["good.py"] == {}


def test_mypy_reports_wrong_field_types_unknown_fields_and_wrong_structs(mypy_results):
    reported = mypy_results["bad.py"]
    assert sorted(reported) == sorted(BAD_ERRORS), reported
    for line, expected in BAD_ERRORS.items():
        assert any(expected in message for message in reported[line]), (line, reported[line])
