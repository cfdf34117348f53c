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


def ranks(name, world, out, *args, env_extra=None, base=None, timeout=900):
    """The ranks 0..world-1 of tests/support/<name> (each started as `name rank world port *args`, one free port),
    waited for; every rank must exit 0 (else an assertion with the ends of their logs); then the JSON each wrote to
    `out`.<rank>.json, in rank order. Each rank logs to a file, not a pipe: a rank blocked on a full pipe would stall
    its peer."""
    import tempfile

    port = free_port()
    procs, logs = [], []
    try:
        for r in range(world):
            logs.append(tempfile.TemporaryFile())
            procs.append(worker(name, r, world, port, *args, env_extra=env_extra, base=base, stdout=logs[-1],
                                stderr=subprocess.STDOUT))
        for p in procs:
            p.wait(timeout=timeout)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    texts = []
    for log in logs:
        log.seek(0)
        texts.append(log.read().decode(errors="replace"))
        log.close()
    assert all(p.returncode == 0 for p in procs), "\n".join(texts)[-8000:]
    results = []
    for r in range(world):
        with open(f"{out}.{r}.json") as f:
            results.append(json.load(f))
    return results
