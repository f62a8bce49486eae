# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The token tree and its export, on ids alone: where a call goes, what each branch trains, and a
random walk of harness behaviours (extend, retry, edit, new conversation) checked for the tree's
invariants."""

from __future__ import annotations

import random
import subprocess
import sys

import pytest
from nemo_gym.openai_utils import NeMoGymResponseOutputMessageForTraining

from prorl_gym.capture import export, tree_from_export
from prorl_gym.capture.export import BrokenExport, branch_paths
from prorl_gym.capture.tree import TokenTree, common_prefix
from prorl_gym.jsonl import read_jsonl, write_jsonl
from prorl_gym.tokens.contiguity import token_ids_contiguous
from prorl_gym.wire.items import validate_item


def lp(ids: list[int]) -> list[float]:
    return [-0.001 * t for t in ids]


def test_a_call_extending_another_continues_its_branch():
    tree = TokenTree()
    first = tree.insert(0, [1, 2, 3], [4, 5], lp([4, 5]))
    second = tree.insert(1, [1, 2, 3, 4, 5, 6], [7], lp([7]), after=0)
    assert (first.parent, first.shared) == (None, 0)
    assert (second.parent, second.shared) == (0, 5)
    assert tree.tokens_to(second.node) == [1, 2, 3, 4, 5, 6, 7]
    assert len(branch_paths(tree.nodes())) == 1


def test_an_edit_inside_a_generation_splits_it_and_branches_there():
    tree = TokenTree()
    tree.insert(0, [1, 2, 3], [4, 5, 6], lp([4, 5, 6]))
    tree.insert(1, [1, 2, 3, 4, 5, 6, 9], [10], lp([10]), after=0)
    edited = tree.insert(2, [1, 2, 3, 4, 8, 9], [11], lp([11]))  # the harness rewrote the end of call 0's reply
    assert (edited.parent, edited.shared) == (0, 4)
    nodes = tree.nodes()
    assert [n.tokens for n in nodes if n.call == 0] == [[4], [5, 6]]  # split, still call 0's, log-probs kept
    assert [n.log_probs for n in nodes if n.call == 0] == [lp([4]), lp([5, 6])]
    assert tree.tokens_to(tree.end_of(0)) == [1, 2, 3, 4, 5, 6]  # call 0 still ends where it did
    exported = export(nodes)
    assert len(exported.branches) == 2
    trained = [[(o["prompt_token_ids"], o["generation_token_ids"]) for o in b.output] for b in exported.branches]
    assert trained[0] == [([1, 2, 3], [4, 5, 6]), ([1, 2, 3, 4, 5, 6, 9], [10])]
    assert trained[1] == [([1, 2, 3, 4, 8, 9], [11])]  # token 4 is in its prompt: trained in the first branch
    assert exported.branches[1].loss_mask == [0, 0, 0, 0, 0, 0, 1]
    assert tree_from_export(exported) == nodes


def test_two_identical_samples_keep_two_nodes_and_the_harness_says_which_it_kept():
    tree = TokenTree()
    tree.insert(0, [1, 2], [3], lp([3]))
    a = tree.insert(1, [1, 2, 3, 4], [5, 6], lp([5, 6]), after=0)
    b = tree.insert(2, [1, 2, 3, 4], [5, 6], lp([5, 6]), after=0)  # a retry that sampled the same
    assert a.node != b.node and (a.shared, b.shared) == (3, 4)  # the second shares the first's prompt
    unsaid = tree.insert(3, [1, 2, 3, 4, 5, 6, 9], [10], lp([10]))  # no hint: as far either way, the newest
    assert unsaid.parent == 2
    kept = tree.insert(4, [1, 2, 3, 4, 5, 6, 7], [8], lp([8]), after=1)  # it went on from the first sample
    assert (kept.parent, kept.shared) == (1, 6)
    again = tree.insert(5, [1, 2, 3, 4, 5, 6, 7], [9], lp([9]))  # further through the first sample's branch now
    assert (again.parent, again.shared) == (1, 7)
    assert export(tree.nodes()).generated_tokens == 1 + 2 + 2 + 1 + 1 + 1


def test_a_conversation_sharing_only_prompt_tokens_is_a_root():
    tree = TokenTree()
    tree.insert(0, [1, 2, 3], [4], lp([4]))
    other = tree.insert(1, [1, 2, 7], [8], lp([8]))  # the same system prompt, another conversation
    assert (other.parent, other.shared) == (None, 2)
    nothing = tree.insert(2, [9], [10], lp([10]))
    assert (nothing.parent, nothing.shared) == (None, 0)


def test_normalisation_weights():
    tree = TokenTree()
    tree.insert(0, [1], [2, 3], lp([2, 3]))
    tree.insert(1, [1, 2, 3, 4], [5, 6], lp([5, 6]), after=0)
    tree.insert(2, [1, 2, 3, 4], [7], lp([7]), after=0)
    by_token, by_tree = export(tree.nodes(), "token"), export(tree.nodes(), "tree")
    assert {b.loss_weight for b in by_token.branches} == {1.0}
    assert by_tree.generated_tokens == 5
    assert sum(b.loss_weight * sum(b.loss_mask) for b in by_tree.branches) == pytest.approx(1.0)


def test_an_export_that_disagrees_with_itself_is_refused():
    tree = TokenTree()
    tree.insert(0, [1], [2, 3], lp([2, 3]))
    tree.insert(1, [1, 2, 9], [4], lp([4]))
    exported = export(tree.nodes())
    twice = exported.model_copy(deep=True)
    twice.branches[1].loss_mask[1] = 1  # token 2 trained in both branches
    with pytest.raises(BrokenExport):
        tree_from_export(twice)
    shortened = exported.model_copy(deep=True)
    shortened.branches[0].output[-1]["generation_token_ids"].pop()
    with pytest.raises(BrokenExport):
        tree_from_export(shortened)


def test_common_prefix_across_chunks():
    a = list(range(2000))
    assert common_prefix(a, a) == 2000
    assert common_prefix(a, [*a[:1500], -1]) == 1500
    assert common_prefix(a[100:], a, 100) == 1900
    assert common_prefix([], a) == 0


def random_harness(rng: random.Random, calls: int) -> tuple[TokenTree, list[tuple[list[int], list[int]]]]:
    """Calls as harnesses make them: extend the latest conversation, retry a call, edit a history at a
    random point (re-tokenized), start over with the same system prompt."""
    tree, made, fresh = TokenTree(), [], iter(range(1000, 10**6))
    system = [next(fresh) for _ in range(rng.randint(0, 4))]
    for index in range(calls):
        move = rng.choice(["extend", "extend", "extend", "retry", "edit", "new"]) if made else "new"
        after = None
        if move == "extend":
            after = rng.randrange(len(made))
            prompt = made[after][0] + made[after][1] + [next(fresh) for _ in range(rng.randint(1, 3))]
        elif move == "retry":
            prompt = list(made[rng.randrange(len(made))][0])
        elif move == "edit":
            base = made[rng.randrange(len(made))]
            whole = base[0] + base[1]
            cut = rng.randint(1, len(whole))
            prompt = whole[:cut] + [next(fresh) for _ in range(rng.randint(1, 3))]
        else:
            prompt = system + [next(fresh) for _ in range(rng.randint(1, 3))]
        same_again = move == "retry" and rng.random() < 0.5
        generated = (
            list(made[-1][1]) if same_again and made[-1][1] else [next(fresh) for _ in range(rng.randint(1, 4))]
        )
        tree.insert(index, prompt, generated, lp(generated), after)
        made.append((prompt, generated))
    return tree, made


@pytest.mark.parametrize("seed", range(40))
def test_every_generated_token_is_in_the_tree_once_after_the_prompt_it_was_sampled_from(seed):
    rng = random.Random(seed)
    tree, made = random_harness(rng, rng.randint(1, 30))
    nodes = tree.nodes()
    for call, (prompt, generated) in enumerate(made):
        assert tree.tokens_to(tree.end_of(call)) == prompt + generated
        mine = [nodes[i] for i in tree.path(tree.end_of(call)) if nodes[i].call == call]
        assert len(mine) == sum(n.call == call for n in nodes)  # all of them on its path
        assert [t for n in mine for t in n.tokens] == generated
        assert [x for n in mine for x in n.log_probs] == lp(generated)
    exported = export(nodes, "tree")
    assert exported.generated_tokens == sum(len(g) for _, g in made)
    assert sum(sum(b.loss_mask) for b in exported.branches) == exported.generated_tokens  # each trained once
    for branch in exported.branches:
        assert token_ids_contiguous(branch.output) is True
        assert {type(validate_item(o)) for o in branch.output} == {NeMoGymResponseOutputMessageForTraining}
        sequence = branch.output[-1]["prompt_token_ids"] + branch.output[-1]["generation_token_ids"]
        trained = [t for o in branch.output for t in o["generation_token_ids"]]
        assert trained == [t for t, m in zip(sequence, branch.loss_mask) if m]
    assert tree_from_export(exported) == nodes


def test_collected_rollouts_become_one_training_sample_per_branch(tmp_path):
    tree = TokenTree()
    tree.insert(0, [1], [2, 3], lp([2, 3]))
    tree.insert(1, [1, 2, 9], [4], lp([4]))  # an edit of call 0's reply: two branches
    harness = {
        "reward": 1.0,
        "response": {"id": "r", "output": []},
        "capture": {"tree": [n.model_dump() for n in tree.nodes()]},
    }
    own_loop = {
        "reward": 0.0,
        "response": {
            "id": "s",
            "output": [
                {
                    "type": "message",
                    "prompt_token_ids": [1],
                    "generation_token_ids": [5, 6],
                    "generation_log_probs": [-0.1, -0.2],
                }
            ],
        },
    }
    write_jsonl(tmp_path / "rollouts.jsonl", [harness, own_loop])
    command = [
        sys.executable,
        "-m",
        "prorl_gym.capture.export",
        str(tmp_path / "rollouts.jsonl"),
        str(tmp_path / "samples.jsonl"),
    ]
    subprocess.run([*command, "--normalization", "tree"], check=True, capture_output=True, timeout=120)
    samples = read_jsonl(tmp_path / "samples.jsonl")
    assert [(s["reward"], s["branch"], s["branches"], s["loss_weight"]) for s in samples] == [
        (1.0, 0, 2, 1 / 3),
        (1.0, 1, 2, 1 / 3),
        (0.0, 0, 1, 1 / 2),
    ]
    assert [[o["generation_token_ids"] for o in s["response"]["output"]] for s in samples] == [
        [[2, 3]],
        [[4]],
        [[5, 6]],
    ]
    assert samples[1]["loss_mask"] == [0, 0, 0, 1] and "capture" not in samples[0]
