// hqval HIP compatibility header: the device-side HIP API that quantized GEMV/GEMM kernels
// use, for clang (bare LLVM, -nogpuinc -nogpulib) with no ROCm installed.
//
// hqval's toolchain puts this directory on the include path only when it builds without
// ROCm's headers (hqval.toolchain.Compiler.hip_headers is false); with ROCm, ROCm's
// headers win.  If clang's HIP runtime wrapper is active anyway, the real header is used.
//
// Covered (device side only; there is no host compilation here):
//   launch      threadIdx blockIdx blockDim gridDim, dim3, __launch_bounds__(N[, MIN_WAVES])
//               as ROCm spells it (amdgpu_flat_work_group_size(1, N) [+ amdgpu_waves_per_eu]),
//               __global__ __device__ __host__ (and __host__ __device__ together)
//               __shared__ __constant__ __managed__ __forceinline__ __noinline__
//               __align__(N), HIP_KERNEL_NAME, HIP_DYNAMIC_SHARED(type, var),
//               __syncthreads (+ _count/_and/_or), __threadfence(_block), __syncwarp
//   macros      __HIP__ platform words a device compile sees: __HIPCC__,
//               __HIP_DEVICE_COMPILE__, __HIP_PLATFORM_AMD__ (and the older
//               __HIP_PLATFORM_HCC__), __HIP_CLANG_ONLY__, the __HIP_ARCH_HAS_*__ feature
//               words of an RDNA device
//   waves       warpSize, __lane_id, __shfl __shfl_up __shfl_down __shfl_xor (+ _sync),
//               __ballot __any __all __activemask (+ _sync)
//   types       char..ulonglong, float and double vectors of 1..4 with make_*, __ldg,
//               size_t, ptrdiff_t, int8_t..uint64_t, intptr_t
//   math        the float functions such kernels call (expf exp2f logf log2f sqrtf rsqrtf
//               fabsf fmaxf fminf fmaf floorf ceilf truncf roundf rintf copysignf ldexpf
//               tanhf, __expf __logf __fdividef __saturatef ...), a few double ones,
//               lrintf llrintf lroundf llroundf, min/max, atomicAdd/Sub/Max/Min/Exch/CAS,
//               amd_mixed_dot (integer overloads; the __half2 one is in hip_fp16.h)
//   half        <hip/hip_fp16.h> (__half, __half2)
// Anything else is a compile error naming the function, never a silent substitute.
#ifndef HQVAL_HIPCOMPAT_HIP_RUNTIME_H
#define HQVAL_HIPCOMPAT_HIP_RUNTIME_H

#if defined(__CLANG_HIP_RUNTIME_WRAPPER_H__)
#include_next <hip/hip_runtime.h>
#else

#if !defined(__HIP__) || !defined(__AMDGCN__)
#error "hipcompat: compile as HIP device code for amdgcn (clang -x hip --offload-arch=gfx... --cuda-device-only)"
#endif

#define HQVAL_HIPCOMPAT 1
#ifndef __HIP_PLATFORM_AMD__
#define __HIP_PLATFORM_AMD__ 1
#endif
#ifndef __HIP_PLATFORM_HCC__
#define __HIP_PLATFORM_HCC__ 1
#endif
#ifndef __HIPCC__
#define __HIPCC__ 1
#endif
#ifndef __HIP_CLANG_ONLY__
#define __HIP_CLANG_ONLY__ 1
#endif
// this header is only ever seen by a device-only compile (checked above)
#ifndef __HIP_DEVICE_COMPILE__
#define __HIP_DEVICE_COMPILE__ 1
#endif

// What an RDNA device supports, in the words device code tests with #if.  Every RDNA arch
// of the matrix has 32- and 64-bit global and LDS atomics, float atomic add and exchange,
// doubles, wave votes, ballots and shuffles, system-scope fences and 3-D grids; none has
// CUDA's funnel shift intrinsic, the extended barrier forms, surfaces or device-side
// launches.
#define __HIP_ARCH_HAS_GLOBAL_INT32_ATOMICS__ 1
#define __HIP_ARCH_HAS_GLOBAL_FLOAT_ATOMIC_EXCH__ 1
#define __HIP_ARCH_HAS_SHARED_INT32_ATOMICS__ 1
#define __HIP_ARCH_HAS_SHARED_FLOAT_ATOMIC_EXCH__ 1
#define __HIP_ARCH_HAS_FLOAT_ATOMIC_ADD__ 1
#define __HIP_ARCH_HAS_GLOBAL_INT64_ATOMICS__ 1
#define __HIP_ARCH_HAS_SHARED_INT64_ATOMICS__ 1
#define __HIP_ARCH_HAS_DOUBLES__ 1
#define __HIP_ARCH_HAS_WARP_VOTE__ 1
#define __HIP_ARCH_HAS_WARP_BALLOT__ 1
#define __HIP_ARCH_HAS_WARP_SHUFFLE__ 1
#define __HIP_ARCH_HAS_WARP_FUNNEL_SHIFT__ 0
#define __HIP_ARCH_HAS_THREAD_FENCE_SYSTEM__ 1
#define __HIP_ARCH_HAS_SYNC_THREAD_EXT__ 0
#define __HIP_ARCH_HAS_SURFACE_FUNCS__ 0
#define __HIP_ARCH_HAS_3DGRID__ 1
#define __HIP_ARCH_HAS_DYNAMIC_PARALLEL__ 0

// ------------------------------------------------------------------ keywords
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __host__ __attribute__((host))
#define __shared__ __attribute__((shared))
#define __constant__ __attribute__((constant))
#define __managed__ __attribute__((managed))
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
// a type or variable aligned to N bytes: struct __align__(16) block { ... };
#define __align__(N) __attribute__((aligned(N)))
// a launch's kernel name, wrapped so a template's commas survive a macro argument
#define HIP_KERNEL_NAME(...) __VA_ARGS__
// the block's dynamically sized LDS array: HIP_DYNAMIC_SHARED(float, smem)
#define HIP_DYNAMIC_SHARED(type, var) extern __shared__ type var[];
#define HIP_DYNAMIC_SHARED_ATTRIBUTE

// ROCm's meaning: the first argument is the most threads a block is launched with, the
// optional second the minimum waves per execution unit.
#define HQVAL_HIPCOMPAT_LB1(max_threads) \
    __attribute__((amdgpu_flat_work_group_size(1, max_threads)))
#define HQVAL_HIPCOMPAT_LB2(max_threads, min_waves) \
    __attribute__((amdgpu_flat_work_group_size(1, max_threads), amdgpu_waves_per_eu(min_waves)))
#define HQVAL_HIPCOMPAT_LB_PICK(_1, _2, which, ...) which
#define __launch_bounds__(...) \
    HQVAL_HIPCOMPAT_LB_PICK(__VA_ARGS__, HQVAL_HIPCOMPAT_LB2, HQVAL_HIPCOMPAT_LB1, )(__VA_ARGS__)

#define HQVAL_HIPCOMPAT_FN static __device__ __forceinline__

// The fixed-width and size types HIP programs take from <stdint.h>/<stddef.h>, from the
// compiler's own definitions (no C library is needed for device code).
typedef __SIZE_TYPE__ size_t;
typedef __PTRDIFF_TYPE__ ptrdiff_t;
typedef __INT8_TYPE__ int8_t;
typedef __INT16_TYPE__ int16_t;
typedef __INT32_TYPE__ int32_t;
typedef __INT64_TYPE__ int64_t;
typedef __UINT8_TYPE__ uint8_t;
typedef __UINT16_TYPE__ uint16_t;
typedef __UINT32_TYPE__ uint32_t;
typedef __UINT64_TYPE__ uint64_t;
typedef __INTPTR_TYPE__ intptr_t;
typedef __UINTPTR_TYPE__ uintptr_t;

#if defined(__AMDGCN_WAVEFRONT_SIZE__)
static constexpr int warpSize = __AMDGCN_WAVEFRONT_SIZE__;
#else
// LLVM 21+ no longer defines the wave size macros (Debian's clang-22): the builtin, which
// clang folds to the target's wave size (ROCm 7's headers spell warpSize the same way).
#define HQVAL_HIPCOMPAT_BUILTIN_WAVE 1
#define warpSize (__builtin_amdgcn_wavefrontsize())
#endif

// ------------------------------------------------------------------ vector types
// Power-of-two sizes are clang vectors (CUDA's size and alignment; .x .y .z .w and
// element-wise arithmetic work); three-element types are plain structs of size 3*sizeof(T).
#define HQVAL_HIPCOMPAT_VEC(T, N)                                                        \
    typedef T N##1 __attribute__((ext_vector_type(1)));                                  \
    typedef T N##2 __attribute__((ext_vector_type(2)));                                  \
    typedef T N##4 __attribute__((ext_vector_type(4)));                                  \
    struct N##3 { T x, y, z; };                                                          \
    HQVAL_HIPCOMPAT_FN N##1 make_##N##1(T x) { N##1 r; r.x = x; return r; }              \
    HQVAL_HIPCOMPAT_FN N##2 make_##N##2(T x, T y) { N##2 r; r.x = x; r.y = y; return r; } \
    HQVAL_HIPCOMPAT_FN N##3 make_##N##3(T x, T y, T z) { return N##3{x, y, z}; }          \
    HQVAL_HIPCOMPAT_FN N##4 make_##N##4(T x, T y, T z, T w) {                             \
        N##4 r; r.x = x; r.y = y; r.z = z; r.w = w; return r;                            \
    }
HQVAL_HIPCOMPAT_VEC(signed char, char)
HQVAL_HIPCOMPAT_VEC(unsigned char, uchar)
HQVAL_HIPCOMPAT_VEC(short, short)
HQVAL_HIPCOMPAT_VEC(unsigned short, ushort)
HQVAL_HIPCOMPAT_VEC(int, int)
HQVAL_HIPCOMPAT_VEC(unsigned int, uint)
HQVAL_HIPCOMPAT_VEC(long, long)
HQVAL_HIPCOMPAT_VEC(unsigned long, ulong)
HQVAL_HIPCOMPAT_VEC(long long, longlong)
HQVAL_HIPCOMPAT_VEC(unsigned long long, ulonglong)
HQVAL_HIPCOMPAT_VEC(float, float)
HQVAL_HIPCOMPAT_VEC(double, double)
#undef HQVAL_HIPCOMPAT_VEC

// ------------------------------------------------------------------ integer dot products
// amd_mixed_dot as ROCm's headers declare it (they forward to the device library's
// __ockl_[su]dot{2,4,8}): the dot instruction where the target has one, else the same
// sums in 64-bit arithmetic; `saturate` clamps to the result type's range.
//   gfx10.3: v_dot2_[iu]32_[iu]16, v_dot4_[iu]32_[iu]8, v_dot8_[iu]32_[iu]4
//   gfx11, gfx12: unsigned dot4/dot8, and the signed ones as v_dot{4,8}_i32_iu{8,4}
//   gfx1010: none
#if defined(__gfx1030__) || defined(__gfx1031__) || defined(__gfx1032__) || \
    defined(__gfx1033__) || defined(__gfx1034__) || defined(__gfx1035__) || defined(__gfx1036__)
#define HQVAL_HIPCOMPAT_DOT_GFX103 1
#endif
#if defined(__GFX11__) || defined(__GFX12__)
#define HQVAL_HIPCOMPAT_DOT_IU 1
#endif
HQVAL_HIPCOMPAT_FN int hqval_hipcompat_sat_i32(long long v, bool saturate) {
    return static_cast<int>(!saturate ? v : v > 2147483647LL ? 2147483647LL
                                           : v < -2147483648LL ? -2147483648LL : v);
}
HQVAL_HIPCOMPAT_FN unsigned int hqval_hipcompat_sat_u32(unsigned long long v, bool saturate) {
    return static_cast<unsigned int>(saturate && v > 0xffffffffULL ? 0xffffffffULL : v);
}
HQVAL_HIPCOMPAT_FN int amd_mixed_dot(short2 a, short2 b, int c, bool saturate) {
#if defined(HQVAL_HIPCOMPAT_DOT_GFX103)
    return saturate ? __builtin_amdgcn_sdot2(a, b, c, true) : __builtin_amdgcn_sdot2(a, b, c, false);
#else
    return hqval_hipcompat_sat_i32(static_cast<long long>(a.x) * b.x
                                   + static_cast<long long>(a.y) * b.y + c, saturate);
#endif
}
HQVAL_HIPCOMPAT_FN unsigned int amd_mixed_dot(ushort2 a, ushort2 b, unsigned int c, bool saturate) {
#if defined(HQVAL_HIPCOMPAT_DOT_GFX103)
    return saturate ? __builtin_amdgcn_udot2(a, b, c, true) : __builtin_amdgcn_udot2(a, b, c, false);
#else
    return hqval_hipcompat_sat_u32(static_cast<unsigned long long>(a.x) * b.x
                                   + static_cast<unsigned long long>(a.y) * b.y + c, saturate);
#endif
}
HQVAL_HIPCOMPAT_FN int amd_mixed_dot(char4 a, char4 b, int c, bool saturate) {
    const int pa = __builtin_bit_cast(int, a), pb = __builtin_bit_cast(int, b);
#if defined(HQVAL_HIPCOMPAT_DOT_GFX103)
    return saturate ? __builtin_amdgcn_sdot4(pa, pb, c, true) : __builtin_amdgcn_sdot4(pa, pb, c, false);
#elif defined(HQVAL_HIPCOMPAT_DOT_IU)
    return saturate ? __builtin_amdgcn_sudot4(true, pa, true, pb, c, true)
                    : __builtin_amdgcn_sudot4(true, pa, true, pb, c, false);
#else
    long long v = c;
    for (int i = 0; i < 4; ++i) v += static_cast<long long>(a[i]) * b[i];
    return hqval_hipcompat_sat_i32(v, saturate);
#endif
}
HQVAL_HIPCOMPAT_FN unsigned int amd_mixed_dot(uchar4 a, uchar4 b, unsigned int c, bool saturate) {
    const unsigned int pa = __builtin_bit_cast(unsigned int, a);
    const unsigned int pb = __builtin_bit_cast(unsigned int, b);
#if defined(HQVAL_HIPCOMPAT_DOT_GFX103) || defined(HQVAL_HIPCOMPAT_DOT_IU)
    return saturate ? __builtin_amdgcn_udot4(pa, pb, c, true) : __builtin_amdgcn_udot4(pa, pb, c, false);
#else
    unsigned long long v = c;
    for (int i = 0; i < 4; ++i) v += static_cast<unsigned long long>(a[i]) * b[i];
    return hqval_hipcompat_sat_u32(v, saturate);
#endif
}
// eight 4-bit lanes per dword, element 0 in bits 3:0
HQVAL_HIPCOMPAT_FN int amd_mixed_dot(int a, int b, int c, bool saturate) {
#if defined(HQVAL_HIPCOMPAT_DOT_GFX103)
    return saturate ? __builtin_amdgcn_sdot8(a, b, c, true) : __builtin_amdgcn_sdot8(a, b, c, false);
#elif defined(HQVAL_HIPCOMPAT_DOT_IU)
    return saturate ? __builtin_amdgcn_sudot8(true, a, true, b, c, true)
                    : __builtin_amdgcn_sudot8(true, a, true, b, c, false);
#else
    long long v = c;
    for (int i = 0; i < 8; ++i)
        v += static_cast<long long>((a << (28 - 4 * i)) >> 28) * ((b << (28 - 4 * i)) >> 28);
    return hqval_hipcompat_sat_i32(v, saturate);
#endif
}
HQVAL_HIPCOMPAT_FN unsigned int amd_mixed_dot(unsigned int a, unsigned int b, unsigned int c,
                                              bool saturate) {
#if defined(HQVAL_HIPCOMPAT_DOT_GFX103) || defined(HQVAL_HIPCOMPAT_DOT_IU)
    return saturate ? __builtin_amdgcn_udot8(a, b, c, true) : __builtin_amdgcn_udot8(a, b, c, false);
#else
    unsigned long long v = c;
    for (int i = 0; i < 8; ++i) v += static_cast<unsigned long long>((a >> (4 * i)) & 15u) * ((b >> (4 * i)) & 15u);
    return hqval_hipcompat_sat_u32(v, saturate);
#endif
}

struct dim3 {
    unsigned int x, y, z;
    constexpr __device__ dim3(unsigned int x_ = 1, unsigned int y_ = 1, unsigned int z_ = 1)
        : x(x_), y(y_), z(z_) {}
};

// ------------------------------------------------------------------ launch coordinates
// threadIdx.x etc. read the hardware registers on each use (as ROCm's properties do).
#define HQVAL_HIPCOMPAT_COORD(TYPE, GX, GY, GZ)                                          \
    struct TYPE {                                                                        \
        __declspec(property(get = get_x)) unsigned int x;                                \
        __declspec(property(get = get_y)) unsigned int y;                                \
        __declspec(property(get = get_z)) unsigned int z;                                \
        static __device__ __forceinline__ unsigned int get_x() { return GX; }            \
        static __device__ __forceinline__ unsigned int get_y() { return GY; }            \
        static __device__ __forceinline__ unsigned int get_z() { return GZ; }            \
        __device__ operator dim3() const { return dim3(get_x(), get_y(), get_z()); }      \
    };
HQVAL_HIPCOMPAT_COORD(hqval_hipcompat_thread_idx, __builtin_amdgcn_workitem_id_x(),
                      __builtin_amdgcn_workitem_id_y(), __builtin_amdgcn_workitem_id_z())
HQVAL_HIPCOMPAT_COORD(hqval_hipcompat_block_idx, __builtin_amdgcn_workgroup_id_x(),
                      __builtin_amdgcn_workgroup_id_y(), __builtin_amdgcn_workgroup_id_z())
HQVAL_HIPCOMPAT_COORD(hqval_hipcompat_block_dim, __builtin_amdgcn_workgroup_size_x(),
                      __builtin_amdgcn_workgroup_size_y(), __builtin_amdgcn_workgroup_size_z())
// HIP launches whole blocks, so the grid's work-item count divides by the block size.
HQVAL_HIPCOMPAT_COORD(hqval_hipcompat_grid_dim,
                      __builtin_amdgcn_grid_size_x() / __builtin_amdgcn_workgroup_size_x(),
                      __builtin_amdgcn_grid_size_y() / __builtin_amdgcn_workgroup_size_y(),
                      __builtin_amdgcn_grid_size_z() / __builtin_amdgcn_workgroup_size_z())
#undef HQVAL_HIPCOMPAT_COORD
extern const __device__ __attribute__((weak)) hqval_hipcompat_thread_idx threadIdx;
extern const __device__ __attribute__((weak)) hqval_hipcompat_block_idx blockIdx;
extern const __device__ __attribute__((weak)) hqval_hipcompat_block_dim blockDim;
extern const __device__ __attribute__((weak)) hqval_hipcompat_grid_dim gridDim;

// ------------------------------------------------------------------ barriers and fences
HQVAL_HIPCOMPAT_FN __attribute__((convergent)) void __syncthreads() {
    __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
    __builtin_amdgcn_s_barrier();
    __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}
HQVAL_HIPCOMPAT_FN void __threadfence_block() { __builtin_amdgcn_fence(__ATOMIC_SEQ_CST, "workgroup"); }
HQVAL_HIPCOMPAT_FN void __threadfence() { __builtin_amdgcn_fence(__ATOMIC_SEQ_CST, "agent"); }
HQVAL_HIPCOMPAT_FN void __threadfence_system() { __builtin_amdgcn_fence(__ATOMIC_SEQ_CST, ""); }
HQVAL_HIPCOMPAT_FN __attribute__((convergent)) void __syncwarp(unsigned long long = 0) {
    __builtin_amdgcn_fence(__ATOMIC_RELEASE, "wavefront");
    __builtin_amdgcn_wave_barrier();
    __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "wavefront");
}

// ------------------------------------------------------------------ wave operations
HQVAL_HIPCOMPAT_FN unsigned int __lane_id() {
#if defined(HQVAL_HIPCOMPAT_BUILTIN_WAVE)
    return __builtin_amdgcn_wavefrontsize() == 64
               ? __builtin_amdgcn_mbcnt_hi(~0u, __builtin_amdgcn_mbcnt_lo(~0u, 0u))
               : __builtin_amdgcn_mbcnt_lo(~0u, 0u);
#elif __AMDGCN_WAVEFRONT_SIZE__ == 64
    return __builtin_amdgcn_mbcnt_hi(~0u, __builtin_amdgcn_mbcnt_lo(~0u, 0u));
#else
    return __builtin_amdgcn_mbcnt_lo(~0u, 0u);
#endif
}

// One 32-bit bpermute: every lane reads ``var`` of lane ``src`` (a lane of this wave).
HQVAL_HIPCOMPAT_FN int hqval_hipcompat_bperm(int src, int var) {
    return __builtin_amdgcn_ds_bpermute(src << 2, var);
}
// Source lanes, HIP's rules: width is a power of two <= warpSize splitting the wave into
// segments; a lane whose source falls outside its segment reads its own value.
HQVAL_HIPCOMPAT_FN int hqval_hipcompat_src_idx(int src_lane, int width) {
    const int self = static_cast<int>(__lane_id());
    return (src_lane & (width - 1)) + (self & ~(width - 1));
}
HQVAL_HIPCOMPAT_FN int hqval_hipcompat_src_up(unsigned int delta, int width) {
    const int self = static_cast<int>(__lane_id());
    const int src = self - static_cast<int>(delta);
    return src < (self & ~(width - 1)) ? self : src;
}
HQVAL_HIPCOMPAT_FN int hqval_hipcompat_src_down(unsigned int delta, int width) {
    const int self = static_cast<int>(__lane_id());
    return static_cast<int>((self & (width - 1)) + delta) >= width ? self
                                                                 : self + static_cast<int>(delta);
}
HQVAL_HIPCOMPAT_FN int hqval_hipcompat_src_xor(int mask, int width) {
    const int self = static_cast<int>(__lane_id());
    const int src = self ^ mask;
    return src >= ((self + width) & ~(width - 1)) ? self : src;
}

// 32-bit values move as one dword, 64-bit ones as two.
template <typename T>
HQVAL_HIPCOMPAT_FN T hqval_hipcompat_move(T var, int src) {
    static_assert(sizeof(T) == 4 || sizeof(T) == 8, "hipcompat: shuffles move 4- or 8-byte values");
    if constexpr (sizeof(T) == 4) {
        return __builtin_bit_cast(T, hqval_hipcompat_bperm(src, __builtin_bit_cast(int, var)));
    } else {
        int2 w = __builtin_bit_cast(int2, var);
        w.x = hqval_hipcompat_bperm(src, w.x);
        w.y = hqval_hipcompat_bperm(src, w.y);
        return __builtin_bit_cast(T, w);
    }
}

#define HQVAL_HIPCOMPAT_SHFL(T)                                                            \
    HQVAL_HIPCOMPAT_FN T __shfl(T var, int src_lane, int width = warpSize) {               \
        return hqval_hipcompat_move(var, hqval_hipcompat_src_idx(src_lane, width));        \
    }                                                                                      \
    HQVAL_HIPCOMPAT_FN T __shfl_up(T var, unsigned int delta, int width = warpSize) {      \
        return hqval_hipcompat_move(var, hqval_hipcompat_src_up(delta, width));            \
    }                                                                                      \
    HQVAL_HIPCOMPAT_FN T __shfl_down(T var, unsigned int delta, int width = warpSize) {    \
        return hqval_hipcompat_move(var, hqval_hipcompat_src_down(delta, width));          \
    }                                                                                      \
    HQVAL_HIPCOMPAT_FN T __shfl_xor(T var, int mask, int width = warpSize) {               \
        return hqval_hipcompat_move(var, hqval_hipcompat_src_xor(mask, width));            \
    }                                                                                      \
    HQVAL_HIPCOMPAT_FN T __shfl_sync(unsigned long long, T var, int src_lane,              \
                                     int width = warpSize) {                               \
        return __shfl(var, src_lane, width);                                               \
    }                                                                                      \
    HQVAL_HIPCOMPAT_FN T __shfl_up_sync(unsigned long long, T var, unsigned int delta,     \
                                        int width = warpSize) {                            \
        return __shfl_up(var, delta, width);                                               \
    }                                                                                      \
    HQVAL_HIPCOMPAT_FN T __shfl_down_sync(unsigned long long, T var, unsigned int delta,   \
                                          int width = warpSize) {                          \
        return __shfl_down(var, delta, width);                                             \
    }                                                                                      \
    HQVAL_HIPCOMPAT_FN T __shfl_xor_sync(unsigned long long, T var, int mask,              \
                                         int width = warpSize) {                           \
        return __shfl_xor(var, mask, width);                                               \
    }
HQVAL_HIPCOMPAT_SHFL(int)
HQVAL_HIPCOMPAT_SHFL(unsigned int)
HQVAL_HIPCOMPAT_SHFL(float)
HQVAL_HIPCOMPAT_SHFL(long)
HQVAL_HIPCOMPAT_SHFL(unsigned long)
HQVAL_HIPCOMPAT_SHFL(long long)
HQVAL_HIPCOMPAT_SHFL(unsigned long long)
HQVAL_HIPCOMPAT_SHFL(double)
#undef HQVAL_HIPCOMPAT_SHFL

// Votes: a 64-bit mask (the upper half is zero on wave32), as HIP returns.
HQVAL_HIPCOMPAT_FN unsigned long long __ballot(int predicate) {
#if defined(HQVAL_HIPCOMPAT_BUILTIN_WAVE)
    return __builtin_amdgcn_wavefrontsize() == 64 ? __builtin_amdgcn_ballot_w64(predicate != 0)
                                                  : __builtin_amdgcn_ballot_w32(predicate != 0);
#elif __AMDGCN_WAVEFRONT_SIZE__ == 64
    return __builtin_amdgcn_ballot_w64(predicate != 0);
#else
    return __builtin_amdgcn_ballot_w32(predicate != 0);
#endif
}
HQVAL_HIPCOMPAT_FN unsigned long long __activemask() { return __ballot(1); }
HQVAL_HIPCOMPAT_FN int __any(int predicate) { return __ballot(predicate) != 0; }
HQVAL_HIPCOMPAT_FN int __all(int predicate) { return __ballot(predicate) == __ballot(1); }
HQVAL_HIPCOMPAT_FN unsigned long long __ballot_sync(unsigned long long mask, int predicate) {
    return __ballot(predicate) & mask;
}
HQVAL_HIPCOMPAT_FN int __any_sync(unsigned long long mask, int predicate) {
    return (__ballot(predicate) & mask) != 0;
}
HQVAL_HIPCOMPAT_FN int __all_sync(unsigned long long mask, int predicate) {
    return (__ballot(predicate) & mask) == (__ballot(1) & mask);
}
HQVAL_HIPCOMPAT_FN __attribute__((convergent)) int __syncthreads_count(int predicate) {
    __shared__ int hqval_hipcompat_count;
    if (threadIdx.x + threadIdx.y + threadIdx.z == 0) hqval_hipcompat_count = 0;
    __syncthreads();
    __hip_atomic_fetch_add(&hqval_hipcompat_count, predicate != 0, __ATOMIC_RELAXED,
                           __HIP_MEMORY_SCOPE_WORKGROUP);
    __syncthreads();
    const int n = hqval_hipcompat_count;
    __syncthreads();
    return n;
}
HQVAL_HIPCOMPAT_FN int __syncthreads_and(int predicate) {
    const int n = __syncthreads_count(predicate);
    return n == __syncthreads_count(1);
}
HQVAL_HIPCOMPAT_FN int __syncthreads_or(int predicate) { return __syncthreads_count(predicate) != 0; }

// ------------------------------------------------------------------ loads
template <typename T>
HQVAL_HIPCOMPAT_FN T __ldg(const T* p) { return *p; }

// ------------------------------------------------------------------ integer helpers
HQVAL_HIPCOMPAT_FN int min(int a, int b) { return a < b ? a : b; }
HQVAL_HIPCOMPAT_FN int max(int a, int b) { return a > b ? a : b; }
HQVAL_HIPCOMPAT_FN unsigned int min(unsigned int a, unsigned int b) { return a < b ? a : b; }
HQVAL_HIPCOMPAT_FN unsigned int max(unsigned int a, unsigned int b) { return a > b ? a : b; }
HQVAL_HIPCOMPAT_FN long long min(long long a, long long b) { return a < b ? a : b; }
HQVAL_HIPCOMPAT_FN long long max(long long a, long long b) { return a > b ? a : b; }
HQVAL_HIPCOMPAT_FN float min(float a, float b) { return __builtin_fminf(a, b); }
HQVAL_HIPCOMPAT_FN float max(float a, float b) { return __builtin_fmaxf(a, b); }
HQVAL_HIPCOMPAT_FN int abs(int a) { return a < 0 ? -a : a; }
HQVAL_HIPCOMPAT_FN int __popc(unsigned int x) { return __builtin_popcount(x); }
HQVAL_HIPCOMPAT_FN int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
HQVAL_HIPCOMPAT_FN int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned int>(x)); }
HQVAL_HIPCOMPAT_FN int __ffs(int x) { return x == 0 ? 0 : __builtin_ctz(static_cast<unsigned int>(x)) + 1; }
HQVAL_HIPCOMPAT_FN unsigned int __umulhi(unsigned int a, unsigned int b) {
    return static_cast<unsigned int>((static_cast<unsigned long long>(a) * b) >> 32);
}

// ------------------------------------------------------------------ float math
// Each is an LLVM operation the AMDGPU backend lowers in line (no device library).
HQVAL_HIPCOMPAT_FN float fabsf(float x) { return __builtin_fabsf(x); }
HQVAL_HIPCOMPAT_FN float fmaxf(float a, float b) { return __builtin_fmaxf(a, b); }
HQVAL_HIPCOMPAT_FN float fminf(float a, float b) { return __builtin_fminf(a, b); }
HQVAL_HIPCOMPAT_FN float fmaf(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
HQVAL_HIPCOMPAT_FN float floorf(float x) { return __builtin_floorf(x); }
HQVAL_HIPCOMPAT_FN float ceilf(float x) { return __builtin_ceilf(x); }
HQVAL_HIPCOMPAT_FN float truncf(float x) { return __builtin_truncf(x); }
HQVAL_HIPCOMPAT_FN float roundf(float x) { return __builtin_roundf(x); }
HQVAL_HIPCOMPAT_FN float rintf(float x) { return __builtin_rintf(x); }
HQVAL_HIPCOMPAT_FN float nearbyintf(float x) { return __builtin_nearbyintf(x); }
HQVAL_HIPCOMPAT_FN float copysignf(float a, float b) { return __builtin_copysignf(a, b); }
HQVAL_HIPCOMPAT_FN float ldexpf(float x, int e) { return __builtin_ldexpf(x, e); }
HQVAL_HIPCOMPAT_FN float sqrtf(float x) { return __builtin_sqrtf(x); }
HQVAL_HIPCOMPAT_FN float expf(float x) { return __builtin_expf(x); }
HQVAL_HIPCOMPAT_FN float exp2f(float x) { return __builtin_exp2f(x); }
HQVAL_HIPCOMPAT_FN float exp10f(float x) { return __builtin_exp10f(x); }
HQVAL_HIPCOMPAT_FN float logf(float x) { return __builtin_logf(x); }
HQVAL_HIPCOMPAT_FN float log2f(float x) { return __builtin_log2f(x); }
HQVAL_HIPCOMPAT_FN float log10f(float x) { return __builtin_log10f(x); }
// Hardware reciprocal square root (1 ulp), as ROCm's device library uses.
HQVAL_HIPCOMPAT_FN float rsqrtf(float x) { return __builtin_amdgcn_rsqf(x); }
// tanh from exp: the series below 0.55 (where 1 - 2/(e^2x + 1) would cancel), the
// identity above; saturates to +-1 past 9 (tanh(9) rounds to 1 in f32).
HQVAL_HIPCOMPAT_FN float tanhf(float x) {
    const float a = __builtin_fabsf(x);
    float r;
    if (a < 0.55f) {
        const float s = a * a;
        r = a * (1.0f + s * (-0.333333333f + s * (0.133333333f + s * (-0.0539682540f
              + s * (0.0218694885f + s * (-0.00886323552f + s * 0.00359212803f))))));
    } else if (a < 9.0f) {
        r = 1.0f - 2.0f / (__builtin_expf(2.0f * a) + 1.0f);
    } else {
        r = 1.0f;
    }
    return __builtin_copysignf(r, x);
}
HQVAL_HIPCOMPAT_FN float __expf(float x) { return __builtin_amdgcn_exp2f(x * 1.44269504088896341f); }
HQVAL_HIPCOMPAT_FN float __exp2f(float x) { return __builtin_amdgcn_exp2f(x); }
HQVAL_HIPCOMPAT_FN float __logf(float x) { return __builtin_amdgcn_logf(x) * 0.693147180559945309f; }
HQVAL_HIPCOMPAT_FN float __log2f(float x) { return __builtin_amdgcn_logf(x); }
HQVAL_HIPCOMPAT_FN float __fdividef(float a, float b) { return a * __builtin_amdgcn_rcpf(b); }
HQVAL_HIPCOMPAT_FN float __frcp_rn(float x) { return 1.0f / x; }
HQVAL_HIPCOMPAT_FN float __fsqrt_rn(float x) { return __builtin_sqrtf(x); }
HQVAL_HIPCOMPAT_FN float __frsqrt_rn(float x) { return __builtin_amdgcn_rsqf(x); }
HQVAL_HIPCOMPAT_FN float __fadd_rn(float a, float b) { return a + b; }
HQVAL_HIPCOMPAT_FN float __fsub_rn(float a, float b) { return a - b; }
HQVAL_HIPCOMPAT_FN float __fmul_rn(float a, float b) { return a * b; }
HQVAL_HIPCOMPAT_FN float __fdiv_rn(float a, float b) { return a / b; }
HQVAL_HIPCOMPAT_FN float __fmaf_rn(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
HQVAL_HIPCOMPAT_FN float __saturatef(float x) { return __builtin_fminf(__builtin_fmaxf(x, 0.0f), 1.0f); }
HQVAL_HIPCOMPAT_FN float __int_as_float(int x) { return __builtin_bit_cast(float, x); }
HQVAL_HIPCOMPAT_FN float __uint_as_float(unsigned int x) { return __builtin_bit_cast(float, x); }
HQVAL_HIPCOMPAT_FN int __float_as_int(float x) { return __builtin_bit_cast(int, x); }
HQVAL_HIPCOMPAT_FN unsigned int __float_as_uint(float x) { return __builtin_bit_cast(unsigned int, x); }
// Round, then convert, as ROCm's headers do (AMDGPU has no lrint libcall).
HQVAL_HIPCOMPAT_FN long lrintf(float x) { return static_cast<long>(__builtin_rintf(x)); }
HQVAL_HIPCOMPAT_FN long long llrintf(float x) { return static_cast<long long>(__builtin_rintf(x)); }
HQVAL_HIPCOMPAT_FN long lroundf(float x) { return static_cast<long>(__builtin_roundf(x)); }
HQVAL_HIPCOMPAT_FN long long llroundf(float x) { return static_cast<long long>(__builtin_roundf(x)); }
HQVAL_HIPCOMPAT_FN int __float2int_rn(float x) { return static_cast<int>(__builtin_rintf(x)); }
HQVAL_HIPCOMPAT_FN int __float2int_rz(float x) { return static_cast<int>(x); }
HQVAL_HIPCOMPAT_FN bool isnan(float x) { return __builtin_isnan(x); }
HQVAL_HIPCOMPAT_FN bool isinf(float x) { return __builtin_isinf(x); }
HQVAL_HIPCOMPAT_FN bool isfinite(float x) { return __builtin_isfinite(x); }

HQVAL_HIPCOMPAT_FN double fabs(double x) { return __builtin_fabs(x); }
HQVAL_HIPCOMPAT_FN double fmax(double a, double b) { return __builtin_fmax(a, b); }
HQVAL_HIPCOMPAT_FN double fmin(double a, double b) { return __builtin_fmin(a, b); }
HQVAL_HIPCOMPAT_FN double fma(double a, double b, double c) { return __builtin_fma(a, b, c); }
HQVAL_HIPCOMPAT_FN double sqrt(double x) { return __builtin_sqrt(x); }
HQVAL_HIPCOMPAT_FN double floor(double x) { return __builtin_floor(x); }
HQVAL_HIPCOMPAT_FN double ceil(double x) { return __builtin_ceil(x); }
HQVAL_HIPCOMPAT_FN double trunc(double x) { return __builtin_trunc(x); }
HQVAL_HIPCOMPAT_FN bool isnan(double x) { return __builtin_isnan(x); }
HQVAL_HIPCOMPAT_FN bool isinf(double x) { return __builtin_isinf(x); }

// ------------------------------------------------------------------ atomics (device scope)
#define HQVAL_HIPCOMPAT_ATOMIC(NAME, OP, T)                                                 \
    HQVAL_HIPCOMPAT_FN T NAME(T* address, T val) {                                         \
        return __hip_atomic_##OP(address, val, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT); \
    }
HQVAL_HIPCOMPAT_ATOMIC(atomicAdd, fetch_add, int)
HQVAL_HIPCOMPAT_ATOMIC(atomicAdd, fetch_add, unsigned int)
HQVAL_HIPCOMPAT_ATOMIC(atomicAdd, fetch_add, unsigned long long)
HQVAL_HIPCOMPAT_ATOMIC(atomicAdd, fetch_add, float)
HQVAL_HIPCOMPAT_ATOMIC(atomicAdd, fetch_add, double)
HQVAL_HIPCOMPAT_ATOMIC(atomicSub, fetch_sub, int)
HQVAL_HIPCOMPAT_ATOMIC(atomicSub, fetch_sub, unsigned int)
HQVAL_HIPCOMPAT_ATOMIC(atomicMax, fetch_max, int)
HQVAL_HIPCOMPAT_ATOMIC(atomicMax, fetch_max, unsigned int)
HQVAL_HIPCOMPAT_ATOMIC(atomicMin, fetch_min, int)
HQVAL_HIPCOMPAT_ATOMIC(atomicMin, fetch_min, unsigned int)
HQVAL_HIPCOMPAT_ATOMIC(atomicExch, exchange, int)
HQVAL_HIPCOMPAT_ATOMIC(atomicExch, exchange, unsigned int)
HQVAL_HIPCOMPAT_ATOMIC(atomicExch, exchange, float)
HQVAL_HIPCOMPAT_ATOMIC(atomicAnd, fetch_and, unsigned int)
HQVAL_HIPCOMPAT_ATOMIC(atomicOr, fetch_or, unsigned int)
HQVAL_HIPCOMPAT_ATOMIC(atomicXor, fetch_xor, unsigned int)
#undef HQVAL_HIPCOMPAT_ATOMIC
template <typename T>
HQVAL_HIPCOMPAT_FN T atomicCAS(T* address, T compare, T val) {
    __hip_atomic_compare_exchange_strong(address, &compare, val, __ATOMIC_RELAXED,
                                         __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
    return compare;
}

#include <hip/hip_fp16.h>

#endif  // !__CLANG_HIP_RUNTIME_WRAPPER_H__
#endif  // HQVAL_HIPCOMPAT_HIP_RUNTIME_H
