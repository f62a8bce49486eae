# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The apptainer backend: the exact command lines (unit), then the full Sandbox API and each
failure a real HPC site would show, through a fake `apptainer` (tests/support/fake_apptainer.py) that
models them (Apptainer cannot be installed here). The real-Apptainer suite is in
test_apptainer_real.py."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from prorl_gym.sandbox import Backends, SandboxSpec, SandboxStartError, create_sandbox, get_backend
from prorl_gym.sandbox.backends import instances
from prorl_gym.sandbox.backends.apptainer import backend as apptainer
from prorl_gym.sandbox.backends.apptainer.backend import ApptainerBackend, nproc_counted_per_sandbox
from prorl_gym.sandbox.backends.apptainer.cli import (
    MAX_NAME,
    ApptainerError,
    env_file_text,
    exec_prefix,
    host_env,
    instance_name,
    instance_start_argv,
    instance_stop_argv,
    join_argv,
    limits_prefix,
    pull_argv,
    pull_env,
    sif_path,
)
from prorl_gym.sandbox.backends.apptainer.options import ApptainerOptions
from prorl_gym.sandbox.backends.apptainer.pull import dataset_images
from prorl_gym.sandbox.backends.apptainer.pull import main as pull_main
from prorl_gym.sandbox.leases import read_leases
from prorl_gym.sandbox.owner import owner_id
from prorl_gym.sandbox.reaper import reap_stale
from prorl_gym.sandbox.spec import Bind, ResourceLimits

PRIVATE = Path("/tmp/prorl-1000/abc123")
NAME = "prorl-node1-42-777-abc123"
ENV_FILE = PRIVATE / "env"
FAKE = Path(__file__).parents[1] / "support" / "fake_apptainer.py"


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
    assert len(long) <= MAX_NAME and long != instance_name("x" * 299, owner="h-1-2")
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
        "--overlay",  # on the node's disk, not the session tmpfs (sessiondir max size, 64 MiB)
        f"{PRIVATE}/overlay",
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


def test_network_fakeroot_copies_binds_and_extra_args(venv):
    spec = spec_for(
        venv,
        network=True,
        backend=ApptainerOptions(fakeroot=True, extra_args=("--nv",), disk_copies=("/testbed",), overlay="tmpfs"),
        binds=[Bind(src="/data/set"), Bind(src="/scratch/out", dst="/out", writable=True)],
    )
    argv = instance_start_argv(spec, NAME, PRIVATE, "/img/u.sif")
    assert "--net" not in argv and "--network" not in argv
    assert "--writable-tmpfs" in argv and "--overlay" not in argv  # never both: Apptainer refuses it
    i = argv.index("--fakeroot")  # and no host libfakeroot preloaded into joined processes
    assert argv[i + 1] == "--ignore-fakeroot-command" and "--fakeroot" not in instance_start_argv(
        spec_for(venv), NAME, PRIVATE, "x"
    )
    binds = [argv[i + 1] for i, arg in enumerate(argv) if arg == "--bind"]
    assert binds == [
        f"{PRIVATE}/workspace:/workspace:rw",
        f"{PRIVATE}/run:{PRIVATE}/run:rw",
        f"{PRIVATE}/ctl:{PRIVATE}/ctl:ro",
        f"{PRIVATE}/copies/0:/testbed:rw",
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


# ------------------------------------------------------------------------------------ exec, env, stop, pull


def test_exec_prefix_reads_the_environment_from_a_file_literally(venv):
    spec = spec_for(venv, env={"FOO": "a,b", "HOME": "/home/agent"})
    assert exec_prefix(spec, NAME, ENV_FILE) == [
        "apptainer",
        "--quiet",
        "exec",
        "--cleanenv",
        "--no-eval",
        "--env-file",
        str(ENV_FILE),
        "--pwd",
        "/workspace",
        f"instance://{NAME}",
        "/usr/bin/env",
        "HOME=/home/agent",
    ]
    text = env_file_text({"A": "$(id)", "B": 'it\'s "q"', "C": "x=y,z", "D": "two\nlines"})
    assert text == "A='$(id)'\nB='it'\"'\"'s \"q\"'\nC=x=y,z\nD='two\nlines'\n"
    for bad in ({"HOME": "/x"}, {"1X": "y"}, {"A-B": "y"}, {"A": "nul\0"}):
        with pytest.raises(ApptainerError):
            env_file_text(bad)


def test_singularity_binary_is_honoured_everywhere(venv):
    spec = spec_for(venv, backend=ApptainerOptions(binary="singularity", fakeroot=True))
    start = instance_start_argv(spec, NAME, PRIVATE, "x")
    assert start[0] == "singularity" and "--ignore-fakeroot-command" not in start  # Apptainer's flag only
    assert exec_prefix(spec, NAME, ENV_FILE)[0] == "singularity"
    join = join_argv(spec, NAME, {}, ENV_FILE, shell=True)
    assert "SINGULARITYENV_PS1=$PS1" in join[2] and "singularity" in join
    assert "APPTAINERENV_PS1=$PS1" in join_argv(spec_for(venv), NAME, {}, ENV_FILE, shell=True)[2]
    assert (
        instance_stop_argv(NAME, "singularity")[0]
        == pull_argv("docker://x", "/c/x.sif", "singularity")[0]
        == "singularity"
    )


def test_limits_are_set_inside_by_the_joined_process():
    assert limits_prefix(ResourceLimits()) == [
        "bash",
        "-c",
        'ulimit -HS -v 8388608 -u 512 -f 1048576 -n 4096 && ulimit -S -t 600 && ulimit -H -t 605 && exec "$@"',
        "prorl-limits",
    ]
    unlimited = ResourceLimits(
        cpu_time_s=None, memory_bytes=None, processes=None, file_size_bytes=None, open_files=None
    )
    assert limits_prefix(unlimited) == []


@pytest.mark.parametrize(
    ("userns", "release", "counted"),
    [
        (True, "5.14.0-427.13.1.el9_4.x86_64", True),
        (True, "6.8.0-45-generic", True),
        (True, "4.18.0-513.24.1.el8_9.x86_64", False),  # EL8: every task of the user on the node
        (False, "6.8.0", False),  # setuid install, no user namespace
        (None, "6.8.0", False),  # unknown
    ],
)
def test_nproc_counts_per_sandbox_only_in_a_user_namespace_on_new_kernels(userns, release, counted):
    assert nproc_counted_per_sandbox(userns, release) is counted


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
        "XDG_RUNTIME_DIR": "/run/user/1000",  # with D-Bus: a systemd user scope per instance
        "DBUS_SESSION_BUS_ADDRESS": "unix:path=/run/user/1000/bus",
        "APPTAINER_CONFIGDIR": "/home/u/.apptainer",
        "APPTAINER_DOCKER_USERNAME": "me",
        "APPTAINER_DOCKER_PASSWORD": "secret",
    }
    assert host_env(environ, "/tmp/r/.apptainer") == {
        "PATH": "/usr/bin",
        "HOME": "/home/u",
        "APPTAINER_CACHEDIR": "/c",
        "SINGULARITY_TMPDIR": "/t",
        "APPTAINER_CONFIGDIR": "/tmp/r/.apptainer",
        "SINGULARITY_CONFIGDIR": "/tmp/r/.apptainer",
    }
    pull = pull_env(environ)  # credentials and the user's config dir (registry logins): pulls only
    assert pull["http_proxy"] == "p" and pull["APPTAINER_DOCKER_PASSWORD"] == "secret"
    assert pull["APPTAINER_CONFIGDIR"] == "/home/u/.apptainer" and "XDG_RUNTIME_DIR" not in pull


def test_join_forwards_the_prompt_and_gives_apptainer_only_the_host_env(venv, tmp_path):
    """Run the joins for real against a stand-in binary that prints its environment."""
    fake = tmp_path / "apptainer"
    fake.write_text("#!/bin/sh\nenv\n")
    fake.chmod(0o755)
    host = {"PATH": "/usr/bin:/bin", "HOME": "/home/u"}
    driver_env = {"PS1": "\x1eN:$?\x1e", "PS2": "", "HOME": "/workspace", "LANG": "C.UTF-8"}

    def seen(shell: bool) -> dict[str, str]:
        argv = join_argv(spec_for(venv), NAME, host, ENV_FILE, str(fake), shell=shell)
        out = subprocess.run(argv, env=driver_env, capture_output=True, text=True, check=True).stdout
        env = dict(line.split("=", 1) for line in out.split("\n") if line)  # not splitlines: \x1e splits
        env.pop("PWD", None)  # exported by the stand-in's own sh
        return env

    assert seen(shell=True) == {"APPTAINERENV_PS1": "\x1eN:$?\x1e", "APPTAINERENV_PS2": "", **host}
    assert seen(shell=False) == host  # the kernel's join: no sh, nothing forwarded
    assert join_argv(spec_for(venv), NAME, host, ENV_FILE)[:4] == [
        "/usr/bin/env",
        "-i",
        "PATH=/usr/bin:/bin",
        "HOME=/home/u",
    ]


def test_registered_backend():
    assert isinstance(get_backend("apptainer"), ApptainerBackend)


async def test_missing_binary_names_what_to_install(sandbox_root, venv):
    spec = spec_for(venv, root_dir=sandbox_root, backend=ApptainerOptions(binary="no-such-apptainer-binary"))
    with pytest.raises(SandboxStartError, match="module load apptainer"):
        await create_sandbox(spec)


# ------------------------------------------------------------------------------------ through the fake


class Fake:
    """One fake `apptainer` (or `singularity`) binary with its site description and call log."""

    def __init__(self, home: Path, name: str = "apptainer"):
        self.home = home
        home.mkdir(parents=True, exist_ok=True)
        self.binary = home / "bin" / name
        self.binary.parent.mkdir(exist_ok=True)
        self.binary.write_text(f'#!/bin/sh\nexec {sys.executable} {FAKE} --fake-home={home} "$@"\n')
        self.binary.chmod(0o755)

    def site(self, **site) -> None:
        (self.home / "site.json").write_text(json.dumps(site))

    def calls(self, *prefix: str) -> list[dict]:
        log = self.home / "calls.jsonl"
        rows = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
        return [row for row in rows if row["argv"][: len(prefix)] == list(prefix)]


@pytest.fixture
def fake(tmp_path, monkeypatch) -> Fake:
    monkeypatch.setattr(apptainer, "running_as_root", lambda: False)  # these tests may run as root
    # A fresh apptainer backend for each test: what one learnt of its site (a refused overlay) and
    # the warnings it gave are its own.
    monkeypatch.setattr(instances, "_default", Backends())
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # Apptainer's default config dir: must stay unused
    return Fake(tmp_path / "fake")


def fake_spec(fake: Fake, root: str, tmp_path: Path, **kw) -> SandboxSpec:
    workspace = tmp_path / "ws"  # a mount point on the host: the fake runs commands here, under bwrap
    workspace.mkdir(exist_ok=True)
    image = tmp_path / "u.sif"
    image.write_text("sif")
    options = {"binary": str(fake.binary), **kw.pop("options", {})}
    fields = dict(
        image=str(image),
        root_dir=root,
        workspace=str(workspace),
        backend=ApptainerOptions(**options),
        limits=ResourceLimits(processes=None),
        command_timeout_s=10,
        python_timeout_s=20,
    )
    return SandboxSpec(**(fields | kw))


async def test_full_sandbox_api_through_the_fake(fake, sandbox_root, tmp_path, monkeypatch):
    monkeypatch.setenv("APPTAINER_BIND", "/scratch")  # a module file's site binds must not reach sandboxes
    tricky = {"CMD": "$(echo pwned)", "QUOTED": 'it\'s "q" $HOME', "CSV": "-X=1,y", "MULTI": "a\nb"}
    spec = fake_spec(fake, sandbox_root, tmp_path, env=tricky)
    sandbox = await create_sandbox(spec)
    name, private_dir = instance_name(sandbox.id), Path(sandbox_root) / sandbox.id
    workspace = spec.workspace
    (start,) = fake.calls("instance", "start")
    assert start["argv"][-2:] == [spec.image, name] and "APPTAINER_BIND" not in start["env"]
    config_dir = Path(sandbox_root) / ".apptainer"  # instance state and logs: under the sandbox root
    assert start["env"]["APPTAINER_CONFIGDIR"] == str(config_dir)
    assert len(list(config_dir.glob(f"instances/app/*/*/{name}/{name}.json"))) == 1
    env_file = private_dir / "env"
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600
    await sandbox.bash("cd sub 2>/dev/null || mkdir sub && cd sub; X=41")
    result = await sandbox.bash('echo "$((X + 1)) $PWD $HOME $TERM $(ulimit -t) $PYTHONDONTWRITEBYTECODE"')
    assert result.output == f"42 {workspace}/sub {workspace} dumb 600 1\n"
    values = await sandbox.bash('printf "%s|" "$CMD" "$QUOTED" "$CSV" "$MULTI"')
    assert values.output == '$(echo pwned)|it\'s "q" $HOME|-X=1,y|a\nb|'  # literal, as given
    code = "import os, resource; print(os.getcwd(), os.environ['TMPDIR'], resource.getrlimit(resource.RLIMIT_CPU)[0])"
    assert (await sandbox.python(code)).output == f"{workspace} /tmp 600\n"
    await sandbox.write_file("notes.txt", "hello\n")
    assert await sandbox.read_file("notes.txt") == "hello\n"
    assert (private_dir / "workspace" / "notes.txt").read_text() == "hello\n"  # bound, on disk
    joins = fake.calls("exec")
    assert len(joins) == 3 and not any("pwned" in " ".join(c["argv"]) for c in joins)  # values not in `ps`
    await sandbox.close()
    await sandbox.close()
    assert [c["argv"] for c in fake.calls("instance", "stop")] == [["instance", "stop", "--force", name]]
    assert not private_dir.exists() and not read_leases(sandbox_root)
    assert not list(config_dir.glob(f"instances/**/{name}*")), "instance state or .out/.err logs left"
    assert not (tmp_path / "home" / ".apptainer").exists()


async def test_no_dbus_session_reaches_apptainer(fake, sandbox_root, tmp_path, monkeypatch):
    """A node with a user systemd: passing both variables puts every instance in a systemd scope
    outside the job's cgroup, and concurrent starts fail (apptainer#3607)."""
    fake.site(user_systemd=True)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", f"unix:path={tmp_path}/bus")
    spec = fake_spec(fake, sandbox_root, tmp_path)
    sandboxes = await asyncio.gather(*(create_sandbox(spec) for _ in range(3)))
    assert [(await sb.bash("echo ok")).output for sb in sandboxes] == ["ok\n"] * 3
    await asyncio.gather(*(sb.close() for sb in sandboxes))
    assert not any("DBUS_SESSION_BUS_ADDRESS" in c["env"] or "XDG_RUNTIME_DIR" in c["env"] for c in fake.calls())


@pytest.mark.parametrize(
    ("install", "kernel", "enforced"),
    [("userns", "6.8.0", True), ("userns", "4.18.0-513.el8", False), ("setuid", "6.8.0", False)],
)
async def test_nproc_is_set_only_where_it_counts_per_sandbox(
    fake, sandbox_root, tmp_path, monkeypatch, caplog, install, kernel, enforced
):
    fake.site(install=install, kernel=kernel)
    monkeypatch.setattr(apptainer, "kernel_release", lambda: kernel)
    spec = fake_spec(fake, sandbox_root, tmp_path, limits=ResourceLimits(processes=64))
    with caplog.at_level(logging.WARNING):
        async with await create_sandbox(spec) as sandbox:
            assert (sandbox.placement.limits.processes == 64) is enforced
            assert (await sandbox.bash("ls / > /dev/null && echo forked")).output == "forked\n"
            assert (await sandbox.python("print(6 * 7)")).output == "42\n"
    assert ("limits.processes is NOT enforced" in caplog.text) is not enforced


async def test_enforcing_nproc_where_it_counts_every_task_of_the_user_fails_the_shell_start(
    fake, sandbox_root, tmp_path
):
    """What the fake models (and a setuid or EL8 site does): the sandbox cannot fork, so its
    shell (started on first use) cannot start: a typed start error, and nothing left behind."""
    fake.site(install="setuid")
    spec = fake_spec(fake, sandbox_root, tmp_path, limits=ResourceLimits(processes=64), options={"nproc": "enforce"})
    async with await create_sandbox(spec) as sandbox:
        with pytest.raises(SandboxStartError):
            await sandbox.bash("true")
    assert not read_leases(sandbox_root)


def image_with_repo(fake: Fake, tmp_path: Path) -> Path:
    """An image whose /testbed (here a host mount point) holds a root-owned repository."""
    content, testbed = tmp_path / "image-testbed", tmp_path / "testbed"
    content.mkdir()
    testbed.mkdir()
    (content / "module.py").write_text("VALUE = 1\n")
    fake.site(image_dirs={str(testbed): str(content)})
    return testbed


async def test_image_directories_are_read_only_unless_copied_to_disk(fake, sandbox_root, tmp_path):
    testbed = image_with_repo(fake, tmp_path)
    edit = f"cd {testbed} && echo 'VALUE = 2' > module.py && cat module.py"
    async with await create_sandbox(fake_spec(fake, sandbox_root, tmp_path)) as sandbox:
        assert "Read-only file system" in (await sandbox.bash(edit)).output  # what SWE rows hit before
    spec = fake_spec(fake, sandbox_root, tmp_path, options={"disk_copies": (str(testbed),)})
    async with await create_sandbox(spec) as sandbox:
        assert (await sandbox.bash(edit)).output == "VALUE = 2\n"
        assert (await sandbox.read_file(f"{testbed}/module.py")) == "VALUE = 2\n"  # another join sees it
        assert (Path(sandbox_root) / sandbox.id / "copies" / "0" / "module.py").read_text() == "VALUE = 2\n"
    assert (tmp_path / "image-testbed" / "module.py").read_text() == "VALUE = 1\n"


async def test_overlay_dir_falls_back_to_tmpfs_where_the_site_refuses_it(fake, sandbox_root, tmp_path, caplog):
    fake.site(install="setuid")  # and no fuse-overlayfs: "only root user can use sandbox as overlay"
    spec = fake_spec(fake, sandbox_root, tmp_path)
    with caplog.at_level(logging.WARNING):
        async with await create_sandbox(spec) as sandbox:
            assert (await sandbox.bash("echo up")).output == "up\n"
        async with await create_sandbox(spec):
            pass
    starts = [c["argv"] for c in fake.calls("instance", "start")]
    assert ["--overlay" in a for a in starts] == [True, False, False]  # then straight to tmpfs
    assert ["--writable-tmpfs" in a for a in starts] == [False, True, True]
    assert caplog.text.count("refuses an --overlay directory") == 1


async def test_fakeroot_joins_are_not_wrapped_in_the_hosts_fakeroot(fake, sandbox_root, tmp_path):
    fake.site(root_mapped_fakeroot=True)  # no /etc/subuid entry: Apptainer falls back to a root-mapped namespace
    spec = fake_spec(fake, sandbox_root, tmp_path, options={"fakeroot": True})
    async with await create_sandbox(spec) as sandbox:
        assert (await sandbox.bash('echo "${LD_PRELOAD-none}"')).output == "none\n"


async def test_pulls_carry_registry_credentials_and_sandboxes_never_see_them(
    fake, sandbox_root, tmp_path, monkeypatch
):
    fake.site(rate_limited=True)
    uri, cache = "docker://ghcr.io/org/task:1", tmp_path / "cache"
    spec = fake_spec(fake, sandbox_root, tmp_path, image=uri, options={"cache_dir": str(cache)})
    with pytest.raises(SandboxStartError, match="toomanyrequests"):
        await create_sandbox(spec)
    monkeypatch.setenv("APPTAINER_DOCKER_USERNAME", "me")
    monkeypatch.setenv("APPTAINER_DOCKER_PASSWORD", "s3cret")
    async with await create_sandbox(spec) as sandbox:
        assert (await sandbox.bash("env | grep -c s3cret")).output == "0\n"
    assert fake.calls("pull")[-1]["env"]["APPTAINER_DOCKER_PASSWORD"] == "s3cret"
    assert not any("s3cret" in json.dumps(c) for c in fake.calls() if c["argv"][0] != "pull")


async def test_docker_images_come_from_the_cache_pulled_once(fake, sandbox_root, tmp_path):
    uri, cache = "docker://ghcr.io/org/task:1", tmp_path / "cache"
    spec = fake_spec(fake, sandbox_root, tmp_path, image=uri, options={"cache_dir": str(cache)})
    backend = ApptainerBackend()  # one instance, as a server has: its pulls are shared
    placements = await asyncio.gather(*(backend.place(f"s{i}", spec) for i in range(3)))
    pulls = [c["argv"] for c in fake.calls("pull")]
    assert len(pulls) == 1 and pulls[0][-1] == uri
    assert {c["argv"][-2] for c in fake.calls("instance", "start")} == {str(sif_path(uri, cache))}
    await asyncio.gather(*(p.close() for p in placements))


async def test_failed_start_leaves_nothing(fake, sandbox_root, tmp_path):
    image = tmp_path / "broken.sif"
    image.write_text("")
    spec = fake_spec(fake, sandbox_root, tmp_path, image=str(image))
    with pytest.raises(SandboxStartError, match="could not open image"):
        await create_sandbox(spec, sandbox_id="s1")
    assert not (Path(sandbox_root) / "s1").exists() and not read_leases(sandbox_root)
    assert [c["argv"][:2] for c in fake.calls()][-1] == ["instance", "stop"]  # a half-started instance too


def registered(sandbox_root: str, name: str) -> bool:
    return any(Path(sandbox_root, ".apptainer").glob(f"instances/app/*/*/{name}/{name}.json"))


async def test_an_instance_that_comes_up_after_its_start_timed_out_is_killed(fake, sandbox_root, tmp_path):
    """The starter detaches the instance (setsid): killing the CLI at the deadline does not end it."""
    fake.site(start_delay_s=2)
    spec = fake_spec(fake, sandbox_root, tmp_path, start_timeout_s=0.5)
    with pytest.raises(SandboxStartError, match="timed out"):
        await create_sandbox(spec, sandbox_id="late")
    await asyncio.sleep(2.5)  # past the moment it would have registered
    assert not registered(sandbox_root, instance_name("late")) and not read_leases(sandbox_root)


async def test_an_instance_not_seen_by_the_deadline_keeps_its_lease_until_reaped(
    fake, sandbox_root, tmp_path, monkeypatch
):
    fake.site(start_delay_s=2, master_title=False)  # its master cannot be found by title
    monkeypatch.setattr(apptainer, "LATE_START_GRACE_S", 0.5)
    spec = fake_spec(fake, sandbox_root, tmp_path, start_timeout_s=0.5)
    with pytest.raises(SandboxStartError, match="timed out"):
        await create_sandbox(spec, sandbox_id="late")
    (lease,) = read_leases(sandbox_root)
    assert lease.abandoned is not None and lease.options["binary"] == str(fake.binary)
    assert await reap_stale(sandbox_root) == []  # not up yet: the lease stays, to look again
    deadline = time.monotonic() + 5
    while not registered(sandbox_root, instance_name("late")) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    assert registered(sandbox_root, instance_name("late"))  # it did come up, with no sandbox of ours
    assert await reap_stale(sandbox_root) == ["late"]  # ours, abandoned: this server's own reaper ends it
    assert not registered(sandbox_root, instance_name("late")) and not read_leases(sandbox_root)


async def test_reaping_uses_the_binary_the_sandbox_was_started_with(fake, sandbox_root, tmp_path, monkeypatch):
    singularity = Fake(tmp_path / "sing", "singularity")
    monkeypatch.setenv("PATH", f"{fake.binary.parent}:{singularity.binary.parent}:{os.environ['PATH']}")
    spec = fake_spec(singularity, sandbox_root, tmp_path, options={"binary": "singularity"})
    sandbox = await create_sandbox(spec)
    name = instance_name(sandbox.id)
    (lease,) = read_leases(sandbox_root)
    assert await ApptainerBackend().reap(lease)  # as a successor server would, for a dead owner
    assert [c["argv"][-1] for c in singularity.calls("instance", "stop")] == [name] and not fake.calls()
    assert not registered(sandbox_root, name)
    await sandbox.close()


def test_pull_cli_pulls_each_distinct_image_once(fake, tmp_path, capsys):
    data = tmp_path / "d.jsonl"
    rows = [{"image": "docker://a/x:1"}, {"image": "docker://a/x:1"}, {"meta": {"image": "docker://b/y:2"}}, {}]
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert dataset_images([data]) == ["docker://a/x:1"]
    assert dataset_images([data], "meta.image") == ["docker://b/y:2"]
    cache = tmp_path / "c"
    assert pull_main([str(data), "--cache-dir", str(cache), "--binary", str(fake.binary)]) == 0
    assert sif_path("docker://a/x:1", cache).read_text() == "sif"
    assert pull_main([str(data), "--cache-dir", str(cache), "--binary", str(fake.binary)]) == 0
    assert len(fake.calls("pull")) == 1
    assert "cached  docker://a/x:1" in capsys.readouterr().out


async def test_an_apptainer_sandbox_forks_with_a_copy_of_its_files_and_state(fake, sandbox_root, tmp_path):
    spec = fake_spec(fake, sandbox_root, tmp_path)
    async with await create_sandbox(spec) as parent:
        await parent.bash("mkdir -p src && cd src && echo v1 > app.py && echo note > /tmp/note && export TASK=t1")
        await parent.python("state = {'turn': 3}")
        forks = await parent.fork(2)
        try:
            assert len(fake.calls("instance", "start")) == 3
            await forks[0].bash("echo mine > app.py && rm /tmp/note")
            shell = await forks[1].bash("pwd; echo $TASK; cat app.py /tmp/note")
            assert shell.output.split() == [f"{spec.workspace}/src", "t1", "v1", "note"]
            assert (await forks[1].python("print(state['turn'])")).output == "3\n"
            assert (await parent.bash("cat app.py /tmp/note")).output.split() == ["v1", "note"]
            for fork in forks:  # each fork's files are its own copy, on its own disk
                assert (Path(sandbox_root) / fork.id / "workspace" / "src" / "app.py").exists()
        finally:
            await asyncio.gather(*(f.close() for f in forks))
    assert not [p.name for p in Path(sandbox_root).iterdir() if not p.name.startswith(".")]
    assert not read_leases(sandbox_root)
