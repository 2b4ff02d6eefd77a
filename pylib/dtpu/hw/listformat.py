"""Contract 2.0's descriptor format (contract.json ``contract2``): the one definition of the
words a command list is made of, shared by the compiler that writes them, the golden model that
reads them back from DDR, the drivers (register offsets) and the testbenches (docs/contract2.md).
"""
from __future__ import annotations

from dtpu.hw.config import HwConfig, get_config


#: where pynq.allocate's CMA buffers typically live on a PYNQ-Z2; any 8-byte aligned base works
DEFAULT_DDR_BASE = 0x1800_0000


class CmdlistError(ValueError):
    """A partition (or a node of it) that this command-list compiler cannot express."""


class ListFault(Exception):
    """A fault the device stops a list on: `kind` is the contract2 error (a CL_ERR bit name:
    BAD_OPCODE, BAD_FIELD, DECERR, JOB, ...), the message says what and where."""

    def __init__(self, kind: str, msg: str) -> None:
        super().__init__(msg)
        self.kind = kind


class Format:
    """Descriptor field layouts, opcodes, modes, registers and memory-model constants of
    contract 2.0, read from the contract (the one source; docs/contract2_tables.md is generated
    from the same section)."""

    def __init__(self, cfg: HwConfig | None = None) -> None:
        self.cfg = cfg or get_config()
        c2 = self.cfg.contract.get("contract2")
        if c2 is None:
            raise RuntimeError("contract.json has no 'contract2' section: the command-list "
                               "format is not defined for this build")
        self.c2 = c2
        self.version = (c2["version"]["major"], c2["version"]["minor"])
        self.opcodes = dict(c2["desc_opcodes"])
        self.opnames = {v: k for k, v in self.opcodes.items()}
        self.act_modes = dict(c2["act_modes"])
        self.res_modes = dict(c2["res_modes"])
        self.fields = {w: {f["name"]: (f["lsb"], f["width"]) for f in fs}
                       for w, fs in c2["desc_fields"].items()}
        self.layout = {op: list(ws) for op, ws in c2["desc_layout"].items()}
        self.mem = dict(c2["memory_model"])
        self.regs = {r["name"]: r for r in c2["registers"]}
        self.errors = {name: 1 << e["bit"] for name, e in c2["errors"].items()}
        self.flag_first = 2

    def word(self, kind: str, **values: int) -> int:
        """One 64-bit descriptor word of layout `kind` with the given fields (others 0)."""
        layout = self.fields[kind]
        w = 0
        for name, v in values.items():
            if name not in layout:
                raise KeyError(f"{kind} has no field {name!r}; fields: {', '.join(layout)}")
            lsb, width = layout[name]
            v = int(v)
            if not 0 <= v < 1 << width:
                raise CmdlistError(f"{kind}.{name} = {v} does not fit its {width}-bit field "
                                   f"(0..{(1 << width) - 1})")
            w |= v << lsb
        return w

    def field(self, kind: str, word: int, name: str) -> int:
        lsb, width = self.fields[kind][name]
        return (int(word) >> lsb) & ((1 << width) - 1)

    def fields_of(self, kind: str, word: int) -> dict[str, int]:
        return {n: self.field(kind, word, n) for n in self.fields[kind]}

    def length(self, op: str, pairs: int = 0) -> int:
        lay = self.layout[op]
        return len(lay) + (pairs - 1 if lay[-1].endswith("*") else 0)

    def reg_offset(self, name: str) -> int:
        return int(self.regs[name]["offset"])
