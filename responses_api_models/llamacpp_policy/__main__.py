# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Serve a local model on llama.cpp's HTTP server: a real policy endpoint on the CPU.

    python -m responses_api_models.llamacpp_policy --model qwen2.5-coder-0.5b [--port 8000]
        [--threads N] [--ctx 16384] [--parallel 1] [--max-tokens 1024]
    python -m responses_api_models.llamacpp_policy --gguf PATH ...   any GGUF (its metadata is checked only)

llama.cpp's server runs in this process (xllamacpp: its C++ server on background threads; no CLI
binary): `/completion` (token ids in, ids and log-probs out: what `completion_api: llamacpp` of the
policy model server calls), `/apply-template`, `/tokenize`, `/detokenize`, `/v1/chat/completions`,
`/v1/models` and `/health` (503 while loading, 200 once the model is loaded). A catalog model's file is
checked before it is loaded (prorl_gym/local_models: as verified when fetched, GGUF metadata); nothing
is downloaded here. SIGINT or SIGTERM stop it.

Threads: by default every core this process may use if nothing else is runnable as it starts, else
one (threads.py: llama.cpp's threads wait for each other after every operation, so on a busy machine
more threads are far slower); they do not busy-wait between operations (`poll 0`). `--threads N` fixes
it. Every generation is capped at `--max-tokens` (llama.cpp's n_predict caps each request's), so a
runaway generation ends, cut, as `length`.
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import sys
import time
import urllib.request
from pathlib import Path

from prorl_gym.errors import ProrlError
from prorl_gym.local_models import local_model, verified
from prorl_gym.local_models.gguf import GGUFError, read_metadata
from responses_api_models.llamacpp_policy.threads import default_threads


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m responses_api_models.llamacpp_policy", description=__doc__)
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--model", help="a model of prorl_gym/local_models/catalog.py (fetched by make setup)")
    which.add_argument("--gguf", type=Path, help="any GGUF file (served under its file name)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--threads", type=int, default=None, help="default: every core if idle, else 1 (above)")
    parser.add_argument("--ctx", type=int, default=16384, help="context size in tokens (all slots together)")
    parser.add_argument("--parallel", type=int, default=1, help="slots: requests generated at once")
    parser.add_argument("--max-tokens", type=int, default=1024, help="the most tokens one generation may have")
    return parser.parse_args(argv)


def model_file(args: argparse.Namespace) -> tuple[Path, str]:
    """(the GGUF to load, the name it is served as), checked."""
    if args.model:
        return verified(local_model(args.model)), args.model
    try:
        metadata = read_metadata(args.gguf)
    except (GGUFError, OSError) as exc:
        raise SystemExit(f"error: {exc}") from exc
    if not metadata.get("tokenizer.chat_template"):
        raise SystemExit(f"error: {args.gguf} has no chat template in its metadata")
    return args.gguf, args.gguf.name


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        path, name = model_file(args)
    except ProrlError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    threads, why = (args.threads, "--threads") if args.threads else default_threads()
    import xllamacpp  # ~0.1 s and a 100 MB library: only once the model is known to be good

    params = xllamacpp.CommonParams()
    params.model.path = str(path)
    params.model_alias = {name}
    params.hostnames = [args.host]
    params.port = args.port
    params.n_ctx = args.ctx
    params.n_parallel = args.parallel
    params.n_predict = args.max_tokens
    params.use_jinja = True  # the model's own chat template (tools included), as transformers renders it
    params.warmup = False
    params.endpoint_metrics = True  # /metrics: tokens evaluated and generated, said when it stops
    for cpu in (params.cpuparams, params.cpuparams_batch):
        cpu.n_threads = threads
        cpu.poll = 0
    stop = {signal.SIGINT, signal.SIGTERM}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop)  # the server's threads inherit the mask: only sigwait sees them
    started = time.perf_counter()
    _server = xllamacpp.Server(params)  # held (it serves) until the process exits
    print(
        f"llama.cpp serving {name} ({path}) on http://{args.host}:{args.port} "
        f"(loaded in {time.perf_counter() - started:.1f} s; {threads} threads ({why}), ctx {args.ctx})",
        flush=True,
    )
    received = signal.sigwait(stop)
    print(f"stopping on {signal.Signals(received).name}: {spent(args.host, args.port)}", flush=True)
    os._exit(0)  # the server's threads are native C++: Python's shutdown has nothing to do, nor to wait for


def spent(host: str, port: int) -> str:
    """What this server did: tokens evaluated and generated (its /metrics), and CPU time."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    said = f"{usage.ru_utime + usage.ru_stime:.1f} CPU-s"
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=5) as answer:
            metrics = dict(
                line.rsplit(" ", 1) for line in answer.read().decode().splitlines() if line and line[0] != "#"
            )
        prompt, generated = (int(float(metrics[f"llamacpp:{k}_total"])) for k in ("prompt_tokens", "tokens_predicted"))
        return f"{prompt} prompt tokens evaluated, {generated} generated, {said}"
    except (OSError, KeyError, ValueError):
        return said


if __name__ == "__main__":
    sys.exit(main())
