/*
 * dtpu_cpath.h -- the C invoke path of a delegated partition compiled as a command list
 * (contract 2.0, issue #27 item 1).
 *
 * Once Prepare compiled a graph and its first invoke ran on the Python path (which loads the
 * prologue and checks everything), an invoke of the partition needs no decision any more: copy
 * the inputs into the DDR image, flush them, CL_BASE, DOORBELL, the completion, CL_STATUS and the
 * counters, the acknowledge, invalidate and copy the outputs. dtpu_cpath.c does exactly that,
 * from TFLite's kernel invoke, and keeps one record per run; Python folds the records into
 * reports when it asks for them (dtpu/delegate/cpath.py).
 *
 * The registers and the DDR image's cache maintenance are reached through dtpu_regio, one small
 * set of calls with three register implementations: a mapped register window (the board: the pointer under pynq's MMIO), the
 * in-process Verilated core (the C API of pylib/dtpu/rtl/native_cl.cpp, by its function
 * pointers) and Python callbacks (the golden model, the emulated board). The run itself is the
 * same C code on all three.
 *
 * The part between DTPU_CDEF_BEGIN and DTPU_CDEF_END goes to cffi's cdef() (delegate/build.py):
 * plain declarations only.
 */
#ifndef DTPU_CPATH_H
#define DTPU_CPATH_H

#include <stddef.h>
#include <stdint.h>

/* DTPU_CDEF_BEGIN */

/* One run on the C path, as Python reads it back (times are CLOCK_MONOTONIC ns). */
typedef struct dtpu_cl_record {
  int64_t seq;        /* process-wide order of C runs: reports are folded in this order */
  int64_t enter_ns;   /* TFLite's kernel invoke entered */
  int64_t start_ns;   /* first input byte copied */
  int64_t end_ns;     /* last output byte copied */
  int64_t exit_ns;    /* the kernel invoke returns (eager drains excluded) */
  int64_t device_ns;  /* time inside the target (dtpu.driver.hostops's definition) */
  uint64_t cycles;    /* CL_CYCLES */
  uint64_t idle;      /* IDLE */
  int32_t reads;
  int32_t writes;
  int32_t doorbells;
  int32_t status;     /* 0: ran; else the run failed and the record is the failure's */
} dtpu_cl_record;

typedef struct dtpu_cpath dtpu_cpath;

/* Register offsets of the list protocol, in this order (dtpu.driver.lists.ListProgram's). */
enum {
  DTPU_CP_CL_BASE = 0, DTPU_CP_DOORBELL, DTPU_CP_CL_STATUS, DTPU_CP_CL_ERR, DTPU_CP_IRQ,
  DTPU_CP_CL_ERR_PC, DTPU_CP_CL_ERR_TAG, DTPU_CP_CYCLES_LO, DTPU_CP_CYCLES_HI, DTPU_CP_IDLE_LO,
  DTPU_CP_IDLE_HI, DTPU_CP_NREGS
};

/* Statistics: kept by a target implementation (the Verilated core: lists ended, cycles run),
 * the runs not yet taken, the bytes the buffer maintenance flushed and invalidated, the runs
 * of this path and those a keep_latest ring dropped unread (since the last take). */
enum {
  DTPU_CP_STAT_LISTS = 0, DTPU_CP_STAT_CYCLES = 1, DTPU_CP_STAT_PENDING = 2,
  DTPU_CP_STAT_FLUSHED = 3, DTPU_CP_STAT_INVALIDATED = 4, DTPU_CP_STAT_RUNS = 5,
  DTPU_CP_STAT_DROPPED = 6
};

dtpu_cpath* dtpu_cpath_new(int64_t id, int n_in, int n_out, int capacity);
void dtpu_cpath_free(dtpu_cpath* cp);
int dtpu_cpath_set_image(dtpu_cpath* cp, uint8_t* image, uint64_t size, uint32_t list_addr);
int dtpu_cpath_set_io(dtpu_cpath* cp, int is_output, int i, int slot, uint64_t offset,
                      uint64_t nbytes);
int dtpu_cpath_set_regs(dtpu_cpath* cp, const uint32_t* offsets, uint32_t done_mask,
                        uint32_t error_mask, uint32_t irq_ack, double timeout_s,
                        const char* error_names);
/* the three register implementations; `simulated`: every call's time is the device's */
int dtpu_cpath_regs_python(dtpu_cpath* cp, int64_t handle, int simulated, int has_wait);
int dtpu_cpath_regs_mmio(dtpu_cpath* cp, uintptr_t base, uint64_t size);
int dtpu_cpath_regs_verilator(dtpu_cpath* cp, uintptr_t sim, uintptr_t fn_write, uintptr_t fn_read,
                              uintptr_t fn_run_until_done, uintptr_t fn_cycle, uint32_t bus_cycles,
                              uint32_t poll_cycles, uint64_t chunk_cycles, uint64_t limit_cycles,
                              double timeout_s);
/* the buffer's maintenance when it is not coherent with the device (none set: coherent): the
 * buffer's own flush / invalidate in Python, a mirror kept in C (the device reads `device`,
 * the host works in `host`, the image itself; `synced`, if not 0, records the host's bytes at
 * each maintenance: the emulated board's cache), or XRT's xclSyncBO called from C (`fn`, the
 * function libxrt_core exports, on buffer object `bo` of device handle `handle`, the image at
 * `bo_offset` in it: the PYNQ v3.0 image's maintenance, range by range) */
int dtpu_cpath_sync_python(dtpu_cpath* cp, int64_t handle);
int dtpu_cpath_sync_mirror(dtpu_cpath* cp, uintptr_t host, uintptr_t device, uintptr_t synced,
                           uint64_t size);
int dtpu_cpath_sync_xcl(dtpu_cpath* cp, uintptr_t fn, uintptr_t handle, uint32_t bo,
                        uint64_t bo_offset);
/* runs only while *owner == owner_id (Python keeps the word: the core's memories hold this
 * program's prologue and nothing else ran since); a failure writes -1 there */
void dtpu_cpath_arm(dtpu_cpath* cp, int64_t* owner, int64_t owner_id, uint64_t cycles,
                    uint64_t idle, int eager);
void dtpu_cpath_disarm(dtpu_cpath* cp);
int dtpu_cpath_run(dtpu_cpath* cp, void** io_data, size_t* io_bytes, int n_io, int64_t enter_ns);
/* on: a full ring drops its oldest run (counted, handed over by take) rather than asking for a
 * drain; clock_mhz > 0: a polled target's first CL_STATUS read waits the armed run's time */
void dtpu_cpath_keep_latest(dtpu_cpath* cp, int on, double clock_mhz);
/* the oldest runs kept, up to max; *dropped (if given): the runs dropped since the last take */
int dtpu_cpath_take(dtpu_cpath* cp, dtpu_cl_record* out, int max, int64_t* dropped);
int dtpu_cpath_pending(dtpu_cpath* cp);
int64_t dtpu_cpath_stat(dtpu_cpath* cp, int which);
const char* dtpu_cpath_error(dtpu_cpath* cp);
int64_t dtpu_cpath_records_waiting(void);
void dtpu_core_lock(void);
void dtpu_core_unlock(void);

/* DTPU_CDEF_END */

/* dtpu_cpath_run's results (also its kernel-invoke use in dtpu_delegate.c) */
#define DTPU_CP_RAN 0
#define DTPU_CP_DECLINED 1
#define DTPU_CP_FAILED (-1)

/* 1: the kernel should hand its records to Python now (full ring unless keep_latest, eager,
 * an unexpected run, a failure) */
int dtpu_cpath_wants_drain(dtpu_cpath* cp);

#endif /* DTPU_CPATH_H */
