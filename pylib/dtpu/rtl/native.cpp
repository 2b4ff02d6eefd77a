// The Verilated dtpu_axi behind a small C API, so that backend=rtl can drive the core from any
// Python process through ctypes (dtpu/rtl/native.py), without cocotb hosting the interpreter.
//
// Everything that happens once per clock cycle is in C++: the AXI4-Stream sources (one word
// queue per input stream, tlast on the last word of each push), the result sink (always ready,
// words kept per tlast-terminated packet) and the AXI4-Lite master. Python only issues register
// accesses, pushes whole streams and runs the clock until the interrupt line rises.
//
// All of that is native_common.h, shared with the contract-2.0 harness (native_cl.cpp): the
// 1.2 top has nothing beyond the common face, so its Port is empty.

#include "Vdtpu.h"
#include "verilated.h"

namespace {

struct Port {
    static constexpr const char* instance = "dtpu_axi";
    struct Fired {};
    void port_drive(Vdtpu&) {}
    Fired port_sample(const Vdtpu&) const { return {}; }
    void port_retire(const Fired&) {}
    void port_reset() {}
    void port_release() {}
};

}  // namespace

#include "native_common.h"
