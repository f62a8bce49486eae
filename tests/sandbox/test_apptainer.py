# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The apptainer backend: the exact command lines (unit), its plumbing through a fake `apptainer`
that runs commands on the host (here, where Apptainer cannot be installed), and the full Sandbox
API on a real Apptainer when one and a test image are available (HPC nodes)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from prorl_gym.sandbox import SandboxSpec, SandboxStartError, create_sandbox, get_backend
from prorl_gym.sandbox.apptainer_pull import dataset_images
from prorl_gym.sandbox.apptainer_pull import main as pull_main
from prorl_gym.sandbox.backends import apptainer
from prorl_gym.sandbox.backends.apptainer import (
    ApptainerBackend,
    ApptainerError,
    ApptainerOptions,
    exec_prefix,
    host_env,
    instance_name,
    instance_start_argv,
    instance_stop_argv,
    join_argv,
    limits_prefix,
    pull_argv,
    sif_path,
)
from prorl_gym.sandbox.owner import owner_id
from prorl_gym.sandbox.spec import Bind, Limits

PRIVATE = Path("/tmp/prorl-1000/abc123")
NAME = "prorl-node1-42-777-abc123"


@pytest.fixture
def venv(tmp_path) -> Path:
    """A venv-shaped kernel interpreter whose base install is under /usr (so only the venv is bound)."""
    root = tmp_path / "kvenv"
    (root / "bin").mkdir(parents=True)
    (root / "pyvenv.cfg").write_text("home = /usr/bin\n")
    return root


def spec_for(venv: Path, **kw) -> SandboxSpec:
    return SandboxSpec(
        **{"backend": "apptainer", "image": "/img/u.sif", "kernel_python": str(venv / "bin" / "python"), **kw}
    )


# ------------------------------------------------------------------------------------ names


def test_instance_name_carries_owner_and_sandbox_id_and_is_sanitised():
    name = instance_name("abc123")
    assert name == f"prorl-{owner_id()}-abc123"
    assert instance_name("a/b c*[x]", owner="h-1-2") == "prorl-h-1-2-a-b-c--x-"
    long = instance_name("x" * 300, owner="h-1-2")
    assert len(long) <= apptainer.MAX_NAME and long != instance_name("x" * 299, owner="h-1-2")
    for n in (name, long, instance_name("ü*?", owner="o")):
        assert re.fullmatch(r"[A-Za-z0-9._-]+", n)  # Apptainer's rule; also: no glob characters


# ------------------------------------------------------------------------------------ instance start


def test_default_instance_start_command_exactly(venv):
    spec = spec_for(venv)
    assert instance_start_argv(spec, NAME, PRIVATE, "/img/u.sif") == [
        "apptainer",
        "instance",
        "start",
        "--containall",
        "--no-home",
        "--writable-tmpfs",
        "--workdir",
        f"{PRIVATE}/work",
        "--net",
        "--network",
        "none",
        "--bind",
        f"{PRIVATE}/workspace:/workspace:rw",
        "--bind",
        f"{PRIVATE}/run:{PRIVATE}/run:rw",
        "--bind",
        f"{PRIVATE}/ctl:{PRIVATE}/ctl:ro",
        "--bind",
        f"{venv}:{venv}:ro",
        "/img/u.sif",
        NAME,
    ]


def test_network_fakeroot_binds_and_extra_args(venv):
    spec = spec_for(
        venv,
        network=True,
        workspace="/testbed",
        backend=ApptainerOptions(fakeroot=True, extra_args=("--nv",)),
        binds=[Bind(src="/data/set"), Bind(src="/scratch/out", dst="/out", writable=True)],
    )
    argv = instance_start_argv(spec, NAME, PRIVATE, "/img/u.sif")
    assert "--net" not in argv and "--network" not in argv
    assert argv.count("--fakeroot") == 1 and "--fakeroot" not in instance_start_argv(
        spec_for(venv), NAME, PRIVATE, "x"
    )
    binds = [argv[i + 1] for i, arg in enumerate(argv) if arg == "--bind"]
    assert binds == [
        f"{PRIVATE}/workspace:/testbed:rw",
        f"{PRIVATE}/run:{PRIVATE}/run:rw",
        f"{PRIVATE}/ctl:{PRIVATE}/ctl:ro",
        f"{venv}:{venv}:ro",
        "/data/set:/data/set:ro",
        "/scratch/out:/out:rw",
    ]
    assert argv[-3:] == ["--nv", "/img/u.sif", NAME]  # extra args last, before image and name


def test_kernel_python_of_the_image_binds_nothing(venv):
    spec = spec_for(venv, kernel_python="/opt/conda/bin/python")  # not on this host: the image's own
    binds = [a for a in instance_start_argv(spec, NAME, PRIVATE, "x") if a.endswith((":ro", ":rw"))]
    assert binds == [
        f"{PRIVATE}/workspace:/workspace:rw",
        f"{PRIVATE}/run:{PRIVATE}/run:rw",
        f"{PRIVATE}/ctl:{PRIVATE}/ctl:ro",
    ]


def test_bind_paths_with_separators_are_refused(venv):
    with pytest.raises(ApptainerError, match="','"):
        instance_start_argv(spec_for(venv, binds=[Bind(src="/a,b")]), NAME, PRIVATE, "x")


# ------------------------------------------------------------------------------------ exec, stop, pull


def test_exec_prefix_cleans_the_environment_and_passes_ours(venv):
    spec = spec_for(venv, env={"FOO": "a,b", "OPTS": "-X=1,y", "HOME": "/home/agent", "PATH": "/opt/bin:/usr/bin"})
    assert exec_prefix(spec, NAME) == [
        "apptainer",
        "--quiet",
        "exec",
        "--cleanenv",
        "--pwd",
        "/workspace",
        "--env",
        "TMPDIR=/tmp",
        "--env",
        "LANG=C.UTF-8",
        "--env",
        "TERM=dumb",
        "--env",
        "PAGER=cat",
        "--env",
        "GIT_PAGER=cat",
        "--env",
        "PYTHONUNBUFFERED=1",
        "--env",
        "FOO=a,b",
        "--env",
        '"OPTS=-X=1,y"',
        "--env",
        "PATH=/opt/bin:/usr/bin",
        f"instance://{NAME}",
        "/usr/bin/env",
        "HOME=/home/agent",
    ]
    assert "PATH=" not in " ".join(exec_prefix(spec_for(venv), NAME))  # the image's own PATH by default


def test_singularity_binary_is_honoured_everywhere(venv):
    spec = spec_for(venv, backend=ApptainerOptions(binary="singularity"))
    assert instance_start_argv(spec, NAME, PRIVATE, "x")[0] == "singularity"
    assert exec_prefix(spec, NAME)[0] == "singularity"
    join = join_argv(spec, NAME, {}, shell=True)
    assert "SINGULARITYENV_PS1=$PS1" in join[2] and "singularity" in join
    assert "APPTAINERENV_PS1=$PS1" in join_argv(spec_for(venv), NAME, {}, shell=True)[2]
    assert (
        instance_stop_argv(NAME, "singularity")[0]
        == pull_argv("docker://x", "/c/x.sif", "singularity")[0]
        == "singularity"
    )


def test_limits_are_set_inside_by_the_joined_process(venv):
    spec = spec_for(venv)
    assert limits_prefix(spec) == [
        "bash",
        "-c",
        'ulimit -HS -v 8388608 -u 512 -f 1048576 -n 4096 && ulimit -S -t 600 && ulimit -H -t 605 && exec "$@"',
        "prorl-limits",
    ]
    unlimited = Limits(cpu_time_s=None, memory_bytes=None, processes=None, file_size_bytes=None, open_files=None)
    assert limits_prefix(spec_for(venv, limits=unlimited)) == []


def test_stop_targets_only_this_instance():
    assert instance_stop_argv(NAME) == ["apptainer", "instance", "stop", "--force", NAME]


def test_pull_command_and_cache_path():
    path = sif_path("docker://swebench/sweb.eval.x86_64.django__django-11099:latest", "/c")
    assert path == Path("/c/docker_swebench_sweb.eval.x86_64.django__django-11099_latest.sif")
    assert pull_argv("docker://ubuntu:22.04", path) == ["apptainer", "pull", str(path), "docker://ubuntu:22.04"]
    assert sif_path("oras://r/x:1", "/c") != sif_path("docker://r/x:1", "/c")
    assert len(sif_path("docker://" + "a" * 400, "/c").name) < 255


def test_host_env_keeps_what_apptainer_needs_and_nothing_that_reaches_inside():
    environ = {
        "PATH": "/usr/bin",
        "HOME": "/home/u",
        "APPTAINER_CACHEDIR": "/c",
        "SINGULARITY_TMPDIR": "/t",
        "APPTAINER_BIND": "/scratch",
        "APPTAINERENV_SECRET": "x",
        "API_KEY": "k",
        "http_proxy": "p",
    }
    assert host_env(environ) == {
        "PATH": "/usr/bin",
        "HOME": "/home/u",
        "APPTAINER_CACHEDIR": "/c",
        "SINGULARITY_TMPDIR": "/t",
    }
    assert host_env(environ, proxies=True)["http_proxy"] == "p"


def test_join_forwards_the_prompt_and_gives_apptainer_only_the_host_env(venv, tmp_path):
    """Run the joins for real against a stand-in binary that prints its environment."""
    fake = tmp_path / "apptainer"
    fake.write_text("#!/bin/sh\nenv\n")
    fake.chmod(0o755)
    host = {"PATH": "/usr/bin:/bin", "HOME": "/home/u"}
    driver_env = {"PS1": "\x1eN:$?\x1e", "PS2": "", "HOME": "/workspace", "LANG": "C.UTF-8"}

    def seen(shell: bool) -> dict[str, str]:
        argv = join_argv(spec_for(venv), NAME, host, str(fake), shell=shell)
        out = subprocess.run(argv, env=driver_env, capture_output=True, text=True, check=True).stdout
        env = dict(line.split("=", 1) for line in out.split("\n") if line)  # not splitlines: \x1e splits
        env.pop("PWD", None)  # exported by the stand-in's own sh
        return env

    assert seen(shell=True) == {"APPTAINERENV_PS1": "\x1eN:$?\x1e", "APPTAINERENV_PS2": "", **host}
    assert seen(shell=False) == host  # the kernel's join: no sh, nothing forwarded
    assert join_argv(spec_for(venv), NAME, host)[:4] == ["/usr/bin/env", "-i", "PATH=/usr/bin:/bin", "HOME=/home/u"]


def test_registered_backend():
    assert isinstance(get_backend("apptainer"), ApptainerBackend)


async def test_missing_binary_names_what_to_install(sandbox_root, venv):
    spec = spec_for(venv, root_dir=sandbox_root, backend=ApptainerOptions(binary="no-such-apptainer-binary"))
    with pytest.raises(SandboxStartError, match="module load apptainer"):
        await create_sandbox(spec)


# ------------------------------------------------------------------------------------ a fake apptainer

# Enough of Apptainer to drive the placement on this host: instance start/stop and pull are
# recorded; exec runs the command here with the environment Apptainer would give it (--cleanenv,
# --env, APPTAINERENV_* evaluated like its action script, PROMPT_COMMAND resetting PS1).
FAKE = textwrap.dedent(
    """\
    #!{python}
    import csv, json, os, pathlib, sys
    args = [a for a in sys.argv[1:] if a != "--quiet"]
    log = pathlib.Path(__file__).with_name("calls.jsonl")
    with log.open("a") as f:
        f.write(json.dumps({{"argv": args, "env": dict(os.environ)}}) + "\\n")
    if args[:2] == ["instance", "start"]:
        sys.exit("FATAL: could not open image" if "broken" in args[-2] else 0)
    if args[:2] == ["instance", "stop"] or args[0] == "pull":
        if args[0] == "pull":
            pathlib.Path(args[1]).write_text("sif")
        sys.exit(0)
    assert args[0] == "exec", args
    i, env, pwd = 1, {{}}, None
    while not args[i].startswith("instance://"):
        if args[i] == "--env":
            i += 1
            pairs = [args[i].strip('"')] if args[i].count("=") == 1 else next(csv.reader([args[i]]))  # as pflag
            for pair in pairs:
                k, _, v = pair.partition("=")
                env[k] = v
        elif args[i] == "--pwd":
            i += 1
            pwd = args[i]
        i += 1
    for k, v in os.environ.items():
        if k.startswith("APPTAINERENV_"):
            env[k[13:]] = v.replace("$?", "0")
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.setdefault("PS1", "Apptainer> ")
    env["PROMPT_COMMAND"] = 'PS1="%s"; unset PROMPT_COMMAND' % env["PS1"]
    os.chdir(pwd)
    os.execvpe(args[i + 1], args[i + 1:], env)
    """
)


@pytest.fixture
def fake(tmp_path, monkeypatch) -> Path:
    binary = tmp_path / "bin" / "apptainer"
    binary.parent.mkdir()
    binary.write_text(FAKE.format(python=sys.executable))
    binary.chmod(0o755)
    monkeypatch.setattr(apptainer, "running_as_root", lambda: False)  # these tests may run as root
    return binary


def calls(fake: Path) -> list[dict]:
    log = fake.with_name("calls.jsonl")
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


async def test_full_sandbox_api_through_the_fake(fake, sandbox_root, tmp_path, monkeypatch):
    monkeypatch.setenv("APPTAINER_BIND", "/scratch")  # a module file's site binds must not reach sandboxes
    workspace = tmp_path / "ws"  # the fake binds nothing: the workspace is a host directory
    workspace.mkdir()
    image = tmp_path / "u.sif"
    image.write_text("sif")
    spec = SandboxSpec(
        image=str(image),
        root_dir=sandbox_root,
        workspace=str(workspace),
        backend=ApptainerOptions(binary=str(fake)),
        env={"GREETING": "a,b", "OPTS": "-X=1,y"},
        limits=Limits(processes=None),  # the fake runs on the host: nproc would count all our tasks here
        command_timeout_s=10,
        python_timeout_s=20,
    )
    sandbox = await create_sandbox(spec)
    name = instance_name(sandbox.id)
    start = calls(fake)[0]
    assert start["argv"][:3] == ["instance", "start", "--containall"] and start["argv"][-2:] == [str(image), name]
    assert "APPTAINER_BIND" not in start["env"] and "PS1" not in start["env"]
    await sandbox.bash("cd sub 2>/dev/null || mkdir sub && cd sub; X=41")
    result = await sandbox.bash('echo "$((X + 1)) $PWD $HOME $GREETING $OPTS $TERM $(ulimit -t)"')
    assert result.output == f"42 {workspace}/sub {workspace} a,b -X=1,y dumb 600\n"
    code = "import os, resource; print(os.getcwd(), os.environ['TMPDIR'], resource.getrlimit(resource.RLIMIT_CPU)[0])"
    assert (await sandbox.python(code)).output == f"{workspace} /tmp 600\n"
    await sandbox.write_file("notes.txt", "hello\n")
    assert await sandbox.read_file("notes.txt") == "hello\n"
    private_dir = Path(sandbox_root) / sandbox.id
    await sandbox.close()
    await sandbox.close()
    stops = [c["argv"] for c in calls(fake) if c["argv"][:2] == ["instance", "stop"]]
    assert stops == [["instance", "stop", "--force", name]]
    assert not private_dir.exists()


async def test_failed_start_leaves_nothing(fake, sandbox_root, tmp_path):
    image = tmp_path / "broken.sif"
    image.write_text("")
    spec = SandboxSpec(image=str(image), root_dir=sandbox_root, backend=ApptainerOptions(binary=str(fake)))
    with pytest.raises(SandboxStartError, match="could not open image"):
        await create_sandbox(spec, sandbox_id="s1")
    assert not (Path(sandbox_root) / "s1").exists()
    assert [c["argv"][:2] for c in calls(fake)][-1] == ["instance", "stop"]  # a half-started instance too


async def test_docker_images_come_from_the_cache_pulled_once(fake, sandbox_root, tmp_path):
    cache = tmp_path / "cache"
    uri = "docker://ghcr.io/org/task:1"
    spec = SandboxSpec(
        image=uri,
        root_dir=sandbox_root,
        workspace=str(tmp_path),
        backend=ApptainerOptions(binary=str(fake), cache_dir=str(cache)),
    )
    placements = await asyncio.gather(*(ApptainerBackend().place(f"s{i}", spec) for i in range(3)))
    pulls = [c["argv"] for c in calls(fake) if c["argv"][0] == "pull"]
    assert len(pulls) == 1 and pulls[0][-1] == uri
    starts = [c["argv"] for c in calls(fake) if c["argv"][:2] == ["instance", "start"]]
    assert {argv[-2] for argv in starts} == {str(sif_path(uri, cache))}
    await asyncio.gather(*(p.close() for p in placements))


def test_pull_cli_pulls_each_distinct_image_once(fake, tmp_path, capsys):
    data = tmp_path / "d.jsonl"
    rows = [{"image": "docker://a/x:1"}, {"image": "docker://a/x:1"}, {"meta": {"image": "docker://b/y:2"}}, {}]
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert dataset_images([data]) == ["docker://a/x:1"]
    assert dataset_images([data], "meta.image") == ["docker://b/y:2"]
    cache = tmp_path / "c"
    assert pull_main([str(data), "--cache-dir", str(cache), "--binary", str(fake)]) == 0
    assert sif_path("docker://a/x:1", cache).read_text() == "sif"
    assert pull_main([str(data), "--cache-dir", str(cache), "--binary", str(fake)]) == 0
    assert len([c for c in calls(fake) if c["argv"][0] == "pull"]) == 1
    assert "cached  docker://a/x:1" in capsys.readouterr().out


# ------------------------------------------------------------------------------------ real Apptainer

TEST_IMAGE = os.environ.get("PRORL_APPTAINER_TEST_IMAGE")
real_apptainer = pytest.mark.skipif(
    shutil.which(ApptainerOptions().binary) is None or not TEST_IMAGE,
    reason="apptainer not on PATH (not installable on this machine kind); "
    "set PRORL_APPTAINER_TEST_IMAGE=<sif> on an HPC node to run",
)


def instances() -> str:
    return subprocess.run(["apptainer", "instance", "list"], capture_output=True, text=True).stdout


@real_apptainer
async def test_real_apptainer_full_sandbox_api(sandbox_root):
    """Needs a self-contained .venvs/sandbox (see docs/hpc.md) and an image with bash."""
    spec = SandboxSpec(
        backend="apptainer", image=TEST_IMAGE, root_dir=sandbox_root, command_timeout_s=30, start_timeout_s=300
    )
    sandbox = await create_sandbox(spec)
    name = instance_name(sandbox.id)
    try:
        assert name in instances()
        await sandbox.bash("mkdir -p sub && cd sub && export X=41")
        result = await sandbox.bash('echo "$((X + 1)) $PWD $HOME"')
        assert result.output == "42 /workspace/sub /workspace\n" and result.exit_code == 0
        interfaces = await sandbox.bash("tail -n +3 /proc/net/dev | cut -d: -f1")
        assert interfaces.output.split() == ["lo"]  # its own, empty network namespace
        assert (await sandbox.python("import os; x = 6 * 7; print(x, os.getcwd())")).output == "42 /workspace\n"
        assert (await sandbox.python("print(x + 1)")).output == "43\n"
        await sandbox.write_file("notes/a.txt", "hello\n")
        assert (await sandbox.bash("cat /workspace/notes/a.txt")).output == "hello\n"
        assert await sandbox.read_file("notes/a.txt") == "hello\n"
    finally:
        await sandbox.close()
    assert name not in instances()
    assert not (Path(sandbox_root) / sandbox.id).exists()
