// What the two in-process Verilator harnesses share: the 1.2 top (dtpu_axi, native.cpp) and the
// contract-2.0 test top (dtpu_cl_top, native_cl.cpp) behind the same small C API, so that
// dtpu/rtl/native.py drives either through ctypes with one class (NativeTransport; the lists
// transport adds the 2.0 calls).
//
// Why it is built like this:
// * Both tops have the same 1.2 face: clk, aresetn, irq, the AXI4-Lite slave, s_axis_wgt,
//   s_axis_act and m_axis_res. Everything that touches only that face is here, once: the core
//   state (Sim), the clock loop (tick), the AXI4-Lite master, the stream queues and the C entry
//   points dtpu_new ... dtpu_trace_flush. A fix to the clock loop or to the context handling
//   then reaches both harnesses.
// * What a top adds per cycle comes in through `struct Port`, which the including file defines
//   *before* it includes this header (Sim derives from it, so its members are the core's):
//     static constexpr const char* instance;   the model's instance name (the VCD's top scope)
//     struct Fired;                             what port_sample saw before the edge
//     void port_drive(Vdtpu&);                  drive the top's extra inputs (clk low)
//     Fired port_sample(const Vdtpu&);          sample its handshakes (just before the edge)
//     void port_retire(const Fired&);           retire them (after the edge)
//     void port_reset();                        every cycle aresetn is low (and once before)
//     void port_release();                      before the model is destroyed
//   For dtpu_axi all of them are empty and inline away: the loop compiles to what it was.
//   A plain struct, not a template or virtual calls, because each .so holds exactly one top
//   and the per-cycle path must stay free of indirection (benchmarks/bench_sim_speed.py).
// * Verilator keeps "the current context" per thread and registers / erases a model's scopes
//   (public signals, VPI names) in it, at construction and destruction too; with several cores
//   in one process (and Python's garbage collector deleting them in any order) every entry
//   point makes its own context current first (sim(h)), or scopes land in (or are erased from)
//   another core's context, possibly a deleted one.
//
// One cycle (tick): drive the inputs with clk low and let them settle, sample every handshake
// (valid && ready just before the edge, as the core sees them), raise clk, then retire the
// words and bus beats whose handshake happened.
//
// Include once per harness, after "Vdtpu.h", "verilated.h" and the definition of Port.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <vector>

#if VM_TRACE
#include "verilated_vcd_c.h"
#endif

namespace {

struct Word {
    uint64_t data;
    bool last;
};

struct Sim : Port {
    std::unique_ptr<VerilatedContext> ctx;
    std::unique_ptr<Vdtpu> top;
#if VM_TRACE
    std::unique_ptr<VerilatedVcdC> vcd;
#endif
    uint64_t half = 5;                 // half a 10 ns clock period in the context's time units
    std::deque<Word> src[2];           // 0: s_axis_wgt, 1: s_axis_act
    std::vector<uint64_t> done;        // result words of complete packets, oldest first
    std::vector<uint64_t> partial;     // result words since the last tlast
    uint64_t cycle = 0;
    // AXI4-Lite master state
    bool aw = false, w = false, ar = false, wait_b = false, wait_r = false;
    uint32_t rdata = 0;
};

// The core behind a C handle, its context made current (see the header comment).
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
    s.port_drive(t);
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
    const Port::Fired port = s.port_sample(t);
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
    s.port_retire(port);
    s.cycle++;
}

// One AXI4-Lite write; 0 when the response came within `max_cycles`, -1 otherwise.
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

// One AXI4-Lite read into *out; 0 when the data came within `max_cycles`, -1 otherwise.
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

// A new core; `vcd` (may be NULL or empty) names a waveform file (builds with tracing only).
void* dtpu_new(const char* vcd) {
    Sim* s = new Sim;
    s->ctx.reset(new VerilatedContext);
    Verilated::threadContextp(s->ctx.get());
    s->top.reset(new Vdtpu(s->ctx.get(), Port::instance));
    // half a period of 10 ns in the context's time precision (10^timeprecision seconds)
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
    s->port_release();
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

// aresetn low for `cycles` (the port reset with it), then two cycles out of reset.
void dtpu_reset(void* h, int cycles) {
    Sim& s = sim(h);
    s.top->aresetn = 0;
    s.port_reset();
    for (int i = 0; i < cycles; i++) {
        tick(s);
        s.port_reset();
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

// Queue `n` words on input stream 0 (wgt) or 1 (act), tlast on the last one.
void dtpu_push(void* h, int stream, const uint64_t* words, uint64_t n) {
    Sim& s = sim(h);
    for (uint64_t i = 0; i < n; i++) s.src[stream].push_back(Word{words[i], i + 1 == n});
}

// Run up to `max_cycles`; with `until_irq`, stop as soon as irq is high. Returns cycles run.
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

// Move up to `max` words of complete result packets to `out`; returns how many.
uint64_t dtpu_take_results(void* h, uint64_t* out, uint64_t max) {
    Sim& s = sim(h);
    const uint64_t n = s.done.size() < max ? s.done.size() : max;
    if (n) std::memcpy(out, s.done.data(), n * sizeof(uint64_t));
    s.done.erase(s.done.begin(), s.done.begin() + n);
    return n;
}

// Drop queued input words and received result words (after an aborted job).
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

}  // extern "C"
