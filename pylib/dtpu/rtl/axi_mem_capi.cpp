// dtpu::AxiMem (axi_mem.h) alone behind a C API, without a Verilated design: the harness-level
// tests (tests/test_rtl_lists.py) play the AXI4 master from Python, cycle by cycle, to check
// the memory model's timing, ordering, outstanding limits and responses on both directions
// (today's dtpu_cl_top has no write channels to exercise them with).
//
// A cycle: axim_drive (the slave's outputs: read back with axim_out), then axim_edge with the
// master's handshakes of that cycle (the caller decides them from axim_out's ready/valid).

#include "axi_mem.h"

extern "C" {

void* axim_new(uint8_t* image, uint64_t base, uint64_t size) {
    dtpu::AxiMem* m = new dtpu::AxiMem;
    m->image = image;
    m->base = base;
    m->size = size;
    m->log_events = true;
    return m;
}

void axim_delete(void* h) { delete static_cast<dtpu::AxiMem*>(h); }

void axim_timing(void* h, uint32_t rd_latency, uint32_t rd_outstanding, uint32_t wr_latency,
                 uint32_t wr_outstanding, uint32_t max_burst, double stall,
                 uint32_t extra_latency, uint64_t seed) {
    dtpu::AxiMem& m = *static_cast<dtpu::AxiMem*>(h);
    m.p.rd_latency = rd_latency;
    m.p.rd_outstanding = rd_outstanding;
    m.p.wr_latency = wr_latency;
    m.p.wr_outstanding = wr_outstanding;
    m.p.max_burst = max_burst;
    m.p.stall = stall;
    m.p.extra_latency = extra_latency;
    m.seed(seed);
}

void axim_ranges(void* h, int kind, const uint64_t* pairs, uint64_t n) {
    dtpu::AxiMem& m = *static_cast<dtpu::AxiMem*>(h);
    std::vector<dtpu::AxiMem::Range>& r = kind == 0 ? m.windows : kind == 1 ? m.slverr : m.hang;
    r.clear();
    for (uint64_t i = 0; i < n; i++) r.push_back({pairs[2 * i], pairs[2 * i + 1]});
}

void axim_drive(void* h) { static_cast<dtpu::AxiMem*>(h)->drive(); }

// out: arready, rvalid, rlast, rresp, rid, awready, wready, bvalid, bresp, bid; *rdata
void axim_out(void* h, uint32_t* out, uint64_t* rdata) {
    const dtpu::AxiMem& m = *static_cast<dtpu::AxiMem*>(h);
    out[0] = m.arready; out[1] = m.rvalid; out[2] = m.rlast; out[3] = m.rresp; out[4] = m.rid;
    out[5] = m.awready; out[6] = m.wready; out[7] = m.bvalid; out[8] = m.bresp; out[9] = m.bid;
    *rdata = m.rdata;
}

// The handshakes at this cycle's edge (each flag: that channel fired), then the next cycle.
// ar/aw: id, addr, len (AxLEN), size, burst; w: data, strb, last.
void axim_edge(void* h, int ar, uint32_t ar_id, uint64_t ar_addr, uint32_t ar_len,
               uint32_t ar_size, uint32_t ar_burst, int r, int aw, uint32_t aw_id,
               uint64_t aw_addr, uint32_t aw_len, uint32_t aw_size, uint32_t aw_burst, int w,
               uint64_t w_data, uint32_t w_strb, int w_last, int b) {
    dtpu::AxiMem& m = *static_cast<dtpu::AxiMem*>(h);
    if (r) m.r_fire();
    if (ar) m.ar_fire(ar_id, ar_addr, ar_len, ar_size, ar_burst);
    if (b) m.b_fire();
    if (w) m.w_fire(w_data, w_strb, w_last != 0);
    if (aw) m.aw_fire(aw_id, aw_addr, aw_len, aw_size, aw_burst);
    m.next_cycle();
}

uint64_t axim_events(void* h, dtpu::AxiEvent* out, uint64_t max) {
    const dtpu::AxiMem& m = *static_cast<dtpu::AxiMem*>(h);
    const uint64_t n = m.events.size() < max ? m.events.size() : max;
    for (uint64_t i = 0; i < n; i++) out[i] = m.events[i];
    return n;
}

uint64_t axim_violations(void* h) { return static_cast<dtpu::AxiMem*>(h)->violations; }

const char* axim_violation(void* h) {
    return static_cast<dtpu::AxiMem*>(h)->first_violation.c_str();
}

}  // extern "C"
