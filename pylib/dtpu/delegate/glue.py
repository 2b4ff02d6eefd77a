"""The extern "Python" callbacks of dtpu.so (see delegate/dtpu_delegate.c).

dtpu.so's embedded init code calls :func:`install` once per process with the library's ``ffi``
and ``lib``. Each callback converts the C arguments, finds the Python object behind a handle and
turns every exception into a return code plus a message for TFLite (never an exception escaping
into C: cffi would print it and return 0, which C could mistake for a result).
"""
from __future__ import annotations

import atexit
import logging
import time

from dtpu.delegate import cpath
from dtpu.delegate import graph as g
from dtpu.delegate import runtime as rt
from dtpu.delegate.options import parse
from dtpu.report import STORE

log = logging.getLogger("dtpu.delegate")

_installed: dict[str, object] = {}


def _write(ffi, buf, size: int, message: str) -> None:
    """Copy a NUL-terminated UTF-8 message into a C buffer of `size` bytes."""
    data = message.encode("utf-8", "replace")[: max(0, size - 1)]
    ffi.memmove(buf, data + b"\0", len(data) + 1)


def _report(lib, ctx, message: str) -> None:
    try:
        lib.dtpu_report_error(ctx, message.encode("utf-8", "replace"))
    except Exception:  # pragma: no cover - reporting must never fail the caller
        pass


def facts() -> dict[str, int] | None:
    """What the C glue observed about the host runtime (None before dtpu.so was loaded)."""
    lib = _installed.get("lib")
    if lib is None:
        return None
    f = lib.dtpu_facts
    return {name: int(getattr(f, name)) for name in (
        "create_calls", "create_gil_held", "create_n_raw", "invoke_gil_held", "get_tensor_is_null",
        "sizeof_tensor", "sizeof_registration", "sizeof_delegate", "sizeof_context_prefix")}


def ffi_and_lib():
    return _installed.get("ffi"), _installed.get("lib")


def _at_exit() -> None:
    lib = _installed.get("lib")
    try:
        with rt.LOCK:
            for state in list(rt.DELEGATES.values()):
                state.close(at_exit=True)
    finally:
        if lib is not None:
            lib.dtpu_python_alive = 0  # late frees from interpreter teardown stay in C


def install(ffi, lib) -> None:
    if _installed:
        return
    _installed.update(ffi=ffi, lib=lib)
    cpath.bind(lib)
    g.install_string_reader(lib)
    STORE.before_read = rt.settle_all
    atexit.register(_at_exit)

    @ffi.def_extern()
    def dtpu_py_create(n, keys, values, err, errlen):
        try:
            raw: dict[str, str] = {}
            for i in range(n):
                key_bytes, value_bytes = ffi.string(keys[i]), ffi.string(values[i])
                try:
                    key, value = key_bytes.decode("utf-8"), value_bytes.decode("utf-8")
                except UnicodeDecodeError:
                    raise ValueError(f"dtpu: option {key_bytes!r}={value_bytes!r} is not UTF-8") from None
                raw[key] = value
            options = parse(raw)
            state = rt.DelegateState(options)
            with rt.LOCK:
                rt.DELEGATES[state.id] = state
            return state.id
        except Exception as exc:
            message = str(exc) if isinstance(exc, ValueError) else f"dtpu: {exc!r}"
            log.debug("delegate creation refused: %s", message)
            _write(ffi, err, errlen, message)
            return 0

    @ffi.def_extern()
    def dtpu_py_destroy(handle):
        try:
            with rt.LOCK:
                state = rt.DELEGATES.pop(handle, None)
                if state is not None:
                    state.close()
        except Exception:
            log.exception("destroying delegate %d", handle)

    @ffi.def_extern()
    def dtpu_py_select(handle, ctx, plan, claimed, err, errlen):
        try:
            state = rt.DELEGATES.get(handle)
            if state is None:
                raise rt.DelegateError(f"unknown delegate handle {handle}")
            state.begin_prepare()   # released by dtpu_py_select_done, which C always calls
            with rt.LOCK:
                nodes = state.select(ffi, ctx, g.int_array(ffi, plan))
            for i, index in enumerate(nodes):
                claimed.data[i] = index
            return len(nodes)
        except Exception as exc:
            log.exception("choosing nodes")
            _write(ffi, err, errlen, f"dtpu: choosing nodes failed: {exc!r}\n")
            return -1

    @ffi.def_extern()
    def dtpu_py_select_done(handle):
        state = rt.DELEGATES.get(handle)
        if state is not None:
            try:
                with rt.LOCK:
                    state.end_select()
            finally:
                state.end_prepare()

    @ffi.def_extern()
    def dtpu_py_kernel_init(handle, ctx, params, kernel):
        state = rt.DELEGATES.get(handle)
        try:
            if state is None:
                raise rt.DelegateError(f"unknown delegate handle {handle}")
            with rt.LOCK:
                k = rt.PartitionKernel(state, ffi, lib, ctx, params, kernel)
                rt.KERNELS[k.id] = k
            return k.id
        except Exception as exc:
            log.exception("creating a delegate kernel")
            _report(lib, ctx, f"dtpu: creating the delegate kernel failed: {exc}\n")
            return 0

    def kernel_step(kernel_handle, ctx, doing: str, step) -> int:
        """step(kernel) for Prepare / Invoke: 0, or 1 with the failure reported to TFLite
        (`doing`: "preparing" / "invoking"; a DelegateError is expected, anything else logged
        with its traceback)."""
        k = rt.KERNELS.get(kernel_handle)
        try:
            if k is None:
                raise rt.DelegateError(f"unknown kernel handle {kernel_handle}")
            with k.state.serial:
                step(k)
            return 0
        except Exception as exc:
            label = f" (nodes {k.label})" if k is not None else ""
            if not isinstance(exc, rt.DelegateError):
                log.exception("%s delegate kernel%s", doing, label)
            _report(lib, ctx, f"dtpu: {doing} delegated nodes{label} failed: {exc}\n")
            return 1

    @ffi.def_extern()
    def dtpu_py_kernel_prepare(kernel_handle, ctx, node, kernel):
        return kernel_step(kernel_handle, ctx, "preparing", lambda k: k.prepare(ctx))

    @ffi.def_extern()
    def dtpu_py_kernel_invoke(kernel_handle, ctx, kernel):
        py_enter = time.monotonic_ns()
        return kernel_step(kernel_handle, ctx, "invoking", lambda k: k.invoke(ctx, py_enter))

    @ffi.def_extern()
    def dtpu_py_cpath_drain(kernel_handle, ctx):
        k = rt.KERNELS.get(kernel_handle)
        try:
            if k is None:
                raise rt.DelegateError(f"unknown kernel handle {kernel_handle}")
            k.drain_c()
            return 0
        except Exception as exc:
            if not isinstance(exc, rt.DelegateError):
                log.exception("reporting the C path's runs of nodes %s", k.label if k else "?")
            _report(lib, ctx, f"dtpu: invoking delegated nodes{f' ({k.label})' if k else ''} "
                              f"failed: {exc}\n")
            return 1

    ffi.def_extern(name="dtpu_py_reg_read")(cpath.reg_read)
    ffi.def_extern(name="dtpu_py_reg_write")(cpath.reg_write)
    ffi.def_extern(name="dtpu_py_reg_wait")(cpath.reg_wait)
    ffi.def_extern(name="dtpu_py_buf_sync")(cpath.buf_sync)

    @ffi.def_extern()
    def dtpu_py_kernel_free(kernel_handle):
        try:
            with rt.LOCK:
                k = rt.KERNELS.pop(kernel_handle, None)
            if k is not None:
                with k.state.serial:
                    k.free()
        except Exception:
            log.exception("freeing delegate kernel %d", kernel_handle)
