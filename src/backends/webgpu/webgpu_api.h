/* Our own declarations of the webgpu.h subset the backend calls, matching
 * the ABI of the Dawn build in npm bun-webgpu-linux-x64@0.1.7 (early-2025
 * webgpu.h: WGPUStringView, CallbackInfo structs returning WGPUFuture,
 * wgpuInstanceWaitAny, WGPULimits with maxImmediateSize). Struct layouts were
 * read from that library's debug info; no header ships with it. Every entry
 * point is loaded with dlsym into rlx_wgpu_fns, so the library is optional at
 * run time. */
#ifndef RLX_BACKENDS_WEBGPU_WEBGPU_API_H
#define RLX_BACKENDS_WEBGPU_WEBGPU_API_H

#include <stddef.h>
#include <stdint.h>

typedef struct WGPUInstanceImpl* WGPUInstance;
typedef struct WGPUAdapterImpl* WGPUAdapter;
typedef struct WGPUDeviceImpl* WGPUDevice;
typedef struct WGPUQueueImpl* WGPUQueue;
typedef struct WGPUBufferImpl* WGPUBuffer;
typedef struct WGPUShaderModuleImpl* WGPUShaderModule;
typedef struct WGPUBindGroupLayoutImpl* WGPUBindGroupLayout;
typedef struct WGPUBindGroupImpl* WGPUBindGroup;
typedef struct WGPUPipelineLayoutImpl* WGPUPipelineLayout;
typedef struct WGPUComputePipelineImpl* WGPUComputePipeline;
typedef struct WGPUCommandEncoderImpl* WGPUCommandEncoder;
typedef struct WGPUComputePassEncoderImpl* WGPUComputePassEncoder;
typedef struct WGPUCommandBufferImpl* WGPUCommandBuffer;

typedef uint32_t WGPUBool;
typedef uint64_t WGPUFlags;

enum {
  WGPU_STATUS_SUCCESS = 1,
  WGPU_CALLBACK_MODE_WAIT_ANY_ONLY = 1,
  WGPU_CALLBACK_MODE_ALLOW_PROCESS_EVENTS = 2,
  WGPU_BACKEND_VULKAN = 6,
  WGPU_FEATURE_LEVEL_CORE = 2,
  WGPU_FEATURE_SHADER_F16 = 10,
  WGPU_FEATURE_SUBGROUPS = 17,
  /* Tracing only (runtime/trace.h). The early-2025 values; a wrong guess
   * surfaces as a validation error that the probe in webgpu.c catches. */
  WGPU_FEATURE_TIMESTAMP_QUERY = 3,
  WGPU_QUERY_TYPE_TIMESTAMP = 2,
  WGPU_USAGE_QUERY_RESOLVE = 0x200,
  WGPU_STYPE_SHADER_SOURCE_WGSL = 2,
  WGPU_WAIT_STATUS_SUCCESS = 1,
  WGPU_WAIT_STATUS_TIMED_OUT = 2,
  WGPU_REQUEST_STATUS_SUCCESS = 1, /* adapter, device, map, pop error scope */
  WGPU_ERROR_FILTER_VALIDATION = 1,
  WGPU_ERROR_FILTER_OUT_OF_MEMORY = 2,
  WGPU_ERROR_FILTER_INTERNAL = 3,
  WGPU_ERROR_TYPE_NO_ERROR = 1,
  WGPU_BUFFER_BINDING_STORAGE = 3,
  WGPU_BUFFER_BINDING_READ_ONLY_STORAGE = 4,
  WGPU_SHADER_STAGE_COMPUTE = 4,
  WGPU_ADAPTER_TYPE_CPU = 3,
  WGPU_STYPE_DAWN_TOGGLES_DESCRIPTOR = 0x0005000A, /* Dawn's extension range */
};

enum {
  WGPU_USAGE_MAP_READ = 0x1,
  WGPU_USAGE_MAP_WRITE = 0x2,
  WGPU_USAGE_COPY_SRC = 0x4,
  WGPU_USAGE_COPY_DST = 0x8,
  WGPU_USAGE_STORAGE = 0x80,
  WGPU_MAP_MODE_READ = 0x1,
};

#define WGPU_STRLEN SIZE_MAX

typedef struct WGPUStringView {
  const char* data;
  size_t length;
} WGPUStringView;

typedef struct WGPUChainedStruct {
  struct WGPUChainedStruct* next;
  uint32_t sType;
} WGPUChainedStruct;

typedef struct WGPUQuerySetImpl* WGPUQuerySet;

typedef struct WGPUQuerySetDescriptor {
  WGPUChainedStruct* nextInChain;
  WGPUStringView label;
  uint32_t type; /* WGPU_QUERY_TYPE_* */
  uint32_t count;
} WGPUQuerySetDescriptor;

typedef struct WGPUFuture {
  uint64_t id;
} WGPUFuture;

typedef struct WGPUFutureWaitInfo {
  WGPUFuture future;
  WGPUBool completed;
} WGPUFutureWaitInfo;

typedef struct WGPUInstanceCapabilities {
  WGPUChainedStruct* nextInChain;
  WGPUBool timedWaitAnyEnable;
  size_t timedWaitAnyMaxCount;
} WGPUInstanceCapabilities;

typedef struct WGPUInstanceDescriptor {
  WGPUChainedStruct* nextInChain;
  WGPUInstanceCapabilities features;
} WGPUInstanceDescriptor;

typedef struct WGPURequestAdapterOptions {
  WGPUChainedStruct* nextInChain;
  uint32_t featureLevel, powerPreference;
  WGPUBool forceFallbackAdapter;
  uint32_t backendType;
  void* compatibleSurface;
} WGPURequestAdapterOptions;

/* Every *CallbackInfo of this ABI with a mode has this layout. */
typedef struct WGPUCallbackInfo {
  WGPUChainedStruct* nextInChain;
  uint32_t mode;
  void* callback;
  void* userdata1;
  void* userdata2;
} WGPUCallbackInfo;

typedef struct WGPUUncapturedErrorCallbackInfo {
  WGPUChainedStruct* nextInChain;
  void* callback;
  void* userdata1;
  void* userdata2;
} WGPUUncapturedErrorCallbackInfo;

typedef struct WGPUAdapterInfo {
  WGPUChainedStruct* nextInChain;
  WGPUStringView vendor, architecture, device, description;
  uint32_t backendType, adapterType, vendorID, deviceID, subgroupMinSize, subgroupMaxSize;
} WGPUAdapterInfo;

typedef struct WGPULimits {
  WGPUChainedStruct* nextInChain;
  uint32_t maxTextureDimension1D, maxTextureDimension2D, maxTextureDimension3D;
  uint32_t maxTextureArrayLayers, maxBindGroups, maxBindGroupsPlusVertexBuffers;
  uint32_t maxBindingsPerBindGroup, maxDynamicUniformBuffersPerPipelineLayout;
  uint32_t maxDynamicStorageBuffersPerPipelineLayout, maxSampledTexturesPerShaderStage;
  uint32_t maxSamplersPerShaderStage, maxStorageBuffersPerShaderStage;
  uint32_t maxStorageTexturesPerShaderStage, maxUniformBuffersPerShaderStage;
  uint64_t maxUniformBufferBindingSize, maxStorageBufferBindingSize;
  uint32_t minUniformBufferOffsetAlignment, minStorageBufferOffsetAlignment, maxVertexBuffers;
  uint64_t maxBufferSize;
  uint32_t maxVertexAttributes, maxVertexBufferArrayStride, maxInterStageShaderVariables;
  uint32_t maxColorAttachments, maxColorAttachmentBytesPerSample;
  uint32_t maxComputeWorkgroupStorageSize, maxComputeInvocationsPerWorkgroup;
  uint32_t maxComputeWorkgroupSizeX, maxComputeWorkgroupSizeY, maxComputeWorkgroupSizeZ;
  uint32_t maxComputeWorkgroupsPerDimension, maxImmediateSize;
} WGPULimits;

typedef struct WGPUSupportedFeatures {
  size_t featureCount;
  const uint32_t* features;
} WGPUSupportedFeatures;

/* Dawn toggles by name, chained on the device descriptor. */
typedef struct WGPUDawnTogglesDescriptor {
  WGPUChainedStruct chain;
  size_t enabledToggleCount;
  const char* const* enabledToggles;
  size_t disabledToggleCount;
  const char* const* disabledToggles;
} WGPUDawnTogglesDescriptor;

typedef struct WGPULoggingCallbackInfo {
  WGPUChainedStruct* nextInChain;
  void* callback;
  void* userdata1;
  void* userdata2;
} WGPULoggingCallbackInfo;

typedef struct WGPUQueueDescriptor {
  WGPUChainedStruct* nextInChain;
  WGPUStringView label;
} WGPUQueueDescriptor;

typedef struct WGPUDeviceDescriptor {
  WGPUChainedStruct* nextInChain;
  WGPUStringView label;
  size_t requiredFeatureCount;
  const uint32_t* requiredFeatures;
  const WGPULimits* requiredLimits;
  WGPUQueueDescriptor defaultQueue;
  WGPUCallbackInfo deviceLostCallbackInfo;
  WGPUUncapturedErrorCallbackInfo uncapturedErrorCallbackInfo;
} WGPUDeviceDescriptor;

typedef struct WGPUShaderSourceWGSL {
  WGPUChainedStruct chain;
  WGPUStringView code;
} WGPUShaderSourceWGSL;

typedef struct WGPUShaderModuleDescriptor {
  WGPUChainedStruct* nextInChain;
  WGPUStringView label;
} WGPUShaderModuleDescriptor;

typedef struct WGPUBufferDescriptor {
  WGPUChainedStruct* nextInChain;
  WGPUStringView label;
  WGPUFlags usage;
  uint64_t size;
  WGPUBool mappedAtCreation;
} WGPUBufferDescriptor;

typedef struct WGPUBufferBindingLayout {
  WGPUChainedStruct* nextInChain;
  uint32_t type;
  WGPUBool hasDynamicOffset;
  uint64_t minBindingSize;
} WGPUBufferBindingLayout;

/* Only the buffer member is used; the sampler/texture members stay zero. */
typedef struct WGPUBindGroupLayoutEntry {
  WGPUChainedStruct* nextInChain;
  uint32_t binding;
  WGPUFlags visibility;
  uint32_t bindingArraySize;
  WGPUBufferBindingLayout buffer;
  uint8_t sampler_texture_storage[64]; /* sampler (16) + texture (24) + storageTexture (24) */
} WGPUBindGroupLayoutEntry;

typedef struct WGPUBindGroupLayoutDescriptor {
  WGPUChainedStruct* nextInChain;
  WGPUStringView label;
  size_t entryCount;
  const WGPUBindGroupLayoutEntry* entries;
} WGPUBindGroupLayoutDescriptor;

typedef struct WGPUPipelineLayoutDescriptor {
  WGPUChainedStruct* nextInChain;
  WGPUStringView label;
  size_t bindGroupLayoutCount;
  const WGPUBindGroupLayout* bindGroupLayouts;
  uint32_t immediateSize;
} WGPUPipelineLayoutDescriptor;

typedef struct WGPUBindGroupEntry {
  WGPUChainedStruct* nextInChain;
  uint32_t binding;
  WGPUBuffer buffer;
  uint64_t offset, size;
  void* sampler;
  void* textureView;
} WGPUBindGroupEntry;

typedef struct WGPUBindGroupDescriptor {
  WGPUChainedStruct* nextInChain;
  WGPUStringView label;
  WGPUBindGroupLayout layout;
  size_t entryCount;
  const WGPUBindGroupEntry* entries;
} WGPUBindGroupDescriptor;

typedef struct WGPUComputeState {
  WGPUChainedStruct* nextInChain;
  WGPUShaderModule module;
  WGPUStringView entryPoint;
  size_t constantCount;
  const void* constants;
} WGPUComputeState;

typedef struct WGPUComputePipelineDescriptor {
  WGPUChainedStruct* nextInChain;
  WGPUStringView label;
  WGPUPipelineLayout layout;
  WGPUComputeState compute;
} WGPUComputePipelineDescriptor;

#define WGPU_WHOLE_SIZE UINT64_MAX

/* Callback signatures of this ABI. */
typedef void (*WGPURequestAdapterCallback)(uint32_t status, WGPUAdapter adapter,
                                           WGPUStringView message, void* u1, void* u2);
typedef void (*WGPURequestDeviceCallback)(uint32_t status, WGPUDevice device,
                                          WGPUStringView message, void* u1, void* u2);
typedef void (*WGPUBufferMapCallback)(uint32_t status, WGPUStringView message, void* u1,
                                      void* u2);
typedef void (*WGPUPopErrorScopeCallback)(uint32_t status, uint32_t type,
                                          WGPUStringView message, void* u1, void* u2);
typedef void (*WGPUQueueWorkDoneCallback)(uint32_t status, void* u1, void* u2);
typedef void (*WGPUUncapturedErrorCallback)(const WGPUDevice* device, uint32_t type,
                                            WGPUStringView message, void* u1, void* u2);
typedef void (*WGPULoggingCallback)(uint32_t type, WGPUStringView message, void* u1, void* u2);
typedef void (*WGPUDeviceLostCallback)(const WGPUDevice* device, uint32_t reason,
                                       WGPUStringView message, void* u1, void* u2);

/* X(return type, name, parameter list) for every entry point we call. */
#define RLX_WGPU_FNS(X)                                                                       \
  X(WGPUInstance, wgpuCreateInstance, (const WGPUInstanceDescriptor*))                        \
  X(WGPUFuture, wgpuInstanceRequestAdapter,                                                   \
    (WGPUInstance, const WGPURequestAdapterOptions*, WGPUCallbackInfo))                       \
  X(uint32_t, wgpuInstanceWaitAny, (WGPUInstance, size_t, WGPUFutureWaitInfo*, uint64_t))     \
  X(void, wgpuInstanceProcessEvents, (WGPUInstance))                                          \
  X(uint32_t, wgpuAdapterGetInfo, (WGPUAdapter, WGPUAdapterInfo*))                            \
  X(void, wgpuAdapterInfoFreeMembers, (WGPUAdapterInfo))                                      \
  X(uint32_t, wgpuAdapterGetLimits, (WGPUAdapter, WGPULimits*))                               \
  X(WGPUBool, wgpuAdapterHasFeature, (WGPUAdapter, uint32_t))                                 \
  X(WGPUFuture, wgpuAdapterRequestDevice,                                                     \
    (WGPUAdapter, const WGPUDeviceDescriptor*, WGPUCallbackInfo))                             \
  X(uint32_t, wgpuDeviceGetLimits, (WGPUDevice, WGPULimits*))                                 \
  X(WGPUQueue, wgpuDeviceGetQueue, (WGPUDevice))                                              \
  X(WGPUShaderModule, wgpuDeviceCreateShaderModule,                                           \
    (WGPUDevice, const WGPUShaderModuleDescriptor*))                                          \
  X(void, wgpuShaderModuleRelease, (WGPUShaderModule))                                        \
  X(WGPUBuffer, wgpuDeviceCreateBuffer, (WGPUDevice, const WGPUBufferDescriptor*))            \
  X(void, wgpuBufferDestroy, (WGPUBuffer))                                                    \
  X(void, wgpuBufferRelease, (WGPUBuffer))                                                    \
  X(WGPUFuture, wgpuBufferMapAsync, (WGPUBuffer, WGPUFlags, size_t, size_t, WGPUCallbackInfo)) \
  X(const void*, wgpuBufferGetConstMappedRange, (WGPUBuffer, size_t, size_t))                 \
  X(void, wgpuBufferUnmap, (WGPUBuffer))                                                      \
  X(WGPUBindGroupLayout, wgpuDeviceCreateBindGroupLayout,                                     \
    (WGPUDevice, const WGPUBindGroupLayoutDescriptor*))                                       \
  X(void, wgpuBindGroupLayoutRelease, (WGPUBindGroupLayout))                                  \
  X(WGPUPipelineLayout, wgpuDeviceCreatePipelineLayout,                                       \
    (WGPUDevice, const WGPUPipelineLayoutDescriptor*))                                        \
  X(void, wgpuPipelineLayoutRelease, (WGPUPipelineLayout))                                    \
  X(WGPUBindGroup, wgpuDeviceCreateBindGroup, (WGPUDevice, const WGPUBindGroupDescriptor*))   \
  X(void, wgpuBindGroupRelease, (WGPUBindGroup))                                              \
  X(WGPUComputePipeline, wgpuDeviceCreateComputePipeline,                                     \
    (WGPUDevice, const WGPUComputePipelineDescriptor*))                                       \
  X(void, wgpuComputePipelineRelease, (WGPUComputePipeline))                                  \
  X(WGPUCommandEncoder, wgpuDeviceCreateCommandEncoder, (WGPUDevice, const void*))            \
  X(void, wgpuCommandEncoderRelease, (WGPUCommandEncoder))                                    \
  X(WGPUComputePassEncoder, wgpuCommandEncoderBeginComputePass,                               \
    (WGPUCommandEncoder, const void*))                                                        \
  X(void, wgpuComputePassEncoderSetPipeline, (WGPUComputePassEncoder, WGPUComputePipeline))   \
  X(void, wgpuComputePassEncoderSetBindGroup,                                                 \
    (WGPUComputePassEncoder, uint32_t, WGPUBindGroup, size_t, const uint32_t*))               \
  X(void, wgpuComputePassEncoderDispatchWorkgroups,                                           \
    (WGPUComputePassEncoder, uint32_t, uint32_t, uint32_t))                                   \
  X(void, wgpuComputePassEncoderEnd, (WGPUComputePassEncoder))                                \
  X(void, wgpuComputePassEncoderRelease, (WGPUComputePassEncoder))                            \
  X(void, wgpuCommandEncoderCopyBufferToBuffer,                                               \
    (WGPUCommandEncoder, WGPUBuffer, uint64_t, WGPUBuffer, uint64_t, uint64_t))               \
  X(void, wgpuCommandEncoderClearBuffer, (WGPUCommandEncoder, WGPUBuffer, uint64_t, uint64_t)) \
  X(WGPUCommandBuffer, wgpuCommandEncoderFinish, (WGPUCommandEncoder, const void*))           \
  X(void, wgpuCommandBufferRelease, (WGPUCommandBuffer))                                      \
  X(void, wgpuQueueWriteBuffer, (WGPUQueue, WGPUBuffer, uint64_t, const void*, size_t))       \
  X(void, wgpuQueueSubmit, (WGPUQueue, size_t, const WGPUCommandBuffer*))                     \
  X(WGPUFuture, wgpuQueueOnSubmittedWorkDone, (WGPUQueue, WGPUCallbackInfo))                  \
  X(WGPUQuerySet, wgpuDeviceCreateQuerySet, (WGPUDevice, const WGPUQuerySetDescriptor*))       \
  X(void, wgpuQuerySetDestroy, (WGPUQuerySet))                                                \
  X(void, wgpuQuerySetRelease, (WGPUQuerySet))                                                \
  X(void, wgpuCommandEncoderWriteTimestamp, (WGPUCommandEncoder, WGPUQuerySet, uint32_t))     \
  X(void, wgpuCommandEncoderResolveQuerySet,                                                  \
    (WGPUCommandEncoder, WGPUQuerySet, uint32_t, uint32_t, WGPUBuffer, uint64_t))             \
  X(void, wgpuDeviceSetLoggingCallback, (WGPUDevice, WGPULoggingCallbackInfo))                \
  X(void, wgpuDevicePushErrorScope, (WGPUDevice, uint32_t))                                   \
  X(WGPUFuture, wgpuDevicePopErrorScope, (WGPUDevice, WGPUCallbackInfo))

typedef struct rlx_wgpu_fns {
#define RLX_WGPU_FIELD(ret, name, params) ret(*name) params;
  RLX_WGPU_FNS(RLX_WGPU_FIELD)
#undef RLX_WGPU_FIELD
} rlx_wgpu_fns;

#endif
