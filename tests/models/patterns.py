"""Real-model patterns for the zoo (issue #25 item 4), written without TensorFlow by
dtpu.tflite_writer, small enough to build in milliseconds inside a test (so nothing is committed
that could drift from its generator):

- :func:`deeplab_v3_like`: DeepLab v3's segmentation head as the published TFLite DeepLab v3
  (257x257, output stride 16) has it, scaled down: a stride-4 backbone to a 17x17 feature map,
  ASPP (a 1x1 and two dilated 3x3 convolutions, rates 2 and 3) beside the image-pooling branch
  (AVERAGE_POOL_2D over the whole 17x17 map -> 1x1 convolution -> RESIZE_BILINEAR back to
  17x17), the CONCATENATION of the four, a 1x1 classifier and RESIZE_BILINEAR to the input size
  (align_corners, as DeepLab). `pool="mean"` writes the image pooling as Keras' global average
  pool (MEAN) instead.
- :func:`ssd_fpn_like`: an SSD detector with a two-level feature pyramid: the coarse level's
  lateral convolution upsampled by RESIZE_NEAREST_NEIGHBOR and ADDed to the fine level's, per
  level a 3x3 box and a 3x3 class convolution RESHAPEd to [1, anchors, 4] / [1, anchors, C],
  CONCATENATION of the levels along the anchor axis, LOGISTIC class scores, and the box decoding
  of an SSD post-processing graph: SPLIT of the box codes into centre and size, the centre
  MULtiplied by the anchors' sizes and ADDed to their centres (constants).

Both carry dead channels (a few per-channel filter scales of 1e-11 and 3e-11, flushed to a
zero multiplier by TFLite, as trained models have them: tests/test_dead_channels.py) in one
convolution. Quantization is chosen so that activations are spread, not saturated: each
convolution's output scale follows its fan-in; inputs of a CONCATENATION share its output's
quantization (as the converter writes them).
"""
from __future__ import annotations

import numpy as np

from dtpu.tflite_writer import GraphWriter, Tensor

#: filter scales of the dead channels
DEAD = (1e-11, 3e-11)


class _Net:
    """A GraphWriter with the layers the patterns use, seeded."""

    def __init__(self, seed: int, dt: str = "int8"):
        if dt not in ("int8", "uint8"):
            raise ValueError(f"dtype {dt!r}; accepted: int8, uint8")
        self.rng = np.random.default_rng(seed)
        self.w = GraphWriter()
        self.dt = dt
        self.off = 0 if dt == "int8" else 128

    def q(self, i):
        t = self.w.tensors[i]
        return float(t.scale), int(t.zero_point)

    def shape(self, i):
        return tuple(self.w.tensors[i].shape)

    def input(self, shape, scale=0.05, zp=-1):
        return self.w.tensor(Tensor(tuple(shape), self.dt, scale, zp + self.off, name="input"))

    def conv(self, x, cout, k, stride=1, dilation=1, act="relu", dead=0, out_q=None,
             name="conv"):
        """SAME convolution, per-channel int8 weights (uint8 models: per-tensor, zero point
        128); `dead` channels get filter scales from DEAD."""
        n, h, wd, cin = self.shape(x)
        s_in, _ = self.q(x)
        fan = k * k * cin
        w = self.rng.integers(-90, 91, (cout, k, k, cin))
        if self.dt == "int8":
            s_w = list(self.rng.uniform(0.01, 0.03, cout))
            for j in range(dead):
                s_w[(3 * j + 1) % cout] = DEAD[j % len(DEAD)]
            f = self.w.const(f"{name}_w", w, "int8", scale=s_w, zero_point=[0] * cout, axis=0)
            s_b = [float(np.float32(s_in) * np.float32(s)) for s in s_w]
            s_ref = 0.02
        else:
            f = self.w.const(f"{name}_w", w + 128, "uint8", scale=0.02, zero_point=128)
            s_b, s_ref = float(np.float32(s_in) * np.float32(0.02)), 0.02
        b = self.w.const(f"{name}_b", self.rng.integers(-2000, 2000, cout), "int32",
                         scale=s_b, zero_point=0)
        if out_q is None:
            out_q = (float(80 * np.sqrt(fan) * s_in * s_ref), -20 + self.off)
        out = (n, -(-h // stride), -(-wd // stride), cout)
        y = self.w.tensor(Tensor(out, self.dt, *out_q, name=name))
        self.w.op("CONV_2D", [x, f, b], [y], padding="SAME", stride=(stride, stride),
                  dilation=(dilation, dilation), activation=act)
        return y

    def op(self, opcode, inputs, shape, q=None, name="", dtype=None, **options):
        q = self.q(inputs[0]) if q is None else q
        y = self.w.tensor(Tensor(tuple(shape), dtype or self.dt, *q, name=name or opcode.lower()))
        self.w.op(opcode, inputs, [y], **options)
        return y

    def const_i32(self, name, values):
        return self.w.const(name, np.asarray(values, np.int32), "int32")


def deeplab_v3_like(dt: str = "int8", pool: str = "avg") -> bytes:
    """65x65x3 -> 17x17 ASPP head -> 65x65x6 class logits (module docstring)."""
    if pool not in ("avg", "mean"):
        raise ValueError(f"pool {pool!r}; accepted: avg (AVERAGE_POOL_2D), mean (MEAN)")
    g = _Net(2501, dt)
    x = g.input((1, 65, 65, 3))
    c1 = g.conv(x, 16, 3, 2, name="backbone1")                     # 33x33
    feat = g.conv(c1, 24, 3, 2, dead=3, name="backbone2")          # 17x17, dead channels
    cat_q = (0.05, -40 + g.off)
    b1 = g.conv(feat, 8, 1, out_q=cat_q, name="aspp_1x1")
    b2 = g.conv(feat, 8, 3, dilation=2, out_q=cat_q, name="aspp_rate2")
    b3 = g.conv(feat, 8, 3, dilation=3, out_q=cat_q, name="aspp_rate3")
    if pool == "avg":
        pooled = g.op("AVERAGE_POOL_2D", [feat], (1, 1, 1, 24), name="image_pool",
                      padding="VALID", stride=(17, 17), filter=(17, 17))
    else:
        pooled = g.op("MEAN", [feat, g.const_i32("axes", [1, 2])], (1, 1, 1, 24),
                      name="image_pool", keep_dims=True)
    b4 = g.conv(pooled, 8, 1, out_q=cat_q, name="image_pool_conv")
    b4 = g.op("RESIZE_BILINEAR", [b4, g.const_i32("aspp_size", [17, 17])], (1, 17, 17, 8),
              name="image_pool_up", align_corners=True)
    cat = g.op("CONCATENATION", [b1, b2, b3, b4], (1, 17, 17, 32), q=cat_q, name="aspp",
               axis=3)
    logits = g.conv(cat, 6, 1, act="none", name="classifier")
    out = g.op("RESIZE_BILINEAR", [logits, g.const_i32("out_size", [65, 65])], (1, 65, 65, 6),
               name="logits_up", align_corners=True)
    return g.w.to_bytes([x], [out], f"dtpu tests/models/patterns.py deeplab_v3_like {dt} {pool}")


def ssd_fpn_like(dt: str = "int8") -> bytes:
    """32x32x3 -> decoded box centres [1, 640, 2], box size codes [1, 640, 2] and class scores
    [1, 640, 3] (module docstring): 16x16 and 8x8 levels, 2 anchors a cell."""
    g = _Net(2502, dt)
    anchors, classes = 2, 3
    x = g.input((1, 32, 32, 3))
    c3 = g.conv(x, 16, 3, 2, dead=2, name="c3")                    # 16x16x16
    c4 = g.conv(c3, 24, 3, 2, name="c4")                           # 8x8x24
    p_q = (0.06, -10 + g.off)
    lat4 = g.conv(c4, 16, 1, act="none", out_q=p_q, name="lateral4")
    up4 = g.op("RESIZE_NEAREST_NEIGHBOR", [lat4, g.const_i32("up_size", [16, 16])],
               (1, 16, 16, 16), name="p4_up")
    lat3 = g.conv(c3, 16, 1, act="none", out_q=p_q, name="lateral3")
    p3 = g.op("ADD", [lat3, up4], (1, 16, 16, 16), q=(0.09, -5 + g.off), name="p3")
    box_q, cls_q = (0.04, g.off), (0.08, -30 + g.off)
    boxes, scores = [], []
    for level, p in (("p3", p3), ("p4", lat4)):
        h = g.shape(p)[1]
        n = h * h * anchors
        bx = g.conv(p, 4 * anchors, 3, act="none", out_q=box_q, name=f"{level}_box")
        cl = g.conv(p, classes * anchors, 3, act="none", out_q=cls_q, name=f"{level}_class")
        boxes.append(g.op("RESHAPE", [bx, g.const_i32(f"{level}_box_shape", [1, n, 4])],
                          (1, n, 4), name=f"{level}_box_flat", new_shape=[1, n, 4]))
        scores.append(g.op("RESHAPE", [cl, g.const_i32(f"{level}_cls_shape", [1, n, classes])],
                           (1, n, classes), name=f"{level}_class_flat",
                           new_shape=[1, n, classes]))
    total = sum(g.shape(b)[1] for b in boxes)
    box = g.op("CONCATENATION", boxes, (1, total, 4), q=box_q, name="box_codes", axis=1)
    logit = g.op("CONCATENATION", scores, (1, total, classes), q=cls_q, name="class_logits",
                 axis=1)
    score = g.op("LOGISTIC", [logit], (1, total, classes), q=(1 / 256, -128 + g.off),
                 name="scores")
    centre = g.w.tensor(Tensor((1, total, 2), dt, *box_q, name="centre_codes"))
    size = g.w.tensor(Tensor((1, total, 2), dt, *box_q, name="size_codes"))
    g.w.op("SPLIT", [g.w.const("split_axis", np.array(2, np.int32)), box], [centre, size],
           num_splits=2)
    rng = g.rng
    anchor_wh = g.w.const("anchor_wh", rng.integers(20, 120, (1, total, 2)) + g.off, dt,
                          scale=1 / 128, zero_point=g.off)
    anchor_c = g.w.const("anchor_centre", rng.integers(-120, 120, (1, total, 2)) + g.off, dt,
                         scale=1 / 128, zero_point=g.off)
    scaled = g.op("MUL", [centre, anchor_wh], (1, total, 2), q=(0.02, g.off), name="scaled")
    decoded = g.op("ADD", [scaled, anchor_c], (1, total, 2), q=(0.02, g.off), name="centres")
    return g.w.to_bytes([x], [decoded, size, score], f"dtpu tests/models/patterns.py ssd_fpn_like {dt}")


#: name -> builder (no argument: int8, the image pool as DeepLab's TFLite file has it)
PATTERNS = {"deeplab_v3_like": deeplab_v3_like, "deeplab_v3_like_mean":
            lambda dt="int8": deeplab_v3_like(dt, "mean"), "ssd_fpn_like": ssd_fpn_like}
