/*
 * dtpu_glue.h -- what the delegate's C glue (dtpu_delegate.c) shares with its Python side,
 * written once: dtpu_delegate.c includes this file, and delegate/build.py hands the part between
 * DTPU_CDEF_BEGIN and DTPU_CDEF_END to cffi's cdef() and wraps the callbacks between
 * DTPU_PYTHON_BEGIN and DTPU_PYTHON_END in cffi's extern "Python" block. Both parts must stay
 * plain declarations (no macros, no #if, no attributes); comments are removed before cdef().
 */
#ifndef DTPU_GLUE_H
#define DTPU_GLUE_H

#include "dtpu_abi.h"
#include "dtpu_cpath.h"

/* DTPU_CDEF_BEGIN */

/* A delegated partition. Python owns `handle`'s meaning; C owns the memory. */
typedef struct dtpu_kernel {
  int64_t handle;           /* Python kernel id; 0 if the Python side failed to create it */
  int n_io;                 /* tensors whose data pointers are gathered at every invoke */
  int* io_tensors;          /* their indices in context->tensors */
  void** io_data;           /* filled before each invoke (pointers may move between invokes) */
  size_t* io_bytes;
  int64_t seq;              /* written by Python during an invoke: that invoke's record number */
  int64_t last_seq;         /* written by C after the callback returned: whose times these are */
  int64_t last_enter_ns;    /* CLOCK_MONOTONIC when C entered the kernel invoke */
  int64_t last_call_ns;     /* ... just before crossing into Python */
  int64_t last_exit_ns;     /* ... when the Python callback had returned */
  int last_status;
  dtpu_cpath* cpath;        /* the C invoke path (dtpu_cpath.h), set by Python once armed; NULL: none */
} dtpu_kernel;

/* Facts about the host runtime, observed while running (tests/test_delegate_abi.py checks them). */
typedef struct dtpu_abi_facts {
  int64_t create_calls;
  int create_gil_held;      /* -1 unknown, 0/1 at the last tflite_plugin_create_delegate */
  uint64_t create_n_raw;    /* the full 64-bit num_options register at the last create */
  int invoke_gil_held;      /* -1 unknown, 0/1 at the last kernel invoke */
  int get_tensor_is_null;   /* -1 unknown, 0/1 at the last delegate Prepare */
  int64_t sizeof_tensor, sizeof_registration, sizeof_delegate, sizeof_context_prefix;
} dtpu_abi_facts;

extern dtpu_abi_facts dtpu_facts;
/* 1 while Python may be called; the Python side clears it from an atexit hook. */
extern int dtpu_python_alive;

/* helpers, also called from Python */
int64_t dtpu_now_ns(void);
void dtpu_report_error(TfLiteContext* ctx, const char* msg);
int dtpu_kernel_set_io(dtpu_kernel* k, const int* tensors, int n);
int dtpu_read_string(const char* src, char* dst, int cap);
int dtpu_resize_tensor(TfLiteContext* ctx, int tensor_index, const int* dims, int ndims);

/* the two exports TFLite's external-delegate loader looks for */
TfLiteDelegate* tflite_plugin_create_delegate(char** keys, char** values, size_t num_options,
                                              void (*report_error)(const char*));
void tflite_plugin_destroy_delegate(TfLiteDelegate* delegate);

/* DTPU_CDEF_END */

/* Implemented in Python (dtpu/delegate/glue.py) via @ffi.def_extern; cffi generates their C
 * bodies after dtpu_delegate.c, hence static. */
/* DTPU_PYTHON_BEGIN */
static int64_t dtpu_py_create(int n, char** keys, char** values, char* err, size_t errlen);
static void dtpu_py_destroy(int64_t handle);
static int dtpu_py_select(int64_t handle, TfLiteContext* ctx, TfLiteIntArray* plan,
                          TfLiteIntArray* claimed, char* err, size_t errlen);
static void dtpu_py_select_done(int64_t handle);
static int64_t dtpu_py_kernel_init(int64_t handle, TfLiteContext* ctx,
                                   const TfLiteDelegateParams* params, dtpu_kernel* kernel);
static int dtpu_py_kernel_prepare(int64_t kernel_handle, TfLiteContext* ctx, TfLiteNode* node,
                                  dtpu_kernel* kernel);
static int dtpu_py_kernel_invoke(int64_t kernel_handle, TfLiteContext* ctx, dtpu_kernel* kernel);
static void dtpu_py_kernel_free(int64_t kernel_handle);
/* the C path's records folded into reports (dtpu/delegate/cpath.py); 0, or 1 with a failure */
static int dtpu_py_cpath_drain(int64_t kernel_handle, TfLiteContext* ctx);
/* the C path's register interface over a Python transport (the golden model, the emulated
 * board): 0 on success, -1 on a failure (logged on the Python side) */
static int dtpu_py_reg_read(int64_t handle, uint32_t offset, uint32_t* value);
static int dtpu_py_reg_write(int64_t handle, uint32_t offset, uint32_t value);
static int dtpu_py_reg_wait(int64_t handle, double timeout_s);
static int dtpu_py_buf_sync(int64_t handle, int to_device, uint64_t offset, uint64_t nbytes);
/* DTPU_PYTHON_END */

#endif /* DTPU_GLUE_H */
