"""The Python helper for processor functions (:mod:`s3ingest_processor`): the decorator's
request checks and answers, and ``Content`` reading a presigned URL over HTTP (a loopback
server that enforces ``If-Match`` as S3 does), superseded on 412 and 404."""

from __future__ import annotations

import ast
import hashlib
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jsonschema
import pytest

import s3ingest_processor
from s3ingest_processor import (
    Change,
    Content,
    ContentError,
    Superseded,
    UnsupportedRequest,
    processor,
    schema,
)

BODY = b"line one\nline two\n" * 1000
ETAG = hashlib.md5(BODY).hexdigest()
RESPONSE = jsonschema.Draft202012Validator(schema("response-v1.json"))

#: The helper reads a presigned URL over HTTP: here from a server on the loopback interface,
#: the only host these tests may connect to (tests/unit/conftest.py disables sockets).
pytestmark = pytest.mark.allow_hosts(["127.0.0.1"])


class Store(BaseHTTPRequestHandler):
    """``GET /obj``: 412 unless ``If-Match`` names :data:`ETAG`; ``/gone``: 404;
    ``/expired``: 403. Records the headers of each request."""

    seen: list[dict[str, str]] = []

    def do_GET(self) -> None:
        Store.seen.append(dict(self.headers))
        if self.path.startswith("/gone"):
            return self._status(404)
        if self.path.startswith("/expired"):
            return self._status(403)
        if self.path.startswith("/short"):  # promises more than it sends, then closes
            self.send_response(200)
            self.send_header("Content-Length", str(len(BODY)))
            self.end_headers()
            self.wfile.write(BODY[:100])
            self.close_connection = True
            return None
        if self.headers.get("If-Match") not in (None, f'"{ETAG}"'):
            return self._status(412)
        self.send_response(200)
        self.send_header("Content-Length", str(len(BODY)))
        self.send_header("ETag", f'"{ETAG}"')
        self.end_headers()
        self.wfile.write(BODY)

    def _status(self, code: int) -> None:
        self.send_response(code)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Store)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def _request(url: str | None, headers: dict[str, str] | None = None, **change: Any) -> Any:
    base = {
        "id": "c" * 32,
        "bucket": "landing",
        "key": "in/a.txt",
        "kind": "created" if url else "removed",
        "sequencer": "00AA",
        "versionId": None,
        "etag": ETAG,
        "size": len(BODY),
        "source": "live",
        "eventName": "Object Created/PutObject",
        "token": 3,
        "leaseDeadline": 1_700_000_000_000,
    }
    content = None if url is None else {"url": url, "headers": headers or {}, "expiresAt": 1}
    return {"version": "1", "processor": "p", "change": base | change, "content": content}


def test_the_handler_gives_a_typed_change_and_reads_with_the_required_headers(
    server: str,
) -> None:
    got: dict[str, Any] = {}

    @processor
    def fn(change: Change, content: Content | None) -> None:
        assert content is not None
        got["change"], got["read"] = change, content.read()
        got["chunks"] = list(content.stream(4096))

    Store.seen.clear()
    answer = fn(_request(f"{server}/obj", {"If-Match": f'"{ETAG}"'}), None)
    assert answer == {"status": "done"}
    RESPONSE.validate(answer)
    change = got["change"]
    assert (change.change_id, change.key, change.kind, change.token) == (
        "c" * 32,
        "in/a.txt",
        "created",
        3,
    )
    assert (change.version_id, change.etag, change.processor) == (None, ETAG, "p")
    assert change.lease_deadline_ms == 1_700_000_000_000
    assert change.lease_remaining_ms(now_ms=1_699_999_999_000) == 1_000
    assert got["read"] == BODY
    assert b"".join(got["chunks"]) == BODY and max(map(len, got["chunks"])) <= 4096
    assert len(got["chunks"]) == -(-len(BODY) // 4096)
    assert [h.get("If-Match") for h in Store.seen] == [f'"{ETAG}"'] * 2


def _read(change: Change, content: Content | None) -> None:
    assert content is not None
    content.read()


def _stream(change: Change, content: Content | None) -> None:
    assert content is not None
    list(content.stream())


def test_a_412_on_the_read_answers_superseded(server: str) -> None:
    handler = processor(_read)
    answer = handler(_request(f"{server}/obj", {"If-Match": '"0ld"'}), None)
    assert answer["status"] == "superseded" and "412" in answer["detail"]
    RESPONSE.validate(answer)


def test_a_404_on_the_stream_answers_superseded(server: str) -> None:
    handler = processor(_stream)
    assert handler(_request(f"{server}/gone?versionId=v1"), None)["status"] == "superseded"


def test_the_function_may_answer_superseded_itself_and_removals_have_no_content() -> None:
    seen: list[Any] = []

    def fn(change: Change, content: Content | None) -> None:
        seen.append(content)
        raise Superseded()

    assert processor(fn)(_request(None), None) == {"status": "superseded"}
    assert seen == [None]


def test_other_failures_propagate_as_function_errors(server: str) -> None:
    handler = processor(_read)
    with pytest.raises(ContentError, match="HTTP 403"):
        handler(_request(f"{server}/expired"), None)

    def broken(change: Change, content: Content | None) -> None:
        raise RuntimeError("warehouse down")

    with pytest.raises(RuntimeError, match="warehouse down"):
        processor(broken)(_request(None), None)


def test_a_body_cut_short_is_a_content_error(server: str) -> None:
    with pytest.raises(ContentError, match="IncompleteRead"):
        Content(f"{server}/short").read()
    with pytest.raises(ContentError, match="IncompleteRead"):
        list(Content(f"{server}/short").stream(1 << 20))


def test_the_sidecar_module_imports_without_the_helper(monkeypatch: pytest.MonkeyPatch) -> None:
    """The in-process processor (``sidecar:process``) loads in a bundle that lacks
    ``s3ingest_processor``; only the function's handler needs it."""
    import importlib

    monkeypatch.setitem(sys.modules, "s3ingest_processor", None)  # import fails
    monkeypatch.delitem(sys.modules, "s3ingest_examples.sidecar", raising=False)
    fresh = importlib.import_module("s3ingest_examples.sidecar")
    assert callable(fresh.process)
    with pytest.raises(ImportError):
        fresh.handler({}, None)


def test_an_unreachable_url_is_a_content_error() -> None:
    content = Content("http://127.0.0.1:9/nothing", timeout=2)
    with pytest.raises(ContentError):
        content.read()


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        ({"version": "2", "change": {}}, "version '2' is not supported"),
        ({"change": {}}, "version None is not supported"),
        ([], "not a JSON object"),
        ({"version": "1"}, "no 'change' object"),
        ({"version": "1.3", "change": {"id": "x", "bucket": "b", "key": "k"}}, "change.kind"),
        ("", "not a JSON object"),
        (_request(None) | {"content": {"url": "http://x"}}, "removed change is not null"),
        (_request("http://x") | {"content": None}, "created change is not an object"),
    ],
)
def test_a_request_it_cannot_understand_is_refused_clearly(request_: Any, message: str) -> None:
    handler = processor(lambda change, content: None)
    with pytest.raises(UnsupportedRequest, match=message):
        handler(request_, None)


def test_a_minor_version_of_1_is_accepted_and_unknown_fields_ignored() -> None:
    request = _request(None) | {"version": "1.4", "future": True}
    request["change"]["added"] = 1
    assert processor(lambda change, content: None)(request, None) == {"status": "done"}


def test_the_decorator_takes_options_and_keeps_the_function() -> None:
    def fn(change: Change, content: Content | None) -> None:
        assert content is not None and content.timeout == 5

    handler = processor(read_timeout=5)(fn)
    assert getattr(handler, "__wrapped__", None) is fn and getattr(handler, "__name__", "") == "fn"
    assert handler(_request("http://127.0.0.1:9/x"), None) == {"status": "done"}


def test_the_package_uses_the_standard_library_only() -> None:
    root = Path(s3ingest_processor.__file__).parent
    imported: set[str] = set()
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                imported.add(node.module.split(".")[0])
    assert imported, "no imports found"
    assert imported - {"__future__", "s3ingest_processor"} <= sys.stdlib_module_names
    assert sorted(p.name for p in (root / "schema").glob("*.json")) == [
        "request-v1.json",
        "response-v1.json",
    ]


def test_the_distribution_ships_the_package_and_its_schemas() -> None:
    """``pyproject.toml`` finds ``s3ingest_processor`` under ``functions/`` (``s3ingest*``) and
    ships the schema files as package data (a built wheel holds
    ``s3ingest_processor/schema/request-v1.json``)."""
    import fnmatch
    import tomllib

    root = Path(__file__).resolve().parents[2]
    setuptools_config = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]
    find = setuptools_config["packages"]["find"]
    assert "functions" in find["where"]
    assert (root / "functions" / "s3ingest_processor" / "__init__.py").is_file()
    assert any(fnmatch.fnmatch("s3ingest_processor", pattern) for pattern in find["include"])
    globs = setuptools_config["package-data"]["s3ingest_processor"]
    package = root / "functions" / "s3ingest_processor"
    shipped = {p.relative_to(package).as_posix() for g in globs for p in package.glob(g)}
    assert shipped == {"schema/request-v1.json", "schema/response-v1.json"}
