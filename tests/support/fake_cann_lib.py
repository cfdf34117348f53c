"""The fake CANN's libraries as the tests reach them through ctypes, typed once: libopapi.so (the aclnn models, their
call and cache counters, the aclTensor C ABI) and libascendcl.so (the runtime: its counters, its error message, its
fault injection, graph capture). Each is the handle the process already loaded (torch_npu found it on
LD_LIBRARY_PATH): the same counters the NPU path's calls moved.

On a real CANN there are no counters: opapi() and runtime() return None there (tests that need them skip)."""

import ctypes

P = ctypes.c_void_p
_libs = {}


def _typed(lib, name, restype, argtypes=None):
    """Types lib's function `name` where lib has it (the aarch64 stand-in's copy of the models has only some)."""
    if hasattr(lib, name):
        fn = getattr(lib, name)
        fn.restype = restype
        if argtypes is not None:
            fn.argtypes = argtypes


def type_opapi(lib):
    """libopapi.so's own functions and the aclTensor C ABI, typed on `lib` (a CDLL of the fake, or of the aarch64
    stand-in's copy of its models)."""
    _typed(lib, "fake_opapi_calls", ctypes.c_int, [ctypes.c_char_p])
    _typed(lib, "fake_opapi_cache_entries", ctypes.c_int)
    _typed(lib, "fake_opapi_last_error", ctypes.c_char_p)
    _typed(lib, "fake_opapi_dump", ctypes.c_char_p)
    _typed(lib, "aclCreateTensor", P, [P, ctypes.c_uint64, ctypes.c_int32, P, ctypes.c_int64, ctypes.c_int32, P,
                                       ctypes.c_uint64, P])
    _typed(lib, "aclDestroyTensor", ctypes.c_int, [P])
    _typed(lib, "aclDestroyAclOpExecutor", ctypes.c_int, [P])
    return lib


def _load(name, typer):
    if name not in _libs:
        try:
            lib = ctypes.CDLL(name)
            getattr(lib, "fake_opapi_calls" if name == "libopapi.so" else "fake_cann_count")  # only the fake has it
            _libs[name] = typer(lib)
        except (OSError, AttributeError):  # a real CANN, or none loaded
            _libs[name] = None
    return _libs[name]


def _type_runtime(lib):
    _typed(lib, "fake_cann_count", ctypes.c_int64, [ctypes.c_char_p])
    _typed(lib, "aclGetRecentErrMsg", ctypes.c_char_p)
    _typed(lib, "fake_cann_dump", ctypes.c_char_p)
    _typed(lib, "fake_cann_fail_malloc", None, [ctypes.c_size_t])
    _typed(lib, "fake_cann_sys_param", ctypes.c_int64, [ctypes.c_int])
    _typed(lib, "aclmdlRICaptureBegin", ctypes.c_int, [P, ctypes.c_int])
    _typed(lib, "aclmdlRICaptureEnd", ctypes.c_int, [P, ctypes.POINTER(P)])
    return lib


def opapi():
    """The fake libopapi.so, typed; None where it is not the fake."""
    return _load("libopapi.so", type_opapi)


def runtime():
    """The fake libascendcl.so, typed; None where it is not the fake."""
    return _load("libascendcl.so", _type_runtime)


def opapi_calls(key):
    """The fake libopapi.so's counter `key` ("aclnnX" launches, "aclnnXGetWorkspaceSize", "cache hit aclnnX", ...)
    since the process started or its last reset; None on a real CANN."""
    lib = opapi()
    return None if lib is None else lib.fake_opapi_calls(key.encode())


def runtime_count(key):
    """The fake runtime's counter `key` ("acl_op <type>", ...); None on a real CANN."""
    lib = runtime()
    return None if lib is None else lib.fake_cann_count(key.encode())
