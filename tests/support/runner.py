"""Subprocesses of the tests: Python workers of tests/support started with the test support modules importable, and
a free localhost port for their process groups."""

import json
import os
import socket
import subprocess
import sys

import paths


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def env(base=None, **extra):
    """`base` (default os.environ) with PYTHONPATH led by tests/support, plus `extra`."""
    base = dict(os.environ if base is None else base)
    base["PYTHONPATH"] = paths.pythonpath(env=base)
    base.update(extra)
    return base


def worker(name, *args, env_extra=None, base=None, **popen):
    """tests/support/<name> started with this Python and `args` (Popen; stdout and stderr piped together unless
    given), in `base` (default os.environ) with env_extra."""
    popen.setdefault("stdout", subprocess.PIPE)
    popen.setdefault("stderr", subprocess.STDOUT)
    return subprocess.Popen([sys.executable, paths.worker(name), *map(str, args)], text=True,
                            env=env(base, **(env_extra or {})), **popen)


def script(body, *args, base=None, **extra):
    """`python -c body args...` with this Python, in env(base, **extra) (Popen; stdout and stderr piped apart)."""
    return subprocess.Popen([sys.executable, "-c", body, *map(str, args)], env=env(base, **extra), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def result(proc, what, timeout=600):
    """The JSON a script printed on its last "RESULT " line, once it exited 0 (else an assertion naming `what`
    with the ends of its output)."""
    out, err = proc.communicate(timeout=timeout)
    lines = [line for line in out.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, (what, out[-2000:] + err[-4000:])
    return json.loads(lines[-1][len("RESULT "):])
