# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The `search` tool's backends: offline BM25 over a corpus directory, or an HTTP search API.

Both return passages with titles. A backend failure (HTTP error, timeout, bad JSON) raises
SearchError, which the tool turns into a message for the policy: a search API being down
is something the policy can work around, not a crashed rollout.

HTTP contract (HttpBackend): POST <url> with JSON {"query": str, "top_k": int} and, when an
API key is configured, the header "Authorization: Bearer <key>". Reply 200 with JSON
{"results": [{"title": str, "text": str, "source": str (optional), "score": float (optional)}]},
best first.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Literal, Protocol

import aiohttp
from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator
from rank_bm25 import BM25Okapi

from prorl_gym.config import StrictConfig
from prorl_gym.errors import ProrlError
from prorl_gym.resources.tools import Tool, ToolArgs

MAX_PASSAGE_CHARS = 2000  # per passage shown to the policy, whatever the backend returns
MAX_REPLY_BYTES = 1 << 20


class SearchConfig(StrictConfig):
    backend: Literal["bm25", "http"] = "bm25"
    corpus_dir: str = "data/corpus"  # bm25; relative paths are relative to this server's folder
    passage_words: int = Field(120, ge=20)  # bm25: a passage is a section or paragraphs up to this
    top_k: int = Field(3, ge=1, le=20)
    url: str | None = None  # http
    api_key: str | None = None  # http; e.g. ${oc.env:STEM_SEARCH_API_KEY} in the config
    timeout_s: float = Field(10.0, gt=0)

    @model_validator(mode="after")
    def _http_needs_url(self) -> SearchConfig:
        if self.backend == "http" and not self.url:
            raise ValueError("search.backend http needs search.url")
        return self


class Passage(BaseModel):
    title: str
    text: str
    source: str = ""
    score: float | None = None


class SearchError(ProrlError):
    """The search failed; the message goes back to the policy."""


class SearchBackend(Protocol):
    async def search(self, query: str, top_k: int) -> list[Passage]: ...

    async def close(self) -> None: ...


# ------------------------------------------------------------------ BM25 over a directory

_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "for",
        "from",
        "how",
        "in",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "that",
        "the",
        "this",
        "to",
        "was",
        "what",
        "when",
        "which",
        "with",
    ]
)


def tokenize(text: str) -> list[str]:
    """Lower-case words and numbers, stop words dropped, a plural 's' stripped (waves ~ wave)."""
    words = re.findall(r"[a-z0-9]+", text.lower())
    return [
        w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w for w in words if w not in _STOPWORDS
    ]


def chunk_document(path: Path, passage_words: int) -> list[Passage]:
    """Passages of one .md/.txt file: each '## ' section, split into paragraph groups of up
    to `passage_words` words. The document title is its first '# ' heading (else the name)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    title = next((ln[2:].strip() for ln in lines if ln.startswith("# ")), path.stem.replace("-", " "))
    sections: list[tuple[str, list[str]]] = [(title, [])]
    for line in lines:
        if line.startswith("# "):
            continue
        if line.startswith("## "):
            sections.append((f"{title} - {line[3:].strip()}", []))
        else:
            sections[-1][1].append(line)
    passages = []
    for section_title, body in sections:
        paragraphs = [p.strip() for p in "\n".join(body).split("\n\n") if p.strip()]
        group: list[str] = []
        for paragraph in paragraphs:
            if group and sum(len(p.split()) for p in group) + len(paragraph.split()) > passage_words:
                passages.append(Passage(title=section_title, text="\n\n".join(group), source=path.name))
                group = []
            group.append(paragraph)
        if group:
            passages.append(Passage(title=section_title, text="\n\n".join(group), source=path.name))
    return passages


class Bm25Backend:
    """Built once (at server start) from every .md and .txt file under corpus_dir."""

    def __init__(self, corpus_dir: str | Path, passage_words: int = 120):
        files = sorted(p for p in Path(corpus_dir).rglob("*") if p.suffix in (".md", ".txt") and p.is_file())
        self.passages = [passage for path in files for passage in chunk_document(path, passage_words)]
        if not self.passages:
            raise ValueError(f"search corpus {corpus_dir} has no .md or .txt documents")
        # The title counts too: "Ideal gas law" should find the passage under that heading.
        self._index = BM25Okapi([tokenize(f"{p.title} {p.text}") for p in self.passages])

    def _rank(self, query: str, top_k: int) -> list[Passage]:
        tokens = tokenize(query)
        if not tokens:
            return []
        scores = self._index.get_scores(tokens)
        best = sorted(range(len(scores)), key=lambda i: -scores[i])[:top_k]
        return [
            self.passages[i].model_copy(update={"score": round(float(scores[i]), 3)}) for i in best if scores[i] > 0
        ]

    async def search(self, query: str, top_k: int) -> list[Passage]:
        return await asyncio.to_thread(self._rank, query, top_k)

    async def close(self) -> None:
        pass


# ------------------------------------------------------------------ HTTP search API


class _Reply(BaseModel):
    results: list[Passage]


class HttpBackend:
    def __init__(self, url: str, api_key: str | None = None, timeout_s: float = 10.0):
        self.url = url
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._session: aiohttp.ClientSession | None = None  # made on first use, inside the server's loop

    async def search(self, query: str, top_k: int) -> list[Passage]:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self._timeout, headers=self._headers)
        try:
            async with self._session.post(self.url, json={"query": query, "top_k": top_k}) as response:
                body = await response.content.read(MAX_REPLY_BYTES)
                if response.status != 200:
                    raise SearchError(
                        f"search API returned HTTP {response.status}: {body[:200].decode(errors='replace')}"
                    )
            return _Reply.model_validate(json.loads(body)).results[:top_k]
        except TimeoutError:
            raise SearchError(f"search API did not answer within {self._timeout.total:g}s") from None
        except aiohttp.ClientError as exc:
            raise SearchError(f"search API unreachable: {type(exc).__name__}: {exc}") from None
        except (ValueError, ValidationError) as exc:  # JSONDecodeError is a ValueError
            raise SearchError(f"search API reply is not the expected JSON: {str(exc)[:200]}") from None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def make_backend(config: SearchConfig, base_dir: Path) -> SearchBackend:
    if config.backend == "http":
        return HttpBackend(config.url, config.api_key, config.timeout_s)
    corpus = Path(config.corpus_dir)
    return Bm25Backend(corpus if corpus.is_absolute() else base_dir / corpus, config.passage_words)


def format_passages(passages: list[Passage]) -> str:
    """What the policy reads: numbered passages with title and source."""
    if not passages:
        return "No results. Try other keywords."
    blocks = []
    for i, p in enumerate(passages, 1):
        text = p.text if len(p.text) <= MAX_PASSAGE_CHARS else p.text[:MAX_PASSAGE_CHARS] + " [...]"
        blocks.append(f"[{i}] {p.title}" + (f" ({p.source})" if p.source else "") + f"\n{text}")
    return "\n\n".join(blocks)


class SearchArgs(ToolArgs):
    query: str = Field(description="Keywords or a question to look up.")

    @field_validator("query")
    @classmethod
    def _query(cls, query: str) -> str:
        # Checked here, not as minLength/maxLength: strict function schemas do not allow those keywords.
        if not query.strip() or len(query) > 500:
            raise ValueError("query must be 1 to 500 characters")
        return query


SEARCH = Tool(
    name="search",
    description=(
        "Search the reference library (physics, chemistry, biology, engineering: constants, "
        "definitions, formulas, data tables). Returns the best-matching passages with their titles."
    ),
    args=SearchArgs,
    run="run_search",
    summary="`search` looks up passages in a reference library (constants, definitions, formulas, data tables)",
)
