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


def pythonpath(*dirs, env=None):
    """A PYTHONPATH value with `dirs` first, then the support folder, then what `env` (default os.environ) had: what
    a subprocess needs to import the test support modules (and, given, the examples)."""
    env = os.environ if env is None else env
    return os.pathsep.join([*dirs, SUPPORT, *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])


def load(path, name=None):
    """The module of a Python file that is not on sys.path (an example, a tool of tests/fake_cann), imported by its
    path under `name` (default: the file's name), once."""
    import importlib.util
    import sys

    name = name or os.path.splitext(os.path.basename(path))[0]
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def example(name):
    """examples/<name>.py as a module."""
    return load(os.path.join(EXAMPLES, name + ".py"))


def repository_package(name):
    """A package at the repository's top (benchmarks/), imported from there whatever the current directory and
    sys.path (the runs against an installed build do not start in the repository)."""
    import importlib.util
    import sys

    if name not in sys.modules:
        folder = os.path.join(ROOT, name)
        spec = importlib.util.spec_from_file_location(name, os.path.join(folder, "__init__.py"),
                                                      submodule_search_locations=[folder])
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]
