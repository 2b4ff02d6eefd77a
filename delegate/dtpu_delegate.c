/*
 * dtpu_delegate.c -- C glue of the DTPU TensorFlow Lite external delegate.
 *
 * TFLite loads dtpu.so with load_delegate(path, options) and calls the two exported functions
 * below. This file only speaks the TFLite C ABI (dtpu_abi.h) and measures time; every decision
 * (options, which nodes to claim, how to run them, reports) is taken by the Python package
 * `dtpu.delegate`, reached through cffi extern "Python" callbacks (dtpu_py_*), declared with
 * everything else shared with Python in dtpu_glue.h. delegate/build.py compiles this file with
 * cffi in embedding mode, which makes the callbacks start the embedded Python side
 * (dtpu.delegate.glue) on first use, inside the host process's interpreter.
 *
 * Object model (no global per-delegate state):
 *   dtpu_delegate  one per tflite_plugin_create_delegate(); wraps the TfLiteDelegate given to
 *                  TFLite and carries the Python-side handle of its options/backend/reports.
 *   dtpu_kernel    one per delegated partition (TFLite node user_data); carries the Python-side
 *                  kernel handle, the tensor indices to gather at every invoke and time stamps.
 *
 * Invoke: a partition compiled as a command list runs in C (dtpu_cpath.c) once its first invoke
 * on the Python path armed it; every other invoke crosses into Python.
 *
 * Threading: TFLite calls kernel invoke with the GIL released; the cffi callbacks take it back.
 * Every call that may drive the device (into Python, or the C path) holds dtpu_core_lock.
 * Once Python starts finalizing (dtpu_python_alive == 0, set from an atexit hook), no callback is
 * made any more: late frees only release C memory.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dtpu_glue.h"

#define DTPU_DELEGATE_MAGIC 0x4454505544454c47ULL /* "DTPUDELG" */
#define DTPU_ERRLEN 2048

/* The structs, globals and entry points shared with Python are declared once, in dtpu_glue.h
 * (cffi reads the same declarations). */
dtpu_abi_facts dtpu_facts = {0, -1, 0, -1, -1, (int64_t)sizeof(TfLiteTensor),
                             (int64_t)sizeof(TfLiteRegistration), (int64_t)sizeof(TfLiteDelegate),
                             (int64_t)sizeof(TfLiteContext)};

int dtpu_python_alive = 1;

/* ---- helpers (also callable from Python) ------------------------------------------------- */

int64_t dtpu_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + (int64_t)ts.tv_nsec;
}

/* TFLite glues reported text to its own, so every message ends with a newline. */
void dtpu_report_error(TfLiteContext* ctx, const char* msg) {
  if (ctx == NULL || ctx->ReportError == NULL || msg == NULL) return;
  size_t len = strlen(msg);
  ctx->ReportError(ctx, (len > 0 && msg[len - 1] == '\n') ? "%s" : "%s\n", msg);
}

/* Copy the NUL-terminated string at `src` into `dst` (at most cap - 1 bytes, always terminated)
 * without ever faulting; returns the bytes copied, or -1 if `src` is not readable at all.
 *
 * TfLiteTensor.name points into the model's flatbuffer, and TFLite stores that pointer without
 * reading it: in a damaged model that the CPU interpreter runs fine, a name can point outside the
 * file (issue #12: a mutated string offset made strlen() fault in the delegate's Prepare). The
 * bytes are moved through a pipe, one page-bounded chunk at a time: write(2) reports EFAULT for
 * an unreadable source instead of raising SIGSEGV/SIGBUS. */
int dtpu_read_string(const char* src, char* dst, int cap) {
  static int fds[2] = {-1, -1};
  static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* one pipe: one copy at a time */
  if (dst == NULL || cap <= 0) return -1;
  dst[0] = '\0';
  if (src == NULL) return -1;
  pthread_mutex_lock(&lock);
  if (fds[0] < 0) {
    if (pipe(fds) != 0) {
      fds[0] = fds[1] = -1;
      pthread_mutex_unlock(&lock);
      return -1;
    }
    fcntl(fds[0], F_SETFD, FD_CLOEXEC);
    fcntl(fds[1], F_SETFD, FD_CLOEXEC);
  }
  int copied = 0, found = -1;
  const uintptr_t page = 4096; /* a divisor of every page size: chunks never cross a page */
  while (copied < cap - 1 && found < 0) {
    uintptr_t at = (uintptr_t)(src + copied);
    int chunk = (int)(page - at % page);
    if (chunk > cap - 1 - copied) chunk = cap - 1 - copied;
    ssize_t wrote;
    do {
      wrote = write(fds[1], src + copied, (size_t)chunk);
    } while (wrote < 0 && errno == EINTR);
    if (wrote <= 0) break; /* EFAULT: not mapped from here on */
    ssize_t got = 0;
    while (got < wrote) { /* the pipe holds far more than a chunk: this never blocks */
      ssize_t n = read(fds[0], dst + copied + got, (size_t)(wrote - got));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += n;
    }
    void* nul = memchr(dst + copied, '\0', (size_t)got);
    if (nul != NULL) found = (int)((char*)nul - dst);
    copied += (int)got;
    if (got < wrote) break;
  }
  pthread_mutex_unlock(&lock);
  if (found >= 0) return found;
  dst[copied] = '\0';
  return copied == 0 ? -1 : copied;
}

/* Tell C which tensors to hand to Python at every invoke (called from Python's prepare). */
int dtpu_kernel_set_io(dtpu_kernel* k, const int* tensors, int n) {
  if (k == NULL || n < 0) return -1;
  int* idx = n ? (int*)malloc(sizeof(int) * (size_t)n) : NULL;
  void** data = n ? (void**)calloc((size_t)n, sizeof(void*)) : NULL;
  size_t* bytes = n ? (size_t*)calloc((size_t)n, sizeof(size_t)) : NULL;
  if (n && (idx == NULL || data == NULL || bytes == NULL)) {
    free(idx);
    free(data);
    free(bytes);
    return -1;
  }
  if (n) memcpy(idx, tensors, sizeof(int) * (size_t)n);
  free(k->io_tensors);
  free(k->io_data);
  free(k->io_bytes);
  k->io_tensors = idx;
  k->io_data = data;
  k->io_bytes = bytes;
  k->n_io = n;
  return 0;
}

/* Resize an output tensor; ResizeTensor takes ownership of a malloc'ed TfLiteIntArray. */
int dtpu_resize_tensor(TfLiteContext* ctx, int tensor_index, const int* dims, int ndims) {
  if (ctx == NULL || tensor_index < 0 || (size_t)tensor_index >= ctx->tensors_size || ndims < 0)
    return kTfLiteError;
  TfLiteTensor* t = &ctx->tensors[tensor_index];
  if (t->dims != NULL && t->dims->size == ndims &&
      memcmp(t->dims->data, dims, sizeof(int) * (size_t)ndims) == 0)
    return kTfLiteOk;
  TfLiteIntArray* shape = (TfLiteIntArray*)malloc(sizeof(int) * (size_t)(ndims + 1));
  if (shape == NULL) return kTfLiteError;
  shape->size = ndims;
  memcpy(shape->data, dims, sizeof(int) * (size_t)ndims);
  return ctx->ResizeTensor(ctx, t, shape);
}

/* ---- the delegate ------------------------------------------------------------------------ */

typedef struct dtpu_delegate {
  TfLiteDelegate base; /* first: TFLite sees only this */
#if DTPU_ABI_TAIL_BYTES > 0
  unsigned char tail[DTPU_ABI_TAIL_BYTES]; /* zeros a newer, longer TfLiteDelegate would read */
#endif
  uint64_t magic;
  int64_t handle; /* Python delegate id */
} dtpu_delegate;

typedef struct dtpu_registration {
  TfLiteRegistration r;
#if DTPU_ABI_TAIL_BYTES > 0
  unsigned char tail[DTPU_ABI_TAIL_BYTES];
#endif
} dtpu_registration;

/* ReplaceNodeSubsetsWithDelegateKernels, seen as taking our zero-tailed registration. */
typedef TfLiteStatus (*dtpu_replace_fn)(TfLiteContext*, dtpu_registration, const TfLiteIntArray*,
                                        TfLiteDelegate*);

static dtpu_delegate* dtpu_from_base(TfLiteDelegate* base) {
  if (base == NULL) return NULL;
  dtpu_delegate* d = (dtpu_delegate*)base->data_;
  if (d == NULL || (void*)d != (void*)base || d->magic != DTPU_DELEGATE_MAGIC) return NULL;
  return d;
}

static int dtpu_gil_held(void) {
#ifdef Py_PYTHON_H
  return PyGILState_Check() ? 1 : 0;
#else
  return -1;
#endif
}

static void* dtpu_kernel_init(TfLiteContext* ctx, const char* buffer, size_t length) {
  (void)length;
  const TfLiteDelegateParams* params = (const TfLiteDelegateParams*)buffer;
  dtpu_kernel* k = (dtpu_kernel*)calloc(1, sizeof(dtpu_kernel));
  if (k == NULL) return NULL;
  dtpu_delegate* d = params ? dtpu_from_base(params->delegate) : NULL;
  dtpu_core_lock();
  if (d != NULL && dtpu_python_alive) k->handle = dtpu_py_kernel_init(d->handle, ctx, params, k);
  dtpu_core_unlock();
  return k;
}

static void dtpu_kernel_free(TfLiteContext* ctx, void* buffer) {
  (void)ctx;
  dtpu_kernel* k = (dtpu_kernel*)buffer;
  if (k == NULL) return;
  dtpu_core_lock();
  if (k->handle > 0 && dtpu_python_alive) dtpu_py_kernel_free(k->handle);
  dtpu_core_unlock();
  free(k->io_tensors);
  free(k->io_data);
  free(k->io_bytes);
  free(k);
}

static TfLiteStatus dtpu_kernel_prepare(TfLiteContext* ctx, TfLiteNode* node) {
  dtpu_kernel* k = node ? (dtpu_kernel*)node->user_data : NULL;
  if (k == NULL || k->handle <= 0) {
    dtpu_report_error(ctx, "dtpu: delegate kernel was not initialised (see the 'dtpu' log)");
    return kTfLiteError;
  }
  if (!dtpu_python_alive) return kTfLiteError;
  dtpu_core_lock();
  int rc = dtpu_py_kernel_prepare(k->handle, ctx, node, k);
  dtpu_core_unlock();
  return rc == 0 ? kTfLiteOk : kTfLiteError;
}

static TfLiteStatus dtpu_kernel_invoke(TfLiteContext* ctx, TfLiteNode* node) {
  int64_t enter = dtpu_now_ns();
  dtpu_kernel* k = node ? (dtpu_kernel*)node->user_data : NULL;
  if (k == NULL || k->handle <= 0 || !dtpu_python_alive) {
    dtpu_report_error(ctx, "dtpu: delegate kernel is not usable (not initialised, or Python exited)");
    return kTfLiteError;
  }
  dtpu_facts.invoke_gil_held = dtpu_gil_held();
  /* Arena tensors may move between invokes: re-read every pointer now. */
  for (int i = 0; i < k->n_io; ++i) {
    int idx = k->io_tensors[i];
    if (idx < 0 || (size_t)idx >= ctx->tensors_size) {
      k->io_data[i] = NULL;
      k->io_bytes[i] = 0;
      continue;
    }
    const TfLiteTensor* t = &ctx->tensors[idx];
    k->io_data[i] = t->data.raw;
    k->io_bytes[i] = t->bytes;
  }
  dtpu_core_lock();
  if (k->cpath != NULL) {
    int ran = dtpu_cpath_run(k->cpath, k->io_data, k->io_bytes, k->n_io, enter);
    if (ran != DTPU_CP_DECLINED) {
      int drained = 0;
      if (dtpu_cpath_wants_drain(k->cpath)) drained = dtpu_py_cpath_drain(k->handle, ctx);
      if (ran == DTPU_CP_FAILED) {
        char msg[640];
        snprintf(msg, sizeof msg, "dtpu: invoking delegated nodes failed: %s",
                 dtpu_cpath_error(k->cpath));
        dtpu_report_error(ctx, msg);
      }
      dtpu_core_unlock();
      return ran == DTPU_CP_RAN && drained == 0 ? kTfLiteOk : kTfLiteError;
    }
  }
  int64_t call = dtpu_now_ns();
  int rc = dtpu_py_kernel_invoke(k->handle, ctx, k);
  dtpu_core_unlock();
  k->last_exit_ns = dtpu_now_ns();
  k->last_enter_ns = enter;
  k->last_call_ns = call;
  k->last_seq = k->seq;
  k->last_status = rc;
  return rc == 0 ? kTfLiteOk : kTfLiteError;
}

static TfLiteStatus dtpu_delegate_prepare(TfLiteContext* ctx, TfLiteDelegate* base) {
  dtpu_delegate* d = dtpu_from_base(base);
  if (d == NULL || !dtpu_python_alive) {
    dtpu_report_error(ctx, "dtpu: Prepare called with a delegate this library did not create");
    return kTfLiteError;
  }
  dtpu_facts.get_tensor_is_null = ctx->GetTensor == NULL ? 1 : 0;
  TfLiteIntArray* plan = NULL;
  if (ctx->GetExecutionPlan(ctx, &plan) != kTfLiteOk || plan == NULL) {
    dtpu_report_error(ctx, "dtpu: GetExecutionPlan failed");
    return kTfLiteError;
  }
  /* The plan is owned by TFLite and invalidated by the next GetExecutionPlan: Python copies it. */
  TfLiteIntArray* claimed = (TfLiteIntArray*)calloc((size_t)plan->size + 1, sizeof(int));
  char* err = (char*)calloc(1, DTPU_ERRLEN);
  if (claimed == NULL || err == NULL) {
    free(claimed);
    free(err);
    dtpu_report_error(ctx, "dtpu: out of memory in delegate Prepare");
    return kTfLiteError;
  }
  dtpu_core_lock(); /* held through the kernels' inits, which replace() calls */
  int n = dtpu_py_select(d->handle, ctx, plan, claimed, err, DTPU_ERRLEN);
  TfLiteStatus status = kTfLiteOk;
  if (n < 0) {
    dtpu_report_error(ctx, err[0] ? err : "dtpu: choosing nodes failed (see the 'dtpu' log)");
    status = kTfLiteError;
  } else if (n > 0) {
    claimed->size = n;
    dtpu_registration reg;
    memset(&reg, 0, sizeof reg);
    reg.r.init = dtpu_kernel_init;
    reg.r.free = dtpu_kernel_free;
    reg.r.prepare = dtpu_kernel_prepare;
    reg.r.invoke = dtpu_kernel_invoke;
    reg.r.builtin_code = kTfLiteBuiltinDelegate;
    reg.r.custom_name = "DtpuDelegate";
    reg.r.version = 1;
    dtpu_replace_fn replace = (dtpu_replace_fn)(void*)ctx->ReplaceNodeSubsetsWithDelegateKernels;
    status = replace(ctx, reg, claimed, base);
  }
  dtpu_py_select_done(d->handle); /* kernel inits (inside replace) have run */
  dtpu_core_unlock();
  free(claimed);
  free(err);
  return status;
}

/* We never attach buffer handles to tensors, so TFLite has no reason to call these. */
static TfLiteStatus dtpu_copy_from_buffer_handle(TfLiteContext* ctx, TfLiteDelegate* delegate,
                                                 TfLiteBufferHandle handle, TfLiteTensor* tensor) {
  (void)delegate;
  (void)handle;
  (void)tensor;
  dtpu_report_error(ctx, "dtpu: the delegate owns no buffer handles");
  return kTfLiteError;
}

static TfLiteStatus dtpu_copy_to_buffer_handle(TfLiteContext* ctx, TfLiteDelegate* delegate,
                                               TfLiteBufferHandle handle, TfLiteTensor* tensor) {
  return dtpu_copy_from_buffer_handle(ctx, delegate, handle, tensor);
}

static void dtpu_free_buffer_handle(TfLiteContext* ctx, TfLiteDelegate* delegate,
                                    TfLiteBufferHandle* handle) {
  (void)ctx;
  (void)delegate;
  (void)handle;
}

/* ---- the two exports TFLite's external-delegate loader looks for ------------------------- */

__attribute__((visibility("default"))) TfLiteDelegate* tflite_plugin_create_delegate(
    char** keys, char** values, size_t num_options, void (*report_error)(const char*)) {
  /* Python's load_delegate passes the count through ctypes as a C int: only the low 32 bits
   * of the register are defined. */
  int n = (int)(uint32_t)num_options;
  dtpu_facts.create_calls += 1;
  dtpu_facts.create_n_raw = (uint64_t)num_options;
  dtpu_facts.create_gil_held = dtpu_gil_held();
  if (n < 0 || n > 4096 || (n > 0 && (keys == NULL || values == NULL))) {
    if (report_error) report_error("dtpu: invalid option list passed to the delegate\n");
    return NULL;
  }
  char* err = (char*)calloc(1, DTPU_ERRLEN);
  dtpu_delegate* d = (dtpu_delegate*)calloc(1, sizeof(dtpu_delegate));
  if (err == NULL || d == NULL) {
    free(err);
    free(d);
    if (report_error) report_error("dtpu: out of memory creating the delegate\n");
    return NULL;
  }
  int64_t handle = dtpu_python_alive ? dtpu_py_create(n, keys, values, err, DTPU_ERRLEN) : 0;
  if (handle <= 0) {
    if (report_error)
      report_error(err[0] ? err
                          : "dtpu: the Python side of the delegate could not start (its traceback "
                            "is on stderr)\n");
    free(err);
    free(d);
    return NULL;
  }
  free(err);
  d->base.data_ = d;
  d->base.Prepare = dtpu_delegate_prepare;
  d->base.CopyFromBufferHandle = dtpu_copy_from_buffer_handle;
  d->base.CopyToBufferHandle = dtpu_copy_to_buffer_handle;
  d->base.FreeBufferHandle = dtpu_free_buffer_handle;
  /* Kernels re-run Prepare with the current shapes and compute their own output shapes, so
   * graphs with dynamic-sized tensors (e.g. a RESHAPE fed by SHAPE) can be delegated too, and
   * resize_tensor_input re-prepares kernels instead of re-applying the delegate. */
  d->base.flags = kTfLiteDelegateFlagsAllowDynamicTensors;
  d->magic = DTPU_DELEGATE_MAGIC;
  d->handle = handle;
  return &d->base;
}

__attribute__((visibility("default"))) void tflite_plugin_destroy_delegate(TfLiteDelegate* base) {
  dtpu_delegate* d = dtpu_from_base(base);
  if (d == NULL) return;
  dtpu_core_lock();
  if (dtpu_python_alive) dtpu_py_destroy(d->handle);
  dtpu_core_unlock();
  d->magic = 0;
  free(d);
}
