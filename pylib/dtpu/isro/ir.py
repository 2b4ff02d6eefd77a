"""The compiler's intermediate representation: hardware layers over frame tensors, and the
Builder front ends describe a model to.

Front ends (:mod:`dtpu.isro.keras_h5`, :mod:`dtpu.isro.tflite_model`, :func:`compile_spec`)
depend on this module and on :mod:`dtpu.isro.isa` only; the compiler (:mod:`dtpu.isro.compiler`)
consumes the IR and never the other way round, so a new front end needs no compiler change.

The IR is a list of :class:`Layer` in execution order. Frame tensor 0 is the model input and
tensor i+1 the output of layer i; each layer names the tensors it reads (``inputs``), so a graph
with branches and joins (a residual add) is a DAG over tensors. The :class:`Builder` owns the
folding rules (bias and batch normalization into the DSP stage, activations into the activation
stage, zero padding into the producer's output border), so both front ends refuse the same
things with the same words, and it refuses a fold that would change a tensor another layer
already reads.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dtpu.isro.isa import Fill, Fmt, Rounding
from dtpu.spec import Padding, output_size, padding_before

log = logging.getLogger(__name__)


class CompileError(ValueError):
    """The model uses something the ISRO-ASIC cannot compute; the message names the layer."""


# The multiplier rounding each TFLite 2.14 int8 kernel applies on x86-64 (the default
# interpreter, with or without XNNPACK, which leaves these int8 ops to the builtin kernels).
# Established by running the interpreter on thousands of outputs per op and counting the ties
# each candidate gets wrong (tests/test_isro_backend.py keeps checking it): CONV_2D and
# FULLY_CONNECTED go through ruy, whose x86 kernels round both steps half up; DEPTHWISE_CONV_2D
# uses TFLite's own MultiplyByQuantizedMultiplier (gemmlowp: the final shift rounds ties away
# from zero).
TFLITE_ROUNDING = {
    "CONV_2D": Rounding.DOUBLE_UP,
    "FULLY_CONNECTED": Rounding.DOUBLE_UP,
    "DEPTHWISE_CONV_2D": Rounding.DOUBLE,
    # MultiplyByQuantizedMultiplier(SmallerThanOneExp) in the scalar int8 ADD and MEAN kernels
    "ADD": Rounding.DOUBLE,
    "MEAN": Rounding.DOUBLE,
    # MultiplyByQuantizedMultiplier in the int8 MUL and TRANSPOSE_CONV kernels
    "MUL": Rounding.DOUBLE,
    "TRANSPOSE_CONV": Rounding.DOUBLE,
}

# layers without a post stage (DSP, activation): they move or look values up
NO_POST = ("concat", "resize", "lut")


def quantized_activation_range(kind: str, scale: float, zero_point: int) -> tuple[int, int]:
    """TFLite's CalculateActivationRangeQuantized for int8 (bounds quantized with round-half-away)."""
    from dtpu.reference.quantize import quantize_value
    bounds = {"none": (None, None), "relu": (0.0, None), "relu6": (0.0, 6.0),
              "relu_n1_to_1": (-1.0, 1.0)}
    if kind not in bounds:
        raise ValueError(f"activation {kind!r}; accepted: {', '.join(bounds)}")
    lo_b, hi_b = bounds[kind]
    lo, hi = -128, 127
    if lo_b is not None:
        lo = max(lo, quantize_value(lo_b, scale, zero_point))
    if hi_b is not None:
        hi = min(hi, quantize_value(hi_b, scale, zero_point))
    return lo, hi


@dataclass
class Layer:
    """One hardware layer: a MAC or pooling operation plus everything folded into it.

    Shapes are channel-major (C, H, W) and exclude padding; `pad` is the border this layer needs
    on its input, which the previous instruction (or the host, for the first layer) writes.

    kind ``input`` is a second (third, ...) model input: no instruction, its output tensor is
    written by the host with the frame image. Its `in_shape` and `in_zp` repeat the first
    input's, so ``layers[0].in_shape`` describes the model's first input whatever comes first.
    """

    kind: str                                  # conv | dwconv | dense | maxpool | avgpool | eadd | input
    name: str                                  # the framework layer whose output this equals
    in_shape: tuple[int, int, int]
    out_shape: tuple[int, int, int]
    sources: list[str] = field(default_factory=list)
    kernel: tuple[int, int] = (1, 1)
    stride: tuple[int, int] = (1, 1)
    dilation: tuple[int, int] = (1, 1)
    mult: int = 1
    pad: tuple[int, int, int, int] = (0, 0, 0, 0)
    fill: Fill = Fill.ZERO
    weights: np.ndarray | None = None          # conv (O,I,KH,KW), dwconv (O,KH,KW), dense (O,N)
    dsp: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None   # F32 v1,v2,v3; I8 bias,mult,shift
    leaky: tuple[float, float] | None = None   # F32 (a1, a2): y = x < a1 ? a2*x : x; I8 (multiplier,
                                               # shift) of the DSP stage for negative accumulators
    clamp: tuple[float, float] | None = None   # (lo, hi)
    rounding: Rounding = Rounding.DOUBLE
    in_zp: int = 0
    w_zp: int = 0                              # I8: the weights' zero point (uint8 models, shifted by 128)
    out_zp: int = 0
    out_scale: float | None = None
    has_bn: bool = False
    flat_out: bool = False                     # the framework sees this output as (1, C)
    tensor: int | None = None                  # TFLite tensor index of the output, if any
    inputs: list[int] | None = None            # frame tensors read (None: the previous layer's output)
    eadd_q: dict | None = None                 # I8 EADD: zero points and TFLite's ADD multipliers
    post_offset: int | None = None             # I8: the out_zp field when it is not the output's
                                               # zero point (TFLite MEAN's folded bias)
    model_output: bool = False                 # a model output besides the last layer's: kept to the end
    exclude_pad: bool = False                  # avgpool: `pad` is left out of sums and counts (SAME)
    half_up: bool = False                      # avgpool I8: the average rounds half up (TFLite's uint8)
    upsample: tuple[int, int] = (1, 1)         # tconv: the stride of the transposed convolution
    inner: tuple[int, int, int, int] = (0, 0, 0, 0)   # tconv: border around the spread-out input
    resize: tuple[str, bool, bool] | None = None      # resize: (nearest|bilinear, align, half pixel)
    func: str | None = None                    # lut: table | sigmoid | tanh | hswish
    bcast: bool = False                        # emul: the second operand is (C, 1, 1)
    emul_q: dict | None = None                 # I8 EMUL: zero points and TFLite's MUL multiplier

    @property
    def macs(self) -> int:
        c, h, w = self.out_shape
        kh, kw = self.kernel
        if self.kind in ("conv", "tconv"):
            return c * h * w * self.in_shape[0] * kh * kw
        if self.kind == "emul":
            return c * h * w
        if self.kind == "dwconv":
            return c * h * w * kh * kw
        if self.kind == "dense":
            return c * int(np.prod(self.in_shape))
        return 0

    @property
    def block(self) -> int:
        kh, kw = self.kernel
        if self.kind in ("conv", "tconv"):
            return self.in_shape[0] * kh * kw
        if self.kind == "dwconv":
            return kh * kw
        if self.kind == "dense":
            return int(np.prod(self.in_shape))
        return 0


@dataclass(frozen=True)
class Value:
    """A tensor as a front end sees it: a frame tensor plus pending padding/flatten.

    Front ends of branching graphs keep one per framework tensor and hand it back through
    :attr:`Builder.value` before describing the layer that reads it.
    """

    tensor: int
    shape: tuple[int, int, int]
    pad: tuple[int, int, int, int]
    pad_sources: tuple[str, ...]
    flattened: bool
    flatten_sources: tuple[str, ...]
    version: int


class Builder:
    """Front ends describe the model to this, layer by layer, in framework terms.

    It owns the folding rules (what may fuse into what) so both front ends refuse the same
    things with the same words. Layers read the *current* value (the last layer's output unless
    the front end sets :attr:`value`).
    """

    def __init__(self, fmt: Fmt, in_shape: tuple[int, int, int], *, flat_input: bool = False,
                 in_scale: float | None = None, in_zp: int = 0, input_name: str = "input") -> None:
        self.fmt = fmt
        self.layers: list[Layer] = []
        self.in_shape = tuple(int(v) for v in in_shape)
        self.shape = self.in_shape
        self.flat_input = flat_input
        self.in_scale, self.in_zp = in_scale, int(in_zp)
        self.input_name = input_name
        self._pad = [0, 0, 0, 0]
        self._pad_sources: list[str] = []
        self._flattened = flat_input
        self._flatten_sources: list[str] = []
        self._t = 0                               # current frame tensor
        self._shapes = [self.in_shape]            # per frame tensor, unpadded
        self._versions = [0]                      # per frame tensor: folds applied so far
        self._readers: list[list[str]] = [[]]     # per frame tensor: layers reading it
        self.heads: list[dict] = []               # trailing layers the host runs (softmax)
        self.extra_inputs: list[Layer] = []       # the model's inputs after the first (kind input)

    # -- values (branching graphs) --------------------------------------------------------------

    @property
    def value(self) -> Value:
        return Value(self._t, tuple(self.shape), tuple(self._pad), tuple(self._pad_sources),
                     self._flattened, tuple(self._flatten_sources), self._versions[self._t])

    @value.setter
    def value(self, v: Value) -> None:
        if v.version != self._versions[v.tensor]:
            prod = self._producer(v.tensor)
            raise CompileError(f"{prod.name if prod else 'input'}: read both before and after an "
                               f"activation or normalization folded into it; the chip stores only "
                               f"the folded output")
        self._t, self.shape = v.tensor, tuple(v.shape)
        self._pad, self._pad_sources = list(v.pad), list(v.pad_sources)
        self._flattened, self._flatten_sources = v.flattened, list(v.flatten_sources)

    def producer(self) -> Layer | None:
        """The layer whose output the current value is (None: the model input)."""
        return self._producer()

    def _producer(self, t: int | None = None) -> Layer | None:
        t = self._t if t is None else t
        return self.layers[t - 1] if t else None

    @property
    def flattened(self) -> bool:
        """A flatten is pending: the next layer sees the tensor as a vector."""
        return self._flattened

    # -- further model inputs -------------------------------------------------------------------

    def add_input(self, name: str, shape: tuple[int, int, int], *, flat: bool = False,
                  scale: float | None = None, zp: int = 0) -> Value:
        """Another model input, (C, H, W); the host writes it into frame memory before START.
        Returns its value (the current value is left as it was)."""
        keep = self.value
        layer = Layer(kind="input", name=name, in_shape=self.in_shape, out_shape=tuple(int(v) for v in shape),
                      sources=[name], in_zp=self.in_zp, out_zp=int(zp), out_scale=scale, flat_out=flat)
        self._push(layer, inputs=[])
        self.extra_inputs.append(layer)
        self._flattened = flat
        v = self.value
        self.value = keep
        return v

    def mark_output(self, v: Value, source: str) -> None:
        """Make the layer holding `v` a model output besides the final one: its tensor stays in
        frame memory until END, where the host reads it."""
        if v.tensor == 0 or self._producer(v.tensor).kind == "input":
            raise CompileError(f"{source}: a model output that is a model input; nothing computes it")
        if any(v.pad) or (v.flattened and v.shape[1] * v.shape[2] != 1):
            raise CompileError(f"{source}: a model output behind {'/'.join(v.pad_sources + v.flatten_sources)}; "
                               f"accepted: outputs that are a layer's stored result")
        layer = self._producer(v.tensor)
        if v.version != self._versions[v.tensor]:
            raise CompileError(f"{source}: a model output read before an activation folded into "
                               f"{layer.name}; the chip stores only the folded output")
        layer.model_output = True
        if v.flattened:
            layer.flat_out = True

    # -- layout-only layers ---------------------------------------------------------------------

    def pad(self, source: str, t: int, b: int, l: int, r: int) -> None:
        if min(t, b, l, r) < 0:
            raise CompileError(f"{source}: negative padding {(t, b, l, r)} (cropping) is not supported")
        if self._flattened:
            raise CompileError(f"{source}: padding after a flatten has no spatial axes to pad")
        for i, v in enumerate((t, b, l, r)):
            self._pad[i] += int(v)
        self._pad_sources.append(source)
        c, h, w = self.shape
        self.shape = (c, h + t + b, w + l + r)

    def flatten(self, source: str) -> None:
        self._flattened = True
        self._flatten_sources.append(source)

    def identity(self, source: str) -> None:
        """Inference no-ops (Dropout): recorded in the metadata, but a layer keeps the name of the
        last layer that changed its values, so dumps compare against that layer's output."""
        if self._pad_sources or self._flatten_sources:
            (self._flatten_sources if self._flatten_sources else self._pad_sources).append(source)
        elif self._producer() is not None and source not in self._producer().sources:
            self._producer().sources.append(source)

    # -- compute layers -------------------------------------------------------------------------

    def _resolve_padding(self, source: str, kind: str, kernel, stride, dilation, padding) -> tuple:
        """Total input padding: pending ZeroPadding/PAD plus the layer's own SAME padding."""
        c, h, w = self.shape                      # already includes pending explicit padding
        pend = list(self._pad)
        own = [0, 0, 0, 0]
        if isinstance(padding, (tuple, list)):
            own = [int(v) for v in padding]
        else:
            padding = Padding(padding)
            for axis, size in ((0, h), (1, w)):
                before, extra = padding_before(size, kernel[axis], stride[axis], dilation[axis], padding)
                own[2 * axis], own[2 * axis + 1] = before, before + extra
        fill = Fill.ZERO
        if kind == "maxpool" and any(own):
            if any(pend):
                raise CompileError(
                    f"{source}: max pooling with SAME padding right after explicit zero padding "
                    f"({'/'.join(self._pad_sources)}) needs two fill values in one border; the "
                    f"chip writes one")
            fill = Fill.LOWEST
        total = tuple(p + o for p, o in zip(pend, own))
        if max(total) > 255:
            raise CompileError(f"{source}: padding {total} exceeds the 8-bit pad fields (max 255)")
        return total, fill

    def _push(self, layer: Layer, inputs: list[int] | None = None) -> Layer:
        layer.sources = self._pad_sources + self._flatten_sources + layer.sources
        layer.inputs = [self._t] if inputs is None else list(inputs)
        for t in layer.inputs:
            self._readers[t].append(layer.name)
        self._pad = [0, 0, 0, 0]
        self._pad_sources = []
        self._flattened = False
        self._flatten_sources = []
        self.layers.append(layer)
        self.shape = layer.out_shape
        self._t = len(self.layers)
        self._shapes.append(tuple(layer.out_shape))
        self._versions.append(0)
        self._readers.append([])
        return layer

    def conv(self, source: str, weights: np.ndarray, *, stride=(1, 1), dilation=(1, 1),
             padding="valid", depthwise_mult: int | None = None, **post: Any) -> Layer:
        """A convolution; `weights` channel-major: (O, I, KH, KW), or (O, KH, KW) if depthwise."""
        if self._flattened:
            raise CompileError(f"{source}: a convolution after a flatten has no spatial input")
        kind = "conv" if depthwise_mult is None else "dwconv"
        weights = np.asarray(weights)
        kh, kw = weights.shape[-2:]
        c_unpadded = self.shape[0]
        if kind == "conv" and weights.shape[1] != c_unpadded:
            raise CompileError(f"{source}: kernel expects {weights.shape[1]} input channels, "
                               f"the tensor has {c_unpadded}")
        if kind == "dwconv" and weights.shape[0] != c_unpadded * depthwise_mult:
            raise CompileError(f"{source}: depthwise kernel has {weights.shape[0]} channels, "
                               f"expected {c_unpadded} x multiplier {depthwise_mult}")
        stride, dilation = tuple(int(v) for v in stride), tuple(int(v) for v in dilation)
        for label, pair, lim in (("stride", stride, 255), ("dilation", dilation, 255),
                                 ("kernel", (kh, kw), 255)):
            if min(pair) < 1 or max(pair) > lim:
                raise CompileError(f"{source}: {label} {pair} outside the chip's 1..{lim}")
        pad, fill = self._resolve_padding(source, kind, (kh, kw), stride, dilation, padding)
        return self._push(self._geometry(kind, source, weights, (kh, kw), stride, dilation, pad, fill,
                                         depthwise_mult or 1, weights.shape[0], **post))

    def _geometry(self, kind, source, weights, kernel, stride, dilation, pad, fill, mult, cout, **post):
        base = self._shapes[self._t]
        c = base[0]
        h, w = base[1] + pad[0] + pad[1], base[2] + pad[2] + pad[3]
        eh, ew = (kernel[0] - 1) * dilation[0] + 1, (kernel[1] - 1) * dilation[1] + 1
        if eh > h or ew > w:
            raise CompileError(f"{source}: a {eh}x{ew} window does not fit the {h}x{w} (padded) input")
        oh = output_size(h, kernel[0], stride[0], dilation[0], Padding.VALID)
        ow = output_size(w, kernel[1], stride[1], dilation[1], Padding.VALID)
        return Layer(kind=kind, name=source, in_shape=(c, base[1], base[2]), out_shape=(cout, oh, ow),
                     sources=[source], kernel=kernel, stride=stride, dilation=dilation, mult=mult,
                     pad=pad, fill=fill, weights=weights, **post)

    def maxpool(self, source: str, pool, stride, padding="valid", **post: Any) -> Layer:
        if self._flattened:
            raise CompileError(f"{source}: pooling after a flatten has no spatial input")
        pool, stride = tuple(int(v) for v in pool), tuple(int(v) for v in stride)
        pad, fill = self._resolve_padding(source, "maxpool", pool, stride, (1, 1), padding)
        c = self.shape[0]
        layer = self._geometry("maxpool", source, None, pool, stride, (1, 1), pad, fill, 1, c, **post)
        return self._push(layer)

    def avgpool(self, source: str, pool, stride, padding="valid", *, flat: bool = False, **post: Any) -> Layer:
        """Average pooling. SAME padding that pads divides by the taps inside the input, as Keras
        and TFLite do: the padding is a border the AVGPOOL instruction leaves out of its sums and
        counts. Explicit ZeroPadding before it is different: those zeros do count, so the two
        cannot share one border."""
        if self._flattened:
            raise CompileError(f"{source}: pooling after a flatten has no spatial input")
        pool, stride = tuple(int(v) for v in pool), tuple(int(v) for v in stride)
        exclude = False
        if not isinstance(padding, (tuple, list)) and Padding(padding) is Padding.SAME:
            c, h, w = self.shape
            needs = any(sum(padding_before(size, pool[axis], stride[axis], 1, Padding.SAME))
                        for axis, size in ((0, h), (1, w)))
            if needs and any(self._pad):
                raise CompileError(f"{source}: average pooling with SAME padding after explicit padding "
                                   f"({'/'.join(self._pad_sources)}): the padded zeros count, the SAME "
                                   f"border does not, and the chip leaves out one border")
            exclude = needs
        pad, fill = self._resolve_padding(source, "avgpool", pool, stride, (1, 1), padding)
        c = self.shape[0]
        layer = self._geometry("avgpool", source, None, pool, stride, (1, 1), pad, fill, 1, c, **post)
        layer.flat_out = flat
        layer.exclude_pad = exclude
        if exclude and layer.dsp is not None:
            raise CompileError(f"{source}: an average whose divisor is in the DSP multiplier cannot leave "
                               f"a border out")
        return self._push(layer)

    def _stored(self, source: str, v: Value, label: str) -> None:
        """`v` must be a stored tensor as it is (no pending padding or flatten, no fold since)."""
        if any(v.pad) or v.flattened:
            raise CompileError(f"{source}: the {label} operand has pending "
                               f"{'/'.join(v.pad_sources + v.flatten_sources)}; the chip reads stored tensors")
        if v.version != self._versions[v.tensor]:
            prod = self._producer(v.tensor)
            raise CompileError(f"{source}: reads {prod.name if prod else 'the input'} before an "
                               f"activation folded into it; the chip stores only the folded output")

    def concat(self, source: str, values: list[Value], **post: Any) -> Layer:
        """Channel concatenation: one CAT instruction per operand, each writing its channels."""
        if len(values) < 2:
            raise CompileError(f"{source}: concatenation of {len(values)} tensor(s); accepted: two or more")
        for k, v in enumerate(values):
            self._stored(source, v, f"#{k}")
        hw = {tuple(v.shape[1:]) for v in values}
        if len(hw) != 1:
            raise CompileError(f"{source}: concatenates tensors of shapes "
                               f"{', '.join(str(tuple(v.shape)) for v in values)} (C, H, W); accepted: "
                               f"equal H and W (concatenation along channels)")
        self.value = values[0]
        c = sum(v.shape[0] for v in values)
        h, w = values[0].shape[1:]
        layer = Layer(kind="concat", name=source, in_shape=tuple(values[0].shape), out_shape=(c, h, w),
                      sources=[source], **post)
        return self._push(layer, inputs=[v.tensor for v in values])

    def emul(self, source: str, a: Value, b: Value, **post: Any) -> Layer:
        """Element-wise product; `b` may be (C, 1, 1), broadcast over H and W (squeeze-excite)."""
        for v, label in ((a, "first"), (b, "second")):
            self._stored(source, v, label)
        bcast = tuple(b.shape) != tuple(a.shape)
        if bcast and tuple(b.shape) != (a.shape[0], 1, 1):
            raise CompileError(f"{source}: multiplies tensors of shapes {a.shape} and {b.shape} (C, H, W); "
                               f"accepted: equal shapes, or a second operand of (C, 1, 1)")
        self.value = a
        layer = Layer(kind="emul", name=source, in_shape=tuple(a.shape), out_shape=tuple(a.shape),
                      sources=[source], bcast=bcast, **post)
        return self._push(layer, inputs=[a.tensor, b.tensor])

    def resize(self, source: str, size: tuple[int, int], *, bilinear: bool, align: bool, half: bool,
               **post: Any) -> Layer:
        """Nearest or bilinear resize to `size` (H, W), TFLite's arithmetic (RESIZE)."""
        if self._flattened or any(self._pad):
            raise CompileError(f"{source}: a resize after {'/'.join(self._pad_sources + self._flatten_sources)}; "
                               f"accepted: a resize of a stored feature map")
        oh, ow = (int(v) for v in size)
        if min(oh, ow) < 1 or max(oh, ow) > 65535:
            raise CompileError(f"{source}: output size {oh}x{ow}; accepted: 1..65535 each")
        c, h, w = self.shape
        layer = Layer(kind="resize", name=source, in_shape=(c, h, w), out_shape=(c, oh, ow), sources=[source],
                      resize=("bilinear" if bilinear else "nearest", bool(align), bool(half)), **post)
        return self._push(layer)

    def lut(self, source: str, *, table: np.ndarray | None = None, func: str | None = None, **post: Any) -> Layer:
        """An element-wise function: an I8 table of 256 outputs (or 256 per channel), or an F32
        function by name."""
        if any(self._pad):
            raise CompileError(f"{source}: an element-wise function after padding "
                               f"({'/'.join(self._pad_sources)}) would change the padded zeros")
        if (table is None) == (self.fmt is Fmt.I8) or (func is None) == (self.fmt is Fmt.F32):
            raise CompileError(f"{source}: an {self.fmt.name} LUT needs "
                               f"{'a 256-entry table' if self.fmt is Fmt.I8 else 'a function name'}")
        weights = None
        c, h, w = self.shape
        if table is not None:
            weights = np.asarray(table)
            if weights.shape not in ((256,), (c, 256)) or weights.min() < -128 or weights.max() > 127:
                raise CompileError(f"{source}: table of shape {weights.shape}; accepted: 256 int8 entries, "
                                   f"or 256 per channel ({c}, 256)")
            weights = weights.astype(np.int8)
        layer = Layer(kind="lut", name=source, in_shape=(c, h, w), out_shape=(c, h, w), sources=[source],
                      weights=weights, func=func or "table", **post)
        prod = self._producer()
        layer.flat_out = self._flattened or (prod.flat_out if prod is not None else self.flat_input)
        return self._push(layer)

    def tconv(self, source: str, weights: np.ndarray, out_size: tuple[int, int], *, stride=(1, 1),
              pad_before=(0, 0), **post: Any) -> Layer:
        """A transposed convolution; `weights` (O, I, KH, KW) as the framework scatters them,
        `pad_before` (top, left) what the framework crops from the full output.

        The chip computes it as a convolution with the kernel flipped over the input spread out
        by the stride (zeros between pixels) with a border of kh - 1 - top rows above (TCONV)."""
        if self._flattened or any(self._pad):
            raise CompileError(f"{source}: a transposed convolution after "
                               f"{'/'.join(self._pad_sources + self._flatten_sources)}")
        weights = np.asarray(weights)
        o, i, kh, kw = weights.shape
        c, h, w = self.shape
        if i != c:
            raise CompileError(f"{source}: kernel expects {i} input channels, the tensor has {c}")
        sh, sw = (int(v) for v in stride)
        oh, ow = (int(v) for v in out_size)
        inner = []
        for k, s, n, out, p in ((kh, sh, h, oh, pad_before[0]), (kw, sw, w, ow, pad_before[1])):
            before, after = k - 1 - p, out - 1 - (n - 1) * s + p
            if before < 0 or after < 0 or max(before, after) > 255 or not 1 <= s <= 255:
                raise CompileError(f"{source}: a {k}-tap transposed convolution with stride {s} from {n} to "
                                   f"{out} cropping {p} needs a border of {before} and {after}; accepted: "
                                   f"0..255 each (the chip does not crop)")
            inner += [before, after]
        flipped = np.ascontiguousarray(weights[:, :, ::-1, ::-1])
        layer = Layer(kind="tconv", name=source, in_shape=(c, h, w), out_shape=(o, oh, ow), sources=[source],
                      kernel=(kh, kw), weights=flipped, upsample=(sh, sw), inner=tuple(inner), **post)
        return self._push(layer)

    def eadd(self, source: str, a: Value, b: Value, **post: Any) -> Layer:
        """Elementwise sum of two tensors (a residual connection): the EADD instruction."""
        for v, label in ((a, "first"), (b, "second")):
            if any(v.pad) or v.flattened:
                raise CompileError(f"{source}: the {label} operand has pending "
                                   f"{'/'.join(v.pad_sources + v.flatten_sources)}; the chip adds "
                                   f"stored tensors")
            if v.version != self._versions[v.tensor]:
                prod = self._producer(v.tensor)
                raise CompileError(f"{source}: reads {prod.name if prod else 'the input'} before an "
                                   f"activation folded into it; the chip stores only the folded output")
        if tuple(a.shape) != tuple(b.shape):
            raise CompileError(f"{source}: adds tensors of shapes {a.shape} and {b.shape} (C, H, W); "
                               f"the chip adds equal shapes (no broadcasting)")
        self.value = a
        layer = Layer(kind="eadd", name=source, in_shape=tuple(a.shape), out_shape=tuple(a.shape),
                      sources=[source], **post)
        return self._push(layer, inputs=[a.tensor, b.tensor])

    def dense(self, source: str, weights: np.ndarray, **post: Any) -> Layer:
        """`weights` (units, N) with N in the framework's flatten order (H, W, C)."""
        if any(self._pad):
            raise CompileError(f"{source}: zero padding directly before a dense layer is not supported")
        c, h, w = self.shape
        n = c * h * w
        weights = np.asarray(weights)
        if weights.shape[1] != n:
            raise CompileError(f"{source}: dense kernel expects {weights.shape[1]} inputs, the "
                               f"incoming tensor has {n} ({c}x{h}x{w})")
        if h * w > 1:
            # Keras and TFLite flatten H x W x C; frame memory holds C x H x W
            units = weights.shape[0]
            weights = weights.reshape(units, h, w, c).transpose(0, 3, 1, 2).reshape(units, n)
        layer = Layer(kind="dense", name=source, in_shape=(c, h, w), out_shape=(weights.shape[0], 1, 1),
                      sources=[source], weights=np.ascontiguousarray(weights), flat_out=True, **post)
        return self._push(layer)

    # -- folding into the previous layer --------------------------------------------------------

    def _last_for(self, source: str, what: str) -> Layer:
        last = self._producer()
        if last is None or last.kind == "input":
            raise CompileError(f"{source}: {what} on the model input has no instruction to fold "
                               f"into (it must follow a Conv2D, Dense or MaxPooling2D)")
        if last.kind in NO_POST:
            raise CompileError(f"{source}: {what} after {last.name} ({last.kind}), which has no DSP or "
                               f"activation stage to fold it into")
        readers = self._readers[self._t]
        if readers:
            raise CompileError(f"{source}: {what} cannot fold into {last.name}: its output is also "
                               f"read unchanged by {', '.join(readers)}")
        self._versions[self._t] += 1
        return last

    def batchnorm(self, source: str, gamma, beta, mean, var, eps: float) -> None:
        last = self._last_for(source, "batch normalization")
        if self.fmt is not Fmt.F32:
            raise CompileError(f"{source}: batch normalization in an I8 model must already be folded "
                               f"into the convolution's quantized weights")
        if last.kind == "maxpool" or last.dsp is None:
            raise CompileError(f"{source}: batch normalization after {last.name} ({last.kind}) has "
                               f"no DSP stage to fold into; it must follow Conv2D or Dense")
        if any(self._pad) or self._flattened:
            between = "/".join(self._pad_sources + self._flatten_sources)
            raise CompileError(f"{source}: batch normalization after {between} cannot fold into {last.name}")
        if last.leaky is not None or last.clamp is not None:
            raise CompileError(f"{source}: batch normalization after the activation of {last.name}; "
                               f"the DSP stage runs before the activation")
        if last.has_bn:
            raise CompileError(f"{source}: a second batch normalization after {last.name}")
        c = last.out_shape[0]
        arrs = [np.broadcast_to(np.asarray(a, dtype=np.float64), (c,)) for a in (gamma, beta, mean, var)]
        g, b, m, v = arrs
        if np.any(v + eps < 0):
            raise CompileError(f"{source}: negative variance + epsilon")
        bias = last.dsp[2].astype(np.float64)
        last.dsp = ((g / np.sqrt(v + eps)).astype(np.float32), b.astype(np.float32),
                    (bias - m).astype(np.float32))
        last.has_bn = True
        last.sources.append(source)
        last.name = source

    def bias(self, source: str, values) -> None:
        """A per-channel constant added after the DSP stage: folds into v2 (F32 only)."""
        last = self._last_for(source, "a bias addition")
        if self.fmt is not Fmt.F32:
            raise CompileError(f"{source}: an int8 addition requantizes; the I8 DSP stage of "
                               f"{last.name} cannot absorb it")
        if last.dsp is None or any(self._pad) or self._flattened:
            raise CompileError(f"{source}: a bias addition must directly follow a Conv2D or Dense")
        if last.leaky is not None or last.clamp is not None:
            raise CompileError(f"{source}: a bias addition after the activation of {last.name}")
        c = last.out_shape[0]
        v = np.asarray(values, dtype=np.float64).reshape(-1)
        if v.size not in (1, c):
            raise CompileError(f"{source}: adds {v.size} values to {c} channels; only a per-channel "
                               f"or scalar constant folds into the DSP stage")
        v1, v2, v3 = last.dsp
        last.dsp = (v1, (v2.astype(np.float64) + v).astype(np.float32), v3)
        last.sources.append(source)
        last.name = source

    def activation(self, source: str, *, leaky=None, clamp=None) -> None:
        """Fold an activation: `leaky` (a1, a2) and/or `clamp` (lo, hi); both None is linear."""
        if leaky is None and clamp is None:
            self.identity(source)
            return
        last = self._last_for(source, "an activation")
        # the chip activates the interior only; the border stays the real zero, so an activation
        # after padding folds only if it maps zero to zero (the leaky stage always does)
        zero = last.out_zp if self.fmt is Fmt.I8 else 0
        if any(self._pad) and clamp is not None and not clamp[0] <= zero <= clamp[1]:
            raise CompileError(f"{source}: an activation that moves 0 after zero padding "
                               f"({'/'.join(self._pad_sources)}) cannot fold into {last.name}")
        if leaky is not None:
            if self.fmt is Fmt.I8:
                raise CompileError(f"{source}: the leaky activation stage is F32-only; an I8 "
                                   f"activation must be a clamp of the quantized values")
            if last.clamp is not None:
                raise CompileError(f"{source}: a leaky/ReLU stage after {last.name}'s clamp; "
                                   f"the chip applies the leaky stage first")
            if last.leaky is not None and tuple(last.leaky) != tuple(leaky):
                raise CompileError(f"{source}: a second leaky activation after {last.name}'s "
                                   f"{last.leaky}; the chip has one leaky stage")
            last.leaky = (float(leaky[0]), float(leaky[1]))
        if clamp is not None:
            lo, hi = clamp
            if last.clamp is not None:
                lo, hi = max(lo, last.clamp[0]), min(hi, last.clamp[1])
            if lo > hi:
                raise CompileError(f"{source}: clamp [{lo}, {hi}] is empty")
            last.clamp = (lo, hi)
        last.sources.append(source)
        last.name = source

    def finish(self, source: str = "model output") -> list[Layer]:
        if self.layers and self._t != len(self.layers):
            raise CompileError(f"{source}: the model output is "
                               f"{self._producer().name if self._t else 'the input'}, not the last "
                               f"layer computed ({self.layers[-1].name}); a layer whose result is "
                               f"not used is not supported")
        if not any(layer.kind != "input" for layer in self.layers):
            raise CompileError(f"{source}: the model has no Conv2D, Dense or MaxPooling2D layer to compile")
        if any(self._pad):
            raise CompileError(f"{'/'.join(self._pad_sources)}: padding at the end of the model "
                               f"has no consumer")
        if self._flatten_sources:
            if self.shape[1] * self.shape[2] != 1:
                raise CompileError(f"{'/'.join(self._flatten_sources)}: a flatten at the end of a "
                                   f"{self.shape[1]}x{self.shape[2]} feature map; accepted only where it "
                                   f"feeds a Dense layer or the map is 1x1")
            self._producer().flat_out = True
            self._producer().sources.extend(self._flatten_sources)
        return self.layers
