# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Fork a sandbox: freeze its state into a template once, start any number of sandboxes from it.

    children = await sandbox.fork(8)          # or: template = await freeze(sandbox)
                                              #     children = await template.spawn(8)

What a fork carries over, and how:
  files       the workspace and /tmp (and an Apptainer sandbox's disk copies: `fork_dirs`),
              copied once into the template (a tar stream written inside the parent, as its own
              uid, and extracted on the host with tarfile's `data` filter: the parent cannot make
              the host write outside the template). Every bubblewrap fork
              mounts them copy-on-write (an overlay: template read-only below, the fork's own
              writes above), so a fork costs a sandbox start, not a copy, and no fork sees
              another's writes; an Apptainer fork starts with a copy (reflinked where the file
              system can), as rootless Apptainer mounts no overlay over a bind.
  shell       working directory, exported variables and functions (`export -p`, `declare -f`);
              not unexported variables, aliases, jobs or history.
  Python      when the parent's kernel runs: its variables (cloudpickle, functions and classes by
              value), imported modules (imported again), the working directory and the state of
              `random` and numpy's global generator, so a fork draws the same numbers the parent
              would next. The kernel is not forked and no cell is run again, so nothing a cell did
              outside the interpreter happens twice. Lost, and listed in `Template.dropped`: values
              that cannot be pickled (open files, sockets, threads, generators).
A template is read-only to its forks and outlives none of them: it is removed when it is closed
and its last fork is. It has a lease like a sandbox, so a killed server's templates are reaped.

A snapshot of a fork whose writes are apart on the host (bubblewrap's overlay upper dirs) is a
layer: those writes, copied (sandbox/layers.py: no link followed, whiteouts kept), stacked on the
fork's own template, which it holds as a fork would. It costs what the fork wrote, not its
workspace. Past MAX_LAYERS (or where the writes are not apart) a snapshot is a full copy.

A sandbox made only to be frozen (a task staged once for a group: `staging_spec`) writes to disk
through an overlay over an empty base; `freeze(consume=True)` closes it and takes its writes as the
template's files with two renames, whatever their size. The host never reads those files.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import secrets
import shutil
import stat
import tarfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Protocol

from prorl_gym.runtime.process import DEFAULT_SIGNALS, reap
from prorl_gym.sandbox.api import SandboxAPI, TemplateAPI
from prorl_gym.sandbox.backends.base import HostReachable, KeepsWrites, Placement
from prorl_gym.sandbox.errors import SandboxForkError
from prorl_gym.sandbox.layers import LayerTooLarge, copy_layer, open_beneath, remove_beneath
from prorl_gym.sandbox.layout import private_dir_of
from prorl_gym.sandbox.leases import lease_for, remove_lease, write_lease
from prorl_gym.sandbox.spec import SandboxSpec

log = logging.getLogger(__name__)

# A snapshot of a snapshot's fork ...: deeper chains are copied whole (each layer is a lower dir of a mount).
MAX_LAYERS = 16
MAX_COPY_BYTES = 1 << 30  # a sandbox's files copied into one template (or layer), at most

# Inside a sandbox: the shell and Python state a fork carries (in /tmp, which a fork carries).
STATE_DIR = "/tmp/.prorl-fork"
SHELL_STATE = "/tmp/.prorl-fork-shell.sh"  # not in STATE_DIR: writing it then needs no mkdir (a process)
PYTHON_STATE = f"{STATE_DIR}/python.pkl"
# Builtins only (no process forked in the sandbox); the shell's own variables (prompt markers, levels)
# are its own, not the task's: they are filtered out of the template's copy on the host (SKIP_EXPORTS).
CAPTURE_SHELL = f"{{ export -p; declare -f; printf 'cd -- %q\\n' \"$PWD\"; }} > {SHELL_STATE}"
SKIP_EXPORTS = re.compile(rb"^declare -[a-zA-Z-]* (PS1|PS2|PS4|PWD|OLDPWD|SHLVL|_)=")


def restore_shell(host_removes: bool) -> str:
    """A fork's shell loads the state first; the file then goes: removed by the host where it reaches the
    sandbox's files (`remove_shell_state`: `rm` is a process, ~1.5 ms of a fork's start), else by `rm`."""
    remove = "" if host_removes else f" rm -f {SHELL_STATE};"
    return f"if [ -f {SHELL_STATE} ]; then . {SHELL_STATE};{remove} fi >/dev/null 2>&1; true"


def remove_shell_state(placement: HostReachable) -> None:
    """A fork's loaded shell state, removed from its /tmp on the host."""
    remove_beneath(placement.files_of("/tmp"), [os.path.basename(SHELL_STATE)])


CAPTURE_PYTHON = f"""
def __prorl_capture(path):
    import json, os, sys, types
    import cloudpickle
    ns = globals()  # the session's namespace, in a REPL as in an IPython kernel
    hidden = set(ns['get_ipython']().user_ns_hidden) if 'get_ipython' in ns else set()
    modules, values, dropped = {{}}, {{}}, []
    for name, value in list(ns.items()):
        if name.startswith('_') or name in hidden:
            continue
        if isinstance(value, types.ModuleType):
            modules[name] = value.__name__
            continue
        try:
            cloudpickle.dumps(value)
            values[name] = value
        except Exception:
            dropped.append(name)
    state = {{'modules': modules, 'values': values, 'cwd': os.getcwd(),
             'random': sys.modules['random'].getstate() if 'random' in sys.modules else None,
             'numpy': sys.modules['numpy'].random.get_state() if 'numpy' in sys.modules else None}}
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'wb') as f:
        cloudpickle.dump(state, f)  # all in one: values that share objects still share them
    print(json.dumps(dropped))
__prorl_capture({PYTHON_STATE!r})
del __prorl_capture
"""

RESTORE_PYTHON = f"""
def __prorl_restore(path):
    import importlib, os, sys, types
    import cloudpickle
    with open(path, 'rb') as f:
        state = cloudpickle.load(f)
    ns = globals()
    for name, module in state['modules'].items():
        try:
            ns[name] = importlib.import_module(module)
        except Exception:
            pass
    for name, value in state['values'].items():
        if isinstance(value, types.FunctionType) and value.__module__ == '__main__':
            # cloudpickle gives functions of the kernel's namespace a globals dict of their own
            f = types.FunctionType(value.__code__, ns, value.__name__, value.__defaults__, value.__closure__)
            f.__kwdefaults__, f.__qualname__, f.__dict__ = value.__kwdefaults__, value.__qualname__, value.__dict__
            value = f
        ns[name] = value
    os.chdir(state['cwd'])
    if state['random'] is not None:
        import random
        random.setstate(state['random'])
    if state['numpy'] is not None:
        import numpy
        numpy.random.set_state(state['numpy'])
    os.remove(path)
__prorl_restore({PYTHON_STATE!r})
del __prorl_restore
"""


class Frozen(SandboxAPI, Protocol):
    """What freeze() reads of a sandbox on this machine (sandbox.py's Sandbox): the sandbox API,
    its placement and, for a fork, its template."""

    placement: Placement
    template: Template | None
    python_state_pending: bool  # a fork's parent's Python state, not loaded yet (its kernel has not started)


# How a template starts one fork: (its spec, its id, the template (whose `release` the fork awaits with its
# id once closed, and which a snapshot of the fork stacks on), whether its parent's Python state is to be loaded
# with its kernel) -> the fork, started. The frozen sandbox's owner supplies it (Sandbox.freeze: placed by the
# same backend, with the same kernel zygote), so a template keeps nothing of the sandbox it was frozen from.
Starter = Callable[[SandboxSpec, str, "Template", bool], Awaitable[SandboxAPI]]


class Template(TemplateAPI):
    """A sandbox's frozen state (see the module docstring). spawn() as often as needed; close()
    when no more forks are wanted: its files go once its last fork is closed too."""

    def __init__(
        self,
        spec: SandboxSpec,
        template_id: str,
        directory: Path,
        python_state: bool,
        dropped: list[str],
        start: Starter,
        base: Template | None = None,
    ):
        self.id = template_id
        self.directory = directory
        # A layer (a fork's writes) lies over its base's files, which it holds as a fork of it would.
        self.base = base
        lowers = [*base.spec.template_lowers, str(base.spec.template_dir)] if base is not None else []
        self.spec = spec.model_copy(
            update={"template_dir": str(directory / "files"), "template_lowers": lowers, "staging": False}
        )
        self.python_state = python_state
        self.dropped = dropped  # Python names that could not be carried over
        self._start = start
        self._forks: set[str] = set()
        self._closed = False

    async def spawn(self, n: int = 1, ids: list[str] | None = None) -> list[SandboxAPI]:
        """n sandboxes starting from this template (with these ids, if given); all start or none
        (the started are closed)."""
        if self._closed:
            raise SandboxForkError(f"template {self.id} is closed")
        ids = list(ids) if ids is not None else [secrets.token_hex(6) for _ in range(n)]
        self._forks.update(ids)  # held from now: a fork that fails to start releases its own
        started = await asyncio.gather(
            *(self._start(self.spec, i, self, self.python_state) for i in ids), return_exceptions=True
        )
        forks = [s for s in started if not isinstance(s, BaseException)]
        if len(forks) < n:
            await asyncio.gather(*(s.close() for s in forks), return_exceptions=True)
            self._forks.difference_update(ids)
            await self._remove_if_unused()
            error = next(s for s in started if isinstance(s, BaseException))
            raise error
        return forks

    async def close(self) -> None:
        self._closed = True
        await self._remove_if_unused()

    def hold(self, holder_id: str) -> None:
        """Kept until `release(holder_id)`: a fork of it, or a layer stacked on it."""
        self._forks.add(holder_id)

    async def release(self, holder_id: str) -> None:
        self._forks.discard(holder_id)
        await self._remove_if_unused()

    async def _remove_if_unused(self) -> None:
        if self._closed and not self._forks and self.directory.exists():
            await asyncio.to_thread(_remove, self.spec.root_dir, self.id, self.directory)
            if self.base is not None:
                await self.base.release(self.id)


def _remove(root_dir: str, template_id: str, directory: Path) -> None:
    shutil.rmtree(directory, ignore_errors=True)
    remove_lease(root_dir, template_id)


def staging_spec(spec: SandboxSpec) -> SandboxSpec:
    """A sandbox to stage a task in and then `freeze(consume=True)`: an overlay over nothing."""
    return spec.model_copy(update={"staging": True, "template_dir": None})


async def freeze(sandbox: Frozen, start: Starter, timeout: float = 60.0, consume: bool = False) -> Template:
    """Freeze a sandbox's current state into a template whose forks `start` starts; the sandbox
    itself goes on unchanged, or, with `consume`, is closed (one made with `staging_spec` on
    bubblewrap gives its files uncopied). Whether its backend can fork is the caller's check."""
    template_id = f"tpl-{secrets.token_hex(6)}"
    directory = private_dir_of(sandbox.spec.root_dir, template_id)
    # A lease first, as for a sandbox: a server killed from here on leaves nothing unaccounted.
    await asyncio.to_thread(write_lease, sandbox.spec.root_dir, lease_for(template_id, sandbox.spec))
    placement, files, dirs = sandbox.placement, directory / "files", sandbox.placement.fork_dirs
    take_writes = consume and sandbox.spec.staging and isinstance(placement, KeepsWrites)
    base = _layer_base(sandbox) if not take_writes else None
    try:
        dropped, python_state = await _capture_state(sandbox, timeout)
        if take_writes:  # its writes on disk become the template's files
            placement.keep_writes(files)
        elif base is not None:  # its writes alone, over its template's files
            assert isinstance(placement, KeepsWrites)
            await asyncio.to_thread(_copy_dirs, placement, files, placement.writes_of)
        elif isinstance(placement, HostReachable):  # its files as it sees them, copied on the host
            await asyncio.to_thread(_copy_dirs, placement, files, placement.files_of)
        else:
            await _copy_files(sandbox, files, timeout)  # extraction makes `files` and what it holds
        if consume:
            await sandbox.close()
        await asyncio.to_thread(_finish_files, files, dirs, placement.private_dir)
    except BaseException:
        await asyncio.shield(asyncio.to_thread(_remove, sandbox.spec.root_dir, template_id, directory))
        raise
    finally:  # the parent is left as it was
        if not sandbox.closed:
            with contextlib.suppress(Exception):
                # (a Python state the sandbox has yet to load is its own: it stays)
                names = [SHELL_STATE] + ([] if sandbox.python_state_pending else [STATE_DIR])
                if isinstance(placement, HostReachable):
                    await asyncio.to_thread(
                        remove_beneath, placement.files_of("/tmp"), [os.path.basename(n) for n in names]
                    )
                else:
                    await sandbox.bash(f"rm -rf {' '.join(names)}", timeout)
    if base is not None:
        base.hold(template_id)
    return Template(sandbox.spec, template_id, directory, python_state, dropped, start, base)


def _layer_base(sandbox: Frozen) -> Template | None:
    """The template a snapshot of this sandbox can be a layer over: its own, when the sandbox is its
    fork, its writes are apart on the host and the chain is not too deep; else None (a full copy)."""
    template, placement = sandbox.template, sandbox.placement
    if template is None or not isinstance(placement, KeepsWrites):  # (held by the fork: its files are there)
        return None
    if len(template.spec.template_lowers) + 1 >= MAX_LAYERS:
        return None
    if any(placement.writes_of(path) is None for path in placement.fork_dirs):
        return None
    return template


def _copy_dirs(placement: Placement, files: Path, source: Callable[[str], Path | None]) -> None:
    """Each of the sandbox's fork_dirs, from where `source` says the host reaches it (its writes
    alone, or its files as it sees them), copied on the host (sandbox/layers.py)."""
    files.parent.mkdir(parents=True, exist_ok=True)
    files.mkdir(mode=0o755)
    budget = MAX_COPY_BYTES
    for path in placement.fork_dirs:
        target = files / path.lstrip("/")
        target.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        try:
            budget -= copy_layer(source(path), target, placement.sandbox_uid, budget)  # type: ignore[arg-type]
        except LayerTooLarge as exc:
            raise SandboxForkError(f"sandbox {placement.sandbox_id}: {exc}") from exc


def _filter_shell_state(files: Path) -> None:
    """Drop the shell's own variables from the captured state in the template (see CAPTURE_SHELL)."""
    relative = SHELL_STATE.lstrip("/")
    try:
        fd = open_beneath(files, relative, os.O_RDWR | os.O_NONBLOCK)
    except OSError:  # none (or not a plain file: the sandbox's doing): the fork starts without it
        return
    with os.fdopen(fd, "r+b") as state:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return
        lines = [line for line in state.read(MAX_COPY_BYTES).splitlines(True) if not SKIP_EXPORTS.match(line)]
        state.seek(0)
        state.writelines(lines)
        state.truncate()


async def _capture_state(sandbox: Frozen, timeout: float) -> tuple[list[str], bool]:
    result = await sandbox.bash(CAPTURE_SHELL, timeout)
    if result.exit_code != 0:
        raise SandboxForkError(f"sandbox {sandbox.id}: could not read its shell state: {result.output[-500:]}")
    if not sandbox.kernel_started:  # a fork that never ran Python still holds its parent's state, unloaded
        return [], sandbox.python_state_pending
    result = await sandbox.python(CAPTURE_PYTHON, timeout)
    if result.error is not None or result.timed_out:
        detail = result.error or "timed out"
        raise SandboxForkError(f"sandbox {sandbox.id}: could not read its Python state: {detail}")
    try:  # what the capture printed: the agent's kernel could print anything
        dropped = [str(name) for name in json.loads(result.output.strip().splitlines()[-1])]
    except (ValueError, TypeError, IndexError) as exc:
        raise SandboxForkError(
            f"sandbox {sandbox.id}: its Python state capture said {result.output[-200:]!r}"
        ) from exc
    if dropped:
        log.info("sandbox %s: fork leaves out Python values that cannot be pickled: %s", sandbox.id, dropped)
    return dropped, True


def _finish_files(files: Path, dirs: tuple[str, ...], private_dir: Path) -> None:
    _filter_shell_state(files)
    _make_dirs(files, dirs)
    _drop_mount_points(files, private_dir)


def _make_dirs(files: Path, dirs: tuple[str, ...]) -> None:
    for path in dirs:
        (files / path.lstrip("/")).mkdir(mode=0o755, parents=True, exist_ok=True)
    os.chmod(files.parent, 0o711)
    os.chmod(files, 0o755)


def _drop_mount_points(files: Path, private_dir: Path) -> None:
    """The parent's socket and control dirs are bound below /tmp when the sandbox root is there:
    their (empty) mount points are the parent's, not a fork's."""
    own = files / str(private_dir).lstrip("/")
    shutil.rmtree(own, ignore_errors=True)
    for parent in own.parents:
        if parent == files / "tmp" or files / "tmp" not in parent.parents:
            break  # /tmp itself stays: the forks' overlay needs it
        try:
            parent.rmdir()  # only while empty: what the agent put there stays
        except OSError:
            break


async def _copy_files(sandbox: Frozen, files: Path, timeout: float) -> None:
    """tar, run inside the parent as its uid, streams its fork_dirs (workspace, /tmp, ...) to the
    host. Mounts below them (sockets, binds) are not the sandbox's files: --one-file-system leaves
    them out."""
    placement = sandbox.placement
    members = [path.lstrip("/") for path in placement.fork_dirs]
    # --hard-dereference: hard links as the files they name (a stream cannot go back to link them)
    argv = placement.wrap(["tar", "--one-file-system", "--hard-dereference", "-C", "/", "-cf", "-", *members])
    read_fd, write_fd = os.pipe()
    log_path = str(placement.private_dir / "fork-tar.log")
    try:
        pid = os.posix_spawnp(
            argv[0],
            argv,
            placement.environment(),
            file_actions=[
                (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                (os.POSIX_SPAWN_DUP2, write_fd, 1),
                (os.POSIX_SPAWN_OPEN, 2, log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600),
                *((os.POSIX_SPAWN_DUP2, ours, theirs) for theirs, ours in placement.spawn_fds.items()),
            ],
            setsid=True,
            setsigdef=DEFAULT_SIGNALS,
        )
    finally:
        os.close(write_fd)
    uid = placement.sandbox_uid if placement.sandbox_uid is not None else os.getuid()
    extracting = asyncio.ensure_future(asyncio.to_thread(_extract, read_fd, files, uid))
    try:
        async with asyncio.timeout(timeout):
            await asyncio.shield(extracting)
            code = await reap(pid, timeout)
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, 9)
        await reap(pid)
        await asyncio.gather(extracting, return_exceptions=True)  # ends at the pipe's EOF
        raise
    if code != 0:
        detail = Path(log_path).read_text(errors="replace")[-500:] if Path(log_path).exists() else ""
        raise SandboxForkError(f"sandbox {sandbox.id}: copying its files failed (tar exit {code}): {detail}")


def _extract(read_fd: int, files: Path, uid: int) -> None:
    """Extract the parent's tar stream into the template, owned by the sandbox uid. The stream is
    the sandbox's to forge: tarfile's `data` filter refuses members outside the template,
    through links, or device files; symlinks leaving the tree are kept as links (nothing on the
    host follows them, and members below one resolve outside and are refused); hard links are
    dropped."""

    def keep(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo | None:
        if member.islnk():  # never made by our tar (see _copy_files): a forged stream's
            return None
        try:
            member = tarfile.data_filter(member, dest)
        except (tarfile.AbsoluteLinkError, tarfile.LinkOutsideDestinationError):
            if not member.issym():
                return None
        except tarfile.FilterError as exc:
            log.warning("fork: left out %s (%s)", member.name, exc)
            return None
        return member.replace(uid=uid, gid=uid, uname="", gname="", deep=False)

    with os.fdopen(read_fd, "rb") as stream, tarfile.open(fileobj=stream, mode="r|") as archive:
        archive.extractall(files, filter=keep, numeric_owner=True)
        with contextlib.suppress(OSError):
            while stream.read(1 << 16):  # drain: tar must not block on a full pipe
                pass
