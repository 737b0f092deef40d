"""A state tuple passed by reference: the compiled engine's functions take one pointer, not the
arrays.

numba passes a tuple argument by value: every array's descriptor (7 or 9 machine words), about
2 KB for the engine's 30 arrays, copied at each call, and it increments and decrements, atomically,
the reference count of every array a function takes out of it. Per event (a few dozen calls) that
was most of the engine's time. A :class:`Ref` is a pointer to a copy of the tuple's descriptors
whose arrays do not take part in numba's reference counting (their ``meminfo`` is null: the caller
keeps them alive for the whole call); ``ref[i]`` reads one descriptor, so the functions' code is
unchanged (``ji, ic = S[1], S[11]``).

* :func:`stash` ``(state)``: a Ref to a copy of ``state`` in the calling function's stack frame
  (valid until it returns);
* :func:`image_access` ``(tuple type)``: intrinsics that store the same copy into the bytes of a
  uint8 array (kept between calls) and make a Ref of it, for a loop over many episodes (the
  vector step);
* :func:`container_image_access` ``(typed list type)``: the same for a numba typed list (the
  episodes' generators), so that a step takes it without unboxing it from Python at each call.

This module imports numba: import it only when numba is available.
"""
from __future__ import annotations

import functools

from numba.core import cgutils, types
from numba.core.datamodel import models, register_default
from numba.core.imputils import impl_ret_new_ref, lower_builtin
from numba.core.typing.templates import AbstractTemplate, infer, signature
from numba.extending import intrinsic
from numba.typed import listobject  # noqa: F401 - registers the typed list's data model


class Ref(types.Type):
    """Pointer to a tuple of arrays; ``ref[i]`` (a constant ``i``) is the tuple's item ``i``."""

    def __init__(self, dtype: types.BaseTuple) -> None:
        self.dtype = dtype
        super().__init__(name=f"Ref({dtype})")

    @property
    def key(self):
        return self.dtype


register_default(Ref)(models.PointerModel)


@infer
class _RefGetItem(AbstractTemplate):
    key = "static_getitem"

    def generic(self, args, kws):
        ref, idx = args
        if isinstance(ref, Ref) and isinstance(idx, int) and -len(ref.dtype) <= idx < len(ref.dtype):
            return signature(ref.dtype.types[idx], *args)
        return None


@lower_builtin("static_getitem", Ref, types.IntegerLiteral)
def _ref_getitem(context, builder, sig, args):
    ref_ty, idx_ty = sig.args
    idx = idx_ty.literal_value % len(ref_ty.dtype)
    item_ty = ref_ty.dtype.types[idx]
    ptr = cgutils.gep_inbounds(builder, args[0], 0, idx)
    value = context.data_model_manager[item_ty].load_from_data_pointer(builder, ptr)
    # The arrays behind a Ref are uncounted (null meminfo, see _detached): no increment to emit
    # (the decrement numba emits when the variable dies is a no-op on a null meminfo).
    return impl_ret_new_ref(context, builder, item_ty, value)


def _check(state) -> bool:
    return isinstance(state, types.BaseTuple) and all(isinstance(t, types.Array) for t in state)


def _detached(context, builder, state_ty, value):
    """``value`` (a tuple of arrays) with every array's meminfo and parent set to null, as data."""
    for i, ty in enumerate(state_ty):
        ary = context.make_array(ty)(context, builder, value=builder.extract_value(value, i))
        ary.meminfo = cgutils.get_null_value(ary.meminfo.type)
        ary.parent = cgutils.get_null_value(ary.parent.type)
        value = builder.insert_value(value, ary._getvalue(), i)
    return context.data_model_manager[state_ty].as_data(builder, value)


@intrinsic
def stash(typingctx, state):
    """A :class:`Ref` to an uncounted copy of the tuple ``state``, in the caller's stack frame."""
    if not _check(state):
        return None

    def codegen(context, builder, sig, args):
        data = _detached(context, builder, state, args[0])
        slot = cgutils.alloca_once(builder, data.type)
        builder.store(data, slot)
        return slot

    return Ref(state)(state), codegen


def tuple_type(items) -> types.Tuple:
    """The numba type of a tuple of arrays given as (numpy dtype, ndim) pairs (C-contiguous) or
    (numpy dtype, ndim, layout) triples."""
    import numpy as np
    from numba.np.numpy_support import from_dtype

    return types.Tuple([types.Array(from_dtype(np.dtype(it[0])), it[1], it[2] if len(it) > 2 else "C")
                        for it in items])


def _converts(have: types.Type, want: types.Type) -> bool:
    """Whether an array of type ``have`` can be stored as ``want``: the same type, or the same
    dtype and dimensions where ``want`` is of any layout ("A": a C-contiguous array is one too)."""
    if have == want:
        return True
    return (isinstance(have, types.Array) and isinstance(want, types.Array) and have.dtype == want.dtype
            and have.ndim == want.ndim and want.layout == "A" and want.mutable and have.mutable)


def image_size(state_ty: types.Type) -> int:
    """Bytes of the image of a value of numba type ``state_ty``: a tuple (see :func:`image_access`)
    or a typed list (:func:`container_image_access`)."""
    from numba.core.registry import cpu_target

    context = cpu_target.target_context
    return context.get_abi_sizeof(context.get_data_type(state_ty))


def _image_pointer(context, builder, image_ty, image, data_ty):
    """A pointer of LLVM type ``data_ty*`` to the bytes of the uint8 array ``image``."""
    ary = context.make_array(image_ty)(context, builder, value=image)
    return builder.bitcast(ary.data, data_ty.as_pointer())


@functools.lru_cache(maxsize=None)
def image_access(state_ty: types.BaseTuple):
    """Two intrinsics for tuples of numba type ``state_ty`` kept as byte images (a uint8 array of
    :func:`image_size` bytes): ``store(image, state)`` writes an uncounted copy of ``state`` into
    ``image`` (a typing error for a tuple of another type; arrays typed with layout "A" in
    ``state_ty`` may be given with any layout), ``load(image)`` is a :class:`Ref` to it. The
    arrays must stay alive as long as the image is loaded."""

    @intrinsic
    def store(typingctx, image, state):
        if not isinstance(image, types.Array) or not isinstance(state, types.BaseTuple) \
                or len(state) != len(state_ty) or not all(map(_converts, state, state_ty)):
            return None

        def codegen(context, builder, sig, args):
            value = args[1]
            if state != state_ty:       # arrays stored as layout "A" (the same data model)
                items = [context.cast(builder, builder.extract_value(value, i), have, want)
                         for i, (have, want) in enumerate(zip(state, state_ty))]
                value = context.make_tuple(builder, state_ty, items)
            data = _detached(context, builder, state_ty, value)
            builder.store(data, _image_pointer(context, builder, image, args[0], data.type))
            return context.get_dummy_value()

        return types.none(image, state), codegen

    @intrinsic
    def load(typingctx, image):
        if not isinstance(image, types.Array):
            return None

        def codegen(context, builder, sig, args):
            return _image_pointer(context, builder, image, args[0], context.get_data_type(state_ty))

        return Ref(state_ty)(image), codegen

    return store, load


@functools.lru_cache(maxsize=None)
def container_image_access(list_ty: types.ListType):
    """``store(image, lst)`` writes an uncounted copy of the typed list ``lst`` (its ``meminfo``
    null, its ``data`` pointer kept) into the bytes of the uint8 array ``image``; ``load(image)``
    returns it (a typed list of type ``list_ty``). Python keeps the list alive while the image is
    used; items may be set and appended (the C list ``data`` points to stays where it is)."""

    @intrinsic
    def store(typingctx, image, lst):
        if not isinstance(image, types.Array) or lst != list_ty:
            return None

        def codegen(context, builder, sig, args):
            proxy = cgutils.create_struct_proxy(list_ty)(context, builder, value=args[1])
            proxy.meminfo = cgutils.get_null_value(proxy.meminfo.type)
            data = context.data_model_manager[list_ty].as_data(builder, proxy._getvalue())
            builder.store(data, _image_pointer(context, builder, image, args[0], data.type))
            return context.get_dummy_value()

        return types.none(image, lst), codegen

    @intrinsic
    def load(typingctx, image):
        if not isinstance(image, types.Array):
            return None

        def codegen(context, builder, sig, args):
            ptr = _image_pointer(context, builder, image, args[0], context.get_data_type(list_ty))
            value = context.data_model_manager[list_ty].load_from_data_pointer(builder, ptr)
            # Null meminfo: numba's increments and decrements of this value are no-ops.
            return impl_ret_new_ref(context, builder, list_ty, value)

        return list_ty(image), codegen

    return store, load
