"""Where things are, for the tests and their workers: every path a test needs, from one place."""

import os

SUPPORT = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(SUPPORT)
ROOT = os.path.dirname(TESTS)
EXAMPLES = os.path.join(ROOT, "examples")
FAKE_CANN = os.path.join(TESTS, "fake_cann")
FAKE_CANN_BUILD = os.path.join(FAKE_CANN, "build.py")
NPU_STUB = os.path.join(TESTS, "npu_stub")


def worker(name):
    """The path of a worker script of tests/support (run as `python <path> ...`)."""
    return os.path.join(SUPPORT, name)


def pythonpath(env=None):
    """A PYTHONPATH value with the support folder first, then what `env` (default os.environ) had: what a subprocess
    needs to import the test support modules."""
    env = os.environ if env is None else env
    return os.pathsep.join([SUPPORT, *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])


def _import(name, path, folder=None):
    """The module `name` from the file `path` (a package's __init__.py when `folder` is its directory), imported
    once, whatever sys.path holds."""
    import importlib.util
    import sys

    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            name, path, submodule_search_locations=None if folder is None else [folder])
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def load(path, name=None):
    """The module of a Python file that is not on sys.path (an example, a tool of tests/fake_cann), imported by its
    path under `name` (default: the file's name), once."""
    return _import(name or os.path.splitext(os.path.basename(path))[0], path)


def example(name):
    """examples/<name>.py as a module."""
    return load(os.path.join(EXAMPLES, name + ".py"))


def repository_package(name):
    """A package at the repository's top (benchmarks/), imported from there whatever the current directory and
    sys.path (the runs against an installed build do not start in the repository)."""
    folder = os.path.join(ROOT, name)
    return _import(name, os.path.join(folder, "__init__.py"), folder)
