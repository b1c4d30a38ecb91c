// Doubles (the f64 division sequence), 16-bit integers, f16 division, indexed register
// arrays and f32 library calls: instruction families beyond the GEMV/GEMM kernels.
#define KERNEL extern "C" __attribute__((global))
typedef unsigned int u32; typedef unsigned short u16;
KERNEL void f64ops(const double* a, const double* b, double* out) {
  u32 i = __builtin_amdgcn_workitem_id_x();
  out[4*i] = a[i] / b[i]; out[4*i+1] = a[i] * b[i] + 1.0; out[4*i+2] = __builtin_sqrt(__builtin_fabs(a[i]));
  out[4*i+3] = (double)(int)a[i];
}
KERNEL void i16ops(const u16* a, const u16* b, u16* out) {
  u32 i = __builtin_amdgcn_workitem_id_x();
  u16 x = a[i], y = b[i];
  out[6*i] = x + y; out[6*i+1] = x * y; out[6*i+2] = (u16)(x << (y & 15));
  out[6*i+3] = (short)x >> (y & 15); out[6*i+4] = x > y ? x : y; out[6*i+5] = (u16)((short)x < (short)y ? x : y);
}
KERNEL void regidx(const int* a, int* out) {
  u32 i = __builtin_amdgcn_workitem_id_x();
  int r[8];
  for (int k = 0; k < 8; ++k) r[k] = a[i] * (k + 1);
  out[i] = r[a[i] & 7];
}
KERNEL void halfops(const _Float16* a, const _Float16* b, _Float16* out) {
  u32 i = __builtin_amdgcn_workitem_id_x();
  _Float16 x = a[i], y = b[i];
  out[4*i] = x + y; out[4*i+1] = x * y; out[4*i+2] = x / y; out[4*i+3] = __builtin_fmaf16(x, y, x);
}
KERNEL void floatmisc(const float* a, float* out, int* iout) {
  u32 i = __builtin_amdgcn_workitem_id_x();
  float x = a[i];
  out[4*i] = __builtin_floorf(x); out[4*i+1] = __builtin_sqrtf(__builtin_fabsf(x)); out[4*i+2] = __builtin_expf(x); out[4*i+3] = __builtin_logf(__builtin_fabsf(x) + 1.0f);
  iout[2*i] = (int)__builtin_rintf(x); iout[2*i+1] = (unsigned)__builtin_fabsf(x);
}
typedef unsigned long long u64;
typedef long long i64;
KERNEL void i64ops(const u64* a, const u64* b, u64* out) {
  unsigned t = __builtin_amdgcn_workitem_id_x();
  u64 x = a[t], y = b[t];
  out[8*t] = x / y; out[8*t+1] = x % y; out[8*t+2] = (u64)((i64)x / (i64)y);
  out[8*t+3] = x * y; out[8*t+4] = (u64)__builtin_clzll(x | 1); out[8*t+5] = (u64)__builtin_popcountll(x);
  out[8*t+6] = x >> (y & 63); out[8*t+7] = (u64)((i64)x >> (y & 63));
}
