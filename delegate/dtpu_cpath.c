/*
 * dtpu_cpath.c -- the C invoke path of a command-list partition (see dtpu_cpath.h).
 *
 * Compiled into dtpu.so after dtpu_delegate.c (delegate/build.py), so the extern "Python"
 * callbacks declared in dtpu_glue.h are visible here: the Python implementation of dtpu_regio
 * calls them.
 *
 * The sequence is dtpu.driver.lists.ListProgram.invoke/kick's, access for access (5 reads, 3
 * writes on success), so that the report's host record is the same on both paths; the Python
 * path stays the reference and runs every first invoke and anything unusual.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dtpu_cpath.h"
#include "dtpu_glue.h"

/* ---- the register interface ------------------------------------------------------------- */

/* All calls return 0 on success, < 0 on a failure of the transport itself (the message, if any,
 * is in `err`). wait: 1 completion seen (or "poll now"), 0 not within the time. flush /
 * invalidate (of a byte range of the DDR image, with their own context: how the buffer is kept
 * coherent does not depend on how the registers are reached) may be NULL: the buffer is
 * coherent with the device (no cache in between). */
typedef struct dtpu_regio {
  void* ctx;
  int (*read32)(void* ctx, uint32_t offset, uint32_t* value);
  int (*write32)(void* ctx, uint32_t offset, uint32_t value);
  int (*wait)(void* ctx, double timeout_s);
  void* sync_ctx;
  int (*flush)(void* sync_ctx, uint64_t offset, uint64_t nbytes);
  int (*invalidate)(void* sync_ctx, uint64_t offset, uint64_t nbytes);
  int simulated;
} dtpu_regio;

typedef struct dtpu_cp_io {
  int slot;         /* index into the kernel's io_data / io_bytes */
  uint64_t offset;  /* in the DDR image */
  uint64_t nbytes;
} dtpu_cp_io;

/* (a) a mapped register window */
typedef struct dtpu_mmio_ctx {
  volatile uint32_t* base;
  uint64_t size;
} dtpu_mmio_ctx;

/* xclSyncBO(handle, bo, direction, size, offset): direction 0 to the device (a flush), 1 from
 * it (an invalidate); a result of 0x80000000 or more is a failure (pynq's own check) */
typedef unsigned int (*dtpu_xcl_sync_fn)(void*, unsigned int, int, size_t, size_t);

/* How the DDR image is kept coherent: by Python (the handle's buffer's flush / invalidate), or
 * as a mirror (the device reads `device`, the host works in `host`: flush copies the range host
 * to device, invalidate device to host, and both record the host's bytes in `synced` when
 * given: the emulated board's cache and its stale-cache record). Counts the bytes each moved. */
typedef struct dtpu_sync_ctx {
  int64_t handle;
  uint8_t* host;
  uint8_t* device;
  uint8_t* synced;
  uint64_t size;
  int64_t flushed, invalidated;
  /* XRT's xclSyncBO (the PYNQ v3.0 image's pynq calls it for every flush and invalidate) on
   * buffer object `bo` of device handle `xrt_handle`; `bo_offset`: the image's offset in it */
  dtpu_xcl_sync_fn xcl_sync;
  void* xrt_handle;
  uint32_t bo;
  uint64_t bo_offset;
} dtpu_sync_ctx;

/* (b) the Verilated dtpu_cl_top of pylib/dtpu/rtl/native_cl.cpp, through its C API */
typedef int (*dtpu_sim_write_fn)(void*, uint32_t, uint32_t, uint64_t);
typedef int (*dtpu_sim_read_fn)(void*, uint32_t, uint32_t*, uint64_t);
typedef int (*dtpu_sim_run_until_fn)(void*, uint32_t, uint32_t, int, uint64_t, uint64_t);
typedef uint64_t (*dtpu_sim_cycle_fn)(void*);
typedef struct dtpu_sim_ctx {
  void* sim;
  dtpu_sim_write_fn write;
  dtpu_sim_read_fn read;
  dtpu_sim_run_until_fn run_until;
  dtpu_sim_cycle_fn cycle;
  uint32_t bus_cycles, poll_cycles;
  uint64_t chunk_cycles, limit_cycles;
  double timeout_s;
  uint32_t cl_status, done_lsb;
  int64_t lists, cycles_run;
} dtpu_sim_ctx;

/* (c) Python callbacks (golden model, emulated board) */
typedef struct dtpu_py_ctx {
  int64_t handle;
} dtpu_py_ctx;

struct dtpu_cpath {
  int64_t id;
  pthread_mutex_t ring_lock;
  dtpu_regio io;
  void* io_ctx; /* owned: one of the ctx structs above */
  dtpu_sync_ctx* sync; /* owned: the buffer maintenance's context; NULL: coherent */
  int kind;     /* 0 none, 1 python, 2 mmio, 3 verilator */
  uint8_t* image;
  uint64_t image_size;
  uint32_t list_addr;
  int n_in, n_out;
  dtpu_cp_io* ins;
  dtpu_cp_io* outs;
  uint32_t reg[DTPU_CP_NREGS];
  uint32_t done_mask, error_mask, irq_ack;
  double timeout_s;
  char error_names[32][24];
  int64_t* owner;
  int64_t owner_id;
  int armed, eager;
  uint64_t expect_cycles, expect_idle;
  int drain_now;
  /* keep_latest: a full ring drops its oldest run (counted in `dropped`) instead of asking
   * Python to fold it: nobody reads a report unless it is asked for (dtpu_cpath_keep_latest) */
  int keep_latest;
  double clock_mhz; /* the build's clock: the expected run's time, napped before polling */
  dtpu_cl_record* ring; /* circular: the oldest kept run at `head` */
  int capacity, count, head;
  int64_t runs, dropped;
  char err[512];
};

/* Process-wide: the order of C runs, and the records not yet taken (all paths). A mutex, not
 * C11 atomics: 64-bit atomics need libatomic on some 32-bit ARM toolchains (the board's). */
static pthread_mutex_t dtpu_cp_count_lock = PTHREAD_MUTEX_INITIALIZER;
static int64_t dtpu_cp_seq = 1;
static int64_t dtpu_cp_waiting = 0;

static int64_t dtpu_cp_count(int64_t* counter, int64_t add) {
  pthread_mutex_lock(&dtpu_cp_count_lock);
  int64_t before = *counter;
  *counter += add;
  pthread_mutex_unlock(&dtpu_cp_count_lock);
  return before;
}

static int64_t dtpu_cp_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + (int64_t)ts.tv_nsec;
}

/* One lock for everything that drives a DTPU from this library: TFLite's calls into Python
 * (dtpu_delegate.c takes it before it enters Python) and the C path's runs. Recursive: a
 * Python callback made under it (a drain, a register access on the golden model) may run code
 * that takes it again. Taken before Python's own locks, never after them. */
static pthread_mutex_t dtpu_core_mutex;
static pthread_once_t dtpu_core_once = PTHREAD_ONCE_INIT;

static void dtpu_core_init(void) {
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
  pthread_mutex_init(&dtpu_core_mutex, &attr);
  pthread_mutexattr_destroy(&attr);
}

void dtpu_core_lock(void) {
  pthread_once(&dtpu_core_once, dtpu_core_init);
  if (pthread_mutex_trylock(&dtpu_core_mutex) == 0) return;
#ifdef Py_PYTHON_H
  /* The holder may be waiting for the GIL (a Python callback): never wait here holding it. */
  if (Py_IsInitialized() && PyGILState_Check()) {
    Py_BEGIN_ALLOW_THREADS pthread_mutex_lock(&dtpu_core_mutex);
    Py_END_ALLOW_THREADS return;
  }
#endif
  pthread_mutex_lock(&dtpu_core_mutex);
}

void dtpu_core_unlock(void) { pthread_mutex_unlock(&dtpu_core_mutex); }

int64_t dtpu_cpath_records_waiting(void) { return dtpu_cp_count(&dtpu_cp_waiting, 0); }

/* ---- (a) mapped window ------------------------------------------------------------------- */

static int dtpu_mmio_read(void* c, uint32_t offset, uint32_t* value) {
  dtpu_mmio_ctx* m = (dtpu_mmio_ctx*)c;
  if ((uint64_t)offset + 4 > m->size || (offset & 3)) return -1;
  *value = m->base[offset >> 2];
  return 0;
}

static int dtpu_mmio_write(void* c, uint32_t offset, uint32_t value) {
  dtpu_mmio_ctx* m = (dtpu_mmio_ctx*)c;
  if ((uint64_t)offset + 4 > m->size || (offset & 3)) return -1;
  m->base[offset >> 2] = value;
  __sync_synchronize(); /* the doorbell after CL_BASE, and both after the flushed inputs */
  return 0;
}


/* ---- (b) the Verilated core -------------------------------------------------------------- */

static int dtpu_sim_read(void* c, uint32_t offset, uint32_t* value) {
  dtpu_sim_ctx* s = (dtpu_sim_ctx*)c;
  return s->read(s->sim, offset, value, s->bus_cycles) ? -1 : 0;
}

static int dtpu_sim_write(void* c, uint32_t offset, uint32_t value) {
  dtpu_sim_ctx* s = (dtpu_sim_ctx*)c;
  return s->write(s->sim, offset, value, s->bus_cycles) ? -1 : 0;
}

/* NativeListTransport.wait_list's loop: the clock runs in C++ until the interrupt or
 * CL_STATUS.DONE, bounded in simulated cycles and in wall time (the longer of the driver's and
 * the transport's bound, as there). */
static int dtpu_sim_wait(void* c, double timeout_s) {
  dtpu_sim_ctx* s = (dtpu_sim_ctx*)c;
  double bound = timeout_s > s->timeout_s ? timeout_s : s->timeout_s;
  int64_t deadline = dtpu_cp_now() + (int64_t)(bound * 1e9);
  uint64_t c0 = s->cycle(s->sim), limit = c0 + s->limit_cycles;
  int result = 0;
  for (;;) {
    uint64_t now = s->cycle(s->sim);
    if (now >= limit || dtpu_cp_now() >= deadline) break;
    uint64_t run = limit - now < s->chunk_cycles ? limit - now : s->chunk_cycles;
    int r = s->run_until(s->sim, s->cl_status, s->done_lsb, 1, s->poll_cycles, run);
    if (r < 0) {
      result = -1;
      break;
    }
    if (r == 1) {
      s->lists += 1;
      result = 1;
      break;
    }
  }
  s->cycles_run += (int64_t)(s->cycle(s->sim) - c0);
  return result;
}

/* ---- (c) Python callbacks ---------------------------------------------------------------- */

static int dtpu_pyio_read(void* c, uint32_t offset, uint32_t* value) {
  return dtpu_py_reg_read(((dtpu_py_ctx*)c)->handle, offset, value);
}

static int dtpu_pyio_write(void* c, uint32_t offset, uint32_t value) {
  return dtpu_py_reg_write(((dtpu_py_ctx*)c)->handle, offset, value);
}

static int dtpu_pyio_wait(void* c, double timeout_s) {
  return dtpu_py_reg_wait(((dtpu_py_ctx*)c)->handle, timeout_s);
}

/* ---- buffer maintenance ------------------------------------------------------------------ */

static int dtpu_pysync_flush(void* c, uint64_t offset, uint64_t nbytes) {
  dtpu_sync_ctx* s = (dtpu_sync_ctx*)c;
  s->flushed += (int64_t)nbytes;
  return dtpu_py_buf_sync(s->handle, 1, offset, nbytes);
}

static int dtpu_pysync_invalidate(void* c, uint64_t offset, uint64_t nbytes) {
  dtpu_sync_ctx* s = (dtpu_sync_ctx*)c;
  s->invalidated += (int64_t)nbytes;
  return dtpu_py_buf_sync(s->handle, 0, offset, nbytes);
}

static int dtpu_mirror_flush(void* c, uint64_t offset, uint64_t nbytes) {
  dtpu_sync_ctx* s = (dtpu_sync_ctx*)c;
  if (offset > s->size || nbytes > s->size - offset) return -1;
  memcpy(s->device + offset, s->host + offset, nbytes);
  if (s->synced != NULL) memcpy(s->synced + offset, s->host + offset, nbytes);
  s->flushed += (int64_t)nbytes;
  return 0;
}

static int dtpu_mirror_invalidate(void* c, uint64_t offset, uint64_t nbytes) {
  dtpu_sync_ctx* s = (dtpu_sync_ctx*)c;
  if (offset > s->size || nbytes > s->size - offset) return -1;
  memcpy(s->host + offset, s->device + offset, nbytes);
  if (s->synced != NULL) memcpy(s->synced + offset, s->host + offset, nbytes);
  s->invalidated += (int64_t)nbytes;
  return 0;
}

static int dtpu_xcl_sync(dtpu_sync_ctx* s, int from_device, uint64_t offset, uint64_t nbytes) {
  unsigned int r = s->xcl_sync(s->xrt_handle, s->bo, from_device, (size_t)nbytes,
                               (size_t)(s->bo_offset + offset));
  if (r >= 0x80000000u) return -1;
  if (from_device)
    s->invalidated += (int64_t)nbytes;
  else
    s->flushed += (int64_t)nbytes;
  return 0;
}

static int dtpu_xcl_flush(void* c, uint64_t offset, uint64_t nbytes) {
  return dtpu_xcl_sync((dtpu_sync_ctx*)c, 0, offset, nbytes);
}

static int dtpu_xcl_invalidate(void* c, uint64_t offset, uint64_t nbytes) {
  return dtpu_xcl_sync((dtpu_sync_ctx*)c, 1, offset, nbytes);
}

/* ---- set-up (from Python, at the first invoke after a Prepare) --------------------------- */

dtpu_cpath* dtpu_cpath_new(int64_t id, int n_in, int n_out, int capacity) {
  if (n_in < 0 || n_out < 0 || capacity < 1) return NULL;
  dtpu_cpath* cp = (dtpu_cpath*)calloc(1, sizeof(dtpu_cpath));
  if (cp == NULL) return NULL;
  cp->ins = (dtpu_cp_io*)calloc((size_t)n_in + 1, sizeof(dtpu_cp_io));
  cp->outs = (dtpu_cp_io*)calloc((size_t)n_out + 1, sizeof(dtpu_cp_io));
  cp->ring = (dtpu_cl_record*)calloc((size_t)capacity, sizeof(dtpu_cl_record));
  if (cp->ins == NULL || cp->outs == NULL || cp->ring == NULL) {
    dtpu_cpath_free(cp);
    return NULL;
  }
  pthread_mutex_init(&cp->ring_lock, NULL);
  cp->id = id;
  cp->n_in = n_in;
  cp->n_out = n_out;
  cp->capacity = capacity;
  for (int i = 0; i < n_in; ++i) cp->ins[i].slot = -1;
  for (int i = 0; i < n_out; ++i) cp->outs[i].slot = -1;
  return cp;
}

void dtpu_cpath_free(dtpu_cpath* cp) {
  if (cp == NULL) return;
  if (cp->ring != NULL) dtpu_cp_count(&dtpu_cp_waiting, -cp->count);
  free(cp->ins);
  free(cp->outs);
  free(cp->ring);
  free(cp->io_ctx);
  free(cp->sync);
  if (cp->ring != NULL) pthread_mutex_destroy(&cp->ring_lock);
  free(cp);
}

int dtpu_cpath_set_image(dtpu_cpath* cp, uint8_t* image, uint64_t size, uint32_t list_addr) {
  if (cp == NULL || image == NULL || size == 0) return -1;
  cp->image = image;
  cp->image_size = size;
  cp->list_addr = list_addr;
  return 0;
}

int dtpu_cpath_set_io(dtpu_cpath* cp, int is_output, int i, int slot, uint64_t offset,
                      uint64_t nbytes) {
  if (cp == NULL || slot < 0 || nbytes == 0 || offset + nbytes > cp->image_size) return -1;
  if (i < 0 || i >= (is_output ? cp->n_out : cp->n_in)) return -1;
  dtpu_cp_io* io = is_output ? &cp->outs[i] : &cp->ins[i];
  io->slot = slot;
  io->offset = offset;
  io->nbytes = nbytes;
  return 0;
}

int dtpu_cpath_set_regs(dtpu_cpath* cp, const uint32_t* offsets, uint32_t done_mask,
                        uint32_t error_mask, uint32_t irq_ack, double timeout_s,
                        const char* error_names) {
  if (cp == NULL || offsets == NULL || done_mask == 0 || !(timeout_s > 0)) return -1;
  memcpy(cp->reg, offsets, sizeof cp->reg);
  cp->done_mask = done_mask;
  cp->error_mask = error_mask;
  cp->irq_ack = irq_ack;
  cp->timeout_s = timeout_s;
  /* "name0,name1,...": the CL_ERR bit names, bit 0 first (empty for an unused bit) */
  memset(cp->error_names, 0, sizeof cp->error_names);
  const char* p = error_names ? error_names : "";
  for (int bit = 0; bit < 32 && *p; ++bit) {
    const char* end = strchr(p, ',');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    if (n >= sizeof cp->error_names[bit]) n = sizeof cp->error_names[bit] - 1;
    memcpy(cp->error_names[bit], p, n);
    if (end == NULL) break;
    p = end + 1;
  }
  return 0;
}

static int dtpu_cp_set_ctx(dtpu_cpath* cp, void* ctx, int kind) {
  if (ctx == NULL) return -1;
  free(cp->io_ctx);
  cp->io_ctx = ctx;
  cp->kind = kind;
  void* sync_ctx = cp->io.sync_ctx;
  int (*flush)(void*, uint64_t, uint64_t) = cp->io.flush;
  int (*invalidate)(void*, uint64_t, uint64_t) = cp->io.invalidate;
  memset(&cp->io, 0, sizeof cp->io);
  cp->io.ctx = ctx;
  cp->io.sync_ctx = sync_ctx; /* the buffer's maintenance is set apart (dtpu_cpath_sync_*) */
  cp->io.flush = flush;
  cp->io.invalidate = invalidate;
  return 0;
}

static dtpu_sync_ctx* dtpu_cp_new_sync(dtpu_cpath* cp) {
  dtpu_sync_ctx* s = (dtpu_sync_ctx*)calloc(1, sizeof(dtpu_sync_ctx));
  if (s == NULL) return NULL;
  free(cp->sync);
  cp->sync = s;
  cp->io.sync_ctx = s;
  return s;
}

int dtpu_cpath_sync_python(dtpu_cpath* cp, int64_t handle) {
  if (cp == NULL || handle <= 0) return -1;
  dtpu_sync_ctx* s = dtpu_cp_new_sync(cp);
  if (s == NULL) return -1;
  s->handle = handle;
  cp->io.flush = dtpu_pysync_flush;
  cp->io.invalidate = dtpu_pysync_invalidate;
  return 0;
}

int dtpu_cpath_sync_mirror(dtpu_cpath* cp, uintptr_t host, uintptr_t device, uintptr_t synced,
                           uint64_t size) {
  if (cp == NULL || !host || !device || size < cp->image_size || host != (uintptr_t)cp->image)
    return -1;
  dtpu_sync_ctx* s = dtpu_cp_new_sync(cp);
  if (s == NULL) return -1;
  s->host = (uint8_t*)host;
  s->device = (uint8_t*)device;
  s->synced = (uint8_t*)synced;
  s->size = size;
  cp->io.flush = dtpu_mirror_flush;
  cp->io.invalidate = dtpu_mirror_invalidate;
  return 0;
}

int dtpu_cpath_sync_xcl(dtpu_cpath* cp, uintptr_t fn, uintptr_t handle, uint32_t bo,
                        uint64_t bo_offset) {
  if (cp == NULL || !fn) return -1;
  dtpu_sync_ctx* s = dtpu_cp_new_sync(cp);
  if (s == NULL) return -1;
  s->xcl_sync = (dtpu_xcl_sync_fn)fn;
  s->xrt_handle = (void*)handle;
  s->bo = bo;
  s->bo_offset = bo_offset;
  cp->io.flush = dtpu_xcl_flush;
  cp->io.invalidate = dtpu_xcl_invalidate;
  return 0;
}

int dtpu_cpath_regs_python(dtpu_cpath* cp, int64_t handle, int simulated, int has_wait) {
  if (cp == NULL || handle <= 0) return -1;
  dtpu_py_ctx* c = (dtpu_py_ctx*)calloc(1, sizeof(dtpu_py_ctx));
  if (dtpu_cp_set_ctx(cp, c, 1) != 0) return -1;
  c->handle = handle;
  cp->io.read32 = dtpu_pyio_read;
  cp->io.write32 = dtpu_pyio_write;
  cp->io.wait = has_wait ? dtpu_pyio_wait : NULL;
  cp->io.simulated = simulated;
  return 0;
}

int dtpu_cpath_regs_mmio(dtpu_cpath* cp, uintptr_t base, uint64_t size) {
  if (cp == NULL || base == 0 || size < 4) return -1;
  dtpu_mmio_ctx* c = (dtpu_mmio_ctx*)calloc(1, sizeof(dtpu_mmio_ctx));
  if (dtpu_cp_set_ctx(cp, c, 2) != 0) return -1;
  c->base = (volatile uint32_t*)base;
  c->size = size;
  cp->io.read32 = dtpu_mmio_read;
  cp->io.write32 = dtpu_mmio_write;
  cp->io.wait = NULL; /* polled: CL_STATUS with the deadline */
  cp->io.simulated = 0;
  return 0;
}

int dtpu_cpath_regs_verilator(dtpu_cpath* cp, uintptr_t sim, uintptr_t fn_write, uintptr_t fn_read,
                              uintptr_t fn_run_until_done, uintptr_t fn_cycle, uint32_t bus_cycles,
                              uint32_t poll_cycles, uint64_t chunk_cycles, uint64_t limit_cycles,
                              double timeout_s) {
  if (cp == NULL || !sim || !fn_write || !fn_read || !fn_run_until_done || !fn_cycle ||
      chunk_cycles == 0 || limit_cycles == 0 || cp->done_mask == 0)
    return -1;
  dtpu_sim_ctx* c = (dtpu_sim_ctx*)calloc(1, sizeof(dtpu_sim_ctx));
  if (dtpu_cp_set_ctx(cp, c, 3) != 0) return -1;
  c->sim = (void*)sim;
  c->write = (dtpu_sim_write_fn)fn_write;
  c->read = (dtpu_sim_read_fn)fn_read;
  c->run_until = (dtpu_sim_run_until_fn)fn_run_until_done;
  c->cycle = (dtpu_sim_cycle_fn)fn_cycle;
  c->bus_cycles = bus_cycles;
  c->poll_cycles = poll_cycles;
  c->chunk_cycles = chunk_cycles;
  c->limit_cycles = limit_cycles;
  c->timeout_s = timeout_s;
  c->cl_status = cp->reg[DTPU_CP_CL_STATUS];
  c->done_lsb = (uint32_t)__builtin_ctz(cp->done_mask);
  cp->io.read32 = dtpu_sim_read;
  cp->io.write32 = dtpu_sim_write;
  cp->io.wait = dtpu_sim_wait;
  cp->io.simulated = 1;
  return 0;
}

void dtpu_cpath_arm(dtpu_cpath* cp, int64_t* owner, int64_t owner_id, uint64_t cycles,
                    uint64_t idle, int eager) {
  if (cp == NULL) return;
  cp->owner = owner;
  cp->owner_id = owner_id;
  cp->expect_cycles = cycles;
  cp->expect_idle = idle;
  cp->eager = eager;
  cp->armed = owner != NULL && owner_id > 0 && cp->kind != 0 && cp->image != NULL;
}

void dtpu_cpath_disarm(dtpu_cpath* cp) {
  if (cp != NULL) cp->armed = 0;
}

int64_t dtpu_cpath_stat(dtpu_cpath* cp, int which) {
  if (cp == NULL) return -1;
  if (which == DTPU_CP_STAT_PENDING) return cp->count;
  if (which == DTPU_CP_STAT_RUNS) return cp->runs;
  if (which == DTPU_CP_STAT_DROPPED) return cp->dropped;
  if (which == DTPU_CP_STAT_FLUSHED) return cp->sync ? cp->sync->flushed : 0;
  if (which == DTPU_CP_STAT_INVALIDATED) return cp->sync ? cp->sync->invalidated : 0;
  if (cp->kind != 3) return 0;
  dtpu_sim_ctx* s = (dtpu_sim_ctx*)cp->io_ctx;
  return which == DTPU_CP_STAT_LISTS ? s->lists : which == DTPU_CP_STAT_CYCLES ? s->cycles_run : -1;
}

const char* dtpu_cpath_error(dtpu_cpath* cp) { return cp ? cp->err : ""; }

int dtpu_cpath_pending(dtpu_cpath* cp) {
  if (cp == NULL) return 0;
  pthread_mutex_lock(&cp->ring_lock);
  int n = cp->count;
  pthread_mutex_unlock(&cp->ring_lock);
  return n;
}

int dtpu_cpath_wants_drain(dtpu_cpath* cp) {
  return cp != NULL &&
         (cp->drain_now || cp->eager || (!cp->keep_latest && cp->count >= cp->capacity));
}

void dtpu_cpath_keep_latest(dtpu_cpath* cp, int on, double clock_mhz) {
  if (cp == NULL) return;
  pthread_mutex_lock(&cp->ring_lock);
  cp->keep_latest = on;
  cp->clock_mhz = clock_mhz > 0 ? clock_mhz : 0;
  pthread_mutex_unlock(&cp->ring_lock);
}

int dtpu_cpath_take(dtpu_cpath* cp, dtpu_cl_record* out, int max, int64_t* dropped) {
  if (cp == NULL || out == NULL || max <= 0) return 0;
  pthread_mutex_lock(&cp->ring_lock);
  int n = cp->count < max ? cp->count : max;
  for (int i = 0; i < n; ++i) out[i] = cp->ring[(cp->head + i) % cp->capacity];
  cp->head = cp->count == n ? 0 : (cp->head + n) % cp->capacity;
  cp->count -= n;
  if (cp->count == 0) cp->drain_now = 0;
  if (dropped != NULL) {
    *dropped = cp->dropped;
    cp->dropped = 0;
  }
  pthread_mutex_unlock(&cp->ring_lock);
  dtpu_cp_count(&dtpu_cp_waiting, -n);
  return n;
}

/* ---- the run ----------------------------------------------------------------------------- */

static void dtpu_cp_fail(dtpu_cpath* cp, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
static void dtpu_cp_fail(dtpu_cpath* cp, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cp->err, sizeof cp->err, fmt, ap);
  va_end(ap);
  cp->armed = 0;
  if (cp->owner != NULL) *cp->owner = -1; /* what the memories hold is not known: reload */
}

/* Time inside a target call: all of it on a simulated target (the call runs the simulator). */
#define DTPU_CP_CALL(cp, dev, expr)                  \
  ({                                                 \
    int64_t t_ = (cp)->io.simulated ? dtpu_cp_now() : 0; \
    int r_ = (expr);                                 \
    if ((cp)->io.simulated) (dev) += dtpu_cp_now() - t_; \
    r_;                                              \
  })

/* CL_BASE, DOORBELL, the completion, CL_STATUS, the counters, the acknowledge (ListProgram.kick).
 * Returns 0, or -1 with cp->err set. */
static int dtpu_cp_kick(dtpu_cpath* cp, dtpu_cl_record* rec) {
  dtpu_regio* io = &cp->io;
  const uint32_t* o = cp->reg;
  int64_t dev = 0, t0 = 0;
  uint32_t st = 0, lo = 0, hi = 0, ilo = 0, ihi = 0;
  int rc = -1;
  if (DTPU_CP_CALL(cp, dev, io->write32(io->ctx, o[DTPU_CP_CL_BASE], cp->list_addr)) != 0 ||
      DTPU_CP_CALL(cp, dev, io->write32(io->ctx, o[DTPU_CP_DOORBELL], 1)) != 0) {
    dtpu_cp_fail(cp, "command list at %#x: the register write failed (see the 'dtpu' log)",
                 cp->list_addr);
    goto out;
  }
  rec->writes = 2;
  rec->doorbells = 1;
  /* the deadline runs from the doorbell; a polled device running beside the host (not a
   * simulation, which has run the list within the doorbell's call) is first read when the
   * armed run's cycles at the build's clock have passed (a run that long is the usual one) */
  int64_t rung = dtpu_cp_now();
  if (!io->simulated) t0 = rung;
  int64_t deadline = rung + (int64_t)(cp->timeout_s * 1e9);
  if (io->wait == NULL && !io->simulated && cp->clock_mhz > 0 && cp->expect_cycles > 0) {
    double ns = (double)cp->expect_cycles * 1e3 / cp->clock_mhz;
    if (ns > cp->timeout_s * 1e9) ns = cp->timeout_s * 1e9;
    struct timespec nap = {(time_t)(ns / 1e9), (long)((int64_t)ns % 1000000000LL)};
    nanosleep(&nap, NULL);
  }
  if (io->wait != NULL) {
    int w = DTPU_CP_CALL(cp, dev, io->wait(io->ctx, cp->timeout_s));
    if (w < 0) {
      dtpu_cp_fail(cp, "command list at %#x: waiting for its completion failed (see the "
                   "'dtpu' log)", cp->list_addr);
      goto out;
    }
    if (w == 0) {
      dtpu_cp_fail(cp, "command list at %#x: no completion within %g s", cp->list_addr,
                   cp->timeout_s);
      goto out;
    }
  }
  for (;;) {
    if (DTPU_CP_CALL(cp, dev, io->read32(io->ctx, o[DTPU_CP_CL_STATUS], &st)) != 0) {
      dtpu_cp_fail(cp, "command list at %#x: reading CL_STATUS failed", cp->list_addr);
      goto out;
    }
    rec->reads += 1;
    if (st & cp->done_mask) break;
    if (dtpu_cp_now() > deadline) {
      dtpu_cp_fail(cp, "command list at %#x: CL_STATUS=%#x, not DONE within %g s",
                   cp->list_addr, st, cp->timeout_s);
      goto out;
    }
    struct timespec nap = {0, 100000}; /* then 0.1 ms, as the Python path */
    nanosleep(&nap, NULL);
  }
  if (!io->simulated) dev += dtpu_cp_now() - t0;
  if (st & cp->error_mask) {
    uint32_t err = 0, pc = 0, tag = 0;
    DTPU_CP_CALL(cp, dev, io->read32(io->ctx, o[DTPU_CP_CL_ERR], &err));
    DTPU_CP_CALL(cp, dev, io->read32(io->ctx, o[DTPU_CP_CL_ERR_PC], &pc));
    DTPU_CP_CALL(cp, dev, io->read32(io->ctx, o[DTPU_CP_CL_ERR_TAG], &tag));
    rec->reads += 3;
    DTPU_CP_CALL(cp, dev, io->write32(io->ctx, o[DTPU_CP_CL_ERR], err));
    DTPU_CP_CALL(cp, dev, io->write32(io->ctx, o[DTPU_CP_IRQ], cp->irq_ack));
    rec->writes += 2;
    char names[256] = "";
    size_t used = 0;
    for (int bit = 0; bit < 32; ++bit) {
      if (!(err >> bit & 1) || !cp->error_names[bit][0]) continue;
      int n = snprintf(names + used, sizeof names - used, "%s%s", used ? ", " : "",
                       cp->error_names[bit]);
      if (n < 0 || (size_t)n >= sizeof names - used) break;
      used += (size_t)n;
    }
    dtpu_cp_fail(cp, "DTPU command list at %#x failed: CL_ERR=%#x (%s) at list offset %u, tag "
                 "%#x (partition %u, node %u)", cp->list_addr, err, names, pc, tag, tag >> 16,
                 tag & 0xFFFF);
    goto out;
  }
  if (DTPU_CP_CALL(cp, dev, io->read32(io->ctx, o[DTPU_CP_CYCLES_LO], &lo)) != 0 ||
      DTPU_CP_CALL(cp, dev, io->read32(io->ctx, o[DTPU_CP_CYCLES_HI], &hi)) != 0 ||
      DTPU_CP_CALL(cp, dev, io->read32(io->ctx, o[DTPU_CP_IDLE_LO], &ilo)) != 0 ||
      DTPU_CP_CALL(cp, dev, io->read32(io->ctx, o[DTPU_CP_IDLE_HI], &ihi)) != 0) {
    dtpu_cp_fail(cp, "command list at %#x: reading the counters failed", cp->list_addr);
    goto out;
  }
  rec->reads += 4;
  if (DTPU_CP_CALL(cp, dev, io->write32(io->ctx, o[DTPU_CP_IRQ], cp->irq_ack)) != 0) {
    dtpu_cp_fail(cp, "command list at %#x: acknowledging IRQ failed", cp->list_addr);
    goto out;
  }
  rec->writes += 1;
  rec->cycles = (uint64_t)lo | (uint64_t)hi << 32;
  rec->idle = (uint64_t)ilo | (uint64_t)ihi << 32;
  rc = 0;
out:
  rec->device_ns += dev;
  return rc;
}

static void dtpu_cp_keep(dtpu_cpath* cp, dtpu_cl_record* rec) {
  pthread_mutex_lock(&cp->ring_lock);
  cp->runs += 1;
  if (cp->count < cp->capacity) {
    cp->ring[(cp->head + cp->count++) % cp->capacity] = *rec;
    dtpu_cp_count(&dtpu_cp_waiting, 1);
  } else if (cp->keep_latest) { /* the oldest run goes: its report would not be kept either */
    cp->ring[cp->head] = *rec;
    cp->head = (cp->head + 1) % cp->capacity;
    cp->dropped += 1;
  }
  pthread_mutex_unlock(&cp->ring_lock);
}

/* The partition's invoke. DTPU_CP_DECLINED: not this time (not armed, the core ran something
 * else since, a tensor that does not fit, a full ring): the caller takes the Python path. */
int dtpu_cpath_run(dtpu_cpath* cp, void** io_data, size_t* io_bytes, int n_io, int64_t enter_ns) {
  if (cp == NULL || !cp->armed || cp->owner == NULL || *cp->owner != cp->owner_id ||
      (cp->count >= cp->capacity && !cp->keep_latest))
    return DTPU_CP_DECLINED;
  for (int i = 0; i < cp->n_in; ++i) {
    int s = cp->ins[i].slot;
    if (s < 0 || s >= n_io || io_data[s] == NULL || io_bytes[s] < cp->ins[i].nbytes)
      return DTPU_CP_DECLINED;
  }
  for (int i = 0; i < cp->n_out; ++i) {
    int s = cp->outs[i].slot;
    if (s < 0 || s >= n_io || io_data[s] == NULL || io_bytes[s] < cp->outs[i].nbytes)
      return DTPU_CP_DECLINED;
  }
  dtpu_cl_record rec;
  memset(&rec, 0, sizeof rec);
  rec.enter_ns = enter_ns;
  rec.start_ns = dtpu_cp_now();
  dtpu_regio* io = &cp->io;
  int rc = 0;
  for (int i = 0; i < cp->n_in && rc == 0; ++i) {
    const dtpu_cp_io* x = &cp->ins[i];
    memcpy(cp->image + x->offset, io_data[x->slot], x->nbytes);
    if (io->flush != NULL && io->flush(io->sync_ctx, x->offset, x->nbytes) != 0) {
      dtpu_cp_fail(cp, "flushing the input at image offset %llu (%llu bytes) failed",
                   (unsigned long long)x->offset, (unsigned long long)x->nbytes);
      rc = -1;
    }
  }
  if (rc == 0) rc = dtpu_cp_kick(cp, &rec);
  for (int i = 0; i < cp->n_out && rc == 0; ++i) {
    const dtpu_cp_io* y = &cp->outs[i];
    if (io->invalidate != NULL && io->invalidate(io->sync_ctx, y->offset, y->nbytes) != 0) {
      dtpu_cp_fail(cp, "invalidating the output at image offset %llu (%llu bytes) failed",
                   (unsigned long long)y->offset, (unsigned long long)y->nbytes);
      rc = -1;
      break;
    }
    memcpy(io_data[y->slot], cp->image + y->offset, y->nbytes);
  }
  rec.end_ns = rec.exit_ns = dtpu_cp_now();
  rec.seq = dtpu_cp_count(&dtpu_cp_seq, 1);
  rec.status = rc == 0 ? 0 : 1;
  if (rc == 0 && (rec.cycles != cp->expect_cycles || rec.idle != cp->expect_idle))
    cp->drain_now = 1; /* a run unlike the armed one: its report needs the target's trace now */
  if (rc != 0) cp->drain_now = 1;
  dtpu_cp_keep(cp, &rec);
  return rc == 0 ? DTPU_CP_RAN : DTPU_CP_FAILED;
}
