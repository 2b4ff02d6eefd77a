"""Field rules and derived geometry of the opcodes added for issue 28's operators (CAT, RESIZE,
TCONV, EMUL, LUT, AVGPOOL's left-out border, a convolution's lanes), judged from the instruction word alone.

Shared by the machine model (:mod:`dtpu.isro.machine`) and the static checker
(:mod:`dtpu.isro.check`) so that both fault on exactly the same words with the same words.
"""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from dtpu.isro import resample
from dtpu.isro.isa import Fmt, Func, Instruction, Mode


def operand_faults(ins: Instruction) -> list[str]:
    """Field combinations of the newer opcodes the chip faults on, judged from the word alone
    (shared with the static checker, :mod:`dtpu.isro.check`, so both report the same words)."""
    name, f = ins.op.name, ins.fields
    out = []
    if name == "CAT" and f["coff"] + f["cin"] > f["cout"]:
        out.append(f"channels {f['coff']}+{f['cin']} outside the output's {f['cout']}")
    if name == "RESIZE" and f["fho"]:           # a row band of a larger resize
        if f["yo"] + f["hout"] > f["fho"] or f["yi"] + f["hin"] > f["fhi"]:
            out.append(f"band rows {f['yo']}+{f['hout']} of {f['fho']} output rows from {f['yi']}+{f['hin']} "
                       f"of {f['fhi']} input rows run past the full resize")
        else:
            lo, hi = resample.source_rows(f["fho"], f["fhi"], f["yo"], f["hout"], f["mode"] == Mode.BILINEAR,
                                          bool(f["align"]), bool(f["half"]))
            if lo < f["yi"] or hi >= f["yi"] + f["hin"]:
                out.append(f"output rows {f['yo']}..{f['yo'] + f['hout'] - 1} read input rows {lo}..{hi}, "
                           f"outside the staged {f['yi']}..{f['yi'] + f['hin'] - 1}")
    if name == "RESIZE" and not f["fho"] and (f["fhi"] or f["yo"] or f["yi"]):
        out.append(f"fhi={f['fhi']}, yo={f['yo']}, yi={f['yi']} without fho (a whole resize has none)")
    if "lanes" in f and not 1 <= f["lanes"] <= max(1, f["cout"]):
        out.append(f"lanes={f['lanes']}; a block computes 1 to cout={f['cout']} output channels per cycle")
    if name == "AVGPOOL" and f["hup"] and (ins.fmt is not Fmt.I8 or f["dsp"]):
        out.append("hup (round the average half up) is I8 without the DSP stage only")
    if name == "TCONV" and min(f["uh"], f["uw"]) < 1:
        out.append(f"upsampling {f['uh']}x{f['uw']}; it must be at least 1x1")
    if name == "LUT" and (ins.fmt is Fmt.I8) != (f["func"] == Func.TABLE):
        out.append(f"func={Func(f['func']).name.lower()} in {ins.fmt.name.lower()}; I8 looks up a table "
                   f"(func=table), F32 evaluates sigmoid, tanh or hswish")
    if name == "LUT" and f["perch"] and ins.fmt is not Fmt.I8:
        out.append("per-channel tables (perch) are I8 only")
    if name == "AVGPOOL" and (f["at"] + f["ab"] >= f["hin"] or f["al"] + f["ar"] >= f["win"]) \
            and any(f[k] for k in ("at", "ab", "al", "ar")):
        out.append(f"border {f['at']},{f['ab']},{f['al']},{f['ar']} left out of the average covers the "
                   f"whole {f['hin']}x{f['win']} input")
    return out


def avgpool_taps(ins: Instruction) -> tuple[np.ndarray, np.ndarray]:
    """(1 inside / 0 in the left-out border per input position, taps counted per output):
    AVGPOOL divides by the taps inside its input's interior (TFLite's SAME average pooling)."""
    inside = np.zeros((ins.hin, ins.win), np.int64)
    inside[ins.at:ins.hin - ins.ab, ins.al:ins.win - ins.ar] = 1
    v = sliding_window_view(inside, (ins.kh, ins.kw))[::ins.sh, ::ins.sw][:ins.hout, :ins.wout]
    return inside, v.sum(axis=(-2, -1))
