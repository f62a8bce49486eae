# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Build the STEM environment's datasets offline.

    python resources_servers/stem/data/prepare.py [--scp FILE ...] [--gpqa FILE ...] [--seed 1] [--out DIR]

Writes, under resources_servers/stem/data/:
  stem.jsonl     the hand-checked set (questions.yaml: >= 30 questions answerable from the corpus)
  example.jsonl  5 rows of it, mixing subjects and answer kinds
  train.jsonl    rows converted from SCP-116K-style and GPQA-style files (default: the small
                 committed samples in data/samples/; pass real dumps with --scp / --gpqa)

Converters (limitations in resources_servers/stem/README.md):
  SCP-116K style: JSON lines {"domain", "problem", "matched_solution"} (or "solution"). The final
    answer is the solution's single distinct \\boxed{} (else a "final answer: ..." line); a number
    with a pint-readable unit becomes a numeric spec (rel_tol 0.02; abs_tol 0.5 for °C/°F), an
    expression a symbolic one (math-verify must parse it). Multi-part, text and missing answers
    are skipped, and counted.
  GPQA style: CSV or JSON lines {"Question", "Correct Answer", "Incorrect Answer 1..3",
    "High-level domain", "Record ID"}: four options shuffled with a per-row seed (seed, Record ID),
    so the order is reproducible and independent of file order.
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import re
from collections import Counter
from pathlib import Path

import yaml

from prorl_gym.jsonl import read_jsonl, write_jsonl
from prorl_gym.verify.answers import extract_boxed
from resources_servers.stem.check import AnswerSpecError, parse_quantity, parse_spec
from resources_servers.stem.prompts import build_row

DATA = Path(__file__).resolve().parent
EXAMPLE_IDS = ["p03", "c05", "b07", "e10", "c08"]  # physics, chemistry, biology, engineering; all kinds
SCP_REL_TOL = 0.02  # textbook solutions round to 2-4 significant figures
OFFSET_ABS_TOL = 0.5  # °C/°F: a relative tolerance means nothing on an offset scale
_FINAL = re.compile(r"(?:final answer|the answer is|answer)\s*(?:is)?\s*[:=]?\s*(.+?)\s*\.?\s*$", re.IGNORECASE)


def hand_rows(path: Path) -> list[dict]:
    rows = []
    for q in yaml.safe_load(path.read_text()):
        parse_spec(q["answer"])  # a malformed hand-written spec fails the build, not a rollout
        rows.append(
            build_row(
                f"stem/hand/{q['id']}",
                q["question"],
                q["answer"],
                q["subject"],
                "hand-checked",
                choices=q.get("choices"),
                reference=q.get("reference"),
            )
        )
    return rows


# ------------------------------------------------------------------ SCP-116K style


def scp_final_answer(solution: str) -> tuple[str | None, str]:
    """(answer, "") or (None, why it was skipped)."""
    boxed = list(dict.fromkeys(b for b in extract_boxed(solution) if b))
    if len(boxed) > 1:
        return None, "multiple_answers"
    if boxed:
        return boxed[0], ""
    lines = [ln for ln in solution.strip().splitlines() if ln.strip()]
    match = _FINAL.search(lines[-1]) if lines else None
    return (match[1], "") if match else (None, "no_final_answer")


def scp_spec(answer: str) -> tuple[dict | None, str]:
    """The answer spec for an SCP final answer, or (None, why not)."""
    answer = re.sub(r"^\s*[A-Za-z_]\w*\s*=\s*", "", answer).strip()  # "V_2 = ..." -> "..."
    if re.search(r"[A-Za-z]{4,}", re.sub(r"\\[A-Za-z]+", "", answer)):
        return None, "text_answer"  # words ("it increases") are not checkable
    quantity = parse_quantity(answer)
    if quantity:
        value, unit = quantity
        spec: dict = {"kind": "numeric", "value": value, "unit": unit or None, "rel_tol": SCP_REL_TOL}
        try:
            parsed = parse_spec(spec)
        except AnswerSpecError:  # degC needs abs_tol; anything else is not a unit: try symbolic
            parsed = None
            if unit:
                offset = spec | {"rel_tol": 0.0, "abs_tol": OFFSET_ABS_TOL}
                try:
                    parsed = parse_spec(offset)
                    spec = offset
                except AnswerSpecError:
                    pass
        if parsed is not None:
            return {k: v for k, v in spec.items() if v is not None}, ""
    from math_verify import parse

    if not parse(f"\\boxed{{{answer}}}"):
        return None, "unparseable_answer"
    return {"kind": "symbolic", "expression": answer}, ""


def convert_scp(path: Path, skipped: Counter) -> list[dict]:
    rows = []
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        item = json.loads(line)
        solution = item.get("matched_solution") or item.get("solution") or ""
        answer, why = scp_final_answer(solution)
        spec, why = scp_spec(answer) if answer else (None, why)
        if spec is None:
            skipped[f"scp/{why}"] += 1
            continue
        rows.append(build_row("", item["problem"], spec, item.get("domain", "").lower() or "science", "scp-116k"))
    return rows


# ------------------------------------------------------------------ GPQA style


def _records(path: Path) -> list[dict]:
    if path.suffix == ".csv":
        with path.open(newline="") as f:
            return list(csv.DictReader(f))
    return read_jsonl(path)


def convert_gpqa(path: Path, seed: int, skipped: Counter) -> list[dict]:
    rows = []
    for index, item in enumerate(_records(path)):
        options = [
            item.get(k, "").strip()
            for k in ("Correct Answer", "Incorrect Answer 1", "Incorrect Answer 2", "Incorrect Answer 3")
        ]
        if not item.get("Question", "").strip() or not all(options):
            skipped["gpqa/missing_fields"] += 1
            continue
        if len(set(options)) < 4:
            skipped["gpqa/duplicate_options"] += 1
            continue
        order = options[:]
        random.Random(f"{seed}:{item.get('Record ID') or index}").shuffle(order)
        letters = "ABCD"
        choices = dict(zip(letters, order))
        spec = {"kind": "choice", "correct": letters[order.index(options[0])], "options": list(letters)}
        subject = (item.get("High-level domain") or "science").strip().lower()
        rows.append(build_row("", item["Question"], spec, subject, "gpqa", choices=choices))
    return rows


# ------------------------------------------------------------------ main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scp", type=Path, nargs="*", default=[DATA / "samples" / "scp116k_sample.jsonl"])
    parser.add_argument("--gpqa", type=Path, nargs="*", default=[DATA / "samples" / "gpqa_sample.csv"])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=DATA)
    args = parser.parse_args()

    hand = hand_rows(DATA / "questions.yaml")
    write_jsonl(args.out / "stem.jsonl", hand, ensure_ascii=False)
    by_id = {row["task_id"].rsplit("/", 1)[-1]: row for row in hand}
    write_jsonl(args.out / "example.jsonl", [by_id[i] for i in EXAMPLE_IDS], ensure_ascii=False)

    skipped: Counter = Counter()
    converted = [row for p in args.scp for row in convert_scp(p, skipped)]
    converted += [row for p in args.gpqa for row in convert_gpqa(p, args.seed, skipped)]
    seen = {user_message_of(row) for row in hand}
    train = []
    for row in converted:
        if user_message_of(row) in seen:
            skipped["duplicate_question"] += 1
            continue
        seen.add(user_message_of(row))
        row["task_id"] = f"stem/train/{row['origin']}-{len(train):05d}"
        train.append(row)
    write_jsonl(args.out / "train.jsonl", train, ensure_ascii=False)
    print(f"skipped: {dict(skipped) or 'none'}")


def user_message_of(row: dict) -> str:
    return row["responses_create_params"]["input"][-1]["content"]


if __name__ == "__main__":
    main()
