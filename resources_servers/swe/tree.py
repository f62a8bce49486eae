# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The repository's files as the grader sees them, and the grader's file work inside the sandbox.

The grader never asks git what changed (git reads attributes and configuration the patch can write):
it fingerprints every entry of the tree itself and compares. An entry is `f:<sha256>` (a regular
file), `x:<sha256>` (executable), `l:<target>` (a symbolic link, never followed) or `o:<type>`
(anything else: never opened, a FIFO would block the grader).

SCRIPT runs in the sandbox as `python -I -c SCRIPT JOB OUT` (the code travels on the command line: no
file the test run could have rewritten): JOB is a JSON list of steps, done in order until one fails;
OUT gets {name: result} (and `failed`: the step that raised, and why). Steps (`do`):

    tree     root, skip_git            -> {path: entry}
    probe    seal, root, env_paths, tests
             -> the Landlock ABI, the names importable without the repository, the tests' top-level
                packages something installed provides (a regular package outside `root`: not a
                namespace portion, which any regular package wins over, nor the repository itself
                installed in place, as SWE-bench images install it: a .pth or finder into /testbed)
    dump     root, paths, dirs, suffix | changed (two trees of this job), suffix
             -> {path: text} of the paths given and of the files with the suffix in dirs, or of those with the
             suffix that differ between the two trees
    keep     root, tree (of this job), into  -> the tree's files hard-linked into a directory
    reset    root, paths, kept         -> each entry removed, then what `kept` has of it put back
    apply    root, patch               -> `git apply` (args given) of the patch's text: {rc, output}
    tail     path, bytes               -> the end of a file, as text
"""

from __future__ import annotations

SCRIPT = r"""
import hashlib, importlib.util, json, os, pkgutil, runpy, shutil, stat, subprocess, sys

def tree(root, skip_git=True):
    found = {}
    for top, dirs, files in os.walk(root, onerror=lambda e: None):
        rel = os.path.relpath(top, root)
        rel = "" if rel == "." else rel + "/"
        if skip_git and not rel:
            dirs[:] = [d for d in dirs if d != ".git"]
            files = [f for f in files if f != ".git"]
        for name in dirs + files:
            path = os.path.join(top, name)
            try:
                st = os.lstat(path)
                if stat.S_ISLNK(st.st_mode):
                    found[rel + name] = "l:" + os.readlink(path)
                elif stat.S_ISREG(st.st_mode):
                    digest = hashlib.sha256()
                    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
                    with os.fdopen(fd, "rb") as f:
                        for chunk in iter(lambda: f.read(1 << 20), b""):
                            digest.update(chunk)
                    found[rel + name] = ("x:" if st.st_mode & 0o111 else "f:") + digest.hexdigest()
                elif not stat.S_ISDIR(st.st_mode):
                    found[rel + name] = "o:" + oct(stat.S_IFMT(st.st_mode))
            except OSError as exc:
                found[rel + name] = "e:" + type(exc).__name__
    return found

def inside(path, root):
    return path is not None and os.path.realpath(path).startswith(os.path.realpath(root).rstrip("/") + "/")

def probe(seal, root, env_paths, tests):
    abi = runpy.run_path(seal)["abi"]()
    sys.path.extend(env_paths)
    names = sorted({m.name for m in pkgutil.iter_modules()} | set(sys.builtin_module_names))
    tops = set()
    for path in tests:  # the top-level package each test module is imported under
        parts = path.split("/")
        top = parts[-1][:-3] if parts[-1].endswith(".py") else parts[-1]
        for i in range(len(parts) - 1, 0, -1):
            if not os.path.exists(os.path.join(root, *parts[:i], "__init__.py")):
                break
            top = parts[i - 1]
        tops.add(top)
    shadowed = []
    for top in sorted(tops):
        try:
            spec = importlib.util.find_spec(top)
        except (ImportError, ValueError):
            spec = None
        if spec is None or spec.origin is None:  # a namespace portion: any regular package on sys.path wins over it
            continue
        places = [spec.origin, *(spec.submodule_search_locations or [])]
        if all(inside(p, root) for p in places):  # the repository itself, installed in place (editable)
            continue
        shadowed.append(top + " (at " + spec.origin + ")")
    return {"abi": abi, "installed": names, "tests": sorted(tops), "shadowed": shadowed}

def dump(root, paths, dirs=(), suffix=".py"):
    paths = list(paths)
    for d in dirs:  # and every file of these directories (not below them) with the suffix
        full = os.path.join(root, d)
        if os.path.isdir(full) and not os.path.islink(full):
            paths += sorted((d + "/" if d else "") + n for n in os.listdir(full) if n.endswith(suffix))
    out = {}
    for name in dict.fromkeys(paths):
        path = os.path.join(root, name)
        if os.path.isfile(path) and not os.path.islink(path):
            with open(path, "rb") as f:
                out[name] = f.read().decode("utf-8", "surrogateescape")
    return out

def keep(root, entries, into):
    # the tree's files hard-linked into `into` (no copy: git apply writes new files, never into these)
    for name, entry in entries.items():
        target = os.path.join(into, name)
        if entry[:2] in ("f:", "x:", "l:"):
            os.makedirs(os.path.dirname(target), exist_ok=True)
        if entry[:2] in ("f:", "x:"):
            try:
                os.link(os.path.join(root, name), target)
            except OSError:  # a file system without hard links (or across a mount): a copy
                shutil.copy2(os.path.join(root, name), target)
        elif entry.startswith("l:"):
            os.symlink(entry[2:], target)

def remove(path):
    if os.path.islink(path) or (os.path.lexists(path) and not os.path.isdir(path)):
        os.unlink(path)
    elif os.path.isdir(path):
        shutil.rmtree(path)

def reset(root, paths, kept):
    for name in paths:
        parts = name.split("/")
        for i in range(1, len(parts)):  # a file or link where the base has a directory goes first
            above = os.path.join(root, *parts[:i])
            if os.path.islink(above) or (os.path.lexists(above) and not os.path.isdir(above)):
                os.unlink(above)
        target, source = os.path.join(root, name), os.path.join(kept, name)
        remove(target)
        if os.path.islink(source):
            os.makedirs(os.path.dirname(target), exist_ok=True)
            os.symlink(os.readlink(source), target)
        elif os.path.isfile(source):
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copy2(source, target)

def apply(root, patch, argv):
    env = dict(os.environ, GIT_CEILING_DIRECTORIES=os.path.dirname(os.path.abspath(root)))  # no repository above
    run = subprocess.run(argv, cwd=root, env=env, input=patch.encode("utf-8", "surrogateescape"), capture_output=True)
    return {"rc": run.returncode, "output": (run.stdout + run.stderr).decode("utf-8", "replace")[-1200:]}

def tail(path, size):
    with open(path, "rb") as f:
        f.seek(max(0, os.fstat(f.fileno()).st_size - size))
        return f.read().decode("utf-8", "replace")

job, out = json.load(open(sys.argv[1])), sys.argv[2]
done = {}
for step in job:
    do, name = step.pop("do"), step.pop("as", None)
    if do == "dump" and "changed" in step:
        before, now = (done[key] for key in step.pop("changed"))
        step["paths"] = sorted(p for p in now if p.endswith(step["suffix"]) and before.get(p) != now[p])
    if do == "keep":
        step["entries"] = done[step.pop("tree")]
    steps = {"tree": tree, "probe": probe, "dump": dump, "keep": keep, "reset": reset, "apply": apply, "tail": tail}
    try:
        result = steps[do](**step)
    except Exception as exc:  # said, with the step: the grader decides whose failure it is
        done["failed"] = {"step": name or do, "error": repr(exc)[:800]}
        break
    done[name or do] = result
    if do == "apply" and result["rc"] != 0:
        break
with open(out, "w") as f:
    json.dump(done, f)
"""


def differences(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """Paths whose entry differs (added, removed, changed content, mode or kind)."""
    return sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))
