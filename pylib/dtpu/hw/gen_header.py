"""Generate the RTL header and the register table from ``contract.json``.

    python -m dtpu.hw.gen_header            # rewrite hw/rtl/dtpu_regs.vh, docs/registers.md and
                                            # contract 2.0's hw/rtl/dtpu_cl_regs.vh and
                                            # docs/contract2_tables.md
    python -m dtpu.hw.gen_header --check    # exit 1 if either is stale (what the drift test does)

Both outputs are committed, so the RTL builds without Python and a reviewer sees register
changes in the diff; tests/test_hw_contract.py fails when they drift from the JSON.
"""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from dtpu.hw.config import HwConfig

log = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parents[3]
HEADER_PATH = REPO / "hw" / "rtl" / "dtpu_regs.vh"
DOC_PATH = REPO / "docs" / "registers.md"
#: contract 2.0's additions (descriptor format, 2.0 registers, memory model), kept out of the
#: 1.2 outputs above so that those stay byte-identical while the 1.2 RTL is the one built
CONTRACT2_DOC_PATH = REPO / "docs" / "contract2_tables.md"
#: contract 2.0's RTL include (descriptor opcodes, lengths and fields, CL_ERR bits, 2.0
#: registers, memory-model constants), used by the 2.0 units only (hw/rtl/dtpu_cl_*.v)
CONTRACT2_HEADER_PATH = REPO / "hw" / "rtl" / "dtpu_cl_regs.vh"


def render_header(cfg: HwConfig | None = None) -> str:
    cfg = cfg or HwConfig()
    c = cfg.contract
    out = [
        "// Generated from pylib/dtpu/hw/contract.json by `python -m dtpu.hw.gen_header`.",
        "// Do not edit: change the JSON and regenerate (tests/test_hw_contract.py checks drift).",
        "// Language: Verilog 2001 (localparams only; include inside a module body).",
        "",
        f"localparam [31:0] DTPU_ID = 32'h{cfg.ID:08X};",
        f"localparam [31:0] DTPU_VERSION = 32'h{cfg.VERSION:08X};",
        "",
        "// ---- default build parameters (override with module parameters / -G) ----",
    ]
    for key in ("ROWS", "COLS", "DATA_WIDTH", "AXIL_ADDR_WIDTH", "LOG_WEIGHT_WORDS",
                "LOG_PARAM_ENTRIES", "LOG_ACT_WORDS"):
        out.append(f"localparam integer DTPU_DEFAULT_{key} = {c['params'][key]};")
    out.append(f"localparam [15:0] DTPU_DEFAULT_PREC_EN = 16'h{cfg.prec_enable_mask:04X};")
    out += ["", "// ---- schedule constants: the golden model's cycle formulas use the same values ----"]
    for key, value in c["timing"].items():
        out.append(f"localparam integer DTPU_{key} = {value};  // {c['timing_docs'][key]}")
    out += ["", "// ---- enums ----"]
    for enum_name, members in c["enums"].items():
        out.append(f"// {c['enum_docs'][enum_name]}")
        for member, code in members.items():
            out.append(f"localparam [3:0] DTPU_{enum_name}_{member} = 4'd{code};")
    out += ["", "// ---- ERR bits ----"]
    for name, e in c["errors"].items():
        out.append(f"localparam integer DTPU_ERR_{name} = {e['bit']};  // {e['doc']}")
    out.append(f"localparam [31:0] DTPU_ERR_FATAL_MASK = 32'h{cfg.ERR_FATAL_MASK:08X};")
    out += ["", "// ---- register byte offsets and fields ----"]
    for r in cfg.registers:
        out.append(f"localparam [{cfg.AXIL_ADDR_WIDTH - 1}:0] DTPU_REG_{r.name} = "
                   f"{cfg.AXIL_ADDR_WIDTH}'h{r.offset:02X};  // {r.access}: {r.doc}")
        for f in r.fields:
            out.append(f"localparam integer DTPU_{r.name}_{f.name}_LSB = {f.lsb};")
            out.append(f"localparam integer DTPU_{r.name}_{f.name}_WIDTH = {f.width};")
    out.append("")
    return "\n".join(out)


def _table(title: str | None, columns: tuple[str, ...], rows) -> list[str]:
    """The lines of a markdown table, after a ``## title`` section heading when given: the
    header, the rule, one line per row (an iterable of cells)."""
    out = ["", f"## {title}", ""] if title else []
    out += ["| " + " | ".join(columns) + " |", "|" + " --- |" * len(columns)]
    out += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return out


def render_doc(cfg: HwConfig | None = None) -> str:
    cfg = cfg or HwConfig()
    c = cfg.contract
    out = [
        "# DTPU register map",
        "",
        "Generated from `pylib/dtpu/hw/contract.json` by `python -m dtpu.hw.gen_header`; do not edit.",
        f"Contract version {c['version']['major']}.{c['version']['minor']}. All registers are 32 bits "
        "on AXI4-Lite (byte offsets, 4-byte aligned).",
        "",
        "| offset | name | access | reset | fields | description |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in cfg.registers:
        reset = "build" if r.reset is None else f"{r.reset:#x}"
        fields = "<br>".join(
            f"`[{f.lsb + f.width - 1}:{f.lsb}]` {f.name}" + (f" ({f.enum})" if f.enum else "")
            + (f": {f.doc}" if f.doc else "") for f in r.fields) or "-"
        out.append(f"| {r.offset:#04x} | {r.name} | {r.access} | {reset} | {fields} | {r.doc} |")
    out += ["", "## Enums", ""]
    for enum_name, members in c["enums"].items():
        codes = ", ".join(f"{m}={v}" for m, v in members.items())
        out.append(f"- **{enum_name}**: {codes}. {c['enum_docs'][enum_name]}")
    out += _table("ERR bits", ("bit", "name", "meaning"),
                  ((e["bit"], name, e["doc"]) for name, e in c["errors"].items()))
    out += _table("Build parameters", ("name", "default", "meaning"),
                  ((key, value, c["param_docs"][key]) for key, value in c["params"].items()))
    out += _table("Schedule constants", ("name", "cycles", "meaning"),
                  ((key, value, c["timing_docs"][key]) for key, value in c["timing"].items()))
    out.append("")
    return "\n".join(out)


def _fields_cell(fields) -> str:
    return "<br>".join(f"`[{f['lsb'] + f['width'] - 1}:{f['lsb']}]` {f['name']}"
                       + (f": {f['doc']}" if f.get("doc") else "") for f in fields) or "-"


def render_contract2_doc(cfg: HwConfig | None = None) -> str:
    """The tables of contract 2.0 (contract.json "contract2"); docs/contract2.md explains them."""
    cfg = cfg or HwConfig()
    c2 = cfg.contract["contract2"]
    v = c2["version"]
    out = [
        "# DTPU contract 2.0 tables",
        "",
        "Generated from the `contract2` section of `pylib/dtpu/hw/contract.json` by "
        "`python -m dtpu.hw.gen_header`; do not edit. The design and the reasons are in "
        "[contract2.md](contract2.md).",
        f"Contract version {v['major']}.{v['minor']}. {c2['doc']}",
        "",
        "## Descriptor opcodes",
        "",
        "| code | opcode | words | meaning |",
        "| --- | --- | --- | --- |",
    ]
    for name, code in c2["desc_opcodes"].items():
        words = " ".join(c2["desc_layout"][name])
        out.append(f"| {code} | {name} | {words} | {c2['desc_opcode_docs'][name]} |")
    out += _table("Descriptor words (64 bit, little-endian)", ("word", "fields"),
                  ((kind, _fields_cell(fields)) for kind, fields in c2["desc_fields"].items()))
    enums = [("act_modes", "act_mode_docs"), ("res_modes", "res_mode_docs")]
    if "vec_ops" in c2:     # 2.1: the vector unit's operations (VEC0.KIND)
        enums.append(("vec_ops", "vec_op_docs"))
    for enum, docs in enums:
        out += _table(enum.replace("_", " ").capitalize(), ("code", "mode", "meaning"),
                      ((code, name, c2[docs][name]) for name, code in c2[enum].items()))
    out += _table("2.0 registers (added to the 1.2 map)",
                  ("offset", "name", "access", "reset", "fields", "description"),
                  ((f"{r['offset']:#04x}", r["name"], r["access"], f"{r['reset']:#x}",
                    _fields_cell(r.get("fields", [])), r["doc"]) for r in c2["registers"]))
    out += _table("CL_ERR bits", ("bit", "name", "meaning"),
                  ((e["bit"], name, e["doc"]) for name, e in c2["errors"].items()))
    out += _table("Memory model", ("name", "value", "meaning and source"),
                  ((key, value, c2["memory_model_docs"][key])
                   for key, value in c2["memory_model"].items()))
    out.append("")
    return "\n".join(out)


def render_contract2_header(cfg: HwConfig | None = None) -> str:
    """hw/rtl/dtpu_cl_regs.vh: the constants of contract.json "contract2" as localparams, and
    the descriptor checks of the fetcher (opcode known, LEN matching the opcode's layout) as
    functions generated from desc_layout, so the RTL holds no number the contract holds."""
    cfg = cfg or HwConfig()
    c2 = cfg.contract["contract2"]
    aw = cfg.AXIL_ADDR_WIDTH
    op_w = next(f["width"] for f in c2["desc_fields"]["HEADER"] if f["name"] == "OP")
    len_w = next(f["width"] for f in c2["desc_fields"]["HEADER"] if f["name"] == "LEN")
    out = [
        "// Generated from the contract2 section of pylib/dtpu/hw/contract.json by",
        "// `python -m dtpu.hw.gen_header`. Do not edit: change the JSON and regenerate",
        "// (tests/test_hw_contract.py checks drift). Contract 2.0: docs/contract2.md.",
        "// Language: Verilog 2001 (localparams and functions; include inside a module body).",
        "",
        f"localparam integer DTPU_CL_VERSION_MAJOR = {c2['version']['major']};",
        f"localparam integer DTPU_CL_VERSION_MINOR = {c2['version']['minor']};",
        "",
        "// ---- memory model (the golden model's Timeline uses the same values) ----",
    ]
    for key, value in c2["memory_model"].items():
        out.append(f"localparam integer DTPU_CL_{key} = {value};")
    out += ["", "// ---- descriptor opcodes and lengths (words including the header) ----"]
    for name, code in c2["desc_opcodes"].items():
        lay = c2["desc_layout"][name]
        var = lay[-1].endswith("*")
        out.append(f"localparam [{op_w - 1}:0] DTPU_CL_OP_{name} = {op_w}'d{code};  "
                   f"// {' '.join(lay)}")
        out.append(f"localparam [{len_w - 1}:0] DTPU_CL_LEN_{name} = {len_w}'d{len(lay)};"
                   + ("  // at least: one or more words of the starred kind" if var else ""))
        out.append(f"localparam integer DTPU_CL_LEN_VAR_{name} = {int(var)};")
    out += ["", "// ---- descriptor word fields ----"]
    for kind, fields in c2["desc_fields"].items():
        for f in fields:
            out.append(f"localparam integer DTPU_CL_{kind}_{f['name']}_LSB = {f['lsb']};")
            out.append(f"localparam integer DTPU_CL_{kind}_{f['name']}_WIDTH = {f['width']};")
    for enum, prefix in (("act_modes", "ACT"), ("res_modes", "RES"), ("vec_ops", "VEC")):
        if enum not in c2:
            continue
        out += ["", f"// ---- {enum} ----"]
        for name, code in c2[enum].items():
            out.append(f"localparam [3:0] DTPU_CL_{prefix}_{name} = 4'd{code};")
    out += ["", "// ---- CL_ERR bits ----"]
    for name, e in c2["errors"].items():
        out.append(f"localparam integer DTPU_CL_ERR_{name} = {e['bit']};")
    out += ["", "// ---- 2.0 registers (byte offsets in the 1.2 map) and fields ----"]
    for r in c2["registers"]:
        out.append(f"localparam [{aw - 1}:0] DTPU_REG_{r['name']} = {aw}'h{r['offset']:02X};"
                   f"  // {r['access']}, reset {r['reset']:#x}")
        for f in r.get("fields", []):
            out.append(f"localparam integer DTPU_{r['name']}_{f['name']}_LSB = {f['lsb']};")
            out.append(f"localparam integer DTPU_{r['name']}_{f['name']}_WIDTH = {f['width']};")
    out += ["", "// ---- descriptor checks ----",
            "// 1 when `op` is one of desc_opcodes",
            f"function automatic dtpu_cl_op_known(input [{op_w - 1}:0] op);",
            "    begin",
            "        case (op)"]
    for name in c2["desc_opcodes"]:
        out.append(f"            DTPU_CL_OP_{name}: dtpu_cl_op_known = 1'b1;")
    out += ["            default: dtpu_cl_op_known = 1'b0;",
            "        endcase",
            "    end",
            "endfunction",
            "",
            "// 1 when LEN `len` matches the layout of the known opcode `op` (a starred layout:",
            "// at least its fixed words)",
            f"function automatic dtpu_cl_len_ok(input [{op_w - 1}:0] op, input [{len_w - 1}:0] len);",
            "    begin",
            "        case (op)"]
    for name in c2["desc_opcodes"]:
        cmp = ">=" if c2["desc_layout"][name][-1].endswith("*") else "=="
        out.append(f"            DTPU_CL_OP_{name}: dtpu_cl_len_ok = (len {cmp} DTPU_CL_LEN_{name});")
    out += ["            default: dtpu_cl_len_ok = 1'b0;",
            "        endcase",
            "    end",
            "endfunction",
            ""]
    return "\n".join(out)


def outputs() -> dict[Path, str]:
    cfg = HwConfig()
    out = {HEADER_PATH: render_header(cfg), DOC_PATH: render_doc(cfg)}
    if "contract2" in cfg.contract:
        out[CONTRACT2_DOC_PATH] = render_contract2_doc(cfg)
        out[CONTRACT2_HEADER_PATH] = render_contract2_header(cfg)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="only compare; exit 1 when stale")
    args = ap.parse_args(argv)
    stale = []
    for path, text in outputs().items():
        current = path.read_text() if path.exists() else None
        if current == text:
            continue
        stale.append(path)
        if not args.check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            log.warning("wrote %s", path)
    if args.check and stale:
        sys.stderr.write("stale: " + ", ".join(str(p) for p in stale) + "\n")
        return 1
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    sys.exit(main())
