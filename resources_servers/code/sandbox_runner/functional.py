# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Function tests: the tests run HERE (trusted), the solution runs in a worker process.

The tests' namespace has the prelude (e.g. HumanEval's prompt with its helpers), the
row's setup code, and `candidate` (also bound to the entry point's name): a proxy whose
calls go to the worker as plain data and come back as plain data (wire.py). The solution
therefore never runs in the process that holds the tests, the expected values and the
run's nonce, and what it returns is a value, not an object that could fake equality.
Each assert is one test (or `check(candidate)` for HumanEval-style check code); one
worker serves all tests and is replaced after it dies or times out.
"""

from __future__ import annotations

import builtins
import json
import linecache
import signal
import subprocess
import time
import traceback
from contextlib import contextmanager

from procs import RunnerError, child_limits, describe, kill_descendants
from wire import Unsupported, decode, dumps, encode

MAX_REPLY = 64 << 20


class TestTimeout(BaseException):
    pass


class SolutionFailure(BaseException):
    """The solution's process died, hung up, garbled a reply or did not load. A
    BaseException, so a test's own `except Exception` cannot swallow it."""


@contextmanager
def alarm(seconds: float):
    def expire(signum, frame):
        raise TestTimeout()

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.001))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class Worker:
    def __init__(self, spec: dict):
        self.proc = subprocess.Popen(
            [spec["python"], spec["runner_dir"] + "/worker.py", spec["solution_path"]],
            cwd=spec["workdir"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=child_limits(spec["memory_bytes"], spec["total_timeout_s"]),
        )
        self.calls = 0
        self.send({"prelude": spec.get("prelude", "")})
        reply = self.receive()
        if reply.get("ready") is not True:
            raise SolutionFailure(str(reply.get("error"))[:300])

    def send(self, message: dict) -> None:
        try:
            self.proc.stdin.write(dumps(message))
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError):
            raise SolutionFailure("the solution's process exited") from None

    def receive(self) -> dict:
        line = self.proc.stdout.readline(MAX_REPLY)
        if not line:
            raise SolutionFailure("the solution's process exited")
        if not line.endswith(b"\n"):
            raise SolutionFailure("the solution's reply is too large")
        try:
            reply = json.loads(line)
        except ValueError:
            reply = None
        if type(reply) is not dict:
            raise SolutionFailure("garbled reply from the solution's process")
        return reply

    def call(self, target: str, args: tuple, kwargs: dict):
        self.calls += 1
        try:
            request = {"id": self.calls, "target": target, "args": encode(list(args)), "kwargs": encode(kwargs)}
        except Unsupported as exc:
            raise RunnerError(f"a test passes a value the runner cannot send: {exc}") from None
        self.send(request)
        reply = self.receive()
        if reply.get("id") != self.calls:
            raise SolutionFailure("out-of-order reply from the solution's process")
        if reply.get("ok") is True:
            try:
                return decode(reply.get("value"))
            except (ValueError, TypeError, KeyError, RecursionError):
                raise SolutionFailure("garbled value from the solution's process") from None
        raise raised_by_solution(str(reply.get("type")), str(reply.get("error"))[:500])

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()


def raised_by_solution(name: str, message: str) -> BaseException:
    """The solution's exception as the same builtin type, so tests that expect one
    (`with pytest.raises`-style try/except) see it; anything else cannot be caught."""
    cls = getattr(builtins, name, None)
    if isinstance(cls, type) and issubclass(cls, Exception):
        try:
            return cls(message)
        except Exception:  # noqa: BLE001 - constructors with other signatures
            pass
    return SolutionFailure(f"{name}: {message}")


class Candidate:
    """The solution's entry point, as the tests see it."""

    def __init__(self, session: Session, target: str):
        self._session, self._target = session, target

    def __call__(self, *args, **kwargs):
        if self._session.worker is None:
            raise SolutionFailure("the solution's process is gone")
        return self._session.worker.call(self._target, args, kwargs)

    def __repr__(self) -> str:
        return f"<solution {self._target}>"


class Session:
    def __init__(self, spec: dict):
        self.spec = spec
        self.worker: Worker | None = None
        self.load_error: str | None = None

    def ensure_worker(self, timeout: float) -> None:
        if self.worker is None and self.load_error is None:
            try:
                with alarm(timeout):
                    self.worker = Worker(self.spec)
            except SolutionFailure as exc:
                self.load_error = f"loading the solution: {exc}"
            except TestTimeout:
                self.load_error = f"loading the solution took over {timeout:.3g}s"
            if self.load_error is not None:
                kill_descendants()
        if self.load_error is not None:
            raise SolutionFailure(self.load_error)

    def drop_worker(self) -> None:
        if self.worker is not None:
            self.worker.kill()
            self.worker = None


def compile_trusted(source: str, name: str):
    linecache.cache[name] = (len(source), None, source.splitlines(True), name)  # failing lines in details
    return compile(source, name, "exec")


def failing_line(exc: BaseException) -> str | None:
    """The tests' own line that failed (check code spans many lines)."""
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if frame.filename.startswith("<") and frame.line:
            return frame.line
    return None


def run_functional(spec: dict, budget, results: list[dict]) -> None:
    session = Session(spec)
    namespace: dict = {"__name__": "__tests__", "__builtins__": builtins}
    try:
        for name, source in (("<prelude>", spec.get("prelude", "")), ("<setup>", spec.get("setup", ""))):
            exec(compile_trusted(source, name), namespace)
        candidate = Candidate(session, spec["entry_point"])
        namespace["candidate"] = candidate
        if spec["entry_point"].isidentifier():
            namespace[spec["entry_point"]] = candidate
        if spec.get("code"):
            exec(compile_trusted(spec["code"], "<check>"), namespace)
        sources = spec.get("asserts") or ["check(candidate)"]
        tests = [(s, compile_trusted(s, f"<test {i}>")) for i, s in enumerate(sources)]
    except Exception as exc:  # noqa: BLE001 - the row's own code is broken
        raise RunnerError(f"the tests do not load: {describe(exc)}") from None
    try:
        for source, code in tests:
            timeout = budget.left(spec["per_test_timeout_s"])
            if timeout <= 0:
                results.append(budget.skipped())
                continue
            started = time.monotonic()
            status, detail = run_one(session, code, source, namespace, timeout)
            keep = session.worker.proc.pid if session.worker else None
            kill_descendants(keep=keep)
            budget.record(
                results, {"status": status, "detail": detail, "seconds": round(time.monotonic() - started, 4)}
            )
    finally:
        session.drop_worker()


def run_one(session: Session, code, source: str, namespace: dict, timeout: float) -> tuple[str, str | None]:
    try:
        session.ensure_worker(timeout)
        with alarm(timeout):
            exec(code, namespace)
        return "passed", None
    except TestTimeout:
        session.drop_worker()
        return "timeout", f"no result within {timeout:.3g}s"
    except SolutionFailure as exc:
        session.drop_worker()
        return "error", str(exc)[:300]
    except AssertionError as exc:
        return "failed", f"assertion failed: {failing_line(exc) or source}"[:300]
    except RunnerError:
        raise
    except Exception as exc:  # noqa: BLE001 - raised by the solution, or by a test on its value
        return "error", describe(exc)
