"""numpy's own float64 ``exp`` loop, called from compiled code without going through Python.

Why: the reference simulator computes the fluctuation factors with ``np.exp(a, out=a)``, and
numpy's vectorised ``exp`` can differ from the C library's (what numba's ``np.exp`` calls) in the
last bit. Episodes must be bit for bit the reference's, so the compiled engine used to call numpy
through ``numba.objmode`` at every event (a round trip through the interpreter: a few
microseconds, a large share of a vector step). numpy (>= 1.24, private API) hands out the C
function of a ufunc's inner loop: ``ufunc._resolve_dtypes_and_context`` and
``ufunc._get_strided_loop`` fill a capsule with the ``PyArrayMethod_StridedLoop`` function
pointer, its context and its auxdata. :func:`exp_loop` returns these three addresses as
integers (the engine keeps them in its int64 parameters, ``pi[EXP_LOOP]``, ``pi[EXP_CTX]``,
``pi[EXP_AUX]``: never compiled into the cached machine code, which outlives the process), and
:func:`unary_inplace` is the numba intrinsic that calls such a loop on a 1-D float64 array in
place (``np.exp(a, out=a)``: the same function on the same pointer and stride, hence the same bits).

The loop is used only after a self-check at first use: through ``ctypes``, on arrays of lengths
1 to 70 and 1000 with varied values (inf, -inf, nan, signed zeros, huge, tiny, subnormal
results), it must give ``np.exp``'s bits exactly. If the private API is missing or changed, the
capsule is not the expected one, or any bit differs, :func:`exp_loop` returns zeros and the
engine keeps calling numpy through ``numba.objmode`` (the same bits, slower). Setting the
environment variable ``CLUSTER_ENV_NPY_LOOPS=0`` forces that fallback.

The addresses are this process's: an engine state carrying them is built, and must be used, in
the process that runs it (states are never pickled; a forked child shares the addresses).

Importing this module does not import numba; :func:`unary_inplace` does.
"""
from __future__ import annotations

import ctypes
import functools
import os
from typing import Optional

import numpy as np

#: The capsule name numpy gives the call info (its layout: see ``numpy.ufunc._get_strided_loop``).
CAPSULE_NAME = b"numpy_1.24_ufunc_call_info"

# int (PyArrayMethod_StridedLoop)(PyArrayMethod_Context *context, char *const *data,
#     const npy_intp *dimensions, const npy_intp *strides, NpyAuxData *auxdata)
_LOOP_TYPE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p),
                              ctypes.POINTER(ctypes.c_ssize_t), ctypes.POINTER(ctypes.c_ssize_t), ctypes.c_void_p)

#: Why the loop is not used (None when it is); set by :func:`exp_loop`.
reason: Optional[str] = None
_keep: list = []            # the capsule (numpy ties the auxdata's lifetime to it)


def _loop_of(ufunc) -> tuple[int, int, int, object]:
    """(loop, context, auxdata) addresses of ``ufunc``'s float64 -> float64 strided loop, and the
    capsule that owns them."""
    f8 = np.dtype(np.float64)
    dtypes, capsule = ufunc._resolve_dtypes_and_context((f8, f8))
    if tuple(dtypes) != (f8, f8):
        raise TypeError(f"{ufunc.__name__} resolves float64 to {dtypes}")
    ufunc._get_strided_loop(capsule)
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    is_valid = ctypes.pythonapi.PyCapsule_IsValid
    is_valid.restype, is_valid.argtypes = ctypes.c_int, [ctypes.py_object, ctypes.c_char_p]
    if not is_valid(capsule, CAPSULE_NAME):
        raise TypeError(f"unexpected call-info capsule {capsule!r}")
    info = get(capsule, CAPSULE_NAME)
    words = (ctypes.c_void_p * 3).from_address(info)       # strided_loop, context, auxdata
    flags = (ctypes.c_ubyte * 2).from_address(info + 3 * ctypes.sizeof(ctypes.c_void_p))
    if flags[0]:
        raise TypeError(f"{ufunc.__name__}'s loop needs the Python API")
    if not words[0] or not words[1]:
        raise TypeError("no loop in the call-info capsule")
    return int(words[0]), int(words[1]), int(words[2] or 0), capsule


def call_inplace(loop: tuple[int, int, int], a: np.ndarray) -> None:
    """Run the strided loop ``loop`` (loop, context, auxdata) on the 1-D float64 array ``a`` in
    place, through ctypes (the self-check and the tests; compiled code uses :func:`unary_inplace`)."""
    if a.dtype != np.float64 or a.ndim != 1:
        raise TypeError("a 1-D float64 array")
    fn = _LOOP_TYPE(loop[0])
    ptr = a.ctypes.data
    data = (ctypes.c_void_p * 2)(ptr, ptr)
    dims = (ctypes.c_ssize_t * 1)(a.shape[0])
    steps = (ctypes.c_ssize_t * 2)(a.strides[0], a.strides[0])
    if fn(loop[1], data, dims, steps, loop[2] or None) != 0:
        raise RuntimeError("the strided loop failed")


def check_values(seed: int = 0) -> list[np.ndarray]:
    """The self-check's arrays: lengths 1 to 70 and 1000, values over exp's whole range and its
    edges (overflow, underflow to subnormals and zero, inf, -inf, nan, signed zeros)."""
    rng = np.random.default_rng(seed)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e308, -1e308, 709.78, 709.79, -708.4, -745.1,
                        -745.2, -1000.0, 1e-300, -1e-300, 5e-324, 1e-17, -1e-17, 1.0, -1.0, 0.5, 88.7, -103.9])
    out = []
    for n in list(range(1, 71)) + [1000]:
        parts = [rng.normal(0.0, 1.0, n), rng.normal(0.0, 30.0, n), rng.uniform(-750.0, 710.0, n),
                 rng.uniform(-1e-6, 1e-6, n), special[rng.integers(0, len(special), n)]]
        for p in parts:
            out.append(np.ascontiguousarray(p))
        mixed = np.concatenate(parts)
        rng.shuffle(mixed)
        out.append(mixed[:n].copy())
    return out


def _self_check(loop: tuple[int, int, int]) -> Optional[str]:
    """None when ``loop`` gives ``np.exp``'s bits on every check array (in place, as the reference
    calls it), else what differed."""
    with np.errstate(all="ignore"):
        for a in check_values():
            want = a.copy()
            np.exp(want, out=want)
            got = a.copy()
            call_inplace(loop, got)
            if not np.array_equal(want.view(np.int64), got.view(np.int64)):
                return f"the loop differs from np.exp on an array of length {len(a)}"
            if not np.array_equal(np.exp(a).view(np.int64), got.view(np.int64)):
                return f"np.exp in place and not differ on an array of length {len(a)}"
    return None


@functools.lru_cache(maxsize=1)
def exp_loop() -> tuple[int, int, int]:
    """(loop, context, auxdata) addresses of numpy's float64 ``exp`` loop, checked (see the module
    docstring); ``(0, 0, 0)`` when it is not to be used (the reason in :data:`reason`)."""
    global reason
    if os.environ.get("CLUSTER_ENV_NPY_LOOPS", "1").strip().lower() in ("0", "false", "no", "off"):
        reason = "disabled by CLUSTER_ENV_NPY_LOOPS"
        return 0, 0, 0
    try:
        fn, ctx, aux, capsule = _loop_of(np.exp)
    except Exception as exc:  # noqa: BLE001 - a missing or changed private API: the fallback
        reason = f"numpy's strided loop API is unavailable: {type(exc).__name__}: {exc}"
        return 0, 0, 0
    _keep.append(capsule)
    why = _self_check((fn, ctx, aux))
    if why is not None:
        reason = why
        return 0, 0, 0
    reason = None
    return fn, ctx, aux


@functools.lru_cache(maxsize=1)
def unary_inplace():
    """The numba intrinsic ``call(loop, context, auxdata, a) -> int32``: the strided loop at the
    address ``loop`` (int64) run on the 1-D float64 array ``a`` in place (0 on success)."""
    from llvmlite import ir
    from numba.core import cgutils, types
    from numba.extending import intrinsic

    @intrinsic
    def call(typingctx, loop, context, auxdata, a):
        if not (isinstance(a, types.Array) and a.ndim == 1 and a.dtype == types.float64):
            return None
        sig = types.int32(types.int64, types.int64, types.int64, a)

        def codegen(cgctx, builder, sig, args):
            fn, ctx, aux, arr = args
            ary = cgctx.make_array(sig.args[3])(cgctx, builder, arr)
            i8p = ir.IntType(8).as_pointer()
            intp = cgctx.get_value_type(types.intp)
            data = cgutils.alloca_once(builder, i8p, size=2)
            dims = cgutils.alloca_once(builder, intp, size=1)
            steps = cgutils.alloca_once(builder, intp, size=2)
            ptr = builder.bitcast(ary.data, i8p)
            builder.store(ptr, data)
            builder.store(ptr, builder.gep(data, [ir.Constant(ir.IntType(32), 1)]))
            builder.store(cgutils.unpack_tuple(builder, ary.shape, 1)[0], dims)
            stride = cgutils.unpack_tuple(builder, ary.strides, 1)[0]
            builder.store(stride, steps)
            builder.store(stride, builder.gep(steps, [ir.Constant(ir.IntType(32), 1)]))
            fnty = ir.FunctionType(ir.IntType(32), [i8p, i8p.as_pointer(), intp.as_pointer(), intp.as_pointer(), i8p])
            callee = builder.inttoptr(fn, fnty.as_pointer())
            return builder.call(callee, [builder.inttoptr(ctx, i8p), data, dims, steps, builder.inttoptr(aux, i8p)])

        return sig, codegen

    return call


__all__ = ["call_inplace", "check_values", "exp_loop", "unary_inplace"]
