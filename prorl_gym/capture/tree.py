# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The calls of a capture as one tree of token ids (a radix tree), so a harness that rewrites its
history (compaction, subagents, edits, retries) still yields every generated token once.

Each call's prompt ids are walked from the root, through prompt and generated tokens alike, as far
as they match what is already in the tree (by ids, never by text); the node where they leave it is
split there, the rest of the prompt becomes a node of its own, and the call's generation is always a
new node, never merged with another (two calls that sampled the same ids keep two nodes). So:
- the path from the root to a call's generation is exactly the prompt the model saw for it;
- every generated token is in the tree once, with its log-prob and the call that sampled it;
- a call's `parent` is the call that sampled the last generated token its prompt shares (none: the
  call starts a conversation of its own, a root; it may share a system prompt, never a generation).

Pure bookkeeping, no I/O; export.py turns a tree into a trainer's branches.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import BaseModel

CHUNK = 512  # tokens compared as one slice before a mismatch is looked for token by token


class TreeNode(BaseModel):
    """A run of tokens with no branch inside: prompt tokens (`call` None) or one call's generation."""

    parent: int | None  # its node index (None: it starts at the root)
    tokens: list[int]
    call: int | None = None  # the call that sampled these tokens; None: prompt tokens (the model saw them)
    log_probs: list[float] | None = None  # with `call`: one per token, as sampled


@dataclass
class Placement:
    """Where a call went into the tree."""

    node: int  # the node its generation ends at
    shared: int  # leading prompt tokens that were in the tree already
    parent: int | None  # the call that sampled the last generated token of that shared prefix


@dataclass
class _Node:
    parent: int | None
    tokens: list[int]
    call: int | None
    log_probs: list[float] | None
    children: list[int] = field(default_factory=list)


def common_prefix(a: list[int], b: list[int], at: int = 0) -> int:
    """How many of `a`'s tokens equal `b`'s from position `at` on (slices first: C speed)."""
    n, done = min(len(a), len(b) - at), 0
    while done < n:
        step = min(CHUNK, n - done)
        if a[done : done + step] == b[at + done : at + done + step]:
            done += step
            continue
        while a[done] == b[at + done]:
            done += 1
        return done
    return done


class TokenTree:
    def __init__(self) -> None:
        self._nodes: list[_Node] = []
        self._top: list[int] = []  # nodes starting at the root
        self._ends: dict[int, int] = {}  # call -> the node its generation ends at
        self._ending: dict[int, int] = {}  # node -> the call whose generation ends there

    def __len__(self) -> int:
        return len(self._nodes)

    def end_of(self, call: int) -> int | None:
        return self._ends.get(call)

    def insert(
        self, call: int, prompt: list[int], generated: list[int], log_probs: list[float], after: int | None = None
    ) -> Placement:
        """Place a call (its prompt ids, then its generated ids and their log-probs). `after`: a call
        whose whole sequence this prompt is expected to extend (the harness sent its reply back):
        tried first, and preferred where two places match as far (two identical samples)."""
        if len(log_probs) != len(generated):
            raise ValueError(f"call {call}: {len(generated)} generated ids but {len(log_probs)} log-probs")
        node, offset, shared = self._match(prompt, after)
        if node is not None and offset < len(self._nodes[node].tokens):
            self._split(node, offset)
        parent = self._sampled_last(node)
        if shared < len(prompt):
            node = self._add(node, prompt[shared:], None, None)
        end = self._add(node, list(generated), call, list(log_probs))
        self._ends[call], self._ending[end] = end, call
        return Placement(node=end, shared=shared, parent=parent)

    def path(self, node: int) -> list[int]:
        """Node indices from the root to `node`."""
        path = []
        at: int | None = node
        while at is not None:
            path.append(at)
            at = self._nodes[at].parent
        return path[::-1]

    def tokens_to(self, node: int) -> list[int]:
        """Every token from the root to the end of `node`."""
        return [t for n in self.path(node) for t in self._nodes[n].tokens]

    def nodes(self) -> list[TreeNode]:
        return [TreeNode(parent=n.parent, tokens=n.tokens, call=n.call, log_probs=n.log_probs) for n in self._nodes]

    # ------------------------------------------------------------------ matching

    def _match(self, prompt: list[int], after: int | None) -> tuple[int | None, int, int]:
        """(node, tokens of it matched, prompt tokens matched) of the longest match; node None: none."""
        start: tuple[int | None, int, int] = (None, 0, 0)
        if after is not None and after in self._ends:
            end = self._ends[after]
            before = self.tokens_to(end)
            if prompt[: len(before)] == before:
                start = (end, len(self._nodes[end].tokens), len(before))
        node, _, shared = start
        if shared == len(prompt):
            return start
        return self._deepest(node, prompt, shared) or start

    def _deepest(self, node: int | None, prompt: list[int], at: int) -> tuple[int, int, int] | None:
        """Below `node` (None: the root) from prompt position `at`: the match reaching furthest into
        the prompt, the newest node on a tie. Depth first over every child that matches: two nodes
        may start alike (two samples of one prompt)."""
        best: tuple[int, int, int] | None = None
        stack = [(c, at) for c in self._children(node) if self._nodes[c].tokens[:1] == prompt[at : at + 1]]
        while stack:
            n, pos = stack.pop()
            tokens = self._nodes[n].tokens
            matched = common_prefix(tokens, prompt, pos)
            reach = pos + matched
            if best is None or (reach, n) > (best[2], best[0]):
                best = (n, matched, reach)
            if matched == len(tokens) and reach < len(prompt):
                stack += [(c, reach) for c in self._nodes[n].children if self._nodes[c].tokens[0] == prompt[reach]]
        return best

    def _children(self, node: int | None) -> list[int]:
        return self._top if node is None else self._nodes[node].children

    # ------------------------------------------------------------------ building

    def _add(self, parent: int | None, tokens: list[int], call: int | None, log_probs: list[float] | None) -> int:
        index = len(self._nodes)
        self._nodes.append(_Node(parent, tokens, call, log_probs))
        self._children(parent).append(index)
        return index

    def _split(self, node: int, offset: int) -> None:
        """Cut `node` after `offset` tokens: it keeps the head (and its index), a new node the tail
        (and its children, and the end of a call's generation if it was there)."""
        head = self._nodes[node]
        tail = _Node(node, head.tokens[offset:], head.call, None, head.children)
        if head.log_probs is not None:
            tail.log_probs, head.log_probs = head.log_probs[offset:], head.log_probs[:offset]
        head.tokens, head.children = head.tokens[:offset], []
        index = len(self._nodes)
        self._nodes.append(tail)
        head.children.append(index)
        for child in tail.children:
            self._nodes[child].parent = index
        if node in self._ending:
            call = self._ending.pop(node)
            self._ends[call], self._ending[index] = index, call

    def _sampled_last(self, node: int | None) -> int | None:
        while node is not None:
            if self._nodes[node].call is not None:
                return self._nodes[node].call
            node = self._nodes[node].parent
        return None
