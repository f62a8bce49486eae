# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Search backends: BM25 over a directory, and the HTTP contract against a real local server."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from resources_servers.stem.search import (
    Bm25Backend,
    HttpBackend,
    SearchConfig,
    SearchError,
    chunk_document,
    format_passages,
    tokenize,
)


@pytest.fixture
def corpus(tmp_path):
    (tmp_path / "gases.md").write_text(
        "# Ideal gases\n\nIntro paragraph about gases.\n\n## Ideal gas law\n\nP V = n R T relates pressure and volume.\n\n"
        "## Temperature\n\nKelvin equals Celsius plus 273.15.\n"
    )
    (tmp_path / "notes.txt").write_text("Enzymes speed up reactions.\n\nMichaelis constant Km.")
    (tmp_path / "image.png").write_bytes(b"\x89PNG")  # not a document
    return tmp_path


def test_documents_are_chunked_into_titled_sections(corpus):
    passages = chunk_document(corpus / "gases.md", passage_words=120)
    assert [p.title for p in passages] == ["Ideal gases", "Ideal gases - Ideal gas law", "Ideal gases - Temperature"]
    assert all(p.source == "gases.md" for p in passages)
    assert chunk_document(corpus / "notes.txt", 120)[0].title == "notes"  # no heading: the file name
    (corpus / "long.md").write_text("# Long\n\n" + "\n\n".join(" ".join(["word"] * 8) for _ in range(3)))
    groups = chunk_document(corpus / "long.md", passage_words=20)
    assert [len(p.text.split()) for p in groups] == [16, 8]  # paragraphs grouped up to the limit, never split


async def test_bm25_ranks_the_matching_section_first(corpus):
    backend = Bm25Backend(corpus)
    assert {p.source for p in backend.passages} == {"gases.md", "notes.txt"}
    found = await backend.search("ideal gas law pressure", top_k=2)
    assert found[0].title == "Ideal gases - Ideal gas law" and found[0].score > 0 and len(found) <= 2
    assert (await backend.search("Michaelis", top_k=3))[0].source == "notes.txt"
    assert await backend.search("the of and", top_k=3) == []  # stop words only
    assert await backend.search("zebra", top_k=3) == []


def test_tokenize_folds_case_and_plurals():
    assert tokenize("The Waves of Gases, 273.15 K") == ["wave", "gase", "273", "15", "k"]


def test_an_empty_corpus_is_a_start_up_error(tmp_path):
    with pytest.raises(ValueError, match="no .md or .txt"):
        Bm25Backend(tmp_path)


def test_http_backend_needs_a_url():
    with pytest.raises(ValueError, match="needs search.url"):
        SearchConfig(backend="http")


class _Api(BaseHTTPRequestHandler):
    """A search API whose behaviour follows the query text."""

    def do_POST(self):
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        query = request["query"]
        if query == "slow":
            time.sleep(1)
        if query == "broken":
            return self._reply(500, b"internal error")
        if query == "garbage":
            return self._reply(200, b"not json")
        if query == "wrong shape":
            return self._reply(200, json.dumps({"hits": []}).encode())
        results = [
            {"title": f"Doc {i}", "text": f"{query} passage {i}", "source": self.headers.get("Authorization", "")}
            for i in range(request["top_k"] + 2)  # more than asked: the backend trims
        ]
        self._reply(200, json.dumps({"results": results}).encode())

    def _reply(self, status, body):
        try:
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client timed out first ("slow"): that is the point of the test

    def log_message(self, *args):
        pass


@pytest.fixture
def api():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Api)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/search"
    server.shutdown()
    server.server_close()


async def test_http_backend_follows_the_contract(api):
    backend = HttpBackend(api, api_key="k123", timeout_s=5)
    try:
        found = await backend.search("entropy", top_k=2)
    finally:
        await backend.close()
    assert [p.title for p in found] == ["Doc 0", "Doc 1"]
    assert found[0].text == "entropy passage 0" and found[0].source == "Bearer k123"


@pytest.mark.parametrize(
    "query,message",
    [
        ("broken", "HTTP 500"),
        ("garbage", "not the expected JSON"),
        ("wrong shape", "not the expected JSON"),
        ("slow", "within 0.5s"),
    ],
)
async def test_http_failures_are_search_errors(api, query, message):
    backend = HttpBackend(api, timeout_s=0.5)
    try:
        with pytest.raises(SearchError, match=message):
            await backend.search(query, top_k=3)
    finally:
        await backend.close()


async def test_an_unreachable_api_is_a_search_error():
    backend = HttpBackend("http://127.0.0.1:9/search", timeout_s=2)
    try:
        with pytest.raises(SearchError, match="unreachable"):
            await backend.search("x", top_k=1)
    finally:
        await backend.close()


def test_results_are_formatted_with_titles_and_trimmed():
    from resources_servers.stem.search import Passage

    text = format_passages([Passage(title="T", text="y" * 5000, source="a.md")])
    assert text.startswith("[1] T (a.md)\n") and text.endswith(" [...]") and len(text) < 2100
    assert format_passages([]) == "No results. Try other keywords."
