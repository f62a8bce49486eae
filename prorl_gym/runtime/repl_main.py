# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The lean Python runtime: a persistent interpreter inside the sandbox, one cell at a time.

What an agent's Python tool needs of IPython, without a kernel: state persists between cells
(one `__main__` namespace), the last expression's value is shown as IPython shows it
(IPython.lib.pretty when the sandbox has IPython, else repr), tracebacks name the cell and its
lines, `await` works at the top level, an interrupt frame stops a cell. No ZMQ, no threads, no
messages but one request and one reply per cell; output is written straight to fd 1/2, a pipe
the server reads and caps.

Standalone on purpose (stdlib only): run by the *sandbox's* Python, forked from the zygote
(zygote_main.py imports this file by path) or started with `python -I -c <this file> <fd>`.

Protocol on the control socket (a stream socket at `control_fd`), each message a 4-byte
big-endian length and a JSON object:
    REPL -> server, once:   {"ready": true}
    server -> REPL:         {"n": <cell number>, "code": "..."}
    server -> REPL:         {"interrupt": <cell number>} (while that cell runs)
    REPL -> server:         {"n": ..., "error": null | {"ename", "evalue", "traceback"}}
A reply is sent after the cell's output is flushed to fd 1, so everything the cell printed is
in the pipe before the server reads the reply. Interrupts come in-band: the control socket is
O_ASYNC, its data raises SIGIO here, and SIGIO during a cell is a KeyboardInterrupt in it (so it
works whatever wraps the REPL, and across namespaces; SIGINT does the same). Between cells the
signal is ignored and the interrupt frame read and dropped.
"""

import ast
import builtins
import fcntl
import io
import json
import linecache
import os
import signal
import socket
import struct
import sys
import traceback
import types

HEADER = struct.Struct(">I")
MAX_REQUEST = 64 << 20
CO_COROUTINE = 0x80
TOP_LEVEL_AWAIT = getattr(ast, "PyCF_ALLOW_TOP_LEVEL_AWAIT", 0)  # 3.8+: an image's older Python runs without it


class _Cells:
    """The session: one namespace, numbered cells."""

    def __init__(self):
        main = types.ModuleType("__main__")
        main.__dict__["__builtins__"] = builtins
        sys.modules["__main__"] = main  # pickle and multiprocessing find the cells' functions here
        self.namespace = main.__dict__
        self.running = False
        self._loop = None
        self._pretty = _pretty_printer()

    def run(self, n: int, code: str) -> dict | None:
        filename = f"<cell-{n}>"
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)  # tracebacks show lines
        try:
            self.running = True
            try:
                tree = ast.parse(code, filename, "exec")
                last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
                self._exec(compile(tree, filename, "exec", TOP_LEVEL_AWAIT))
                if last is not None:
                    expression = compile(ast.Expression(last.value), filename, "eval", TOP_LEVEL_AWAIT)
                    value = self._exec(expression)
                    if value is not None:
                        self.namespace["_"] = value
                        _write_out(self._pretty(value) + "\n")
            finally:
                self.running = False
        except BaseException as exc:  # noqa: BLE001 - the cell's own error (SystemExit, KeyboardInterrupt too)
            return _report(exc)
        return None

    def _exec(self, code: types.CodeType):
        if code.co_flags & CO_COROUTINE:  # top-level await: run it on the session's own loop
            import asyncio

            if self._loop is None:
                self._loop = asyncio.new_event_loop()
            return self._loop.run_until_complete(eval(code, self.namespace))
        return eval(code, self.namespace)


HERE = _Cells.run.__code__.co_filename  # this file, however it was loaded (`-c`: "<string>")


def _pretty_printer():
    try:
        from IPython.lib.pretty import pretty
    except ImportError:
        return repr
    return pretty


def _report(exc: BaseException) -> dict:
    """The error, its traceback as the cell's: from its first frame in a cell, without this file's
    frames (the interrupt handler) or the parser's (a SyntaxError has no cell frame)."""
    report = traceback.TracebackException(type(exc), exc, exc.__traceback__)
    frames = list(report.stack)
    first = next((i for i, frame in enumerate(frames) if frame.filename.startswith("<cell-")), len(frames))
    report.stack = traceback.StackSummary.from_list([f for f in frames[first:] if f.filename != HERE])
    text = "".join(report.format())
    _write_out(text)
    return {"ename": type(exc).__name__, "evalue": str(exc), "traceback": text.rstrip("\n")}


def _write_out(text: str) -> None:
    try:
        sys.stdout.write(text)
    except Exception:  # noqa: BLE001 - the cell replaced or closed sys.stdout: write to the fd itself
        os.write(1, text.encode(errors="replace"))


def _flush() -> None:
    for stream in {id(s): s for s in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__)}.values():
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a cell's own replacement stream may not flush
            pass


def _text_stream(fd: int) -> io.TextIOWrapper:
    """Unbuffered text on fd: what a cell prints is in the pipe at once, in order with its subprocesses'."""
    raw = io.FileIO(fd, "w", closefd=False)
    return io.TextIOWrapper(raw, encoding="utf-8", errors="backslashreplace", write_through=True)


def _recv_exact(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return bytes(data)


def _send(sock: socket.socket, message: dict) -> None:
    payload = json.dumps(message).encode()
    sock.sendall(HEADER.pack(len(payload)) + payload)


def serve(control_fd: int) -> None:
    """Until the server closes the control socket. fd 1 and 2 are the output pipe already."""
    os.closerange(3, control_fd)  # e.g. the user-namespace fd a joining launcher needed
    os.closerange(control_fd + 1, 1 << 16)
    sys.stdin = open(os.devnull)  # noqa: SIM115 - for the session's lifetime
    sys.stdout, sys.stderr = _text_stream(1), _text_stream(2)
    sys.argv = [""]
    sock = socket.socket(fileno=control_fd)
    sock.set_inheritable(False)  # a cell's subprocesses get no control channel
    cells = _Cells()

    def interrupt(signum, frame):
        if cells.running:  # between cells a late interrupt is ignored
            raise KeyboardInterrupt

    signal.signal(signal.SIGINT, interrupt)
    signal.signal(signal.SIGIO, interrupt)
    fcntl.fcntl(control_fd, fcntl.F_SETOWN, os.getpid())
    fcntl.fcntl(control_fd, fcntl.F_SETFL, fcntl.fcntl(control_fd, fcntl.F_GETFL) | os.O_ASYNC)
    _send(sock, {"ready": True})
    while True:
        try:
            (size,) = HEADER.unpack(_recv_exact(sock, HEADER.size))
            if size > MAX_REQUEST:
                return
            request = json.loads(_recv_exact(sock, size))
        except (EOFError, OSError):
            return  # the server is gone or closed us
        if "interrupt" in request:
            continue  # it came after its cell had ended
        error = cells.run(int(request["n"]), str(request["code"]))
        _flush()
        try:
            _send(sock, {"n": request["n"], "error": error})
        except OSError:
            return


if __name__ == "__main__":
    serve(int(sys.argv[1]))
