"""MindSpore's dtypes (mindspore.common.dtype, usually imported as mstype): ms.float32, ms.int32...
They are spore._C.DType values; numpy dtypes and names ("float32") are accepted wherever a dtype is."""
import numpy as np

from .. import _C

DType = _C.DType
bool_ = _C.DType.bool
uint8 = _C.DType.uint8
int8 = _C.DType.int8
int32 = _C.DType.int32
int64 = _C.DType.int64
float16 = _C.DType.float16
bfloat16 = _C.DType.bfloat16
float32 = _C.DType.float32
float64 = _C.DType.float64
half, single, double = float16, float32, float64
int_, float_ = int64, float64
number_type = (uint8, int8, int32, int64, float16, bfloat16, float32, float64)
int_type = (int8, int32, int64)
uint_type = (uint8,)
float_type = (float16, bfloat16, float32, float64)


def dtype_to_nptype(dtype):
    """numpy's type for a dtype (bfloat16 has none: a TypeError)."""
    return _C.dtype_to_nptype(_C.dtype_from_any(dtype))


def pytype_to_dtype(obj):
    return _C.dtype_from_any(obj)


def get_py_obj_dtype(obj):
    if isinstance(obj, _C.Tensor):
        return obj.dtype
    return _C.dtype_from_any(type(obj)) if not isinstance(obj, np.ndarray) else _C.dtype_from_any(obj.dtype)


__all__ = ["DType", "bool_", "uint8", "int8", "int32", "int64", "float16", "bfloat16", "float32", "float64",
           "half", "single", "double", "dtype_to_nptype", "pytype_to_dtype", "number_type", "int_type",
           "float_type", "uint_type"]
