// hqval portability prelude: one kernel source for ROCm HIP headers, bare clang
// (-nogpulib -nogpuinc) and NVRTC/nvcc.
//
// Kernels use only what is defined here: HQ_GLOBAL / HQ_DEVICE / HQ_LAUNCH_BOUNDS(_MIN),
// hq_lane() / hq_block_x() / hq_block_y(), hq_u32_as_float(), hq_half_to_float(), hq_load_u32(),
// hq_wave_sum(), hq_atomic_add_f32(), hq_uniform_u32(), HQ_OPAQUE(), HQ_OPAQUE_UNIFORM(),
// hq_float4.  Nothing here knows about any quantization format.
#ifndef HQVAL_PRELUDE_H
#define HQVAL_PRELUDE_H

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
// ======================= CUDA branch (NVRTC / nvcc) ==========================
// Owned jointly with the timing engineer, who verifies it under NVRTC; keep every
// CUDA-only line inside this block.
#define HQ_CUDA 1
#define HQ_GLOBAL extern "C" __global__
#define HQ_DEVICE __device__ __forceinline__
#define HQ_LAUNCH_BOUNDS(n) __launch_bounds__(n)
// ... and at least `blocks` resident blocks per multiprocessor (caps registers per thread).
#define HQ_LAUNCH_BOUNDS_MIN(n, blocks) __launch_bounds__(n, blocks)
#define HQ_WAVE 32
#define HQ_OPAQUE(x) asm volatile("" : "+f"(x))
// An int the compiler must forget the value of (same in every lane: stays uniform).
#define HQ_OPAQUE_UNIFORM(x) asm volatile("" : "+r"(x))
typedef float4 hq_float4;

static HQ_DEVICE unsigned int hq_lane() { return threadIdx.x; }
static HQ_DEVICE unsigned int hq_block_x() { return blockIdx.x; }
static HQ_DEVICE unsigned int hq_block_y() { return blockIdx.y; }

static HQ_DEVICE float hq_u32_as_float(unsigned int u) { return __uint_as_float(u); }

static HQ_DEVICE float hq_half_to_float(unsigned short h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}

// Lane-invariant loads are ordinary loads on NVIDIA (the uniform datapath decides).
static HQ_DEVICE unsigned int hq_load_u32(const unsigned char* __restrict__ p) {
    return *reinterpret_cast<const unsigned int*>(p);
}

static HQ_DEVICE float hq_wave_sum(float v) {
    #pragma unroll
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

// *p += v as one device-scope atomic (blocks of one launch adding into the same word).
static HQ_DEVICE void hq_atomic_add_f32(float* p, float v) { atomicAdd(p, v); }
// A loaded value kept apart from its load (see the AMD branch); NVIDIA: unchanged.
static HQ_DEVICE unsigned int hq_uniform_u32(unsigned int v) { return v; }
// ===================== end CUDA branch ======================================

#elif defined(__HIP__) && defined(__AMDGCN__)
// ======================= AMD branch (HIP headers or bare clang) ==============
#define HQ_AMD 1
// ROCm's HIP headers when the compiler set them up (clang pre-includes its HIP wrapper
// unless -nogpuinc): a HIP-header build then sees exactly what a HIP program sees.
#if defined(__CLANG_HIP_RUNTIME_WRAPPER_H__) && defined(__has_include)
#if __has_include(<hip/hip_runtime.h>)
#include <hip/hip_runtime.h>
#define HQ_HIP_HEADERS 1
#endif
#endif
// With ROCm's headers these keywords are macros already; bare clang (-nogpuinc) gets
// the attributes they expand to.
#ifndef __global__
#define __global__ __attribute__((global))
#endif
#ifndef __device__
#define __device__ __attribute__((device))
#endif
#define HQ_GLOBAL extern "C" __global__
#define HQ_DEVICE __device__ inline __attribute__((always_inline))
// HIP's __launch_bounds__(n) is this attribute; spelled out so bare clang gets it too.
#define HQ_LAUNCH_BOUNDS(n) __attribute__((amdgpu_flat_work_group_size(1, n)))
// The residency half is NVIDIA's register cap; on AMD only the block size is bounded.
#define HQ_LAUNCH_BOUNDS_MIN(n, blocks) HQ_LAUNCH_BOUNDS(n)
#define HQ_WAVE 32
#define HQ_OPAQUE(x) asm volatile("" : "+v"(x))
// An int the compiler must forget the value of, kept in an SGPR (lane-invariant), so
// addresses built from it stay scalar (the ISA audit's rule (a)).
#define HQ_OPAQUE_UNIFORM(x) asm volatile("" : "+s"(x))
typedef float hq_float4 __attribute__((ext_vector_type(4)));

// (LLVM 21+ defines no wave size macro: there the code object's .wavefront_size, which the
// audit and the emulator read, is the only word on it)
#if defined(__AMDGCN_WAVEFRONT_SIZE) && __AMDGCN_WAVEFRONT_SIZE != 32
#error "hqval kernels are wave32 (block = one wave32); build without -mwavefrontsize64"
#endif

static HQ_DEVICE unsigned int hq_lane() { return __builtin_amdgcn_workitem_id_x(); }
static HQ_DEVICE unsigned int hq_block_x() { return __builtin_amdgcn_workgroup_id_x(); }
static HQ_DEVICE unsigned int hq_block_y() { return __builtin_amdgcn_workgroup_id_y(); }

static HQ_DEVICE float hq_u32_as_float(unsigned int u) { return __builtin_bit_cast(float, u); }

static HQ_DEVICE float hq_half_to_float(unsigned short h) {
    return static_cast<float>(__builtin_bit_cast(_Float16, h));
}

// Headers are loaded through this with a lane-invariant pointer: the const __restrict__
// pointer lets the backend prove the memory is not clobbered, so the load selects to
// s_load (the ISA audit's rule (a) checks that it did).
static HQ_DEVICE unsigned int hq_load_u32(const unsigned char* __restrict__ p) {
    return *reinterpret_cast<const unsigned int*>(p);
}

// Butterfly sum over the wave through ds_bpermute (every lane ends with the total).
static HQ_DEVICE float hq_wave_sum(float v) {
    const int lane = static_cast<int>(hq_lane());
    #pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        const int other = __builtin_amdgcn_ds_bpermute((lane ^ off) << 2,
                                                       __builtin_bit_cast(int, v));
        v += __builtin_bit_cast(float, other);
    }
    return v;
}

// *p += v as one device-scope atomic (blocks of one launch adding into the same word):
// clang's HIP builtin, so bare clang and ROCm's headers build the same code: without
// -munsafe-fp-atomics clang-19 makes it a global_atomic_cmpswap loop on every RDNA arch.
static HQ_DEVICE void hq_atomic_add_f32(float* p, float v) {
    (void)__hip_atomic_fetch_add(p, v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
}
// A loaded value the compiler may not trace back to its load, so a select between two
// such values is never folded into one load from a select of their addresses (a
// lane-dependent address when the select is).  An empty asm: no instruction.
// (__builtin_amdgcn_readfirstlane of a value loaded from a uniform address is folded
// away, and an SGPR constraint on a vector load's result does not compile.)
static HQ_DEVICE unsigned int hq_uniform_u32(unsigned int v) {
    asm volatile("" : "+v"(v));
    return v;
}
// ===================== end AMD branch =======================================

#else
#error "hqval_prelude.h: compile as HIP for amdgcn (clang -x hip --offload-arch=gfx...) or with NVRTC/nvcc"
#endif

#endif  // HQVAL_PRELUDE_H
