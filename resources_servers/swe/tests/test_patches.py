# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The agent's patch as the grader reads it: which sections reach the graded tree, and why not."""

from __future__ import annotations

from resources_servers.swe.patches import ImportNames, is_test_path, plan_patch, split_patch


def new_file(path: str, text: str = "x = 1\n", mode: str = "100644") -> str:
    lines = text.splitlines(keepends=True)
    body = "".join("+" + line for line in lines)
    return (
        f"diff --git a/{path} b/{path}\nnew file mode {mode}\nindex 0000000..1111111\n--- /dev/null\n"
        f"+++ b/{path}\n@@ -0,0 +1,{len(lines)} @@\n{body}"
    )


def changed_file(path: str) -> str:
    return f"diff --git a/{path} b/{path}\nindex 1111111..2222222 100644\n--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n-a\n+b\n"


NAMES = ImportNames(
    roots=("", "src"),
    installed=frozenset({"numpy", "sympy"}),
    tests=frozenset({"tests"}),
    existing=frozenset({"src", "src/pkg", "tests", "README.md", "json_tools.py"}),
)


def test_sections_name_their_paths_and_kind():
    patch = new_file("a.py") + changed_file("src/pkg/b.py") + new_file("link", "target", mode="120000")
    sections = split_patch(patch)
    assert [s.paths for s in sections] == [("a.py",), ("src/pkg/b.py",), ("link",)]
    assert [s.new for s in sections] == [True, False, True]
    assert [s.symlink for s in sections] == [False, False, True]
    plain = "--- a/x.py\t2020\n+++ b/x.py\t2020\n@@ -1 +1 @@\n-a\n+b\n"
    assert [s.paths for s in split_patch(plain)] == [("x.py",)]


def test_the_fix_is_kept_and_what_the_grader_relies_on_is_dropped():
    dropped = {
        ".git/config": "inside .git",
        "src/.GIT/hooks/x": "inside .git",
        "../outside.py": "outside the repository",
        "link": "a symbolic link",
        "tests/test_a.py": "a test file",
        "src/pkg/conftest.py": "a test file",
        "src/pkg/x_test.py": "a test file",
        "docs/check.py": "a test file",  # a file of a test id
        "src/pkg/pyproject.toml": "pytest configuration",
        "setup.cfg": "pytest configuration",
        "src/sitecustomize.py": "an interpreter start-up hook",
        "x.pth": "an interpreter start-up hook",
        "json.py": "shadows the standard library's module 'json'",
        "src/unittest/__init__.py": "shadows the standard library's module 'unittest'",
        "_distutils_hack/__init__.py": "shadows the standard library's module '_distutils_hack'",
        "pytest.py": "shadows the test runner's module 'pytest'",
        "src/pluggy/__init__.py": "shadows the test runner's module 'pluggy'",
        "numpy.py": "shadows the installed module 'numpy'",
        "src/tests.py": "shadows the tests' package 'tests'",
    }
    kept = ["src/pkg/core.py", "src/pkg/json.py", "src/newpkg/__init__.py", "json_tools.py", "NOTES.md", ".gitconfig"]
    patch = "".join(
        new_file(p, mode="120000") if p == "link" else new_file(p) for p in [*dropped, *kept] if p != "json_tools.py"
    )
    patch += changed_file("json_tools.py")
    plan = plan_patch(patch, {"docs/check.py"}, NAMES)
    assert plan.dropped == dropped
    assert [s.paths[0] for s in split_patch(plan.kept)] == [p for p in kept if p != "json_tools.py"] + [
        "json_tools.py"
    ]
    assert plan.tool_config == [".gitconfig"]


def test_an_existing_top_level_module_may_change():
    names = ImportNames(roots=("",), existing=frozenset({"json.py"}))
    assert plan_patch(changed_file("json.py"), set(), names).dropped == {}
    assert plan_patch(new_file("json.py"), set(), ImportNames(roots=("",))).dropped  # new: it would shadow


def test_test_paths():
    assert all(map(lambda p: is_test_path(p, set()), ["tests/x.py", "a/testing/b.py", "test_x.py", "a/b_test.py"]))
    assert not any(map(lambda p: is_test_path(p, set()), ["src/testutils.py", "attest.py", "pytest.ini"]))
