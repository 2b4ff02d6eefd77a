// An AXI4 slave memory over a host-owned byte array: the DDR behind the DTPU's HP port as
// contract 2.0's memory model describes it (contract.json contract2.memory_model), for the
// in-process Verilator harness (native_cl.cpp) and its standalone test shim (axi_mem_capi.cpp).
//
// Why it is built like this:
// * The contract's timing, not a DDR controller's: a read burst's first beat comes exactly
//   MEM_READ_LATENCY cycles after its AR handshake, then one beat per cycle; up to
//   MEM_READ_OUTSTANDING bursts are accepted, served in order (a burst never starts before the
//   previous one's last beat); a write burst's B response comes MEM_WRITE_LATENCY cycles after
//   its last W beat, up to MEM_WRITE_OUTSTANDING bursts. That is what dtpu.hw.timeline.Timeline assumes
//   (first beat = max(request + latency, channel free)), so RTL cycle counts can be held to the
//   golden model's. The values are passed in by the caller (read from contract.json in Python),
//   never compiled in.
// * The bytes are the host's: the memory points into an array the Python side owns (a numpy
//   array: the DDR image), so a host write is visible to the next beat and a device write to
//   the host at once; flush / invalidate have nothing to do, as with the model's DdrPool.
// * Errors, never hangs (unless asked): a beat outside the image, or outside every mapped
//   window when windows are set (DdrPool: only allocated buffers answer), gets DECERR; a beat
//   in an injected SLVERR range gets SLVERR; read data of an erroring beat is 0 and an
//   erroring write beat writes nothing. "Hang" ranges (fault injection for the core's TIMEOUT)
//   make a read burst never answer, or a write burst never get its response.
// * Optional disorder for tests: a per-cycle stall probability on every ready/valid the slave
//   drives (ARREADY, RVALID, AWREADY, WREADY, BVALID) and a random extra latency per burst,
//   from a seeded xorshift generator (reproducible). Both 0: the contract's memory.
// * A protocol monitor counts what a well-behaved DTPU master never does (a burst crossing
//   4 KiB, other than 8-byte INCR beats, longer than MEM_BURST_BEATS, WLAST on the wrong
//   beat); `violations` and `first_violation` report it. W beats are taken only for an
//   accepted AW (WREADY waits for it, which AXI4 allows a slave), oldest first.
// * An event log of handshakes (AR, first/last R of a burst, AW, last W, B) with their cycles,
//   off by default, for the timing tests.
//
// One tick of the harness: drive() before the clock edge (from the state and the cycle
// number), the master's outputs sampled, then ar/r/aw/w/b_fire() for the handshakes that
// happened at that edge, then next_cycle().
#pragma once

#include <cstdint>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

namespace dtpu {

enum : uint8_t { RESP_OKAY = 0, RESP_EXOKAY = 1, RESP_SLVERR = 2, RESP_DECERR = 3 };

struct AxiMemParams {
    uint32_t rd_latency = 85;
    uint32_t rd_outstanding = 8;
    uint32_t wr_latency = 85;
    uint32_t wr_outstanding = 8;
    uint32_t max_burst = 16;       // for the monitor only (longer bursts are served)
    double stall = 0.0;            // probability of a stalled ready/valid, per channel and cycle
    uint32_t extra_latency = 0;    // uniform extra latency in [0, extra_latency] per burst
    uint64_t seed = 1;
};

struct AxiEvent {
    uint64_t cycle;
    uint32_t kind;                 // 0 AR, 1 first R of a burst, 2 last R, 3 AW, 4 last W, 5 B
    uint32_t beats;
    uint64_t addr;
    uint32_t resp;
};

class AxiMem {
public:
    struct Range { uint64_t lo, hi; };

    AxiMemParams p;
    uint8_t* image = nullptr;      // host-owned
    uint64_t base = 0, size = 0;
    std::vector<Range> windows;    // empty: the whole image answers
    std::vector<Range> slverr, hang;
    uint64_t cycle = 0;
    uint64_t rd_beats = 0, wr_beats = 0, rd_bursts = 0, wr_bursts = 0;
    uint64_t violations = 0;
    std::string first_violation;
    bool log_events = false;
    std::vector<AxiEvent> events;

    // what drive() put on the slave's outputs this cycle
    bool arready = false, rvalid = false, rlast = false, awready = false, wready = false,
         bvalid = false;
    uint64_t rdata = 0;
    uint32_t rid = 0, bid = 0;
    uint8_t rresp = 0, bresp = 0;

    void reset() {
        rq.clear(); wq.clear(); bq.clear();
        r_shown = b_shown = false;
        arready = rvalid = rlast = awready = wready = bvalid = false;
        rdata = 0; rid = bid = 0; rresp = bresp = 0;
    }

    void seed(uint64_t s) { rng = s ? s : 0x9E3779B97F4A7C15ull; }

    size_t reads_in_flight() const { return rq.size(); }
    size_t writes_in_flight() const { return wq.size() + bq.size(); }

    // --- the slave's outputs for this cycle
    void drive() {
        // READY may drop at will; a VALID once shown stays until its handshake (AXI4 A3.2.1)
        const bool s_ar = stalled(), s_r = stalled() && !r_shown, s_aw = stalled(),
                   s_w = stalled(), s_b = stalled() && !b_shown;
        arready = !s_ar && rq.size() < p.rd_outstanding;
        rvalid = false; rlast = false; rdata = 0; rresp = RESP_OKAY; rid = 0;
        if (!rq.empty() && !s_r) {
            const RBurst& b = rq.front();
            if (!b.hang && b.ready <= cycle) {
                const uint64_t a = beat_addr(b.addr, b.size, b.burst, b.len, b.sent);
                rresp = check(a, 1u << b.size);
                if (rresp == RESP_OKAY) {
                    const uint64_t o = (a & ~7ull) - base;
                    std::memcpy(&rdata, image + o, 8);
                }
                rvalid = true;
                rlast = b.sent + 1 == b.len;
                rid = b.id;
            }
        }
        awready = !s_aw && wq.size() + bq.size() < p.wr_outstanding;
        wready = !s_w && w_index < wq.size();
        bvalid = false; bresp = RESP_OKAY; bid = 0;
        if (!bq.empty() && !s_b) {
            const BResp& b = bq.front();
            if (!b.hang && b.ready <= cycle) {
                bvalid = true; bresp = b.resp; bid = b.id;
            }
        }
        r_shown = rvalid;
        b_shown = bvalid;
    }

    // --- handshakes at this cycle's edge
    void ar_fire(uint32_t id, uint64_t addr, uint32_t len, uint32_t size, uint32_t burst) {
        RBurst b;
        b.id = id; b.addr = addr; b.len = len + 1; b.size = size; b.burst = burst;
        b.ready = cycle + p.rd_latency + extra();
        b.hang = false;
        for (uint32_t k = 0; k < b.len; k++)
            b.hang |= in(hang, beat_addr(addr, size, burst, b.len, k), 1u << size);
        monitor(addr, b.len, size, burst, "AR");
        rq.push_back(b);
        rd_bursts++;
        event(0, b.len, addr, 0);
    }

    void r_fire() {
        r_shown = false;
        RBurst& b = rq.front();
        if (b.sent == 0) event(1, b.len, b.addr, rresp);
        b.sent++;
        rd_beats++;
        if (b.sent == b.len) {
            event(2, b.len, b.addr, rresp);
            rq.pop_front();
        }
    }

    void aw_fire(uint32_t id, uint64_t addr, uint32_t len, uint32_t size, uint32_t burst) {
        WBurst b;
        b.id = id; b.addr = addr; b.len = len + 1; b.size = size; b.burst = burst;
        monitor(addr, b.len, size, burst, "AW");
        wq.push_back(b);
        wr_bursts++;
        event(3, b.len, addr, 0);
    }

    void w_fire(uint64_t data, uint32_t strb, bool last) {
        WBurst& b = wq[w_index];
        const uint64_t a = beat_addr(b.addr, b.size, b.burst, b.len, b.got);
        uint8_t resp = check(a, 1u << b.size);
        b.hang |= in(hang, a, 1u << b.size);
        if (resp == RESP_OKAY && !b.hang) {
            const uint64_t o = (a & ~7ull) - base;
            for (int i = 0; i < 8; i++)
                if (strb >> i & 1) image[o + i] = uint8_t(data >> (8 * i));
        }
        if (resp > b.resp) b.resp = resp;
        b.got++;
        wr_beats++;
        if (last != (b.got == b.len)) {
            violate("WLAST on beat " + std::to_string(b.got) + " of a " + std::to_string(b.len) +
                    "-beat burst at " + hex(b.addr));
        }
        if (b.got == b.len) {
            event(4, b.len, b.addr, b.resp);
            bq.push_back(BResp{b.id, cycle + p.wr_latency + extra(), b.resp, b.hang});
            wq.erase(wq.begin() + w_index);
        }
    }

    void b_fire() {
        b_shown = false;
        event(5, 0, 0, bq.front().resp);
        bq.pop_front();
    }

    void next_cycle() { cycle++; }

private:
    struct RBurst {
        uint32_t id = 0; uint64_t addr = 0; uint32_t len = 0, size = 3, burst = 1, sent = 0;
        uint64_t ready = 0; bool hang = false;
    };
    struct WBurst {
        uint32_t id = 0; uint64_t addr = 0; uint32_t len = 0, size = 3, burst = 1, got = 0;
        uint8_t resp = 0; bool hang = false;
    };
    struct BResp { uint32_t id; uint64_t ready; uint8_t resp; bool hang; };

    std::deque<RBurst> rq;
    std::deque<WBurst> wq;         // accepted AWs whose W beats are not all in
    std::deque<BResp> bq;
    const size_t w_index = 0;      // W beats go to the oldest AW (no write interleaving in AXI4)
    bool r_shown = false, b_shown = false;   // RVALID / BVALID shown, not yet taken
    uint64_t rng = 0x9E3779B97F4A7C15ull;

    uint64_t next_rand() {
        rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
        return rng;
    }
    bool stalled() {
        return p.stall > 0.0 && double(next_rand() >> 11) * (1.0 / 9007199254740992.0) < p.stall;
    }
    uint64_t extra() { return p.extra_latency ? next_rand() % (p.extra_latency + 1) : 0; }

    static uint64_t beat_addr(uint64_t addr, uint32_t size, uint32_t burst, uint32_t len,
                              uint32_t k) {
        const uint64_t n = 1ull << size;
        const uint64_t aligned = addr & ~(n - 1);
        if (burst == 0) return addr;                                   // FIXED
        if (burst == 2) {                                              // WRAP
            const uint64_t span = n * len, lo = addr & ~(span - 1);
            return lo + ((addr - lo + k * n) % span);
        }
        return k == 0 ? addr : aligned + k * n;                        // INCR
    }

    static bool in(const std::vector<Range>& rs, uint64_t a, uint64_t n) {
        for (const Range& r : rs)
            if (r.lo < a + n && a < r.hi) return true;
        return false;
    }

    uint8_t check(uint64_t a, uint64_t n) const {
        const uint64_t lo = a & ~7ull;
        (void)n;
        if (lo < base || lo + 8 > base + size) return RESP_DECERR;
        if (!windows.empty()) {
            bool ok = false;
            for (const Range& r : windows)
                if (r.lo <= lo && lo + 8 <= r.hi) { ok = true; break; }
            if (!ok) return RESP_DECERR;
        }
        if (in(slverr, a, n)) return RESP_SLVERR;
        return RESP_OKAY;
    }

    static std::string hex(uint64_t v) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%#llx", (unsigned long long)v);
        return buf;
    }

    void violate(const std::string& what) {
        if (!violations) first_violation = "cycle " + std::to_string(cycle) + ": " + what;
        violations++;
    }

    void monitor(uint64_t addr, uint32_t beats, uint32_t size, uint32_t burst, const char* ch) {
        if (size != 3 || burst != 1 || addr % 8)
            violate(std::string(ch) + " at " + hex(addr) + ": not 8-byte INCR beats");
        if ((addr & 0xFFF) + 8ull * beats > 0x1000)
            violate(std::string(ch) + " at " + hex(addr) + " of " + std::to_string(beats) +
                    " beats crosses a 4 KiB boundary");
        if (beats > p.max_burst)
            violate(std::string(ch) + " at " + hex(addr) + " of " + std::to_string(beats) +
                    " beats > MEM_BURST_BEATS " + std::to_string(p.max_burst));
    }

    void event(uint32_t kind, uint32_t beats, uint64_t addr, uint32_t resp) {
        if (log_events) events.push_back(AxiEvent{cycle, kind, beats, addr, resp});
    }
};

}  // namespace dtpu
