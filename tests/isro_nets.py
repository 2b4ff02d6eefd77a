"""Small networks with the operators of issue 28.2 (a UNet, a detection head, squeeze-excite, a
1-D time-series net), written as .tflite files without TensorFlow.

A network is described once in float32 (:class:`Net`); :meth:`Net.int8` quantizes it the way the
converter's post-training quantization does (per-channel symmetric int8 weights, int32 biases,
activation ranges from running the float graph on calibration inputs, the quantization each
int8 kernel requires: one for a concatenation's inputs and output, for pooling, resizing and
views; 1/256 for LOGISTIC, 1/128 for TANH). The interpreter is the oracle for both files.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from dtpu import tflite_writer as tw
from dtpu.tflite import Interpreter

SAME_QUANT = ("MAX_POOL_2D", "AVERAGE_POOL_2D", "RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR",
              "RESHAPE", "EXPAND_DIMS", "SQUEEZE", "CONCATENATION")
FIXED_QUANT = {"LOGISTIC": (1 / 256, -128), "TANH": (1 / 128, 0)}


def _out(size: int, k: int, s: int, padding: str) -> int:
    return -(-size // s) if padding == "SAME" else (size - k) // s + 1


class Net:
    """A float32 graph built op by op; every method returns the index of its output tensor."""

    def __init__(self, shape: tuple, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)
        self.shapes: list[tuple] = []
        self.consts: dict[int, np.ndarray] = {}
        self.nodes: list[tw.Node] = []
        self.kind: dict[int, str] = {}          # constant role: weights / bias / int
        self.input = self.tensor(shape)

    def tensor(self, shape, data=None, kind="act") -> int:
        """A new tensor of `shape`; with `data` a constant (`kind`: weights, bias or int)."""
        self.shapes.append(tuple(int(v) for v in shape))
        i = len(self.shapes) - 1
        if data is not None:
            self.consts[i], self.kind[i] = data, kind
        return i

    def node(self, opcode, inputs, shape, **options) -> int:
        """An operator on tensors `inputs` whose output (of `shape`) it adds."""
        y = self.tensor(shape)
        self.nodes.append(tw.Node(opcode, list(inputs), [y], options))
        return y

    def _wb(self, shape, fan_in, cout, bias=True):
        w = self.tensor(shape, (self.rng.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float32), "weights")
        b = self.tensor((cout,), (self.rng.standard_normal(cout) * 0.1).astype(np.float32), "bias") if bias else -1
        return w, b

    def conv(self, x, cout, k=3, stride=1, padding="SAME", act="relu"):
        _, h, w_, c = self.shapes[x]
        kh, kw = (k, k) if isinstance(k, int) else k
        sh, sw = (stride, stride) if isinstance(stride, int) else stride
        w, b = self._wb((cout, kh, kw, c), kh * kw * c, cout)
        return self.node("CONV_2D", [x, w, b], (1, _out(h, kh, sh, padding), _out(w_, kw, sw, padding), cout),
                          padding=padding, stride=(sh, sw), activation=act)

    def tconv(self, x, cout, k=3, stride=2, padding="SAME", bias=True):
        _, h, w_, c = self.shapes[x]
        oh, ow = (h * stride, w_ * stride) if padding == "SAME" else ((h - 1) * stride + k, (w_ - 1) * stride + k)
        shape = self.tensor((4,), np.array([1, oh, ow, cout], np.int32), "int")
        w, b = self._wb((cout, k, k, c), k * k * c, cout, bias)
        ins = [shape, w, x] + ([b] if bias else [])
        return self.node("TRANSPOSE_CONV", ins, (1, oh, ow, cout), padding=padding, stride=(stride, stride))

    def pool(self, op, x, k=2, stride=2, padding="VALID"):
        _, h, w, c = self.shapes[x]
        kh, kw = (k, k) if isinstance(k, int) else k
        sh, sw = (stride, stride) if isinstance(stride, int) else stride
        return self.node(op, [x], (1, _out(h, kh, sh, padding), _out(w, kw, sw, padding), c),
                          padding=padding, stride=(sh, sw), filter=(kh, kw))

    def concat(self, xs):
        shape = list(self.shapes[xs[0]])
        shape[-1] = sum(self.shapes[x][-1] for x in xs)
        return self.node("CONCATENATION", xs, tuple(shape), axis=-1)

    def resize(self, x, size, bilinear=False, align=False, half=False):
        _, h, w, c = self.shapes[x]
        s = self.tensor((2,), np.array(size, np.int32), "int")
        return self.node("RESIZE_BILINEAR" if bilinear else "RESIZE_NEAREST_NEIGHBOR", [x, s],
                          (1, size[0], size[1], c), align_corners=align, half_pixel_centers=half)

    def mul(self, a, b):
        return self.node("MUL", [a, b], self.shapes[a])

    def unary(self, op, x):
        return self.node(op, [x], self.shapes[x])

    def mean(self, x, keep=True):
        shape = self.shapes[x]
        axes = list(range(1, len(shape) - 1))
        a = self.tensor((len(axes),), np.array(axes, np.int32), "int")
        out = (1,) + (1,) * len(axes) + (shape[-1],) if keep else (1, shape[-1])
        return self.node("MEAN", [x, a], out, keep_dims=keep)

    def fc(self, x, units, act="none"):
        n = int(np.prod(self.shapes[x]))
        w, b = self._wb((units, n), n, units)
        return self.node("FULLY_CONNECTED", [x, w, b], (1, units), activation=act)

    def view(self, op, x, shape):
        shape = tuple(shape)
        if op == "RESHAPE":
            s = self.tensor((len(shape),), np.array(shape, np.int32), "int")
            return self.node("RESHAPE", [x, s], shape, new_shape=list(shape))
        if op == "EXPAND_DIMS":
            axis = next(i for i in range(len(shape)) if tuple(np.delete(shape, i)) == self.shapes[x])
            a = self.tensor((), np.array(axis, np.int32), "int")
            return self.node("EXPAND_DIMS", [x, a], shape)
        axis = next(i for i in range(len(self.shapes[x])) if tuple(np.delete(self.shapes[x], i)) == shape)
        return self.node("SQUEEZE", [x], shape, squeeze_dims=[axis])

    # -- files -------------------------------------------------------------------------------

    def _tensors_f32(self):
        out = []
        for i, shape in enumerate(self.shapes):
            data = self.consts.get(i)
            dtype = "int32" if self.kind.get(i) == "int" else "float32"
            out.append(tw.Tensor(shape, dtype, data=data, name=f"t{i}"))
        return out

    def float32(self, output: int) -> bytes:
        return tw.write(self._tensors_f32(), self.nodes, [self.input], [output])

    def ranges(self, output: int, calib: np.ndarray) -> dict[int, tuple[float, float]]:
        it = Interpreter(model_content=self.float32(output), experimental_preserve_all_tensors=True)
        it.allocate_tensors()
        lo, hi = {}, {}
        for x in calib:
            it.set_tensor(it.get_input_details()[0]["index"], x[None].astype(np.float32))
            it.invoke()
            for i in range(len(self.shapes)):
                if i in self.consts:
                    continue
                v = it.get_tensor(i)
                lo[i] = min(lo.get(i, 0.0), float(v.min()))
                hi[i] = max(hi.get(i, 0.0), float(v.max()))
        return {i: (lo[i], hi[i]) for i in lo}

    def int8(self, output: int, calib: np.ndarray) -> bytes:
        rng = self.ranges(output, calib)
        parent = {i: i for i in rng}

        def find(i):
            while parent[i] != i:
                i = parent[i]
            return i
        for n in self.nodes:
            if n.opcode in SAME_QUANT:
                for t in [n.inputs[0]] + ([*n.inputs[1:]] if n.opcode == "CONCATENATION" else []) + n.outputs:
                    parent[find(t)] = find(n.outputs[0])
        group: dict[int, tuple[float, float]] = {}
        for i, (lo, hi) in rng.items():
            g = find(i)
            a, b = group.get(g, (0.0, 0.0))
            group[g] = (min(a, lo), max(b, hi))
        quant = {}
        for i in rng:
            lo, hi = group[find(i)]
            scale = max(hi - lo, 1e-6) / 255.0
            quant[i] = (scale, int(np.clip(round(-128 - lo / scale), -128, 127)))
        for n in self.nodes:
            if n.opcode in FIXED_QUANT:
                quant[n.outputs[0]] = FIXED_QUANT[n.opcode]
        tensors = []
        users = {t: n for n in self.nodes for t in n.inputs}
        for i, shape in enumerate(self.shapes):
            kind = self.kind.get(i)
            if kind is None:
                s, z = quant[i]
                tensors.append(tw.Tensor(shape, "int8", s, z, name=f"t{i}"))
            elif kind == "int":
                tensors.append(tw.Tensor(shape, "int32", data=self.consts[i], name=f"t{i}"))
            elif kind == "weights":
                w = self.consts[i]
                node = users[i]
                per_channel = node.opcode in ("CONV_2D", "TRANSPOSE_CONV")
                axes = tuple(range(1, w.ndim))
                amax = np.abs(w).max(axis=axes) if per_channel else np.array([np.abs(w).max()])
                sw = np.maximum(amax, 1e-6) / 127.0
                q = np.clip(np.round(w / sw.reshape((-1,) + (1,) * (w.ndim - 1)) if per_channel else w / sw[0]),
                            -127, 127).astype(np.int8)
                tensors.append(tw.Tensor(shape, "int8", [float(v) for v in sw], [0] * len(sw), data=q, name=f"t{i}"))
                self._wscale = getattr(self, "_wscale", {})
                self._wscale[node.outputs[0]] = sw
            else:
                node = users[i]
                x = node.inputs[2] if node.opcode == "TRANSPOSE_CONV" else node.inputs[0]
                sw = self._wscale[node.outputs[0]]
                sb = quant[x][0] * sw
                q = np.round(self.consts[i] / sb).astype(np.int32)
                tensors.append(tw.Tensor(shape, "int32", [float(v) for v in sb], [0] * len(sb), data=q, name=f"t{i}"))
        return tw.write(tensors, self.nodes, [self.input], [output])


# -- the four networks of issue 28.2 ----------------------------------------------------------------

def unet(seed: int = 0):
    """Encoder (conv, max pool), bottleneck, decoder (transposed conv and resize up, concat with
    the skip), a 1x1 per-pixel classifier with a sigmoid."""
    n = Net((1, 16, 16, 3), seed)
    e1 = n.conv(n.input, 8)
    d1 = n.pool("MAX_POOL_2D", e1)
    e2 = n.conv(d1, 12)
    d2 = n.pool("AVERAGE_POOL_2D", e2, k=3, stride=2, padding="SAME")
    mid = n.conv(d2, 16)
    u2 = n.resize(mid, (8, 8), bilinear=True, half=True)
    c2 = n.conv(n.concat([u2, e2]), 12)
    u1 = n.tconv(c2, 8, k=3, stride=2)
    u1b = n.resize(c2, (16, 16))
    c1 = n.conv(n.concat([u1, e1, u1b]), 8)
    y = n.unary("LOGISTIC", n.conv(c1, 2, k=1, act="none"))
    return n, y


def unet_224(seed: int = 4):
    """The UNet's shape at 224x224 with 32-128 channels: its activations (3.2 MB for the 224x224x64
    concatenation) exceed the default profile's frame memory, so every layer is staged in row
    bands, the resizes and the transposed convolution included."""
    n = Net((1, 224, 224, 3), seed)
    e1 = n.conv(n.input, 32)
    e2 = n.conv(n.pool("MAX_POOL_2D", e1), 64)
    mid = n.conv(n.pool("MAX_POOL_2D", e2), 128)
    u2 = n.resize(mid, (112, 112), bilinear=True, half=True)
    c2 = n.conv(n.concat([u2, e2]), 64)
    u1 = n.tconv(c2, 32, k=3, stride=2)
    u1b = n.resize(c2, (224, 224))
    c1 = n.conv(n.concat([u1, e1, u1b]), 32)
    return n, n.unary("LOGISTIC", n.conv(c1, 2, k=1, act="none"))


def detection_head(seed: int = 1):
    """YOLO-style: two feature levels, the coarse one resized up and concatenated with the fine
    one, box, class and objectness branches concatenated and squashed by a sigmoid."""
    n = Net((1, 16, 16, 3), seed)
    f1 = n.conv(n.input, 8, stride=2)
    f2 = n.conv(f1, 12, stride=2)
    up = n.resize(n.conv(f2, 8, k=1), (8, 8), align=True, bilinear=True)
    f1m = n.conv(n.concat([f1, up]), 8)
    boxes = n.conv(f1m, 4, k=1, act="none")
    cls = n.conv(f1m, 3, k=1, act="none")
    obj = n.unary("HARD_SWISH", n.conv(f1m, 2, k=3, act="none"))
    return n, n.unary("LOGISTIC", n.concat([boxes, cls, obj]))


def squeeze_excite(seed: int = 2):
    """Conv, then a squeeze-excite gate (global mean, two 1x1 convs, sigmoid, channel-wise MUL),
    a tanh branch multiplied element-wise, and a classifier."""
    n = Net((1, 12, 12, 3), seed)
    x = n.conv(n.input, 16)
    s = n.mean(x, keep=True)
    s = n.conv(s, 4, k=1)
    s = n.unary("LOGISTIC", n.conv(s, 16, k=1, act="none"))
    y = n.mul(x, s)
    t = n.unary("TANH", n.conv(y, 16, k=1, act="none"))
    z = n.mul(y, t)
    z = n.pool("AVERAGE_POOL_2D", z, k=3, stride=2, padding="SAME")
    return n, n.fc(n.view("RESHAPE", z, (1, int(np.prod(n.shapes[z])))), 5)


def time_series(seed: int = 3):
    """A 1-D net over (1, 32, 4) as the converter writes Keras Conv1D / MaxPooling1D /
    GlobalAveragePooling1D: EXPAND_DIMS, 2-D ops over (1, 1, L, C) or (1, L, 1, C), SQUEEZE."""
    n = Net((1, 32, 4), seed)
    x = n.view("EXPAND_DIMS", n.input, (1, 1, 32, 4))
    x = n.conv(x, 8, k=(1, 5), padding="SAME")
    x = n.view("SQUEEZE", x, (1, 32, 8))
    x = n.view("EXPAND_DIMS", x, (1, 32, 1, 8))
    x = n.pool("MAX_POOL_2D", x, k=(2, 1), stride=(2, 1))
    x = n.view("SQUEEZE", x, (1, 16, 8))
    x = n.view("EXPAND_DIMS", x, (1, 1, 16, 8))
    x = n.conv(x, 12, k=(1, 3), stride=(1, 2), padding="VALID")
    x = n.view("SQUEEZE", x, (1, 7, 12))
    x = n.view("EXPAND_DIMS", x, (1, 7, 1, 12))
    x = n.pool("AVERAGE_POOL_2D", x, k=(3, 1), stride=(2, 1), padding="SAME")
    x = n.view("SQUEEZE", x, (1, 4, 12))
    g = n.mean(x, keep=False)
    return n, n.fc(g, 3)


def unsupported(path) -> Path:
    """A float32 .tflite whose second op (EXP) the chip cannot compute: refusal tests."""
    from pathlib import Path
    n = Net((1, 6, 6, 2))
    y = n.unary("EXP", n.conv(n.input, 3))
    Path(path).write_bytes(n.float32(y))
    return Path(path)


NETS = {"unet": unet, "detection_head": detection_head, "squeeze_excite": squeeze_excite,
        "time_series": time_series}


LARGE = {"unet_224": unet_224}        # the staged path's slow test only: not in the per-net sweeps


def write(name: str, directory, fmt: str = "int8", seed: int = 0):
    """(path of the .tflite file, float32 calibration/test inputs) for network `name`."""
    from pathlib import Path
    net, out = {**NETS, **LARGE}[name]()
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((8,) + net.shapes[net.input][1:])).astype(np.float32)
    data = net.int8(out, x) if fmt == "int8" else net.float32(out)
    path = Path(directory) / f"{name}_{fmt}.tflite"
    path.write_bytes(data)
    return path, x
