"""What a claimed node asks the accelerator to compute, independent of who computes it.

The delegate builds a :class:`ConvSpec` from a TFLite node; the reference kernels, the lowering to
DTPU jobs and the ISRO compiler all read the same object. Shapes follow TFLite: activations NHWC,
CONV_2D filters OHWI, DEPTHWISE_CONV_2D filters 1HW(C*M).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace

import numpy as np


class OpKind(str, enum.Enum):
    CONV_2D = "conv2d"
    DEPTHWISE_CONV_2D = "depthwise_conv2d"
    FULLY_CONNECTED = "fully_connected"


class Padding(str, enum.Enum):
    SAME = "same"
    VALID = "valid"


class Activation(str, enum.Enum):
    NONE = "none"
    RELU = "relu"
    RELU6 = "relu6"
    RELU_N1_TO_1 = "relu_n1_to_1"


class DataMode(str, enum.Enum):
    """The TFLite type combinations the delegate can reproduce exactly."""

    INT8 = "int8"          # int8 activations, int8 per-channel symmetric weights, int32 bias
    UINT8 = "uint8"        # uint8 activations and weights, per-tensor, weight zero point, int32 bias
    INT16X8 = "int16x8"    # int16 symmetric activations, int8 per-channel weights, int64 bias
    FLOAT32 = "float32"

    @property
    def is_quantized(self) -> bool:
        return self is not DataMode.FLOAT32


@dataclass(frozen=True)
class Quant:
    """Affine quantization of one tensor: real = scale * (q - zero_point), per tensor or per channel."""

    scale: tuple[float, ...]
    zero_point: tuple[int, ...]

    def __post_init__(self):
        if len(self.scale) == 0 or len(self.scale) != len(self.zero_point):
            raise ValueError(
                f"quantization needs as many zero points as scales (got {len(self.scale)} scales, "
                f"{len(self.zero_point)} zero points)")

    @property
    def per_channel(self) -> bool:
        return len(self.scale) > 1

    def scales(self, channels: int) -> np.ndarray:
        """Scales broadcast to `channels` entries, as float64 (TFLite derives multipliers in double)."""
        return np.broadcast_to(np.asarray(self.scale, dtype=np.float64), (channels,)).copy()

    def zero_points(self, channels: int) -> np.ndarray:
        return np.broadcast_to(np.asarray(self.zero_point, dtype=np.int64), (channels,)).copy()


def output_size(in_size: int, kernel: int, stride: int, dilation: int, padding: Padding) -> int:
    """TFLite's ComputeOutSize."""
    effective = (kernel - 1) * dilation + 1
    if padding is Padding.SAME:
        return (in_size + stride - 1) // stride
    return (in_size - effective + stride) // stride


def padding_before(in_size: int, kernel: int, stride: int, dilation: int, padding: Padding) -> tuple[int, int]:
    """(pad before, extra pad after) as TFLite's ComputePaddingWithOffset: odd totals pad more after."""
    out = output_size(in_size, kernel, stride, dilation, padding)
    effective = (kernel - 1) * dilation + 1
    total = max((out - 1) * stride + effective - in_size, 0)
    return total // 2, total % 2


@dataclass(frozen=True)
class ConvSpec:
    kind: OpKind
    mode: DataMode
    input_shape: tuple[int, int, int, int]
    filter_shape: tuple[int, ...]
    stride: tuple[int, int] = (1, 1)
    dilation: tuple[int, int] = (1, 1)
    padding: Padding = Padding.VALID
    activation: Activation = Activation.NONE
    depth_multiplier: int = 1
    has_bias: bool = True
    input_q: Quant | None = None
    filter_q: Quant | None = None
    output_q: Quant | None = None
    name: str = field(default="", compare=False)

    def __post_init__(self):
        for label, pair in (("stride", self.stride), ("dilation", self.dilation)):
            if len(pair) != 2 or min(pair) < 1:
                raise ValueError(f"{label} must be two positive integers, got {pair!r}")
        if self.mode.is_quantized and None in (self.input_q, self.filter_q, self.output_q):
            raise ValueError(f"mode {self.mode.value} needs input, filter and output quantization")
        if self.kind is OpKind.DEPTHWISE_CONV_2D:
            c = self.input_shape[3]
            if self.filter_shape[3] != c * self.depth_multiplier:
                raise ValueError(
                    f"depthwise filter has {self.filter_shape[3]} channels; expected input channels "
                    f"{c} x depth multiplier {self.depth_multiplier}")

    @property
    def kernel(self) -> tuple[int, int]:
        if self.kind is OpKind.FULLY_CONNECTED:
            return (1, 1)
        return (self.filter_shape[1], self.filter_shape[2])

    @property
    def out_channels(self) -> int:
        if self.kind is OpKind.DEPTHWISE_CONV_2D:
            return self.filter_shape[3]
        return self.filter_shape[0]

    @property
    def output_shape(self) -> tuple[int, int, int, int]:
        n, h, w, _ = self.input_shape
        (kh, kw), (sh, sw), (dh, dw) = self.kernel, self.stride, self.dilation
        return (n, output_size(h, kh, sh, dh, self.padding), output_size(w, kw, sw, dw, self.padding),
                self.out_channels)

    @property
    def pads(self) -> tuple[tuple[int, int], tuple[int, int]]:
        """((top, extra bottom), (left, extra right)) in TFLite's convention."""
        _, h, w, _ = self.input_shape
        (kh, kw), (sh, sw), (dh, dw) = self.kernel, self.stride, self.dilation
        return (padding_before(h, kh, sh, dh, self.padding), padding_before(w, kw, sw, dw, self.padding))

    @property
    def macs(self) -> int:
        """Multiply-accumulates of one invoke, padding taps included (what the hardware spends)."""
        n, oh, ow, oc = self.output_shape
        kh, kw = self.kernel
        depth = 1 if self.kind is OpKind.DEPTHWISE_CONV_2D else self.input_shape[3]
        return n * oh * ow * oc * kh * kw * depth


def same_equivalent(shape, pads, kernel, stride, dilation) -> str | None:
    """Why a VALID convolution over `shape` padded by `pads` is not the SAME convolution over
    `shape` (None: it is). Equal when each padded side starts with SAME's own pad before and
    gives as many outputs: the same input rows are read, and the rows only one of them reads
    are pads in both."""
    wanted = []
    for axis, label in ((1, "height"), (2, "width")):
        size, (before, after) = shape[axis], pads[axis]
        k, s, d = kernel[axis - 1], stride[axis - 1], dilation[axis - 1]
        same_before, same_extra = padding_before(size, k, s, d, Padding.SAME)
        wanted.append((same_before, same_before + same_extra))
        valid_out = output_size(size + before + after, k, s, d, Padding.VALID)
        if before != same_before or valid_out != output_size(size, k, s, d, Padding.SAME):
            return (f"pads {tuple(pads[1:3])} are not those a SAME convolution adds "
                    f"({tuple(wanted)} along height, width for {label} {size}, kernel {k}, stride "
                    f"{s}, dilation {d})")
    return None


def fold_pads(spec: "ConvSpec", pads, input_shape: tuple[int, ...]) -> "ConvSpec":
    """`spec` (a VALID convolution over a tensor a PAD padded by `pads`, NHWC) as the SAME
    convolution over the PAD's input of shape `input_shape` (dtpu.delegate.folding: the PAD's
    fill is the zero point); ValueError when the pads are not SAME's."""
    if spec.kind not in (OpKind.CONV_2D, OpKind.DEPTHWISE_CONV_2D):
        raise ValueError(f"{spec.kind.value} does not take a folded PAD")
    why = same_equivalent(tuple(input_shape), tuple(pads), spec.kernel, spec.stride, spec.dilation)
    if why is not None:
        raise ValueError(why)
    folded = replace(spec, input_shape=tuple(input_shape), padding=Padding.SAME)
    if folded.output_shape != spec.output_shape:   # same_equivalent guarantees it; kept honest
        raise ValueError(f"folded output {folded.output_shape} differs from {spec.output_shape}")
    return folded
