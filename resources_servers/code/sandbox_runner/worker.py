# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Hosts the solution for function tests; UNTRUSTED side (the solution runs in this process).

    python worker.py SOLUTION_PATH   (requests on stdin, replies on stdout)

First line in: {"prelude": code}; it runs the prelude (e.g. HumanEval's prompt: imports and
helpers), then the solution file, in one namespace, and replies {"ready": true} or
{"ready": false, "error"}. Then, per line {"id", "target", "args", "kwargs"}: calls the
target ("name" or "Class().method", a fresh instance per call) and replies
{"id", "ok": true, "value"} or {"id", "ok": false, "type", "error"}. Nothing here is trusted: the
runner treats every reply as what the solution returned, and proof of passing comes only
from the runner itself.
"""

import builtins
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from wire import decode, dumps, encode

sys.set_int_max_str_digits(0)


def message(exc: BaseException) -> str:
    try:
        return str(exc)[:500]
    except BaseException:  # noqa: BLE001 - a hostile __str__
        return ""


def describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {message(exc)}"


def resolve(namespace: dict, target: str):
    if "()." in target:
        cls, method = target.split("().", 1)
        return getattr(namespace[cls](), method)
    return namespace[target]


def send(replies, message: dict) -> None:
    replies.write(dumps(message))
    replies.flush()


def main() -> None:
    # The protocol moves to private fds; the solution's stdin, stdout and stderr are /dev/null.
    requests = os.fdopen(os.dup(0), "rb")
    replies = os.fdopen(os.dup(1), "wb")
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    path = sys.argv[1]
    namespace = {"__name__": "__solution__", "__file__": path, "__builtins__": builtins}
    try:
        prelude = json.loads(requests.readline())["prelude"]
        exec(compile(prelude, "<prelude>", "exec"), namespace)
        with open(path) as f:
            source = f.read()
        exec(compile(source, path, "exec"), namespace)
        send(replies, {"ready": True})
    except BaseException as exc:  # noqa: BLE001 - SyntaxError, SystemExit, ... at load time
        send(replies, {"ready": False, "error": describe(exc)})
        return
    for line in requests:
        request = json.loads(line)
        try:
            function = resolve(namespace, request["target"])
            value = function(*decode(request["args"]), **decode(request["kwargs"]))
            reply = {"id": request["id"], "ok": True, "value": encode(value)}
        except BaseException as exc:  # noqa: BLE001 - the solution's error is this call's answer
            reply = {"id": request["id"], "ok": False, "type": type(exc).__name__, "error": message(exc)}
        try:
            send(replies, reply)
        except (TypeError, ValueError) as exc:
            send(replies, {"id": request["id"], "ok": False, "type": type(exc).__name__, "error": message(exc)})


if __name__ == "__main__":
    main()
