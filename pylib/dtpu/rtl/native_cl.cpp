// The Verilated contract-2.0 test top (dtpu_cl_top) behind a small C API, for the in-process
// lists transport (dtpu/rtl/native.py, NativeListTransport).
//
// native.cpp does the same for the 1.2 top (dtpu_axi): AXI4-Lite master, the AXI4-Stream
// queues, the clock loop. Both take those from native_common.h (the same code and C names, so
// the Python side is one class with a few more calls); this harness adds, through the header's
// Port hooks and the entry points below, what a core with a memory port needs:
// * the DDR behind m_axi_*: dtpu::AxiMem (axi_mem.h), an AXI4 slave over a byte array the
//   Python side owns, with contract2.memory_model's latencies and outstanding limits;
// * the write channels (m_axi_aw*/w*/b*) are served when the Verilated top has them: the
//   build greps the generated Vdtpu.h for m_axi_awvalid and defines DTPU_HAS_AXI_WR, so the
//   same file builds against today's read-only top and the next one;
// * hierarchical reads of the core's memories for the regressions (dtpu_peek): by VPI name,
//   the names cocotb uses ("dtpu_cl_top.core_inst.wmem_inst.bank[0].ram_inst.mem"), on the
//   signals the build makes public (only dtpu_bram.mem: the rest of the design stays
//   optimizable); handles cached per name;
// * dtpu_run_until_done: the clock until CL_STATUS.DONE would read 1, or irq, or a cycle
//   bound, entirely in C++ (the doorbell wait costs no Python per cycle).
//
// One cycle (native_common.h's tick): drive the inputs with clk low (the memory's from its
// state: Port::port_drive), let them settle, sample every handshake (valid && ready just before
// the edge: port_sample), raise clk, then retire what was handshaken (stream words, bus beats,
// memory bursts: port_retire).

#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "Vdtpu.h"
#include "verilated.h"
#include "verilated_vpi.h"
#include "axi_mem.h"

#ifndef DTPU_HAS_AXI_WR
#define DTPU_HAS_AXI_WR 0
#endif

namespace {

// What dtpu_cl_top adds to the 1.2 face (native_common.h): the memory behind m_axi_*, and the
// VPI handles of dtpu_peek.
struct Port {
    static constexpr const char* instance = "TOP";
    dtpu::AxiMem mem;
    std::map<std::string, vpiHandle> handles;
    std::string last_error;

    // the master's side of the handshakes at the edge
    struct Fired {
        bool ar, r;
        uint32_t ar_id, ar_len, ar_size, ar_burst;
        uint64_t ar_addr;
#if DTPU_HAS_AXI_WR
        bool aw, w, b;
        uint32_t aw_id, aw_len, aw_size, aw_burst;
        uint64_t aw_addr;
        uint64_t w_data;
        uint32_t w_strb;
        bool w_last;
#endif
    };

    // the slave's outputs from its state, with clk low
    void port_drive(Vdtpu& t) {
        mem.drive();
        t.m_axi_arready = mem.arready;
        t.m_axi_rvalid = mem.rvalid;
        t.m_axi_rdata = mem.rdata;
        t.m_axi_rresp = mem.rresp;
        t.m_axi_rlast = mem.rlast;
        t.m_axi_rid = mem.rid;
#if DTPU_HAS_AXI_WR
        t.m_axi_awready = mem.awready;
        t.m_axi_wready = mem.wready;
        t.m_axi_bvalid = mem.bvalid;
        t.m_axi_bresp = mem.bresp;
        t.m_axi_bid = mem.bid;
#endif
    }

    Fired port_sample(const Vdtpu& t) const {
        Fired f;
        f.ar = t.m_axi_arvalid && mem.arready;
        f.ar_id = t.m_axi_arid; f.ar_len = t.m_axi_arlen; f.ar_size = t.m_axi_arsize;
        f.ar_burst = t.m_axi_arburst;
        f.ar_addr = t.m_axi_araddr;
        f.r = mem.rvalid && t.m_axi_rready;
#if DTPU_HAS_AXI_WR
        f.aw = t.m_axi_awvalid && mem.awready;
        f.aw_id = t.m_axi_awid; f.aw_len = t.m_axi_awlen; f.aw_size = t.m_axi_awsize;
        f.aw_burst = t.m_axi_awburst;
        f.aw_addr = t.m_axi_awaddr;
        f.w = t.m_axi_wvalid && mem.wready;
        f.w_data = t.m_axi_wdata;
        f.w_strb = t.m_axi_wstrb;
        f.w_last = t.m_axi_wlast;
        f.b = mem.bvalid && t.m_axi_bready;
#endif
        return f;
    }

    // the bursts and beats handshaken at the edge, then the memory's clock
    void port_retire(const Fired& f) {
        if (f.r) mem.r_fire();
        if (f.ar) mem.ar_fire(f.ar_id, f.ar_addr, f.ar_len, f.ar_size, f.ar_burst);
#if DTPU_HAS_AXI_WR
        if (f.b) mem.b_fire();
        if (f.w) mem.w_fire(f.w_data, f.w_strb, f.w_last);
        if (f.aw) mem.aw_fire(f.aw_id, f.aw_addr, f.aw_len, f.aw_size, f.aw_burst);
#endif
        mem.next_cycle();
    }

    // the memory's queues emptied while aresetn is low
    void port_reset() { mem.reset(); }

    void port_release() {
        for (auto& kv : handles) vpi_release_handle(kv.second);
    }
};

}  // namespace

// the 1.2 face: Sim, tick, axil_read / axil_write and the C API dtpu_new ... dtpu_trace_flush
#include "native_common.h"

extern "C" {

// ---------------------------------------------------------------- the memory port

int dtpu_has_axi_wr(void) { return DTPU_HAS_AXI_WR; }

// The DDR image: `size` bytes at `image` (host-owned, must outlive the core) seen at `base`.
void dtpu_mem_image(void* h, uint8_t* image, uint64_t base, uint64_t size) {
    Sim& s = sim(h);
    s.mem.image = image;
    s.mem.base = base;
    s.mem.size = image ? size : 0;
}

// Timing: the contract's memory model (latencies, outstanding bursts; `max_burst` for the
// monitor) and the optional disorder (stall probability per cycle, extra latency, seed).
void dtpu_mem_timing(void* h, uint32_t rd_latency, uint32_t rd_outstanding, uint32_t wr_latency,
                     uint32_t wr_outstanding, uint32_t max_burst, double stall,
                     uint32_t extra_latency, uint64_t seed) {
    dtpu::AxiMem& m = sim(h).mem;
    m.p.rd_latency = rd_latency;
    m.p.rd_outstanding = rd_outstanding ? rd_outstanding : 1;
    m.p.wr_latency = wr_latency;
    m.p.wr_outstanding = wr_outstanding ? wr_outstanding : 1;
    m.p.max_burst = max_burst;
    m.p.stall = stall;
    m.p.extra_latency = extra_latency;
    m.seed(seed);
}

// Address ranges [lo, hi) as 2n values: kind 0 mapped windows (empty: the whole image),
// 1 SLVERR, 2 hang (never answers).
void dtpu_mem_ranges(void* h, int kind, const uint64_t* pairs, uint64_t n) {
    dtpu::AxiMem& m = sim(h).mem;
    std::vector<dtpu::AxiMem::Range>& r = kind == 0 ? m.windows : kind == 1 ? m.slverr : m.hang;
    r.clear();
    for (uint64_t i = 0; i < n; i++) r.push_back({pairs[2 * i], pairs[2 * i + 1]});
}

// Counters: 0 read beats, 1 write beats, 2 read bursts, 3 write bursts, 4 protocol violations,
// 5 reads in flight, 6 writes in flight, 7 the memory's cycle.
uint64_t dtpu_mem_count(void* h, int which) {
    const dtpu::AxiMem& m = sim(h).mem;
    switch (which) {
        case 0: return m.rd_beats;
        case 1: return m.wr_beats;
        case 2: return m.rd_bursts;
        case 3: return m.wr_bursts;
        case 4: return m.violations;
        case 5: return m.reads_in_flight();
        case 6: return m.writes_in_flight();
        case 7: return m.cycle;
        default: return 0;
    }
}

const char* dtpu_mem_violation(void* h) { return sim(h).mem.first_violation.c_str(); }

// The handshake log (axi_mem.h AxiEvent): on/off (clears it); copy up to `max` events out.
void dtpu_mem_log(void* h, int on) {
    dtpu::AxiMem& m = sim(h).mem;
    m.log_events = on != 0;
    m.events.clear();
}

uint64_t dtpu_mem_events(void* h, dtpu::AxiEvent* out, uint64_t max) {
    dtpu::AxiMem& m = sim(h).mem;
    const uint64_t n = m.events.size() < max ? m.events.size() : max;
    if (n) std::memcpy(out, m.events.data(), n * sizeof(dtpu::AxiEvent));
    return n;
}

// Run the clock until (with `use_irq`) irq is high, or `offset` (CL_STATUS; STATUS for a 1.2
// job, whose interrupt this top does not route out) reads with bit `done_bit` set (polled over
// AXI4-Lite every `poll` cycles, as a host without the interrupt would), at most `max_cycles`.
// Returns 1 when done, 0 at the bound, -1 when a register read hung.
int dtpu_run_until_done(void* h, uint32_t offset, uint32_t done_bit, int use_irq, uint64_t poll,
                        uint64_t max_cycles) {
    Sim& s = sim(h);
    const uint64_t limit = s.cycle + max_cycles;
    if (!poll) poll = 1;
    uint64_t next_poll = s.cycle;
    while (s.cycle < limit) {
        if (use_irq && s.top->irq) return 1;
        if (s.cycle >= next_poll) {
            uint32_t v = 0;
            if (axil_read(s, offset, &v, 1000)) return -1;
            if (v >> done_bit & 1) return 1;
            next_poll = s.cycle + poll;
            continue;
        }
        tick(s);
    }
    return 0;
}

// ---------------------------------------------------------------- hierarchical reads

// Element `index` of the public array `name` (VPI name) into out[0..max_words) as 32-bit
// words, least significant first; returns the words written, -1 if there is no such signal.
int dtpu_peek(void* h, const char* name, uint32_t index, uint32_t* out, int max_words) {
    Sim& s = sim(h);
    vpiHandle arr;
    auto it = s.handles.find(name);
    if (it == s.handles.end()) {
        arr = vpi_handle_by_name(const_cast<PLI_BYTE8*>(name), nullptr);
        if (!arr) {   // Verilator's scopes start at TOP (the model's instance name)
            const std::string full = std::string("TOP.") + name;
            arr = vpi_handle_by_name(const_cast<PLI_BYTE8*>(full.c_str()), nullptr);
        }
        if (!arr) return -1;
        s.handles[name] = arr;
    } else {
        arr = it->second;
    }
    vpiHandle el = vpi_handle_by_index(arr, (PLI_INT32)index);
    if (!el) return -1;
    s_vpi_value v;
    v.format = vpiVectorVal;
    vpi_get_value(el, &v);
    const int bits = vpi_get(vpiSize, el);
    const int words = (bits + 31) / 32;
    int n = 0;
    for (; n < words && n < max_words; n++) out[n] = (uint32_t)v.value.vector[n].aval;
    vpi_release_handle(el);
    return n;
}

// The scope names the model knows (one per line), for finding a peek's name.
const char* dtpu_scopes(void* h) {
    Sim& s = sim(h);
    s.last_error.clear();
    vpiHandle it = vpi_iterate(vpiModule, nullptr);
    while (it) {
        vpiHandle mod = vpi_scan(it);
        if (!mod) break;
        s.last_error += vpi_get_str(vpiFullName, mod);
        s.last_error += "\n";
        vpi_release_handle(mod);
    }
    return s.last_error.c_str();
}

}  // extern "C"
