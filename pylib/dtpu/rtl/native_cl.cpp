// The Verilated contract-2.0 test top (dtpu_cl_top) behind a small C API, for the in-process
// lists transport (dtpu/rtl/native.py, NativeListTransport).
//
// native.cpp does the same for the 1.2 top (dtpu_axi): AXI4-Lite master, the AXI4-Stream
// queues, the clock loop. This harness has those too (the same C names, so the Python side is
// one class with a few more calls) plus what a core with a memory port needs:
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
// One cycle (tick): drive the inputs with clk low (the memory's from its state), let them
// settle, sample every handshake (valid && ready just before the edge), raise clk, then retire
// what was handshaken (stream words, bus beats, memory bursts).

#include <cmath>
#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "Vdtpu.h"
#include "verilated.h"
#include "verilated_vpi.h"
#if VM_TRACE
#include "verilated_vcd_c.h"
#endif
#include "axi_mem.h"

#ifndef DTPU_HAS_AXI_WR
#define DTPU_HAS_AXI_WR 0
#endif

namespace {

struct Word {
    uint64_t data;
    bool last;
};

struct Sim {
    std::unique_ptr<VerilatedContext> ctx;
    std::unique_ptr<Vdtpu> top;
#if VM_TRACE
    std::unique_ptr<VerilatedVcdC> vcd;
#endif
    uint64_t half = 5;
    std::deque<Word> src[2];           // 0: s_axis_wgt, 1: s_axis_act
    std::vector<uint64_t> done;
    std::vector<uint64_t> partial;
    uint64_t cycle = 0;
    bool aw = false, w = false, ar = false, wait_b = false, wait_r = false;
    uint32_t rdata = 0;
    dtpu::AxiMem mem;
    std::map<std::string, vpiHandle> handles;
    std::string last_error;
};

// Verilator keeps "the current context" per thread and registers / erases a model's scopes
// (public signals, VPI names) in it, at construction and destruction too; with several cores
// in one process (and Python's garbage collector deleting them in any order) every entry
// point makes its own context current first, or scopes land in (or are erased from) another
// core's context, possibly a deleted one.
Sim& sim(void* h) {
    Sim& s = *static_cast<Sim*>(h);
    Verilated::threadContextp(s.ctx.get());
    return s;
}

void dump(Sim& s) {
#if VM_TRACE
    if (s.vcd) s.vcd->dump(s.ctx->time());
#else
    (void)s;
#endif
}

void tick(Sim& s) {
    Vdtpu& t = *s.top;
    dtpu::AxiMem& m = s.mem;
    for (int i = 0; i < 2; i++) {
        const bool valid = !s.src[i].empty();
        const uint64_t data = valid ? s.src[i].front().data : 0;
        const bool last = valid && s.src[i].front().last;
        if (i == 0) {
            t.s_axis_wgt_tvalid = valid; t.s_axis_wgt_tdata = data; t.s_axis_wgt_tlast = last;
        } else {
            t.s_axis_act_tvalid = valid; t.s_axis_act_tdata = data; t.s_axis_act_tlast = last;
        }
    }
    t.m_axis_res_tready = 1;
    t.s_axil_awvalid = s.aw;
    t.s_axil_wvalid = s.w;
    t.s_axil_bready = 1;
    t.s_axil_arvalid = s.ar;
    t.s_axil_rready = 1;
    m.drive();
    t.m_axi_arready = m.arready;
    t.m_axi_rvalid = m.rvalid;
    t.m_axi_rdata = m.rdata;
    t.m_axi_rresp = m.rresp;
    t.m_axi_rlast = m.rlast;
    t.m_axi_rid = m.rid;
#if DTPU_HAS_AXI_WR
    t.m_axi_awready = m.awready;
    t.m_axi_wready = m.wready;
    t.m_axi_bvalid = m.bvalid;
    t.m_axi_bresp = m.bresp;
    t.m_axi_bid = m.bid;
#endif
    t.clk = 0;
    t.eval();
    dump(s);
    s.ctx->timeInc(s.half);
    const bool fire_wgt = t.s_axis_wgt_tvalid && t.s_axis_wgt_tready;
    const bool fire_act = t.s_axis_act_tvalid && t.s_axis_act_tready;
    const bool fire_res = t.m_axis_res_tvalid && t.m_axis_res_tready;
    const uint64_t res = t.m_axis_res_tdata;
    const bool res_last = t.m_axis_res_tlast;
    const bool fire_aw = s.aw && t.s_axil_awready;
    const bool fire_w = s.w && t.s_axil_wready;
    const bool fire_b = t.s_axil_bvalid;
    const bool fire_ar = s.ar && t.s_axil_arready;
    const bool fire_r = t.s_axil_rvalid;
    const uint32_t rdata = t.s_axil_rdata;
    const bool m_ar = t.m_axi_arvalid && m.arready;
    const uint32_t ar_id = t.m_axi_arid, ar_len = t.m_axi_arlen, ar_size = t.m_axi_arsize,
                   ar_burst = t.m_axi_arburst;
    const uint64_t ar_addr = t.m_axi_araddr;
    const bool m_r = m.rvalid && t.m_axi_rready;
#if DTPU_HAS_AXI_WR
    const bool m_aw = t.m_axi_awvalid && m.awready;
    const uint32_t aw_id = t.m_axi_awid, aw_len = t.m_axi_awlen, aw_size = t.m_axi_awsize,
                   aw_burst = t.m_axi_awburst;
    const uint64_t aw_addr = t.m_axi_awaddr;
    const bool m_w = t.m_axi_wvalid && m.wready;
    const uint64_t w_data = t.m_axi_wdata;
    const uint32_t w_strb = t.m_axi_wstrb;
    const bool w_last = t.m_axi_wlast;
    const bool m_b = m.bvalid && t.m_axi_bready;
#endif
    t.clk = 1;
    t.eval();
    dump(s);
    s.ctx->timeInc(s.half);
    if (fire_wgt) s.src[0].pop_front();
    if (fire_act) s.src[1].pop_front();
    if (fire_res) {
        s.partial.push_back(res);
        if (res_last) {
            s.done.insert(s.done.end(), s.partial.begin(), s.partial.end());
            s.partial.clear();
        }
    }
    if (fire_aw) s.aw = false;
    if (fire_w) s.w = false;
    if (fire_b && s.wait_b) s.wait_b = false;
    if (fire_ar) s.ar = false;
    if (fire_r && s.wait_r) { s.wait_r = false; s.rdata = rdata; }
    if (m_r) m.r_fire();
    if (m_ar) m.ar_fire(ar_id, ar_addr, ar_len, ar_size, ar_burst);
#if DTPU_HAS_AXI_WR
    if (m_b) m.b_fire();
    if (m_w) m.w_fire(w_data, w_strb, w_last);
    if (m_aw) m.aw_fire(aw_id, aw_addr, aw_len, aw_size, aw_burst);
#endif
    m.next_cycle();
    s.cycle++;
}

int axil_write(Sim& s, uint32_t addr, uint32_t data, uint64_t max_cycles) {
    s.top->s_axil_awaddr = addr;
    s.top->s_axil_wdata = data;
    s.top->s_axil_wstrb = 0xF;
    s.aw = s.w = s.wait_b = true;
    for (uint64_t i = 0; i < max_cycles && (s.aw || s.w || s.wait_b); i++) tick(s);
    if (s.aw || s.w || s.wait_b) {
        s.aw = s.w = s.wait_b = false;
        return -1;
    }
    return 0;
}

int axil_read(Sim& s, uint32_t addr, uint32_t* out, uint64_t max_cycles) {
    s.top->s_axil_araddr = addr;
    s.ar = s.wait_r = true;
    for (uint64_t i = 0; i < max_cycles && (s.ar || s.wait_r); i++) tick(s);
    if (s.ar || s.wait_r) {
        s.ar = s.wait_r = false;
        return -1;
    }
    *out = s.rdata;
    return 0;
}

}  // namespace

extern "C" {

// ---------------------------------------------------------------- as native.cpp

void* dtpu_new(const char* vcd) {
    Sim* s = new Sim;
    s->ctx.reset(new VerilatedContext);
    Verilated::threadContextp(s->ctx.get());
    s->top.reset(new Vdtpu(s->ctx.get(), "TOP"));
    s->half = (uint64_t)std::llround(5e-9 / std::pow(10.0, s->ctx->timeprecision()));
    if (s->half == 0) s->half = 1;
#if VM_TRACE
    if (vcd && *vcd) {
        s->ctx->traceEverOn(true);
        s->vcd.reset(new VerilatedVcdC);
        s->top->trace(s->vcd.get(), 99);
        s->vcd->open(vcd);
    }
#else
    (void)vcd;
#endif
    Vdtpu& t = *s->top;
    t.clk = 0; t.aresetn = 1;
    t.s_axil_awaddr = 0; t.s_axil_awprot = 0; t.s_axil_wdata = 0; t.s_axil_wstrb = 0xF;
    t.s_axil_araddr = 0; t.s_axil_arprot = 0;
    t.eval();
    return s;
}

void dtpu_delete(void* h) {
    Sim* s = static_cast<Sim*>(h);
    if (!s) return;
    Verilated::threadContextp(s->ctx.get());
    for (auto& kv : s->handles) vpi_release_handle(kv.second);
    s->top->final();
#if VM_TRACE
    if (s->vcd) s->vcd->close();
#endif
    s->top.reset();
    delete s;
    Verilated::threadContextp(nullptr);
}

int dtpu_traced(void* h) {
#if VM_TRACE
    return sim(h).vcd ? 1 : 0;
#else
    (void)h;
    return 0;
#endif
}

// aresetn low for `cycles` (the memory's queues emptied), then two cycles out of reset.
void dtpu_reset(void* h, int cycles) {
    Sim& s = sim(h);
    s.top->aresetn = 0;
    s.mem.reset();
    for (int i = 0; i < cycles; i++) {
        tick(s);
        s.mem.reset();
    }
    s.top->aresetn = 1;
    tick(s);
    tick(s);
}

int dtpu_write(void* h, uint32_t addr, uint32_t data, uint64_t max_cycles) {
    return axil_write(sim(h), addr, data, max_cycles);
}

int dtpu_read(void* h, uint32_t addr, uint32_t* out, uint64_t max_cycles) {
    return axil_read(sim(h), addr, out, max_cycles);
}

void dtpu_push(void* h, int stream, const uint64_t* words, uint64_t n) {
    Sim& s = sim(h);
    for (uint64_t i = 0; i < n; i++) s.src[stream].push_back(Word{words[i], i + 1 == n});
}

uint64_t dtpu_run(void* h, uint64_t max_cycles, int until_irq) {
    Sim& s = sim(h);
    uint64_t i = 0;
    for (; i < max_cycles; i++) {
        if (until_irq && s.top->irq) break;
        tick(s);
    }
    return i;
}

int dtpu_irq(void* h) { return sim(h).top->irq ? 1 : 0; }

uint64_t dtpu_cycle(void* h) { return sim(h).cycle; }

uint64_t dtpu_pending(void* h, int stream) { return sim(h).src[stream].size(); }

uint64_t dtpu_result_words(void* h) { return sim(h).done.size(); }

uint64_t dtpu_partial_words(void* h) { return sim(h).partial.size(); }

uint64_t dtpu_take_results(void* h, uint64_t* out, uint64_t max) {
    Sim& s = sim(h);
    const uint64_t n = s.done.size() < max ? s.done.size() : max;
    if (n) std::memcpy(out, s.done.data(), n * sizeof(uint64_t));
    s.done.erase(s.done.begin(), s.done.begin() + n);
    return n;
}

void dtpu_flush(void* h) {
    Sim& s = sim(h);
    s.src[0].clear();
    s.src[1].clear();
    s.done.clear();
    s.partial.clear();
}

void dtpu_trace_flush(void* h) {
#if VM_TRACE
    Sim& s = sim(h);
    if (s.vcd) s.vcd->flush();
#else
    (void)h;
#endif
}

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
