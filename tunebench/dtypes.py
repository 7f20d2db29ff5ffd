"""The element types a kernel is tuned in, by name: numpy's own, and the floats numpy lacks
(bfloat16 and the two 8-bit floats of FP8 training and inference).

A dtype is named in declarations, records and lookups by its numpy name (``float32``,
``float16``, ``bfloat16``, ``float8_e4m3fn``, ``float8_e5m2``, as PyTorch names them too). The
extension floats are ml_dtypes' (the numpy types JAX and TensorFlow share), imported only where a
kernel is declared or looked up in one. Its name means something to numpy
only once that import has registered it, and numpy counts it as kind ``V`` (a raw struct), not a
float: every question of whether a dtype holds floats is asked here, not of ``dtype.kind``.

A framework asks for its own tensors' dtypes (``x.dtype`` of a PyTorch tensor is
``torch.float32``, which numpy does not take): such a dtype means the numpy dtype of its name.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util

import numpy as np

#: Floating types outside numpy, by name, each with the package that defines it.
EXTENSION_FLOATS = {"bfloat16": "ml_dtypes", "float8_e4m3fn": "ml_dtypes", "float8_e5m2": "ml_dtypes"}


def numpy_dtype(dtype) -> np.dtype:
    """The numpy dtype of a name, a numpy type, a dtype or a framework's dtype (by its name); an
    extension float's package is imported first, so that its name is one numpy knows (an args
    builder's ``np.empty(shape, dtype)`` then works too). A ValueError says what is unknown, or
    which package to install."""
    name = dtype if isinstance(dtype, (str, type, np.dtype)) else framework_name(dtype)
    package = EXTENSION_FLOATS.get(name) if isinstance(name, str) else None
    if package is not None:
        try:
            importlib.import_module(package)
        except ImportError:
            raise ValueError(f"dtype {dtype!r} is {package}'s: pip install {package}") from None
    unread = (TypeError, SyntaxError, ValueError)  # numpy reads "," and "f4,i4" as a record's fields
    found = None
    with contextlib.suppress(*unread):
        found = np.dtype(name if name is not None else dtype)
    if found is None and isinstance(name, str) and importlib.util.find_spec("ml_dtypes") is not None:
        importlib.import_module("ml_dtypes")  # its other names (float8_e4m3fnuz, int4) are numpy's once imported
        with contextlib.suppress(*unread):
            found = np.dtype(name)
    if found is None:
        raise ValueError(f"dtype {dtype!r} is not a numpy dtype (float32, float16, bfloat16, int32, ...)")
    if found.fields is not None and isinstance(dtype, str):  # a name a typo made a record ("float32,")
        raise ValueError(f"dtype {dtype!r} is a record of fields ({found}), not one number type (float32, ...)")
    return found


def as_bits(array: np.ndarray) -> np.ndarray:
    """An array of a type numpy does not define (ml_dtypes': the extension floats, int4) as its
    bits, unsigned ints of its size, in the same memory; any other as it is. The buffer protocol
    refuses those types ("cannot include dtype 'E' in a buffer") and numpy's files cannot read
    float8_e5m2 back."""
    return array.view(f"u{array.dtype.itemsize}") if array.dtype.isbuiltin == 2 else array


def framework_name(dtype) -> str | None:
    """The numpy name of a framework's dtype object: ``float32`` for PyTorch's ``torch.float32``
    (a module path, then the name, as Paddle's and MLX's print too) or for a dtype whose ``name``
    says it (TensorFlow's). The printed form comes first: Paddle's ``name`` is its enum's,
    ``FLOAT32``. None for anything else, numpy's own scalar types among them."""
    module, _, name = str(dtype).rpartition(".")
    if not module or not all(part.isidentifier() for part in module.split(".")):
        name = getattr(dtype, "name", None)
        if not isinstance(name, str):
            return None
    return name if name.isidentifier() else None


def is_float(dtype: np.dtype) -> bool:
    """Whether a dtype holds real floating-point numbers (numpy's, or an extension float)."""
    return dtype.kind == "f" or dtype.name in EXTENSION_FLOATS


def kind(dtype: np.dtype) -> str:
    """numpy's kind letter of a dtype, ``f`` for an extension float too."""
    return "f" if is_float(dtype) else dtype.kind


def significand_bits(dtype: np.dtype) -> int:
    """The bits of a float's significand (a complex's parts'), the implicit one included (24 for
    float32 and complex64, 8 for bfloat16): how precisely it can hold a value."""
    if dtype.name in EXTENSION_FLOATS:
        return importlib.import_module(EXTENSION_FLOATS[dtype.name]).finfo(dtype).nmant + 1
    return np.finfo(dtype).nmant + 1
