// hqval HIP compatibility header: __half and __half2 for device code, without ROCm.
// See hip_runtime.h in this directory for when hqval uses these headers.
//
// __half holds one _Float16 and converts to and from float implicitly, as HIP's does;
// arithmetic and comparisons are f16 operations (one rounding each).  __half2 holds two.
// Conversions: __float2half(_rn/_rz/_rd/_ru), __half2float, __ushort_as_half,
// __half_as_ushort, __short_as_half, __half_as_short, __int2half_rn, __half2int_rz,
// __floats2half2_rn, __float2half2_rn, __halves2half2, __low2half, __high2half,
// __low2float, __high2float, __half22float2, __float22half2_rn.
// Arithmetic: __hadd __hsub __hmul __hdiv __hfma __hneg __habs __hmax __hmin and their
// ...2 forms; comparisons __heq __hne __hlt __hle __hgt __hge, __hisnan __hisinf.
#ifndef HQVAL_HIPCOMPAT_HIP_FP16_H
#define HQVAL_HIPCOMPAT_HIP_FP16_H

#if defined(__CLANG_HIP_RUNTIME_WRAPPER_H__)
#include_next <hip/hip_fp16.h>
#else
#include <hip/hip_runtime.h>

#define HQVAL_HIPCOMPAT_HFN static __device__ __forceinline__

struct __half_raw { unsigned short x; };
struct __half2_raw { unsigned short x, y; };

struct __half {
    _Float16 data;
    __half() = default;
    __device__ constexpr __half(_Float16 v) : data(v) {}
    __device__ __half(float v) : data(static_cast<_Float16>(v)) {}
    __device__ __half(double v) : data(static_cast<_Float16>(v)) {}
    __device__ __half(int v) : data(static_cast<_Float16>(v)) {}
    __device__ __half(unsigned int v) : data(static_cast<_Float16>(v)) {}
    __device__ __half(__half_raw r) : data(__builtin_bit_cast(_Float16, r.x)) {}
    __device__ operator float() const { return static_cast<float>(data); }
    __device__ operator __half_raw() const { return __half_raw{__builtin_bit_cast(unsigned short, data)}; }
    __device__ __half& operator+=(__half o) { data += o.data; return *this; }
    __device__ __half& operator-=(__half o) { data -= o.data; return *this; }
    __device__ __half& operator*=(__half o) { data *= o.data; return *this; }
    __device__ __half& operator/=(__half o) { data /= o.data; return *this; }
};
static_assert(sizeof(__half) == 2, "hipcompat: __half is 2 bytes");

typedef _Float16 hqval_hipcompat_h2v __attribute__((ext_vector_type(2)));

struct __half2 {
    __half x, y;
    __half2() = default;
    __device__ constexpr __half2(__half a, __half b) : x(a), y(b) {}
    __device__ __half2(__half2_raw r) : x(__half_raw{r.x}), y(__half_raw{r.y}) {}
    __device__ operator __half2_raw() const {
        return __half2_raw{__builtin_bit_cast(unsigned short, x.data),
                           __builtin_bit_cast(unsigned short, y.data)};
    }
};
static_assert(sizeof(__half2) == 4, "hipcompat: __half2 is 4 bytes");
typedef __half half;
typedef __half2 half2;

HQVAL_HIPCOMPAT_HFN hqval_hipcompat_h2v hqval_hipcompat_v(__half2 a) {
    hqval_hipcompat_h2v v; v.x = a.x.data; v.y = a.y.data; return v;
}
HQVAL_HIPCOMPAT_HFN __half2 hqval_hipcompat_h2(hqval_hipcompat_h2v v) { return __half2(__half(v.x), __half(v.y)); }

// ------------------------------------------------------------------ conversions
HQVAL_HIPCOMPAT_HFN float __half2float(__half h) { return static_cast<float>(h.data); }
HQVAL_HIPCOMPAT_HFN __half __float2half(float f) { return __half(static_cast<_Float16>(f)); }
HQVAL_HIPCOMPAT_HFN __half __float2half_rn(float f) { return __half(static_cast<_Float16>(f)); }
HQVAL_HIPCOMPAT_HFN __half __float2half_rz(float f) {
    return __half(__builtin_amdgcn_cvt_pkrtz(f, 0.0f)[0]);
}
HQVAL_HIPCOMPAT_HFN __half __ushort_as_half(unsigned short u) { return __half(__builtin_bit_cast(_Float16, u)); }
HQVAL_HIPCOMPAT_HFN unsigned short __half_as_ushort(__half h) { return __builtin_bit_cast(unsigned short, h.data); }
HQVAL_HIPCOMPAT_HFN __half __short_as_half(short s) { return __half(__builtin_bit_cast(_Float16, s)); }
HQVAL_HIPCOMPAT_HFN short __half_as_short(__half h) { return __builtin_bit_cast(short, h.data); }
HQVAL_HIPCOMPAT_HFN __half __int2half_rn(int i) { return __half(static_cast<_Float16>(i)); }
HQVAL_HIPCOMPAT_HFN __half __uint2half_rn(unsigned int i) { return __half(static_cast<_Float16>(i)); }
HQVAL_HIPCOMPAT_HFN int __half2int_rz(__half h) { return static_cast<int>(h.data); }
HQVAL_HIPCOMPAT_HFN int __half2int_rn(__half h) { return static_cast<int>(__builtin_rintf(static_cast<float>(h.data))); }
HQVAL_HIPCOMPAT_HFN __half2 __halves2half2(__half a, __half b) { return __half2(a, b); }
HQVAL_HIPCOMPAT_HFN __half2 __half2half2(__half a) { return __half2(a, a); }
HQVAL_HIPCOMPAT_HFN __half2 make_half2(__half x, __half y) { return __half2(x, y); }
HQVAL_HIPCOMPAT_HFN __half2 __floats2half2_rn(float a, float b) { return __half2(__float2half(a), __float2half(b)); }
HQVAL_HIPCOMPAT_HFN __half2 __float2half2_rn(float a) { return __half2(__float2half(a), __float2half(a)); }
HQVAL_HIPCOMPAT_HFN __half __low2half(__half2 a) { return a.x; }
HQVAL_HIPCOMPAT_HFN __half __high2half(__half2 a) { return a.y; }
HQVAL_HIPCOMPAT_HFN float __low2float(__half2 a) { return __half2float(a.x); }
HQVAL_HIPCOMPAT_HFN float __high2float(__half2 a) { return __half2float(a.y); }
HQVAL_HIPCOMPAT_HFN float2 __half22float2(__half2 a) { return make_float2(__half2float(a.x), __half2float(a.y)); }
HQVAL_HIPCOMPAT_HFN __half2 __float22half2_rn(float2 a) { return __floats2half2_rn(a.x, a.y); }
HQVAL_HIPCOMPAT_HFN __half2 __lows2half2(__half2 a, __half2 b) { return __half2(a.x, b.x); }
HQVAL_HIPCOMPAT_HFN __half2 __highs2half2(__half2 a, __half2 b) { return __half2(a.y, b.y); }

// ------------------------------------------------------------------ arithmetic
HQVAL_HIPCOMPAT_HFN __half __hadd(__half a, __half b) { return __half(static_cast<_Float16>(a.data + b.data)); }
HQVAL_HIPCOMPAT_HFN __half __hsub(__half a, __half b) { return __half(static_cast<_Float16>(a.data - b.data)); }
HQVAL_HIPCOMPAT_HFN __half __hmul(__half a, __half b) { return __half(static_cast<_Float16>(a.data * b.data)); }
HQVAL_HIPCOMPAT_HFN __half __hdiv(__half a, __half b) { return __half(static_cast<_Float16>(a.data / b.data)); }
HQVAL_HIPCOMPAT_HFN __half __hfma(__half a, __half b, __half c) {
    return __half(__builtin_fmaf16(a.data, b.data, c.data));
}
HQVAL_HIPCOMPAT_HFN __half __hneg(__half a) { return __half(static_cast<_Float16>(-a.data)); }
HQVAL_HIPCOMPAT_HFN __half __habs(__half a) { return __half(__builtin_fabsf16(a.data)); }
HQVAL_HIPCOMPAT_HFN __half __hmax(__half a, __half b) { return __half(__builtin_fmaxf16(a.data, b.data)); }
HQVAL_HIPCOMPAT_HFN __half __hmin(__half a, __half b) { return __half(__builtin_fminf16(a.data, b.data)); }
HQVAL_HIPCOMPAT_HFN __half2 __hadd2(__half2 a, __half2 b) { return hqval_hipcompat_h2(hqval_hipcompat_v(a) + hqval_hipcompat_v(b)); }
HQVAL_HIPCOMPAT_HFN __half2 __hsub2(__half2 a, __half2 b) { return hqval_hipcompat_h2(hqval_hipcompat_v(a) - hqval_hipcompat_v(b)); }
HQVAL_HIPCOMPAT_HFN __half2 __hmul2(__half2 a, __half2 b) { return hqval_hipcompat_h2(hqval_hipcompat_v(a) * hqval_hipcompat_v(b)); }
HQVAL_HIPCOMPAT_HFN __half2 __h2div(__half2 a, __half2 b) { return hqval_hipcompat_h2(hqval_hipcompat_v(a) / hqval_hipcompat_v(b)); }
HQVAL_HIPCOMPAT_HFN __half2 __hfma2(__half2 a, __half2 b, __half2 c) {
    return __half2(__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y));
}
HQVAL_HIPCOMPAT_HFN __half2 __hneg2(__half2 a) { return __half2(__hneg(a.x), __hneg(a.y)); }
HQVAL_HIPCOMPAT_HFN __half2 __habs2(__half2 a) { return __half2(__habs(a.x), __habs(a.y)); }
HQVAL_HIPCOMPAT_HFN __half2 __hmax2(__half2 a, __half2 b) { return __half2(__hmax(a.x, b.x), __hmax(a.y, b.y)); }
HQVAL_HIPCOMPAT_HFN __half2 __hmin2(__half2 a, __half2 b) { return __half2(__hmin(a.x, b.x), __hmin(a.y, b.y)); }

HQVAL_HIPCOMPAT_HFN __half operator+(__half a, __half b) { return __hadd(a, b); }
HQVAL_HIPCOMPAT_HFN __half operator-(__half a, __half b) { return __hsub(a, b); }
HQVAL_HIPCOMPAT_HFN __half operator*(__half a, __half b) { return __hmul(a, b); }
HQVAL_HIPCOMPAT_HFN __half operator/(__half a, __half b) { return __hdiv(a, b); }
HQVAL_HIPCOMPAT_HFN __half operator-(__half a) { return __hneg(a); }
HQVAL_HIPCOMPAT_HFN __half2 operator+(__half2 a, __half2 b) { return __hadd2(a, b); }
HQVAL_HIPCOMPAT_HFN __half2 operator-(__half2 a, __half2 b) { return __hsub2(a, b); }
HQVAL_HIPCOMPAT_HFN __half2 operator*(__half2 a, __half2 b) { return __hmul2(a, b); }
HQVAL_HIPCOMPAT_HFN __half2 operator/(__half2 a, __half2 b) { return __h2div(a, b); }

// ------------------------------------------------------------------ comparisons
HQVAL_HIPCOMPAT_HFN bool __heq(__half a, __half b) { return a.data == b.data; }
HQVAL_HIPCOMPAT_HFN bool __hne(__half a, __half b) { return a.data != b.data; }
HQVAL_HIPCOMPAT_HFN bool __hlt(__half a, __half b) { return a.data < b.data; }
HQVAL_HIPCOMPAT_HFN bool __hle(__half a, __half b) { return a.data <= b.data; }
HQVAL_HIPCOMPAT_HFN bool __hgt(__half a, __half b) { return a.data > b.data; }
HQVAL_HIPCOMPAT_HFN bool __hge(__half a, __half b) { return a.data >= b.data; }
HQVAL_HIPCOMPAT_HFN bool __hisnan(__half a) { return __builtin_isnan(a.data); }
HQVAL_HIPCOMPAT_HFN bool __hisinf(__half a) { return __builtin_isinf(a.data); }
HQVAL_HIPCOMPAT_HFN bool operator==(__half a, __half b) { return __heq(a, b); }
HQVAL_HIPCOMPAT_HFN bool operator!=(__half a, __half b) { return __hne(a, b); }
HQVAL_HIPCOMPAT_HFN bool operator<(__half a, __half b) { return __hlt(a, b); }
HQVAL_HIPCOMPAT_HFN bool operator<=(__half a, __half b) { return __hle(a, b); }
HQVAL_HIPCOMPAT_HFN bool operator>(__half a, __half b) { return __hgt(a, b); }
HQVAL_HIPCOMPAT_HFN bool operator>=(__half a, __half b) { return __hge(a, b); }

// amd_mixed_dot(__half2, __half2, float, saturate): a.x*b.x + a.y*b.y + c in f32, as
// ROCm's device library's __ockl_fdot2: v_dot2_f32_f16 where the target has it (all but
// gfx1010), else two fused multiply-adds, x then y.
HQVAL_HIPCOMPAT_HFN float amd_mixed_dot(__half2 a, __half2 b, float c, bool saturate) {
#if defined(__gfx1010__)
    const float r = __builtin_fmaf(static_cast<float>(a.y.data), static_cast<float>(b.y.data),
                                   __builtin_fmaf(static_cast<float>(a.x.data),
                                                  static_cast<float>(b.x.data), c));
    return saturate ? __builtin_fminf(__builtin_fmaxf(r, 0.0f), 1.0f) : r;
#else
    return saturate ? __builtin_amdgcn_fdot2(hqval_hipcompat_v(a), hqval_hipcompat_v(b), c, true)
                    : __builtin_amdgcn_fdot2(hqval_hipcompat_v(a), hqval_hipcompat_v(b), c, false);
#endif
}

// Wave shuffles of halves move the 16 bits inside one dword.
#define HQVAL_HIPCOMPAT_HSHFL(NAME, ARG)                                                     \
    HQVAL_HIPCOMPAT_HFN __half NAME(__half var, ARG a, int width = warpSize) {               \
        return __ushort_as_half(static_cast<unsigned short>(                                 \
            NAME(static_cast<unsigned int>(__half_as_ushort(var)), a, width)));             \
    }
HQVAL_HIPCOMPAT_HSHFL(__shfl, int)
HQVAL_HIPCOMPAT_HSHFL(__shfl_up, unsigned int)
HQVAL_HIPCOMPAT_HSHFL(__shfl_down, unsigned int)
HQVAL_HIPCOMPAT_HSHFL(__shfl_xor, int)
#undef HQVAL_HIPCOMPAT_HSHFL

#endif  // !__CLANG_HIP_RUNTIME_WRAPPER_H__
#endif  // HQVAL_HIPCOMPAT_HIP_FP16_H
