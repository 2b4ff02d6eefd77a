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
//
// The list's per-node record (dtpu_trace_*, NativeListTransport.list_trace): while a list runs,
// port_sample also watches the sequencer's state (dtpu_cl_seq.state) and, on the few cycles it
// changes, closes the descriptor that just ended: per LOAD / RUN / POST its TAG, the cycle
// (dtpu_cl_top.cl_cycles, CL_CYCLES' own counter) and the deltas of the 1.2 register file's
// counters (busy cycles, STALL, WORDS_WGT / ACT / RES) and of the cycles the top did not count
// as IDLE; during a POST also the cycles the post unit waits for a partial sum (its stall).
// Signals read through pointers into the model's public variables (the build's control
// file makes them public_flat_rd: registers, so nothing the optimizer could have removed), so
// a cycle costs one byte compare (docs/rtl.md "backend=rtl lists: per-node cycles from the RTL").

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <map>
#include <string>
#include <vector>

#include "Vdtpu.h"
#include "verilated.h"
#include "verilated_sym_props.h"
#include "verilated_vpi.h"
#include "axi_mem.h"

#ifndef DTPU_HAS_AXI_WR
#define DTPU_HAS_AXI_WR 0
#endif

namespace {

// One LOAD / RUN / POST the sequencer finished (dtpu_trace_events copies them out; the layout
// is dtpu.rtl.nodetrace.EVENT_DTYPE).
struct TraceEvent {
    uint64_t end;        // cl_cycles when the sequencer left the descriptor's last state
    uint64_t busy;       // the core's busy cycles (RUN) or the post unit's cycles (POST)
    uint64_t stall;      // the core's STALL cycles (RUN); cycles waiting for a sum (POST)
    uint64_t act, res, wgt;   // words on the core's streams
    uint64_t nonidle;    // list cycles the top did not count as IDLE meanwhile
    uint32_t tag, op;    // HEADER.TAG, the opcode (1 LOAD, 3 RUN, 4 POST, 5 VEC)
};

// dtpu_cl_seq's state codes this record needs (hw/rtl/dtpu_cl_seq.v localparams)
enum : uint8_t {
    S_IDLE = 0, S_HEAD = 2, S_LCHK = 5, S_LAFTER = 11, S_RSTART = 18, S_RRUN = 19, S_RCLR = 20,
    S_PRUN = 24, S_PGO = 26, S_VRUN = 28
};

struct Tracer {
    // the public variables: state, tag, cl_cycles, cl_idle, the register file's counters
    enum { STATE, TAG, CYC, IDLE, BUSY, STALL, WGT, ACT, RES, P_RUN, P_PIX, P_NPIX, P_WVALID, N };
    const void* p[N] = {};
    int bytes[N] = {};
    const uint8_t* state = nullptr;   // set once every variable was found
    uint8_t prev = S_IDLE;
    bool done = false;                // the list ended (END, or an error) since it started
    uint64_t lists = 0;
    uint64_t cycles = 0, idle = 0;    // CL_CYCLES and IDLE at the end of the last list
    std::vector<TraceEvent> events;
    uint64_t s_busy = 0, s_stall = 0, s_wgt = 0, s_nonidle = 0, s_cyc = 0;   // at a job's start
    long last_run = -1;               // the last RUN's event (its words are final at the next)
    uint64_t r_act = 0, r_res = 0;    // the counters when that RUN started
    uint64_t p_wait = 0;              // cycles the running POST waited for a partial sum

    // every cycle of a POST (S_PRUN): the post unit runs, sums are still owed and none is
    // there (the read latency, a slow memory): its stall, as the core's STALL for a RUN
    void post_cycle() {
        if (rd(P_RUN) && rd(P_PIX) != rd(P_NPIX) && !rd(P_WVALID)) p_wait++;
    }

    uint64_t rd(int i) const {
        switch (bytes[i]) {
            case 1: return *static_cast<const uint8_t*>(p[i]);
            case 2: return *static_cast<const uint16_t*>(p[i]);
            case 4: return *static_cast<const uint32_t*>(p[i]);
            default: return *static_cast<const uint64_t*>(p[i]);
        }
    }

    uint64_t nonidle() const { return rd(CYC) - rd(IDLE); }

    // the words of the last RUN, counted up to now (result words may follow its DONE)
    void settle_run() {
        if (last_run < 0) return;
        TraceEvent& e = events[(size_t)last_run];
        e.act = rd(ACT) - r_act;
        e.res = rd(RES) - r_res;
    }

    void push(uint32_t op, uint64_t busy, uint64_t stall, uint64_t act, uint64_t res,
              uint64_t wgt) {
        events.push_back(TraceEvent{rd(CYC), busy, stall, act, res, wgt, nonidle() - s_nonidle,
                                    (uint32_t)rd(TAG), op});
    }

    // the sequencer went from `prev` to `st` at the last edge (sampled before the next one)
    void step(uint8_t st) {
        if (prev == S_IDLE) {             // DOORBELL: a new list
            events.clear();
            done = false;
            last_run = -1;
        }
        if (st == S_LCHK) {
            s_wgt = rd(WGT);
            s_nonidle = nonidle();
        } else if (st == S_LAFTER && prev != S_LAFTER) {
            push(1, 0, 0, 0, 0, rd(WGT) - s_wgt);
        } else if (st == S_RSTART && prev != S_RSTART) {
            settle_run();
            s_busy = rd(BUSY);
            s_stall = rd(STALL);
            s_nonidle = nonidle();
            r_act = rd(ACT);
            r_res = rd(RES);
        } else if (prev == S_RRUN && (st == S_HEAD || st == S_RCLR)) {
            last_run = (long)events.size();
            push(3, rd(BUSY) - s_busy, rd(STALL) - s_stall, rd(ACT) - r_act, rd(RES) - r_res, 0);
        } else if (st == S_PGO) {
            s_cyc = rd(CYC);
            s_nonidle = nonidle();
            p_wait = 0;
        } else if (prev == S_PRUN && st == S_HEAD) {
            push(4, rd(CYC) - s_cyc, p_wait, 0, 0, 0);
        } else if (st == S_VRUN && prev != S_VRUN) {
            // a VEC (VEC_EN builds): its words are in, the unit has not read yet
            s_nonidle = nonidle();
        } else if (prev == S_VRUN && st == S_HEAD) {
            // the unit's `done`: its cycles the ones the top did not count as IDLE (its
            // stall-free cycles, dtpu_vec `active`), no stall, no core stream words
            push(5, nonidle() - s_nonidle, 0, 0, 0, 0);
        }
        if (st == S_IDLE) {               // the list's end (done or failed)
            settle_run();
            cycles = rd(CYC);
            idle = rd(IDLE);
            done = true;
            lists++;
        }
        prev = st;
    }
};

// What dtpu_cl_top adds to the 1.2 face (native_common.h): the memory behind m_axi_*, and the
// VPI handles of dtpu_peek.
struct Port {
    static constexpr const char* instance = "TOP";
    dtpu::AxiMem mem;
    std::map<std::string, vpiHandle> handles;
    std::string last_error;
    Tracer trace;

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

    Fired port_sample(const Vdtpu& t) {
        if (trace.state) {
            if (*trace.state != trace.prev) trace.step(*trace.state);
            if (trace.prev == S_PRUN) trace.post_cycle();
        }
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

// ---------------------------------------------------------------- the per-node record

// Find the variables the record reads (public_flat_rd in the build's control file); 1 when
// all were found (the record runs from then on), 0 otherwise (`dtpu_error` names the first
// missing one).
int dtpu_trace_init(void* h) {
    Sim& s = sim(h);
    Tracer& tr = s.trace;
    static const char* const names[Tracer::N][2] = {
        {"dtpu_cl_top.seq_inst", "state"}, {"dtpu_cl_top.seq_inst", "tag"},
        {"dtpu_cl_top", "cl_cycles"}, {"dtpu_cl_top", "cl_idle"},
        {"dtpu_cl_top.regfile_inst", "cycles_reg"}, {"dtpu_cl_top.regfile_inst", "stall_reg"},
        {"dtpu_cl_top.regfile_inst", "words_wgt_reg"},
        {"dtpu_cl_top.regfile_inst", "words_act_reg"},
        {"dtpu_cl_top.regfile_inst", "words_res_reg"}, {"dtpu_cl_top.post_inst", "run_reg"},
        {"dtpu_cl_top.post_inst", "p_reg"}, {"dtpu_cl_top.post_inst", "pix_reg"},
        {"dtpu_cl_top.post_inst", "w_valid"}};
    tr.state = nullptr;
    for (int i = 0; i < Tracer::N; i++) {
        const VerilatedScope* sc = nullptr;
        for (const char* pre : {"TOP.", ""}) {
            sc = s.ctx->scopeFind((std::string(pre) + names[i][0]).c_str());
            if (sc) break;
        }
        VerilatedVar* v = sc ? sc->varFind(names[i][1]) : nullptr;
        if (!v) {
            s.last_error = std::string("no public variable ") + names[i][0] + "." + names[i][1];
            return 0;
        }
        switch (v->vltype()) {
            case VLVT_UINT8: tr.bytes[i] = 1; break;
            case VLVT_UINT16: tr.bytes[i] = 2; break;
            case VLVT_UINT32: tr.bytes[i] = 4; break;
            case VLVT_UINT64: tr.bytes[i] = 8; break;
            default:
                s.last_error = std::string("unexpected type of ") + names[i][1];
                return 0;
        }
        tr.p[i] = v->datap();
    }
    tr.prev = (uint8_t)tr.rd(Tracer::STATE);
    tr.state = static_cast<const uint8_t*>(tr.p[Tracer::STATE]);
    return 1;
}

const char* dtpu_error(void* h) { return sim(h).last_error.c_str(); }

// The record of the last list: out[0] lists ended since the core was made, [1] 1 when the
// last one ran to its end (0: none, or one still running), [2] its CL_CYCLES, [3] its IDLE,
// [4] the events recorded; then up to `max` events copied to `events`. Returns the events.
uint64_t dtpu_trace_events(void* h, uint64_t* out, TraceEvent* events, uint64_t max) {
    const Tracer& tr = sim(h).trace;
    out[0] = tr.lists;
    out[1] = tr.done ? 1 : 0;
    out[2] = tr.cycles;
    out[3] = tr.idle;
    out[4] = tr.events.size();
    const uint64_t n = tr.events.size() < max ? tr.events.size() : max;
    if (n) std::memcpy(events, tr.events.data(), n * sizeof(TraceEvent));
    return n;
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
