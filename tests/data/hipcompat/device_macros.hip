// Device-side macros of ROCm's HIP headers that engine kernels use, each checked at compile
// time: a build of this file passes with ROCm's headers and with hqval's compatibility ones.
#include <hip/hip_runtime.h>

struct __align__(16) quad { float x, y, z, w; };
static_assert(alignof(quad) == 16, "__align__(16) aligns the type");
__align__(8) __device__ unsigned char staged[24];
static_assert(alignof(decltype(staged)) >= 1, "an __align__ variable");

#if !defined(__HIPCC__) || !defined(__HIP_PLATFORM_AMD__) || !__HIP_DEVICE_COMPILE__
#error "the platform words of a device compile"
#endif
#if !__HIP_ARCH_HAS_WARP_SHUFFLE__ || !__HIP_ARCH_HAS_WARP_BALLOT__ || \
    !__HIP_ARCH_HAS_GLOBAL_INT32_ATOMICS__ || !__HIP_ARCH_HAS_SHARED_INT32_ATOMICS__
#error "the feature words of an RDNA device"
#endif

__host__ __device__ inline float twice(float v) { return 2.0f * v; }
__device__ __host__ inline float half_of(float v) { return 0.5f * v; }
__device__ __forceinline__ float thrice(float v) { return 3.0f * v; }
__device__ __noinline__ float negate(float v) { return -v; }

extern "C" __global__ void __launch_bounds__(64) device_macros_lb1(float* y) {
    HIP_DYNAMIC_SHARED(float, lds)
    lds[threadIdx.x] = y[threadIdx.x];
    __syncthreads();
    y[threadIdx.x] = twice(lds[0]) + thrice(half_of(1.0f)) + negate(staged[0]);
}

extern "C" __global__ void __launch_bounds__(32, 4) device_macros_lb2(quad* q) {
    q[blockIdx.x].x = 1.0f;
}
