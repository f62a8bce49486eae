# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""A capture's token tree (tree.py) as what a trainer consumes: one sample per branch.

A branch is a path from the root to a leaf of the tree: one whole token sequence the model saw and
produced, as NeMo RL takes a multi-turn sample (output items each with `prompt_token_ids`,
`generation_token_ids`, `generation_log_probs`, each prompt extending everything before it). Two
branches share a prefix wherever the harness branched (a retry, an edit of its history, the call
that wrote a compaction's summary); a generated span in a shared prefix is trained in one branch only
(the first, in depth-first order, that holds it): there it is an item's generation; in any other
branch its tokens are part of the next item's prompt, as context. So a trainer that takes the
branches as they are trains every generated token exactly once. `loss_mask` says the same per token
of the branch (its last item's prompt ids, then its generation ids): 1 where the branch trains it.

Normalisation (`loss_weight`, the same for every trained token of a branch; a trainer multiplies each
token's loss by it and sums):
- `token`: 1.0. Every generated token of the batch counts alike: divide the sum by the batch's
  trained tokens (NeMo RL's token-level loss). A rollout that branched weighs what it generated.
- `tree`: 1 / (generated tokens of the rollout). Each rollout's tokens sum to 1 whatever its branches,
  so divide by the number of rollouts: every rollout counts alike, as a flat rollout does under a
  per-sample mean, and a harness that branches more gains no weight by it.

`nodes` lists the tree nodes on each branch, so `tree_from_export` rebuilds the tree exactly.

Collected rollouts as a trainer's samples, one line per branch (each a rollout record whose
`response.output` is the branch's items, with its `loss_weight`, `loss_mask`, `branch`, `branches`):

    python -m prorl_gym.capture.export rollouts.jsonl samples.jsonl [--normalization tree]
"""

from __future__ import annotations

import argparse
from typing import Literal

from pydantic import BaseModel

from prorl_gym.capture.tree import TreeNode
from prorl_gym.jsonl import read_jsonl, write_jsonl

Normalization = Literal["token", "tree"]


class ExportedBranch(BaseModel):
    nodes: list[tuple[int, int, int | None]]  # (node, its token count, the call that sampled it or None), root first
    output: list[dict]  # NeMo RL output items: one per generated span this branch trains, in order
    loss_mask: list[int]  # per token of the branch: 1 where it is trained here
    loss_weight: float


class TreeExport(BaseModel):
    normalization: Normalization
    generated_tokens: int  # over the whole tree: each is trained in exactly one branch
    branches: list[ExportedBranch]


def branch_paths(nodes: list[TreeNode]) -> list[list[int]]:
    """Every root-to-leaf path, depth first, children in the order they were made."""
    children: dict[int | None, list[int]] = {}
    for index, node in enumerate(nodes):
        children.setdefault(node.parent, []).append(index)
    paths, stack = [], [[n] for n in reversed(children.get(None, []))]
    while stack:
        path = stack.pop()
        below = children.get(path[-1], [])
        if not below:
            paths.append(path)
        stack += [[*path, c] for c in reversed(below)]
    return paths


def export(nodes: list[TreeNode], normalization: Normalization = "token") -> TreeExport:
    generated = sum(len(n.tokens) for n in nodes if n.call is not None)
    weight = 1.0 if normalization == "token" or not generated else 1.0 / generated
    trained: set[int] = set()
    branches = []
    for path in branch_paths(nodes):
        sequence: list[int] = []
        mask: list[int] = []
        items: list[dict] = []
        for index in path:
            node = nodes[index]
            own = node.call is not None and index not in trained
            if own:
                trained.add(index)
                last = items[-1] if items else None
                if last is not None and last["call"] == node.call and last["end"] == len(sequence):
                    last["generation_token_ids"] += node.tokens
                    last["generation_log_probs"] += node.log_probs or []
                    last["end"] += len(node.tokens)
                else:
                    items.append(_item(sequence, node, index))
            sequence += node.tokens
            mask += [int(own)] * len(node.tokens)
        branches.append(
            ExportedBranch(
                nodes=[(i, len(nodes[i].tokens), nodes[i].call) for i in path],
                output=[_without_bookkeeping(item) for item in items],
                loss_mask=mask,
                loss_weight=weight,
            )
        )
    return TreeExport(normalization=normalization, generated_tokens=generated, branches=branches)


def _item(before: list[int], node: TreeNode, index: int) -> dict:
    """An output message for training (NeMo Gym's model of one), its id named after the tree node."""
    return {
        "id": f"msg_node_{index}",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [],
        "prompt_token_ids": list(before),
        "generation_token_ids": list(node.tokens),
        "generation_log_probs": list(node.log_probs or []),
        "call": node.call,  # bookkeeping while merging, dropped below
        "end": len(before) + len(node.tokens),
    }


def _without_bookkeeping(item: dict) -> dict:
    return {k: v for k, v in item.items() if k not in ("call", "end")}


class BrokenExport(ValueError):
    """An export that is not one tree: it disagrees with itself."""


def tree_from_export(exported: TreeExport) -> list[TreeNode]:
    """The tree the export was made from: its nodes, their tokens, and each generated span's log-probs
    (from the one branch that trains it)."""
    nodes: dict[int, TreeNode] = {}
    for b, branch in enumerate(exported.branches):
        last = branch.output[-1] if branch.output else None
        sequence = (last["prompt_token_ids"] + last["generation_token_ids"]) if last else []
        if len(sequence) != sum(length for _, length, _ in branch.nodes) or len(branch.loss_mask) != len(sequence):
            raise BrokenExport(f"branch {b}: its nodes, items and mask cover different lengths")
        log_probs: dict[int, float] = {}
        for item in branch.output:
            start = len(item["prompt_token_ids"])
            if item["prompt_token_ids"] != sequence[:start]:
                raise BrokenExport(f"branch {b}: an item's prompt does not extend the tokens before it")
            log_probs |= {start + k: lp for k, lp in enumerate(item["generation_log_probs"])}
        position, parent = 0, None
        for index, length, call in branch.nodes:
            span = range(position, position + length)
            tokens = sequence[position : position + length]
            trained = {p for p in span if branch.loss_mask[p]}
            if trained and (call is None or trained != set(span) or not trained <= set(log_probs)):
                raise BrokenExport(f"branch {b}: node {index} is trained in part, or without its log-probs")
            node = nodes.setdefault(index, TreeNode(parent=parent, tokens=tokens, call=call))
            if (node.parent, node.tokens, node.call) != (parent, tokens, call):
                raise BrokenExport(f"branch {b}: node {index} differs from the same node in an earlier branch")
            if trained:
                if node.log_probs is not None:
                    raise BrokenExport(f"node {index} is trained in two branches")
                node.log_probs = [log_probs[p] for p in span]
            position, parent = position + length, index
    if sorted(nodes) != list(range(len(nodes))):
        raise BrokenExport("the branches leave nodes of the tree out")
    untrained = [i for i, n in nodes.items() if n.call is not None and n.log_probs is None]
    if untrained:
        raise BrokenExport(f"generated nodes {untrained} are trained in no branch")
    return [nodes[i] for i in range(len(nodes))]


def rollout_samples(record: dict, normalization: Normalization = "token") -> list[dict]:
    """A collected rollout record as the training samples of its branches. A record without a tree
    (the built-in loop's: one growing conversation) is one sample, as it is."""
    tree = (record.get("capture") or {}).get("tree")
    if not tree:
        items = (record.get("response") or {}).get("output") or []
        generated = sum(len(i.get("generation_token_ids") or []) for i in items)
        weight = 1.0 if normalization == "token" or not generated else 1.0 / generated
        return [record | {"loss_weight": weight, "branch": 0, "branches": 1}]
    exported = export([TreeNode.model_validate(n) for n in tree], normalization)
    base = {k: v for k, v in record.items() if k not in ("capture", "response")}
    response = record.get("response") or {}
    return [
        base
        | {
            "response": response | {"output": branch.output},
            "loss_weight": branch.loss_weight,
            "loss_mask": branch.loss_mask,
            "branch": index,
            "branches": len(exported.branches),
        }
        for index, branch in enumerate(exported.branches)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m prorl_gym.capture.export", description=__doc__.splitlines()[0])
    parser.add_argument("rollouts", help="collected rollout records (JSON lines)")
    parser.add_argument("samples", help="where to write one training sample per branch (JSON lines)")
    parser.add_argument("--normalization", choices=["token", "tree"], default="token")
    args = parser.parse_args()
    rows = read_jsonl(args.rollouts)
    write_jsonl(args.samples, [s for r in rows for s in rollout_samples(r, args.normalization)])


if __name__ == "__main__":
    main()
