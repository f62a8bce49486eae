# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Generate the math environment's train/validation sets offline with reasoning-gym.

    python resources_servers/math/data/prepare.py [--train 2000] [--validation 200] [--seed 42] [--out DIR]

Rows follow NeMo Gym's shape (`responses_create_params` holds the prompt; the agent adds
the resources server's tools) plus what the verifier needs: `expected_answer` and
`checker`, the generator's own `score_answer` for generators whose answers have a
generator-specific format or tolerance, math-verify otherwise. Every math-verify gold is held
to data/golds.py's property (its LaTeX form scores 1.0, a fragment 0.0): one that fails is
written in LaTeX (the generator's text kept as `answer_source`), or checked by its generator.
Splits are deduplicated by question text. Also rewrites the 5-row example set when --example
is given.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import reasoning_gym

from prorl_gym.jsonl import write_jsonl
from resources_servers.math.data.golds import checked_gold
from resources_servers.math.prompts import build_row

# generator -> checker kind. math_verify handles symbolic/numeric equivalence (roots in any
# order, antiderivatives once written in LaTeX: golds.py); the others need their generator's
# checker: complex numbers written with i, N significant digits, "a × b" factor lists.
GENERATORS: dict[str, str] = {
    "basic_arithmetic": "math_verify",
    "gsm_symbolic": "math_verify",
    "fraction_simplification": "math_verify",
    "simple_equations": "math_verify",
    "polynomial_equations": "math_verify",
    "simple_integration": "math_verify",
    "lcm": "math_verify",
    "gcd": "math_verify",
    "prime_factorization": "reasoning_gym",
    "complex_arithmetic": "reasoning_gym",
    "power_function": "reasoning_gym",
    "decimal_arithmetic": "reasoning_gym",
}
DEFAULT_OUT = Path(__file__).resolve().parent


def generate(split: str, size: int, seed: int, seen: set[str]) -> list[dict]:
    """`size` rows, round-robin over the generators, skipping questions already in `seen`."""
    per_generator = -(-size // len(GENERATORS))
    pools = {}
    for offset, name in enumerate(GENERATORS):
        # Over-generate a little so duplicates can be dropped and the split still fills up.
        dataset = reasoning_gym.create_dataset(name, size=per_generator + per_generator // 4 + 10, seed=seed + offset)
        pools[name] = (dataset, iter(dataset))
    rows: list[dict] = []
    while len(rows) < size:
        progressed = False
        for name, (dataset, entries) in pools.items():
            if len(rows) >= size:
                break
            for entry in entries:
                if entry["question"] in seen:
                    continue
                seen.add(entry["question"])
                rows.append(make_row(name, dataset, entry, split, len(rows)))
                progressed = True
                break
        if not progressed:
            raise RuntimeError(f"ran out of unique questions for {split} after {len(rows)} rows")
    return rows


def make_row(generator: str, dataset, entry: dict, split: str, index: int) -> dict:
    entry = json.loads(json.dumps(entry, default=str))  # exactly what the verifier will see
    answer = str(entry["answer"])
    assert dataset.score_answer(answer, entry) == 1.0, (generator, answer)
    source = answer.strip().strip("$")
    expected, judged = checked_gold(source) if GENERATORS[generator] == "math_verify" else (source, False)
    checker: dict = {"kind": "math_verify" if judged else "reasoning_gym"}
    if checker["kind"] == "reasoning_gym":
        checker |= {"dataset": generator, "entry": entry}
    return build_row(
        task_id=f"math/{split}/{index:05d}",
        question=entry["question"],
        expected_answer=expected,
        checker=checker,
        generator=generator,
        answer_source=source if expected != source else None,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", type=int, default=2000)
    parser.add_argument("--validation", type=int, default=200)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--example", action="store_true", help="also rewrite data/example.jsonl (5 rows)")
    args = parser.parse_args()

    seen: set[str] = set()
    validation = generate("validation", args.validation, args.seed + 10_000, seen)
    train = generate("train", args.train, args.seed, seen)
    write_jsonl(args.out / "train.jsonl", train)
    write_jsonl(args.out / "validation.jsonl", validation)
    if args.example:
        picks = [
            "basic_arithmetic",
            "polynomial_equations",
            "fraction_simplification",
            "complex_arithmetic",
            "gsm_symbolic",
        ]
        example = [next(r for r in validation if r["generator"] == g) for g in picks]
        for i, row in enumerate(example):
            row["task_id"] = f"math/example/{i:05d}"
        write_jsonl(args.out / "example.jsonl", example)


if __name__ == "__main__":
    main()
