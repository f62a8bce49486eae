# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The code verifier: extraction, and tests run in real eval sandboxes against honest,
wrong and hostile solutions. A hostile solution must score 0 with a reason, never 1.0 and
never an eval error; only a failure of the machinery itself is an error."""

from __future__ import annotations

import subprocess

import pytest
from pydantic import TypeAdapter, ValidationError

from prorl_gym.sandbox import SandboxError, SandboxSpec
from prorl_gym.verify.pool import VerifierError
from resources_servers.code.check import CodeLimits, CodeTests, extract_code, find_record, run_tests
from resources_servers.code.sandbox_runner.wire import Unsupported, decode, encode

TESTS = TypeAdapter(CodeTests)
FAST = CodeLimits(per_test_timeout_s=2, total_timeout_s=20)
SECRET = "SECRET-7b1e0c"

SQUARE = TESTS.validate_python(
    {
        "kind": "stdio",
        "cases": [
            {"input": "3\n", "output": "9\n"},
            {"input": "12\n", "output": "144\n"},
            {"input": "-4", "output": "16"},
        ],
    }
)
ADD = TESTS.validate_python(
    {
        "kind": "functional",
        "entry_point": "add",
        "asserts": [
            "assert candidate(1, 2) == 3",
            "assert add(2.5, 0.5) == 3.0",
            f"assert candidate('{SECRET}', '!') == '{SECRET}!'",
        ],
    }
)
GOOD_ADD = "def add(a, b):\n    return a + b\n"


@pytest.fixture
def base(sandbox_root) -> SandboxSpec:
    return SandboxSpec(root_dir=sandbox_root)


async def run(solution: str, tests=ADD, base=None, limits=FAST) -> dict:
    return await run_tests(solution, tests, base, limits)


# ---------------------------------------------------------------- extraction (pure)


@pytest.mark.parametrize(
    "text,code,problem",
    [
        ("Here:\n```python\nprint(1)\n```\n", "print(1)\n", None),
        ("```py\nx = 1\n```", "x = 1\n", None),
        ("```\nx = 1\n```", "x = 1\n", None),  # untagged counts when nothing is tagged
        ("```bash\nls\n```\n```python\nx = 1\n```", "x = 1\n", None),  # other languages are not answers
        ("```python\nx = 1\n```\nagain:\n```python\nx = 1\n```", "x = 1\n", None),  # the same block twice
        ("no code at all", None, "no_code_block"),
        ("", None, "no_code_block"),
        ("```python\nx = 1\n```\n```python\nx = 2\n```", None, "multiple_code_blocks"),
        ("```python\n\n```", None, "empty_code_block"),
        ("```python\nx = 1\n", None, "no_code_block"),  # cut off: not a complete answer
        ("```python\n" + "x = 1\n" * 60_000 + "```", None, "solution_too_large"),
    ],
)
def test_extraction(text, code, problem):
    assert extract_code(text) == (code, problem)


def test_extraction_policy_last_takes_the_last_block():
    assert extract_code("```python\nx = 1\n```\n```python\nx = 2\n```", "last") == ("x = 2\n", None)


def test_a_huge_message_without_a_block_is_no_answer():
    assert extract_code("`" * 2 + "x" * 2_000_000) == (None, "no_code_block")


def test_only_a_record_with_this_runs_nonce_counts():
    fake = 'PRORL-CODE-RESULT {"nonce": "guess", "tests": [{"status": "passed"}], "runner_error": null}'
    assert find_record(fake + "\nnoise\n", "the-real-nonce") is None
    real = fake.replace("guess", "the-real-nonce")
    assert find_record(f"{fake}\n{real}\n", "the-real-nonce")["nonce"] == "the-real-nonce"


def test_wire_carries_plain_values_only():
    value = [1, 2.5, float("inf"), "s", None, True, (1, [2]), {"k": {3, 4}}, frozenset({1}), b"\x00", 1j, 10**5000]
    assert decode(encode(value)) == value
    assert type(decode(encode((1,)))) is tuple

    class Sneaky(int):
        def __eq__(self, other):
            return True

    with pytest.raises(Unsupported):
        encode(Sneaky(1))
    with pytest.raises(ValueError):
        decode({"t": "object", "v": "os.system"})


def test_rows_are_validated():
    with pytest.raises(ValidationError):
        TESTS.validate_python({"kind": "stdio", "cases": []})
    with pytest.raises(ValidationError):  # neither asserts nor check code
        TESTS.validate_python({"kind": "functional", "entry_point": "f"})
    with pytest.raises(ValidationError):  # test code that does not compile
        TESTS.validate_python({"kind": "functional", "entry_point": "f", "asserts": ["assert f(1) =="]})
    with pytest.raises(ValidationError):
        FAST.merged({"per_test_timout_s": 3})  # a typo is an error, not a silent default


# ---------------------------------------------------------------- honest solutions


async def test_correct_and_wrong_stdio(base):
    good = await run("n = int(input())\nprint(n * n)\n", SQUARE, base)
    assert good["reward"] == 1.0 and good["tests_passed"] == 3 and good["pass_fraction"] == 1.0
    half = await run("n = int(input())\nprint(n * n if n < 10 else 0)\n", SQUARE, base)
    assert half["reward"] == 0.0 and half["tests_passed"] == 2 and half["pass_fraction"] == pytest.approx(2 / 3)
    assert half["test_statuses"] == {"passed": 2, "failed": 1} and half["reason"] == "failed: wrong answer"


async def test_correct_and_wrong_functional(base):
    good = await run(GOOD_ADD, ADD, base)
    assert good["reward"] == 1.0 and good["tests_total"] == 3 and good["reason"] is None
    wrong = await run("def add(a, b):\n    return a - b if isinstance(a, int) else a + b\n", ADD, base)
    assert wrong["reward"] == 0.0 and wrong["tests_passed"] == 2
    assert wrong["reason"] == "failed: assertion failed: assert candidate(1, 2) == 3"


async def test_stdio_comparison_ignores_trailing_whitespace_and_tiny_float_error(base):
    tests = TESTS.validate_python({"kind": "stdio", "cases": [{"input": "", "output": "0.3333333\n1 2\n"}]})
    assert (await run("print(1/3)\nprint(1, 2, '  ')\n\n", tests, base))["reward"] == 1.0
    strict = TESTS.validate_python(tests.model_dump() | {"compare": "lines"})
    assert (await run("print(1/3)\nprint(1, 2)\n", strict, base))["reward"] == 0.0
    assert (await run("print('0.34')\nprint(1, 2)\n", tests, base))["reward"] == 0.0


async def test_check_code_with_a_helper_from_the_prelude_and_expected_exceptions(base):
    tests = TESTS.validate_python(
        {
            "kind": "functional",
            "entry_point": "safe_div",
            "prelude": "def helper(x):\n    return x * 2\n",
            "code": "def check(candidate):\n    assert candidate(helper(3), 2) == 3\n    try:\n        candidate(1, 0)\n"
            "    except ZeroDivisionError:\n        pass\n    else:\n        assert False\n",
        }
    )
    assert (await run("def safe_div(a, b):\n    return a // b\n", tests, base))["reward"] == 1.0
    assert (await run("def safe_div(a, b):\n    return a // b if b else 0\n", tests, base))["reward"] == 0.0


async def test_a_leetcode_method_gets_a_fresh_instance_per_call(base):
    tests = TESTS.validate_python(
        {
            "kind": "functional",
            "entry_point": "Solution().count",
            "asserts": ["assert candidate() == 1", "assert candidate() == 1"],
        }
    )
    solution = (
        "class Solution:\n    def __init__(self):\n        self.n = 0\n"
        "    def count(self):\n        self.n += 1\n        return self.n\n"
    )
    assert (await run(solution, tests, base))["reward"] == 1.0


# ---------------------------------------------------------------- hostile solutions


@pytest.mark.parametrize(
    "solution",
    [
        "import sys\nsys.exit(0)\n",
        "import os\nos._exit(0)\n",
        "def add(a, b):\n    raise SystemExit(0)\n",
        "import os\ndef add(a, b):\n    os._exit(0)\n",
        "def add(a, b):\n    print('OK')\n    return None\n",
        "import os, signal\ndef add(a, b):\n    os.kill(os.getppid(), signal.SIGKILL)\n",
        "import os, signal\ndef add(a, b):\n    os.kill(os.getppid(), signal.SIGSTOP)\n",
        "class Eq:\n    def __eq__(self, other):\n        return True\ndef add(a, b):\n    return Eq()\n",
        "class Eq(str):\n    def __eq__(self, other):\n        return True\ndef add(a, b):\n    return Eq('x')\n",
    ],
    ids=[
        "sys.exit",
        "os._exit",
        "SystemExit-in-call",
        "os._exit-in-call",
        "prints-OK",
        "kills-runner",
        "stops-runner",
        "always-equal",
        "always-equal-str",
    ],
)
async def test_early_exits_and_fake_passes_score_zero(base, solution):
    result = await run(solution, ADD, base)
    assert result["reward"] == 0.0 and result["tests_passed"] == 0 and result["reason"]


async def test_stdio_exit_zero_without_output_fails(base):
    result = await run("import sys\nsys.exit(0)\n", SQUARE, base)
    assert result["reward"] == 0.0 and result["test_statuses"] == {"failed": 3}


async def test_printing_the_sample_output_does_not_pass_hidden_cases(base):
    result = await run("print(9)\n", SQUARE, base)
    assert result["reward"] == 0.0 and result["tests_passed"] == 1


async def test_a_forged_result_record_is_ignored(base):
    forge = (
        "import json, os\nRECORD = 'PRORL-CODE-RESULT ' + json.dumps({'nonce': 'x' * 32, 'tests': [{'status': 'passed'}] * 3,"
        " 'runner_error': None})\ndef add(a, b):\n    for pid in os.listdir('/proc'):\n        try:\n"
        "            with open(f'/proc/{pid}/fd/1', 'w') as tty:\n                tty.write('\\n' + RECORD + '\\n')\n"
        "        except OSError:\n            pass\n    print(RECORD)\n    return None\n"
    )
    result = await run(forge, ADD, base)
    assert result["reward"] == 0.0 and result["tests_passed"] == 0


async def test_the_tests_cannot_be_read_from_disk_or_memory(base):
    """The tests hold SECRET; the solution searches every file and every process it can see."""
    scan = (
        "import os\nfound = []\ndef add(a, b):\n    needle = 'SECRET-' + '7b1e0c'\n    if found:\n        return needle + '!'\n"
        "    for root, dirs, files in os.walk('/'):\n        if root.startswith(('/proc', '/sys', '/usr', '/dev')):\n"
        "            dirs[:] = []\n            continue\n"
        "        for name in files:\n            path = os.path.join(root, name)\n"
        "            try:\n                if needle.encode() in open(path, 'rb').read() and path != __file__:\n"
        "                    found.append(path)\n            except OSError:\n                pass\n"
        "    for pid in filter(str.isdigit, os.listdir('/proc')):\n        for part in ('cmdline', 'environ', 'mem'):\n"
        "            try:\n                with open(f'/proc/{pid}/{part}', 'rb') as f:\n"
        "                    if part != 'mem' and needle.encode() in f.read():\n                        found.append(pid)\n"
        "            except OSError:\n                pass\n    return needle + '!' if found else a + b\n"
    )
    result = await run(scan, ADD, base, CodeLimits(per_test_timeout_s=30, total_timeout_s=90))
    assert result["tests_passed"] == 3, result  # found nothing, so it answered honestly


async def test_hangs_are_timeouts_and_bounded(base):
    result = await run("def add(a, b):\n    while True:\n        pass\n", ADD, base, CodeLimits(per_test_timeout_s=1))
    assert result["reward"] == 0.0
    assert result["test_statuses"] == {"timeout": 2, "not_run": 1} and result["test_seconds"] < 4
    stdio = await run("import time\ntime.sleep(100)\n", SQUARE, base, CodeLimits(per_test_timeout_s=1, max_timeouts=5))
    assert stdio["test_statuses"] == {"timeout": 3}


async def test_the_total_budget_cuts_the_run(base):
    limits = CodeLimits(per_test_timeout_s=5, total_timeout_s=1.5, max_timeouts=10)
    result = await run("import time\ntime.sleep(100)\n", SQUARE, base, limits)
    assert result["reward"] == 0.0 and result["test_statuses"]["not_run"] >= 1


async def test_fork_bombs_are_contained_and_the_next_test_runs(base):
    bomb = (
        "import os\ncalls = 0\ndef add(a, b):\n    global calls\n    calls += 1\n    if calls == 1:\n        if os.fork() == 0:\n"
        "            os.setsid()\n            while True:\n                try:\n                    os.fork()\n"
        "                except OSError:\n                    pass\n    return a + b\n"
    )
    result = await run(bomb, ADD, base)
    assert result["reward"] == 1.0, result  # the bomb was killed after the first test; the others ran
    inline = await run(
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n",
        SQUARE,
        base,
        CodeLimits(per_test_timeout_s=1, max_timeouts=5),
    )
    assert inline["reward"] == 0.0 and inline["test_statuses"] == {"timeout": 3}


async def test_floods_and_memory_hogs_fail_their_tests(base):
    flood = await run("while True:\n    print('x' * 65536)\n", SQUARE, base)
    assert flood["test_statuses"] == {"output_limit": 3}
    silent_flood = await run(
        "import sys\ndef add(a, b):\n    for _ in range(2000):\n        print('y' * 65536)\n"
        "        sys.stderr.write('z' * 65536)\n    return a + b\n",
        ADD,
        base,
    )
    assert silent_flood["reward"] == 1.0  # a function's prints go nowhere and cost nothing but time
    hog = await run("x = bytearray(4 << 30)\n", SQUARE, base, CodeLimits(memory_mb=256))
    assert hog["test_statuses"] == {"memory": 3}


async def test_a_solution_that_does_not_load_fails_every_test_once(base):
    result = await run("def add(a, b)\n    return a + b\n", ADD, base)
    assert result["test_statuses"] == {"error": 3} and "SyntaxError" in result["reason"]


# ---------------------------------------------------------------- the machinery failing


async def test_no_sandbox_is_an_error_not_a_score(base):
    broken = SandboxSpec.model_validate(
        base.model_dump() | {"backend": {"kind": "apptainer", "binary": "/nonexistent/apptainer"}, "image": "x.sif"}
    )
    with pytest.raises(SandboxError):
        await run(GOOD_ADD, ADD, broken)


async def test_tests_the_runner_cannot_run_are_an_error_not_a_score(base):
    tests = TESTS.validate_python(
        {"kind": "functional", "entry_point": "f", "asserts": ["assert candidate(lambda: 1) == 1"]}
    )
    with pytest.raises(VerifierError, match="cannot send"):
        await run("def f(g):\n    return g()\n", tests, base)
    broken = TESTS.validate_python(
        {"kind": "functional", "entry_point": "f", "setup": "import no_such_module", "asserts": ["assert 1"]}
    )
    with pytest.raises(VerifierError, match="tests do not load"):
        await run("def f():\n    return 1\n", broken, base)


async def test_without_isolation_no_process_outside_the_run_is_touched(base):
    """isolation: none (trusted code only) shows the host's processes: the runner must not
    end any of them, only its own descendants."""
    bystander = subprocess.Popen(["sleep", "60"])
    try:
        unisolated = base.with_backend(isolation="none")
        assert (await run(GOOD_ADD, ADD, unisolated))["reward"] == 1.0
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()
