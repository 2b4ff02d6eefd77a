"""The one list of precisions the DTPU knows.

Every layer (packing, the register map, the golden model, the delegate options) names a precision
through this enum, so a spelling accepted in one place is accepted everywhere.
"""
from __future__ import annotations

import enum

import numpy as np


class Precision(str, enum.Enum):
    INT8 = "int8"
    UINT8 = "uint8"
    INT16 = "int16"
    UINT16 = "uint16"
    INT32 = "int32"
    UINT32 = "uint32"
    INT64 = "int64"
    UINT64 = "uint64"
    FP32 = "fp32"
    BF16 = "bf16"

    @classmethod
    def parse(cls, value: "Precision | str") -> "Precision":
        """Accept an enum member or its name; reject anything else with the accepted list."""
        if isinstance(value, Precision):
            return value
        try:
            return cls(str(value).lower())
        except ValueError:
            accepted = ", ".join(p.value for p in cls)
            raise ValueError(f"unknown precision {value!r}; accepted: {accepted}") from None

    @property
    def bits(self) -> int:
        return _BITS[self]

    @property
    def lanes(self) -> int:
        """Elements per 64-bit word."""
        return 64 // _BITS[self]

    @property
    def is_float(self) -> bool:
        return self in (Precision.FP32, Precision.BF16)

    @property
    def is_signed(self) -> bool:
        return not self.value.startswith("uint")

    @property
    def lane_dtype(self) -> np.dtype:
        """The unsigned integer dtype of one lane's raw bits."""
        return np.dtype(f"<u{_BITS[self] // 8}")

    @property
    def value_dtype(self) -> np.dtype:
        """The numpy dtype of the values a lane carries (bf16 is carried as float32)."""
        return np.dtype(_VALUE_DTYPE[self])


_BITS = {
    Precision.INT8: 8, Precision.UINT8: 8,
    Precision.INT16: 16, Precision.UINT16: 16, Precision.BF16: 16,
    Precision.INT32: 32, Precision.UINT32: 32, Precision.FP32: 32,
    Precision.INT64: 64, Precision.UINT64: 64,
}
_VALUE_DTYPE = {
    Precision.INT8: "<i1", Precision.UINT8: "<u1", Precision.INT16: "<i2", Precision.UINT16: "<u2",
    Precision.INT32: "<i4", Precision.UINT32: "<u4", Precision.INT64: "<i8", Precision.UINT64: "<u8",
    Precision.FP32: "<f4", Precision.BF16: "<f4",
}
