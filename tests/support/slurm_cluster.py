# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""A real Slurm cluster on this machine, for tests: one slurmctld and N slurmd, all on loopback.

    with LocalSlurm(nodes=3) as slurm:
        slurm.run(["srun", "-N3", "hostname"])

Everything lives under one temporary directory: a slurm.conf that only the daemons started here and the
clients run with `slurm.env` read, state and logs. A private munged (own key and socket) and the slurmds'
spool (slurmstepd's sockets) use a second one under /tmp: munged wants every directory above its socket
searchable by all (a pytest tmp_path is not), and a unix socket path has at most 107 bytes. Every simulated node is a `slurmd -N nodeK` with
its own port on 127.0.0.1. Nothing system-wide is touched (no /etc/slurm, no /run/munge, no systemd).
Needs root and Debian's `slurmctld slurmd slurm-client munge` (`make slurm-deps`).

Which processes are ours: every daemon runs under its own supervisor (this file run as a script), a Linux
"child subreaper". slurmd double-forks its slurmstepd, and a task whose stepd died, or that daemonized, is
orphaned: all would be reparented to init, out of reach (and left as zombies until init gets round to
them), but under a subreaper they are reparented to the supervisor instead. So a node's slurmd, stepds
and job tasks are exactly its supervisor's descendants: killing a node or the cluster kills that tree,
and the supervisor reaps it. A supervisor whose parent (the test process) dies kills its tree too.
Client processes (an srun you started yourself) are not the cluster's: end them yourself.
"""

from __future__ import annotations

import ctypes
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd", "slurmstepd")
CLIENTS = ("sinfo", "srun", "sbatch", "scontrol", "squeue", "scancel")
PARTITION = "debug"
START_TIMEOUT = 30.0
# Node states (sinfo %t) of a node whose slurmd is up and registered.
UP_STATES = ("idle", "alloc", "mix", "comp")
# Set in the daemons' environment (and so their slurmstepds'): close()'s last-resort way to find them.
_MARKER = "LOCAL_SLURM_DIR"
# The caller's Slurm client settings would override slurm.conf (SLURM_CONF, a partition, an account, ...).
_CLIENT_ENV_PREFIXES = ("SLURM_", "SBATCH_", "SRUN_", "SALLOC_", "SQUEUE_", "SINFO_", "SCONTROL_")


def available() -> tuple[bool, str]:
    """(True, "") when a LocalSlurm can start here, else (False, why not)."""
    if not sys.platform.startswith("linux"):
        return False, "a local Slurm cluster needs Linux"
    missing = [b for b in (*DAEMONS, *CLIENTS) if shutil.which(b) is None]
    if missing:
        return False, f"Slurm/munge not installed ({', '.join(missing)} not on PATH; `make slurm-deps` as root)"
    if os.geteuid() != 0:
        return False, "a local Slurm cluster needs root (slurmd runs jobs as their owner)"
    return True, ""


# -- /proc -----------------------------------------------------------------------------------------------------


def _proc_table() -> dict[int, tuple[int, str]]:
    """pid -> (ppid, comm) of every live process (zombies excluded)."""
    table = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry.name}/stat").read_text()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may contain spaces and parentheses.
        comm = stat[stat.find("(") + 1 : stat.rfind(")")]
        state, ppid = stat[stat.rfind(")") + 2 :].split()[:2]
        if state not in ("Z", "X"):
            table[int(entry.name)] = (int(ppid), comm)
    return table


def _descendants(root: int, table: dict[int, tuple[int, str]] | None = None) -> list[int]:
    table = _proc_table() if table is None else table
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found, todo = [], list(children.get(root, ()))
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, ()))
    return found


def _proc_environ(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    env = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            env[key.decode(errors="replace")] = value.decode(errors="replace")
    return env


def _kill(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


# -- the supervisor (this file as a script) -----------------------------------------------------------------

PR_SET_CHILD_SUBREAPER = 36


def _reap() -> list[tuple[int, int]]:
    """Reap every exited child; [(pid, wait status)]. Raises ChildProcessError when there is no child."""
    reaped = []
    while True:
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            return reaped
        reaped.append((pid, status))


def _supervise(argv: list[str]) -> int:
    """Run argv as a child subreaper; on SIGTERM, or when our parent dies, SIGKILL the whole tree."""
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        print("supervisor: prctl(PR_SET_CHILD_SUBREAPER) failed", file=sys.stderr)
        return 1
    parent = os.getppid()
    watched = {signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP}
    signal.pthread_sigmask(signal.SIG_BLOCK, watched)
    child = os.fork()
    if child == 0:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, watched)
        try:
            os.execvp(argv[0], argv)
        except OSError as e:
            print(f"supervisor: cannot run {argv[0]}: {e}", file=sys.stderr, flush=True)
        os._exit(127)
    code = 0
    while True:
        sig = signal.sigtimedwait(watched, 0.5)
        try:
            for pid, status in _reap():
                if pid == child:
                    code = os.waitstatus_to_exitcode(status)
        except ChildProcessError:
            return code  # the daemon and every process it left behind are gone
        if (sig is not None and sig.si_signo != signal.SIGCHLD) or os.getppid() != parent:
            _kill([child])  # the daemon first, so that it starts nothing more
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:  # until every descendant is killed and reaped (no zombie left)
                _kill(_descendants(os.getpid()))
                time.sleep(0.01)
                try:
                    _reap()
                except ChildProcessError:
                    break
            return code or -signal.SIGKILL


# -- the cluster -----------------------------------------------------------------------------------------------


def _free_ports(count: int) -> list[int]:
    socks = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _now() -> str:
    """Local time as Slurm prints it (2026-01-31T12:34:56): such strings compare in time order."""
    return time.strftime("%Y-%m-%dT%H:%M:%S")


def _tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return "    (no log)"
    return "\n".join(f"    {line}" for line in text) or "    (empty)"


class LocalSlurm:
    """A local Slurm cluster: `nodes` slurmd named node1..nodeN in one partition `debug`, each with 2 CPUs.

    Its directory is a new temporary directory under `workdir` (default: the system's), removed by close().
    """

    # Slurm marks a node that stops answering DOWN after SlurmdTimeout (default 300 s). With 10 s, a node
    # killed by kill_node() shows `down*` (and its jobs are killed or requeued) about 20-30 s later.
    slurmd_timeout: int = 10
    # A finished job's record (scontrol show job, squeue -t all) is purged MinJobAge s after it ends, at the next
    # purge pass (every 60 s). Slurm's default is 300; 5 makes `sbatch --wait` poll every 2 s instead of 2, 8, 32 s.
    min_job_age: int = 5

    def __init__(self, nodes: int = 3, workdir: Path | None = None) -> None:
        if nodes < 1:
            raise ValueError("nodes must be >= 1")
        self.nodes = [f"node{i}" for i in range(1, nodes + 1)]
        self._parent = Path(workdir) if workdir is not None else None
        self.dir: Path | None = None
        self._munge_dir: Path | None = None
        # Supervisors (see the module docstring) of munged, slurmctld and each node's slurmd.
        self._munged: subprocess.Popen | None = None
        self._slurmctld: subprocess.Popen | None = None
        self._slurmd: dict[str, subprocess.Popen] = {}

    def _require_dir(self) -> Path:
        if self.dir is None:
            raise RuntimeError("LocalSlurm is not started")
        return self.dir

    @property
    def conf(self) -> Path:
        """The cluster's slurm.conf."""
        return self._require_dir() / "slurm.conf"

    def _short_dir(self) -> Path:
        """A short directory under /tmp for what must have a short path: munged's and slurmstepd's sockets."""
        assert self._munge_dir is not None
        return self._munge_dir

    @property
    def munge_socket(self) -> Path:
        """munged's socket (slurm.conf points Slurm at it with AuthInfo=socket=...)."""
        self._require_dir()
        assert self._munge_dir is not None
        return self._munge_dir / "socket"

    @property
    def logs(self) -> Path:
        """Directory of the daemons' logs: munged.log, slurmctld.log, slurmd-<node>.log (+ .out: stdout/err)."""
        return self._require_dir() / "log"

    @property
    def env(self) -> dict[str, str]:
        """os.environ plus what Slurm clients need to use this cluster (SLURM_CONF)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(_CLIENT_ENV_PREFIXES)}
        env["SLURM_CONF"] = str(self.conf)
        return env

    # -- lifecycle ---------------------------------------------------------------------------------------------

    def start(self) -> LocalSlurm:
        """Start munged, slurmctld and every slurmd; return when sinfo shows every node idle."""
        ok, why = available()
        if not ok:
            raise RuntimeError(why)
        if self.dir is not None:
            raise RuntimeError("LocalSlurm already started")
        if self._parent is not None:
            self._parent.mkdir(parents=True, exist_ok=True)
        self.dir = Path(tempfile.mkdtemp(prefix="slurm-", dir=self._parent))
        try:
            for sub in ("state", "spool", "log"):  # spool: the slurmd pid files
                (self.dir / sub).mkdir()
            self._munge_dir = Path(tempfile.mkdtemp(prefix="munge-", dir="/tmp" if os.path.isdir("/tmp") else None))
            self._munge_dir.chmod(0o755)  # munged: not group/world-writable, and searchable by its clients
            self._start_munged()
            self._write_conf()
            self._slurmctld = self._spawn(["slurmctld", "-D", "-i"], "slurmctld")
            for name in self.nodes:
                self._start_slurmd(name)
            self.wait_nodes(self.nodes, ("idle",))
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Kill every daemon, slurmstepd and job task of this cluster; remove its directory."""
        if self.dir is None:
            return
        try:
            sups = [*self._slurmd.values(), self._slurmctld, self._munged]
            for sup in sups:
                _terminate(sup)
            for sup in sups:
                _wait(sup)
            # Safety net: anything of ours that escaped its supervisor (e.g. a supervisor SIGKILLed by hand).
            marker = str(self.dir)
            _kill([p for p in _proc_table() if p != os.getpid() and _proc_environ(p).get(_MARKER) == marker])
        finally:
            self._slurmd.clear()
            self._slurmctld = self._munged = None
            shutil.rmtree(self.dir, ignore_errors=True)
            if self._munge_dir is not None:
                shutil.rmtree(self._munge_dir, ignore_errors=True)
            self.dir = self._munge_dir = None

    def __enter__(self) -> LocalSlurm:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- nodes -------------------------------------------------------------------------------------------------

    def node_states(self) -> dict[str, str]:
        """Node name -> sinfo state (idle, alloc, mix, comp, down*, idle*, ...); {} if slurmctld does not answer."""
        r = self.run(["sinfo", "-h", "-N", "-o", "%N %t"], check=False, timeout=10)
        if r.returncode != 0:
            return {}
        return dict(line.split(None, 1) for line in r.stdout.splitlines() if " " in line)

    def wait_nodes(
        self, nodes: list[str], states: tuple[str, ...] = UP_STATES, timeout: float = START_TIMEOUT
    ) -> None:
        """Wait until every node in `nodes` is in one of `states` (sinfo %t); RuntimeError with log tails if not."""
        current: dict[str, str] = {}

        def ready() -> bool:
            current.update(self.node_states())
            return all(current.get(n) in states for n in nodes)

        self._wait_for(ready, lambda: f"nodes {nodes} not {'/'.join(states)}: {current or 'sinfo failed'}", timeout)

    def _wait_for(self, ready: Callable[[], bool], what: Callable[[], str], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            for sup, name in ((self._munged, "munged"), (self._slurmctld, "slurmctld")):
                if sup is not None and sup.poll() is not None:
                    raise RuntimeError(f"{name} exited ({sup.returncode})\n{self._log_tails()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"Slurm: {what()} after {timeout:.0f} s\n{self._log_tails()}")
            time.sleep(0.1)

    def kill_node(self, name: str) -> None:
        """Crash a node: SIGKILL its slurmd, then its slurmstepds and every task of their jobs."""
        self._check_node(name)
        sup = self._slurmd.pop(name, None)
        _terminate(sup)
        _wait(sup)

    def start_node(self, name: str, wait: bool = True) -> None:
        """Start a killed node's slurmd again; with wait, return once it has registered (node up, not down)."""
        self._check_node(name)
        if name in self._slurmd:
            if self._slurmd[name].poll() is None:
                raise RuntimeError(f"{name}'s slurmd is running")
            del self._slurmd[name]  # it exited by itself, and nothing it started is left
        # sinfo may still show the node idle (not yet noticed dead): wait for a newer SlurmdStartTime, which
        # slurmctld records when the slurmd registers. It has 1 s resolution, so start in a later second.
        before = self._slurmd_start_time(name)
        while _now() <= before:
            time.sleep(0.05)
        started = _now()
        self._start_slurmd(name)
        if wait:
            self._wait_for(
                lambda: self._slurmd_start_time(name) >= started, lambda: f"{name}'s slurmd did not register", 30
            )
            self.wait_nodes([name])

    def _slurmd_start_time(self, name: str) -> str:
        """The node's SlurmdStartTime (local time, ISO 8601, as _now()); "" if unknown."""
        r = self.run(["scontrol", "-o", "show", "node", name], check=False, timeout=10)
        for field in r.stdout.split():
            if field.startswith("SlurmdStartTime="):
                value = field.partition("=")[2]
                return value if value[:1].isdigit() else ""
        return ""

    def processes(self, node: str | None = None) -> list[int]:
        """Pids of the slurmstepds and job tasks running on one node (default: all nodes); not the slurmds."""
        table = _proc_table()
        return sorted(
            pid
            for name, sup in self._slurmd.items()
            if node is None or name == node
            for pid in _descendants(sup.pid, table)
            if not (table[pid][0] == sup.pid and table[pid][1] == "slurmd")
        )

    def run(self, argv: list[str], **kw: object) -> subprocess.CompletedProcess:
        """Run a Slurm client command (srun, sbatch, ...) on this cluster: env=self.env, text output captured,
        check=True, timeout=60 s unless given."""
        kw = {"env": self.env, "capture_output": True, "text": True, "check": True, "timeout": 60, **kw}
        return subprocess.run(argv, **kw)  # type: ignore[call-overload]

    # -- internals ---------------------------------------------------------------------------------------------

    def _check_node(self, name: str) -> None:
        self._require_dir()
        if name not in self.nodes:
            raise ValueError(f"no node {name!r} (nodes: {', '.join(self.nodes)})")

    def _spawn(self, argv: list[str], log_name: str, extra_env: dict[str, str] | None = None) -> subprocess.Popen:
        """Start argv under a supervisor, in its own session, stdout/stderr to log/<log_name>.out."""
        env = {**self.env, _MARKER: str(self.dir), **(extra_env or {})}
        with open(self.logs / f"{log_name}.out", "ab") as out:
            return subprocess.Popen(
                [sys.executable, "-I", __file__, "--supervise", *argv],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def _start_munged(self) -> None:
        m = self.munge_socket.parent
        key = m / "munge.key"
        key.write_bytes(secrets.token_bytes(1024))
        os.chown(key, 0, 0)
        key.chmod(0o400)
        self._munged = self._spawn(
            [
                "munged",
                "--foreground",
                f"--socket={self.munge_socket}",
                f"--key-file={key}",
                f"--pid-file={m / 'munged.pid'}",
                f"--log-file={self.logs / 'munged.log'}",
                f"--seed-file={m / 'munged.seed'}",
            ],
            "munged",
        )
        deadline = time.monotonic() + 10
        while not self.munge_socket.exists():
            if self._munged.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("munged did not start:\n" + self._log_tails())
            time.sleep(0.02)

    def _write_conf(self) -> None:
        d = self._require_dir()
        ctld_port, *node_ports = _free_ports(1 + len(self.nodes))
        lines = [
            "ClusterName=localslurm",
            "SlurmctldHost=localhost(127.0.0.1)",
            f"SlurmctldPort={ctld_port}",
            f"SlurmdPort={node_ports[0]}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            # libmunge only knows its compiled-in socket (/run/munge/munge.socket.2); Slurm passes this one.
            f"AuthInfo=socket={self.munge_socket}",
            f"StateSaveLocation={d / 'state'}",
            # slurmstepd's sockets live in the spool dir: keep it under the short dir (a unix socket path
            # has at most 107 bytes; a pytest tmp_path plus "spool/node1/node1_<job>.<step>" can exceed it).
            f"SlurmdSpoolDir={self._short_dir() / 'spool' / '%n'}",
            f"SlurmctldPidFile={d / 'slurmctld.pid'}",
            f"SlurmdPidFile={d / 'spool' / 'slurmd-%n.pid'}",
            f"SlurmctldLogFile={d / 'log' / 'slurmctld.log'}",
            f"SlurmdLogFile={d / 'log' / 'slurmd-%n.log'}",
            "SlurmctldDebug=info",
            "SlurmdDebug=info",
            # No cgroups, no systemd, no accounting daemon.
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            "MpiDefault=none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            # The nodes share this machine's CPUs and memory: trust the node lines, not the hardware.
            "SlurmdParameters=config_overrides",
            # A DOWN node (e.g. after kill_node) becomes usable again when its slurmd registers.
            "ReturnToService=2",
            f"SlurmdTimeout={self.slurmd_timeout}",
            "InactiveLimit=0",
            "KillWait=2",
            # `sbatch --wait` polls after 2 s, then every 8 s, then 32 s... unless MinJobAge <= 5: then every 2 s.
            f"MinJobAge={self.min_job_age}",
        ]
        for name, port in zip(self.nodes, node_ports):
            lines.append(
                f"NodeName={name} NodeAddr=127.0.0.1 NodeHostname=localhost Port={port}"
                " CPUs=2 RealMemory=1000 State=UNKNOWN"
            )
        lines.append(f"PartitionName={PARTITION} Nodes={','.join(self.nodes)} Default=YES MaxTime=INFINITE State=UP")
        self.conf.write_text("\n".join(lines) + "\n")

    def _start_slurmd(self, name: str) -> None:
        (self._short_dir() / "spool" / name).mkdir(parents=True, exist_ok=True)
        self._slurmd[name] = self._spawn(["slurmd", "-D", "-N", name], f"slurmd-{name}")

    def _log_tails(self) -> str:
        d = self._require_dir() / "log"
        names = ["munged.log", "munged.out", "slurmctld.log", "slurmctld.out"]
        names += [f"slurmd-{n}.{ext}" for n in self.nodes for ext in ("log", "out")]
        return "\n".join(f"  {name}:\n{_tail(d / name)}" for name in names if (d / name).exists())


def _terminate(sup: subprocess.Popen | None) -> None:
    if sup is not None and sup.poll() is None:
        sup.terminate()


def _wait(sup: subprocess.Popen | None, timeout: float = 15.0) -> None:
    if sup is None:
        return
    try:
        sup.wait(timeout)
    except subprocess.TimeoutExpired:
        sup.kill()
        sup.wait()


if __name__ == "__main__" and sys.argv[1:2] == ["--supervise"]:
    sys.exit(_supervise(sys.argv[2:]))
