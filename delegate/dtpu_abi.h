/*
 * dtpu_abi.h -- the part of the TensorFlow Lite C ABI that the DTPU delegate touches.
 *
 * Written for this project from the published layout of TFLite's C structs (field order, field
 * types and enum values of tensorflow/lite/core/c/common.h and builtin_op_data.h, "semi-ABI
 * stable": fields are only ever appended). We do not include TensorFlow's headers, so the
 * delegate builds with nothing but a C compiler and links no TFLite library.
 *
 * Checked on x86-64 against tflite-runtime 2.14 and ai-edge-litert 2.3 (tests/test_delegate_abi.py):
 *   sizeof(TfLiteTensor) == 112, sizeof(TfLiteRegistration) == 88, sizeof(TfLiteDelegate) == 56.
 *
 * Rules that follow from "fields are only appended":
 *   - structs the runtime owns (context, tensor, node, op params) are only read, and only the
 *     prefix declared here; newer runtimes may have more fields after it;
 *   - structs we hand to the runtime (registration, delegate) are over-allocated and zero-filled
 *     (DTPU_ABI_TAIL_BYTES) so that a newer runtime reading a longer struct sees zeros (= "not
 *     set") instead of garbage. TfLiteRegistration is passed BY VALUE to
 *     ReplaceNodeSubsetsWithDelegateKernels; the zero tail is only added where the calling
 *     convention puts such a struct in memory with nothing after it (x86-64, aarch64).
 *
 * Everything between DTPU_CDEF_BEGIN and DTPU_CDEF_END is also fed to cffi's cdef() by
 * delegate/build.py, so it must stay plain declarations (no macros, no #if).
 */
#ifndef DTPU_ABI_H
#define DTPU_ABI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__x86_64__) || defined(__aarch64__)
#define DTPU_ABI_TAIL_BYTES 64
#else
#define DTPU_ABI_TAIL_BYTES 0
#endif

/* DTPU_CDEF_BEGIN */

typedef enum TfLiteStatus {
  kTfLiteOk = 0,
  kTfLiteError = 1,
  kTfLiteDelegateError = 2,
  kTfLiteApplicationError = 3,
  kTfLiteDelegateDataNotFound = 4,
  kTfLiteDelegateDataWriteError = 5,
  kTfLiteDelegateDataReadError = 6,
  kTfLiteUnresolvedOps = 7,
  kTfLiteCancelled = 8
} TfLiteStatus;

typedef enum TfLiteType {
  kTfLiteNoType = 0,
  kTfLiteFloat32 = 1,
  kTfLiteInt32 = 2,
  kTfLiteUInt8 = 3,
  kTfLiteInt64 = 4,
  kTfLiteString = 5,
  kTfLiteBool = 6,
  kTfLiteInt16 = 7,
  kTfLiteComplex64 = 8,
  kTfLiteInt8 = 9,
  kTfLiteFloat16 = 10,
  kTfLiteFloat64 = 11,
  kTfLiteComplex128 = 12,
  kTfLiteUInt64 = 13,
  kTfLiteResource = 14,
  kTfLiteVariant = 15,
  kTfLiteUInt32 = 16,
  kTfLiteUInt16 = 17,
  kTfLiteInt4 = 18,
  kTfLiteBFloat16 = 19
} TfLiteType;

typedef enum TfLiteAllocationType {
  kTfLiteMemNone = 0,
  kTfLiteMmapRo = 1,
  kTfLiteArenaRw = 2,
  kTfLiteArenaRwPersistent = 3,
  kTfLiteDynamic = 4,
  kTfLitePersistentRo = 5,
  kTfLiteCustom = 6,
  kTfLiteVariantObject = 7
} TfLiteAllocationType;

typedef enum TfLiteQuantizationType {
  kTfLiteNoQuantization = 0,
  kTfLiteAffineQuantization = 1
} TfLiteQuantizationType;

/* Builtin operator codes we look at (the rest are just "not ours"). */
typedef enum DtpuBuiltinCode {
  kTfLiteBuiltinConv2d = 3,
  kTfLiteBuiltinDepthwiseConv2d = 4,
  kTfLiteBuiltinDequantize = 6,
  kTfLiteBuiltinFullyConnected = 9,
  kTfLiteBuiltinDelegate = 51
} DtpuBuiltinCode;

typedef enum TfLitePadding {
  kTfLitePaddingUnknown = 0,
  kTfLitePaddingSame = 1,
  kTfLitePaddingValid = 2
} TfLitePadding;

typedef enum TfLiteFusedActivation {
  kTfLiteActNone = 0,
  kTfLiteActRelu = 1,
  kTfLiteActReluN1To1 = 2,
  kTfLiteActRelu6 = 3,
  kTfLiteActTanh = 4,
  kTfLiteActSignBit = 5,
  kTfLiteActSigmoid = 6
} TfLiteFusedActivation;

typedef enum TfLiteDelegateFlags {
  kTfLiteDelegateFlagsNone = 0,
  kTfLiteDelegateFlagsAllowDynamicTensors = 1,
  kTfLiteDelegateFlagsRequirePropagatedShapes = 2,
  kTfLiteDelegateFlagsPerOperatorProfiling = 4
} TfLiteDelegateFlags;

/* Shapes and index lists: a length followed by that many ints (a C99 flexible array). */
typedef struct TfLiteIntArray {
  int size;
  int data[];
} TfLiteIntArray;

typedef struct TfLiteFloatArray {
  int size;
  float data[];
} TfLiteFloatArray;

typedef struct TfLiteQuantizationParams {
  float scale;
  int32_t zero_point;
} TfLiteQuantizationParams;

/* params points to a TfLiteAffineQuantization when type == kTfLiteAffineQuantization. */
typedef struct TfLiteQuantization {
  TfLiteQuantizationType type;
  void* params;
} TfLiteQuantization;

typedef struct TfLiteAffineQuantization {
  TfLiteFloatArray* scale;
  TfLiteIntArray* zero_point;
  int32_t quantized_dimension;
} TfLiteAffineQuantization;

/* The data pointer union reduced to the one member we use; every member is a pointer. */
typedef union TfLitePtrUnion {
  void* raw;
} TfLitePtrUnion;

typedef int TfLiteBufferHandle;

struct TfLiteContext;
struct TfLiteDelegate;
struct TfLiteRegistration;

typedef struct TfLiteTensor {
  TfLiteType type;
  TfLitePtrUnion data;
  TfLiteIntArray* dims;
  TfLiteQuantizationParams params;
  TfLiteAllocationType allocation_type;
  size_t bytes;
  const void* allocation;
  const char* name;
  struct TfLiteDelegate* delegate;
  TfLiteBufferHandle buffer_handle;
  bool data_is_stale;
  bool is_variable;
  TfLiteQuantization quantization;
  void* sparsity;
  const TfLiteIntArray* dims_signature;
} TfLiteTensor;

/* Read-only prefix: newer runtimes append fields (delegate, side-effect flag, ...). */
typedef struct TfLiteNode {
  TfLiteIntArray* inputs;
  TfLiteIntArray* outputs;
  TfLiteIntArray* intermediates;
  TfLiteIntArray* temporaries;
  void* user_data;
  void* builtin_data;
  const void* custom_initial_data;
  int custom_initial_data_size;
} TfLiteNode;

typedef struct TfLiteRegistration {
  void* (*init)(struct TfLiteContext* context, const char* buffer, size_t length);
  void (*free)(struct TfLiteContext* context, void* buffer);
  TfLiteStatus (*prepare)(struct TfLiteContext* context, TfLiteNode* node);
  TfLiteStatus (*invoke)(struct TfLiteContext* context, TfLiteNode* node);
  const char* (*profiling_string)(const struct TfLiteContext* context, const TfLiteNode* node);
  int32_t builtin_code;
  const char* custom_name;
  int version;
  void* registration_external;
  void* (*async_kernel)(struct TfLiteContext* context, TfLiteNode* node);
  uint64_t inplace_operator;
} TfLiteRegistration;

/* What a delegate kernel's init() receives as `buffer`. */
typedef struct TfLiteDelegateParams {
  struct TfLiteDelegate* delegate;
  TfLiteIntArray* nodes_to_replace;
  TfLiteIntArray* input_tensors;
  TfLiteIntArray* output_tensors;
} TfLiteDelegateParams;

/* Read-only prefix, up to GetTensor (which both runtimes leave NULL: index `tensors`). */
typedef struct TfLiteContext {
  size_t tensors_size;
  TfLiteStatus (*GetExecutionPlan)(struct TfLiteContext* context, TfLiteIntArray** execution_plan);
  TfLiteTensor* tensors;
  void* impl_;
  TfLiteStatus (*ResizeTensor)(struct TfLiteContext* context, TfLiteTensor* tensor,
                               TfLiteIntArray* new_size);
  void (*ReportError)(struct TfLiteContext* context, const char* format, ...);
  TfLiteStatus (*AddTensors)(struct TfLiteContext* context, int tensors_to_add,
                             int* first_new_tensor_index);
  TfLiteStatus (*GetNodeAndRegistration)(struct TfLiteContext* context, int node_index,
                                         TfLiteNode** node,
                                         struct TfLiteRegistration** registration);
  TfLiteStatus (*ReplaceNodeSubsetsWithDelegateKernels)(struct TfLiteContext* context,
                                                        struct TfLiteRegistration registration,
                                                        const TfLiteIntArray* nodes_to_replace,
                                                        struct TfLiteDelegate* delegate);
  int recommended_num_threads;
  void* (*GetExternalContext)(struct TfLiteContext* context, int type);
  void (*SetExternalContext)(struct TfLiteContext* context, int type, void* external);
  bool allow_fp32_relax_to_fp16;
  void* profiler;
  void* (*AllocatePersistentBuffer)(struct TfLiteContext* context, size_t bytes);
  TfLiteStatus (*AllocateBufferForEval)(struct TfLiteContext* context, size_t bytes, void** ptr);
  TfLiteStatus (*RequestScratchBufferInArena)(struct TfLiteContext* context, size_t bytes,
                                              int* buffer_idx);
  void* (*GetScratchBuffer)(struct TfLiteContext* context, int buffer_idx);
  TfLiteStatus (*ResizeTensorExplicit)(struct TfLiteContext* context, TfLiteTensor* tensor,
                                       int dims, const int* shape);
  TfLiteStatus (*PreviewDelegatePartitioning)(struct TfLiteContext* context,
                                              const TfLiteIntArray* nodes_to_replace,
                                              TfLiteDelegateParams** partition_params_array,
                                              int* num_partitions);
  TfLiteTensor* (*GetTensor)(const struct TfLiteContext* context, int tensor_idx);
} TfLiteContext;

typedef struct TfLiteDelegate {
  void* data_;
  TfLiteStatus (*Prepare)(TfLiteContext* context, struct TfLiteDelegate* delegate);
  TfLiteStatus (*CopyFromBufferHandle)(TfLiteContext* context, struct TfLiteDelegate* delegate,
                                       TfLiteBufferHandle buffer_handle, TfLiteTensor* tensor);
  TfLiteStatus (*CopyToBufferHandle)(TfLiteContext* context, struct TfLiteDelegate* delegate,
                                     TfLiteBufferHandle buffer_handle, TfLiteTensor* tensor);
  void (*FreeBufferHandle)(TfLiteContext* context, struct TfLiteDelegate* delegate,
                           TfLiteBufferHandle* handle);
  int64_t flags;
  void* opaque_delegate_builder;
} TfLiteDelegate;

/* Builtin op parameters (node->builtin_data); read-only prefixes, newer runtimes append. */
typedef struct TfLiteConvParams {
  TfLitePadding padding;
  int stride_width;
  int stride_height;
  TfLiteFusedActivation activation;
  int dilation_width_factor;
  int dilation_height_factor;
} TfLiteConvParams;

typedef struct TfLiteDepthwiseConvParams {
  TfLitePadding padding;
  int stride_width;
  int stride_height;
  int depth_multiplier;
  TfLiteFusedActivation activation;
  int dilation_width_factor;
  int dilation_height_factor;
} TfLiteDepthwiseConvParams;

typedef enum TfLiteFullyConnectedWeightsFormat {
  kTfLiteFullyConnectedWeightsFormatDefault = 0,
  kTfLiteFullyConnectedWeightsFormatShuffled4x16Int8 = 1
} TfLiteFullyConnectedWeightsFormat;

typedef struct TfLiteFullyConnectedParams {
  TfLiteFusedActivation activation;
  TfLiteFullyConnectedWeightsFormat weights_format;
  bool keep_num_dims;
  bool asymmetric_quantize_inputs;
} TfLiteFullyConnectedParams;

/* ADD / SUB / MUL, AVERAGE_POOL_2D / MAX_POOL_2D and MEAN (the vector unit's operators):
 * prefixes of builtin_op_data.h's structs; pot_scale_int16 (ADD v4, SUB v5) and the pools'
 * computed padding follow, unread. */
typedef struct TfLiteAddParams {
  TfLiteFusedActivation activation;
} TfLiteAddParams;

typedef struct TfLiteSubParams {
  TfLiteFusedActivation activation;
} TfLiteSubParams;

typedef struct TfLiteMulParams {
  TfLiteFusedActivation activation;
} TfLiteMulParams;

typedef struct TfLitePoolParams {
  TfLitePadding padding;
  int stride_width;
  int stride_height;
  int filter_width;
  int filter_height;
  TfLiteFusedActivation activation;
} TfLitePoolParams;

typedef struct TfLiteReducerParams {
  bool keep_dims;
} TfLiteReducerParams;

/* CONCATENATION (along channels on the vector unit: dtpu.hw.vec_lower.concat_spec) */
typedef struct TfLiteConcatenationParams {
  int axis;
  TfLiteFusedActivation activation;
} TfLiteConcatenationParams;

/* LEAKY_RELU (a table operator of the vector unit: its slope makes the table) */
typedef struct TfLiteLeakyReluParams {
  float alpha;
} TfLiteLeakyReluParams;

/* STRIDED_SLICE and PACK of a shape vector (dtpu.delegate.shape_fold: Keras' SHAPE ->
 * STRIDED_SLICE -> PACK -> RESHAPE heads, evaluated at Prepare) */
typedef struct TfLiteStridedSliceParams {
  int begin_mask;
  int end_mask;
  int ellipsis_mask;
  int new_axis_mask;
  int shrink_axis_mask;
  bool offset;
} TfLiteStridedSliceParams;

typedef struct TfLitePackParams {
  int values_count;
  int axis;
} TfLitePackParams;

/* RESIZE_NEAREST_NEIGHBOR (COPY descriptors on the vector unit: dtpu.hw.vec_lower.resize_copies) */
typedef struct TfLiteResizeNearestNeighborParams {
  bool align_corners;
  bool half_pixel_centers;
} TfLiteResizeNearestNeighborParams;

/* DTPU_CDEF_END */

#endif /* DTPU_ABI_H */
