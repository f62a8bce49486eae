# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Helpers for tests and benchmarks: build NeMo Gym servers without ng_run, fake transcripts."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import uvicorn
from nemo_gym.config_types import BaseServerConfig
from nemo_gym.server_utils import ServerClient
from omegaconf import OmegaConf

from prorl_gym.client import agent_url
from prorl_gym.environments import environment
from prorl_gym.paths import REPO_ROOT
from prorl_gym.stack import RayCluster, Stack, free_port
from prorl_gym.supervise import read_child_pid

# Run in a sandbox's agent shell: every other bash of the sandbox (the harness's file shell) stops,
# as when a fault freezes it. Prints "stopped".
STOP_OTHER_SHELLS = (
    'for d in /proc/[0-9]*; do p=${d#/proc/}; [ "$p" != $$ ] && [ "$(cat $d/comm 2>/dev/null)" = bash ] '
    '&& kill -STOP "$p"; done; echo stopped'
)


def traversable_dir(prefix: str = "prorl-test-") -> Path:
    """A new directory under /tmp that the unprivileged sandbox uid can traverse (mkdtemp makes 0700, and so are
    pytest's tmp dirs): a sandbox root. Short, as the socket paths below it must be."""
    root = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    root.chmod(0o711)
    return root


@asynccontextmanager
async def served_app(app: Any, port: int | None = None, lifespan: str = "auto") -> AsyncIterator[str]:
    """`app` served by uvicorn in this event loop on 127.0.0.1 (a free port unless given): its base URL."""
    port = port or free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan=lifespan))
    serving = asyncio.create_task(server.serve())
    while not server.started:
        if serving.done():
            serving.result()  # its start's error, if it raised one
            raise RuntimeError(f"the app did not start on port {port}")
        await asyncio.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await serving


def sandbox_dirs_left(root: Path) -> list[str]:
    """The sandboxes' directories (and leases) still under a sandbox root: none once every sandbox is released."""
    left = [p.name for p in root.iterdir() if not p.name.startswith(".")] if root.exists() else []
    return left + [f".leases/{p.name}" for p in (root / ".leases").glob("*.json")]


@contextmanager
def environment_stack(
    name: str,
    log_dir: Path,
    overrides: Sequence[str] = (),
    latency_ms: int | None = None,
    ray: RayCluster | None = None,
    env: dict[str, str] | None = None,
    check_released: bool = False,
) -> Iterator[Stack]:
    """ng_run serving one environment's stock configs (its resources server, its agent, the model server) and
    the scripted policy playing its example rows (`latency_ms` per turn), its sandboxes under a fresh
    traversable root: `stack.sandbox_root`, removed after (`check_released`: first asserted empty of
    sandboxes and leases). `stack.agent_url` is the agent's URL. `ray`: a running cluster to join."""
    spec = environment(name)
    sandbox_root = traversable_dir(f"prorl-{name}-")
    try:
        with Stack(
            spec.config_paths(),
            overrides=[f"+{spec.server_key}.sandbox.root_dir={sandbox_root}", *overrides],
            policy_data=[str(spec.example)],
            policy_args=["--latency-ms", str(latency_ms)] if latency_ms else [],
            log_dir=log_dir,
            env=dict(env or {}),
            ray=ray,
        ) as stack:
            stack.sandbox_root = sandbox_root
            stack.agent_url = asyncio.run(agent_url(f"http://127.0.0.1:{stack.head_port}", spec.agent))
            yield stack
        if check_released:
            assert not sandbox_dirs_left(sandbox_root), f"left behind: {sandbox_dirs_left(sandbox_root)}"
    finally:
        shutil.rmtree(sandbox_root, ignore_errors=True)


def offline_server_client() -> ServerClient:
    """A ServerClient that knows no other servers (for a server tested on its own)."""
    return ServerClient(
        head_server_config=BaseServerConfig(host="127.0.0.1", port=1), global_config_dict=OmegaConf.create({})
    )


def build_server(server_cls: type, name: str, server_client: ServerClient | None = None, **config: Any):
    """Instantiate a NeMo Gym server class from keyword config, as ng_run would from YAML. An
    environment's server gets the tools its config lists (the one list) unless given others."""
    config_cls = server_cls.model_fields["config"].annotation
    module = server_cls.__module__.split(".")
    if "tools" in config_cls.model_fields and "tools" not in config and module[0] == "resources_servers":
        config["tools"] = environment(module[1]).tools
    base = {"host": "127.0.0.1", "port": 0, "entrypoint": "app.py", "name": name}
    return server_cls(config=config_cls(**(base | config)), server_client=server_client or offline_server_client())


def transcript(final_text: str | None = None, tool_calls: list[tuple[str, str]] = ()) -> dict:
    """A NeMo Gym response (as JSON) with some tool calls and an optional final assistant message."""
    output: list[dict] = []
    for name, arguments in tool_calls:
        call_id = f"call_{uuid.uuid4().hex[:8]}"
        output.append(
            {
                "type": "function_call",
                "name": name,
                "arguments": arguments,
                "call_id": call_id,
                "id": call_id,
                "status": "completed",
            }
        )
        output.append({"type": "function_call_output", "call_id": call_id, "output": "ok"})
    if final_text is not None:
        output.append(
            {
                "type": "message",
                "role": "assistant",
                "id": f"msg_{uuid.uuid4().hex[:8]}",
                "status": "completed",
                "content": [{"type": "output_text", "text": final_text, "annotations": []}],
            }
        )
    return {
        "id": "resp_test",
        "created_at": int(time.time()),
        "model": "test",
        "object": "response",
        "output": output,
        "parallel_tool_calls": False,
        "tool_choice": "auto",
        "tools": [],
    }


def supervised_server(session: int, folder: str | Path) -> int:
    """The pid of the server supervised from `folder` in process session `session` (a Stack's ng_run
    session), for tests that kill it: forked by the server zygote (outside the session) or spawned."""
    supervisor = supervisor_of(session, folder)
    if (server := read_child_pid(supervisor)) is None:
        raise LookupError(f"the supervisor {supervisor} of {folder} has no server now")
    return server


def _session_members(session: int) -> list[int]:
    members = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if os.getsid(int(entry.name)) == session:
                    members.append(int(entry.name))
            except OSError:
                continue
    return members


def stack_servers(session: int) -> dict[int, int]:
    """{supervisor pid: its server's pid} of a stack's session (a server the zygote forked is outside it)."""
    return {pid: server for pid in _session_members(session) if (server := read_child_pid(pid)) is not None}


def stack_processes(session: int) -> list[int]:
    """Every process of a stack: its session's, and its servers with their descendants (verifier workers,
    zygotes), which are outside it when the server zygote forked the servers."""
    members = set(_session_members(session))
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as f:
                    ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    todo = [server for pid in members if (server := read_child_pid(pid)) is not None]
    while todo:  # a server and its descendants, in the session or not
        pid = todo.pop()
        members.add(pid)
        todo += children.get(pid, [])
    return sorted(members)


def supervisor_of(session: int, folder: str | Path) -> int:
    """The pid of the supervisor ng_run started for the server in `folder`, in session `session`."""
    folder = str(Path(folder).resolve())
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            if os.getsid(int(entry.name)) != session or os.readlink(f"/proc/{entry.name}/cwd") != folder:
                continue
            if read_child_pid(int(entry.name)) is not None:  # only a supervisor keeps one
                return int(entry.name)
        except OSError:
            continue
    raise LookupError(f"no supervisor of a server from {folder} in session {session}")


HARNESS_CONFIGS = "responses_api_agents/prorl_agent/configs"
# Agents with an existing harness on SWE (docs/service.md, "Train your own agent"), and the harness environments
# the SWE resources server binds for those placed inside its sandboxes.
HARNESS_AGENTS = ("swe_mini_swe_agent", "swe_mini_swe_agent_sandbox", "swe_claude_code", "swe_codex", "swe_opencode")
HARNESS_ENVS = ("mini_swe_agent", "claude_code", "codex", "opencode")


def built_harness_envs() -> list[str]:
    """HARNESS_ENVS that make setup built here (an npm one is left out where npm is missing)."""
    return [name for name in HARNESS_ENVS if (REPO_ROOT / ".venvs" / "harnesses" / name / ".prorl-installed").exists()]


def harness_stack(
    sandbox_root: str | Path, log_dir: Path, overrides: list[str] | None = None, ray: RayCluster | None = None
) -> Stack:
    """ng_run serving the SWE environment (its own agent `swe_agent` too) and the harness agents, the
    model server in token-in/token-out mode with Qwen3's real tokenizer, and the scripted policy
    playing the SWE example's tasks in whatever harness asks."""
    swe = environment("swe")
    configs = [f"{HARNESS_CONFIGS}/{agent}.yaml" for agent in HARNESS_AGENTS]
    model = "+policy_model.responses_api_models.balanced_vllm_model"
    return Stack(
        [*swe.config_paths()[:2], *configs, swe.config_paths()[2]],
        overrides=[
            f"+{swe.server_key}.sandbox.root_dir={sandbox_root}",
            f"++{swe.server_key}.harness_envs=[{','.join(built_harness_envs())}]",  # each config binds its own
            f"{model}.token_mode=tito",
            f"{model}.tokenizer=qwen3",
            *(overrides or []),
        ],
        policy_data=[str(swe.example)],
        policy_args=["--tokenizer", "qwen3"],
        log_dir=log_dir,
        ray=ray,
    )


class DirectPeer:
    """What a capture gateway posts through (the agent's PeerClient), straight to one server's URL and
    encoding as PeerClient does (orjson), for a gateway tested or measured without ng_run."""

    def __init__(self, url: str, http: aiohttp.ClientSession):
        self.url, self.http = url, http

    async def post(self, server_name: str, url_path: str, json: Any = None, cookies: dict | None = None):
        headers = {"Content-Type": "application/json"}
        return await self.http.post(self.url + url_path, data=orjson.dumps(json), headers=headers, cookies=cookies)


# An OpenAI function tool as chat completions take it: the capture tests' and benchmark's harness calls it.
PYTHON_TOOL = {
    "type": "function",
    "function": {
        "name": "python",
        "description": "run code",
        "parameters": {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]},
    },
}
