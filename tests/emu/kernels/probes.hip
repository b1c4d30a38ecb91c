// Coverage probes: the instruction mix clang-19 -O3 emits for engine-style quantized
// kernels on every RDNA target (tests/emu/test_coverage.py scans them with
// hqval.emu.coverage before anything runs).  Bare clang (-nogpulib -nogpuinc): builtins only.
#define KERNEL extern "C" __attribute__((global))
#define BOUNDS(n) __attribute__((amdgpu_flat_work_group_size(1, n)))
#define SHARED __attribute__((shared))
typedef unsigned int u32;
typedef unsigned char u8;
typedef _Float16 half2 __attribute__((ext_vector_type(2)));
typedef float float4 __attribute__((ext_vector_type(4)));
typedef u32 u32x4 __attribute__((ext_vector_type(4)));

#if defined(__gfx1100__) || defined(__gfx1101__) || defined(__gfx1102__) || \
    defined(__gfx1150__) || defined(__gfx1151__)
#define RDNA3 1
#endif
#if defined(__gfx1200__) || defined(__gfx1201__)
#define RDNA4 1
#endif

static __attribute__((device)) inline void sync_block() {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}

static __attribute__((device)) inline float wave_sum(float v) {
  for (int off = 16; off > 0; off >>= 1)
    v += __builtin_bit_cast(float, __builtin_amdgcn_ds_bpermute(
        (int)((__builtin_amdgcn_workitem_id_x() ^ off) << 2), __builtin_bit_cast(int, v)));
  return v;
}

// buffer loads through a resource descriptor, with cache-policy bits (glc/slc/dlc on
// gfx10/11, th/scope on gfx12), and a nontemporal global load
KERNEL void buffer_policy(const u32* w, u32* out, int n) {
  u32 i = __builtin_amdgcn_workgroup_id_x() * 64 + __builtin_amdgcn_workitem_id_x();
  __amdgpu_buffer_rsrc_t r = __builtin_amdgcn_make_buffer_rsrc((void*)w, 0, n * 4, 0x31014fac);
  u32 a = __builtin_amdgcn_raw_buffer_load_b32(r, i * 4, 0, 0);
  u32 b = __builtin_amdgcn_raw_buffer_load_b32(r, i * 4, 0, 1);
  u32 c = __builtin_amdgcn_raw_buffer_load_b32(r, i * 4, 0, 3);
  u32x4 d = __builtin_amdgcn_raw_buffer_load_b128(r, (i & ~3u) * 4, 0, 2);
  u32 e = __builtin_nontemporal_load(&w[i]);
  __builtin_amdgcn_raw_buffer_store_b32(a + b + c + d.x + d.w + e, r, i * 4, 0, 1);
  __builtin_nontemporal_store(a ^ e, &out[i]);
}

// LDS-staged GEMV tile: x staged in LDS by the whole block, 4-bit weights, block of 128
// or 256 threads (__launch_bounds__), a cross-wave reduction through LDS, residual add
template <int BLOCK>
static __attribute__((device)) inline void lds_gemv(const u8* w, const float* x, float* y,
                                                   int K, int residual) {
  SHARED float xs[1024];
  SHARED float part[BLOCK / 32];
  u32 t = __builtin_amdgcn_workitem_id_x();
  u32 row = __builtin_amdgcn_workgroup_id_x();
  float acc = 0.f;
  for (int k0 = 0; k0 < K; k0 += 1024) {
    for (int k = t; k < 1024; k += BLOCK) xs[k] = x[k0 + k];
    sync_block();
    for (int k = 2 * t; k < 1024; k += 2 * BLOCK) {
      u8 q = w[(row * K + k0 + k) / 2];
      acc = __builtin_fmaf((float)(q & 15) - 8.f, xs[k], acc);
      acc = __builtin_fmaf((float)(q >> 4) - 8.f, xs[k + 1], acc);
    }
    sync_block();
  }
  acc = wave_sum(acc);
  if ((t & 31) == 0) part[t / 32] = acc;
  sync_block();
  if (t == 0) {
    float s = 0.f;
    for (int i = 0; i < BLOCK / 32; ++i) s += part[i];
    y[row] = residual ? y[row] + s : s;
  }
}
KERNEL BOUNDS(128) void lds_gemv_b128(const u8* w, const float* x, float* y, int K, int r) {
  lds_gemv<128>(w, x, y, K, r);
}
KERNEL BOUNDS(256) void lds_gemv_b256(const u8* w, const float* x, float* y, int K, int r) {
  lds_gemv<256>(w, x, y, K, r);
}

// fused QKV: one launch, three row ranges, f16 scales, RMS-norm style rsqrt, softmax exp
KERNEL BOUNDS(64) void qkv_norm(const u32* wq, const u32* wk, const u32* wv,
                                const _Float16* scales, const float* x, float* q, float* k,
                                float* v, int mq, int mk, int mv, int K, float eps) {
  u32 t = __builtin_amdgcn_workitem_id_x();
  int row = __builtin_amdgcn_workgroup_id_x();
  const u32* w = wq;
  float* y = q;
  if (row >= mq + mk) { w = wv; y = v; row -= mq + mk; }
  else if (row >= mq) { w = wk; y = k; row -= mq; }
  float ss = 0.f, acc = 0.f;
  for (int i = t; i < K / 8; i += 64) {
    u32 p = w[row * (K / 8) + i];
    float sc = (float)scales[(row * K + 8 * i) / 256];
    for (int j = 0; j < 8; ++j) {
      float xv = x[8 * i + j];
      ss = __builtin_fmaf(xv, xv, ss);
      acc = __builtin_fmaf(sc * (float)((int)((p >> (4 * j)) & 15) - 8), xv, acc);
    }
  }
  acc = wave_sum(acc);
  ss = wave_sum(ss);
  if ((t & 31) == 0) {
    float inv = __builtin_amdgcn_rsqf(ss / K + eps);
    __hip_atomic_fetch_add(&y[row], acc * inv, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
    y[row + 1] = __builtin_expf(acc) / (1.f + __builtin_expf(acc));
  }
}

// half2 math, bf16 conversion, DPP moves, ballot, integer division and 64-bit offsets
KERNEL void mixed_ops(const half2* a, const half2* b, const unsigned short* bf, float* out,
                      u32 d) {
  u32 i = __builtin_amdgcn_workitem_id_x();
  half2 h = a[i] * b[i] + a[i];
  float f = (float)h.x + (float)h.y;
  f += __builtin_bit_cast(float, (u32)bf[i] << 16);
  int m = __builtin_amdgcn_update_dpp(0, __builtin_bit_cast(int, f), 0x111, 0xf, 0xf, false);
  f += __builtin_bit_cast(float, m);
  f += (float)(__builtin_amdgcn_ballot_w32(f > 0.f) / (d | 1));
  f = __builtin_fminf(__builtin_fmaxf(f, -1e4f), 1e4f);
  unsigned long long off = (unsigned long long)i * d;
  out[off % 64] = f + (float)__builtin_amdgcn_readfirstlane(i);
}

#if defined(RDNA3) || defined(RDNA4)
// int8 dot products (sudot4) and f16 dot2 with an f32 accumulator
KERNEL void dot_ops(const int* a, const int* b, const half2* h, float* out) {
  u32 i = __builtin_amdgcn_workitem_id_x();
  int s = __builtin_amdgcn_sudot4(true, a[i], true, b[i], 0, false);
  out[i] = __builtin_amdgcn_fdot2(h[i], h[i ^ 1], (float)s, false);
}
#elif defined(__gfx1030__)
KERNEL void dot_ops(const int* a, const int* b, const half2* h, float* out) {
  u32 i = __builtin_amdgcn_workitem_id_x();
  int s = __builtin_amdgcn_sdot4(a[i], b[i], 0, false);
  out[i] = __builtin_amdgcn_fdot2(h[i], h[i ^ 1], (float)s, false);
}
#endif

#if defined(RDNA3)
typedef _Float16 half16 __attribute__((ext_vector_type(16)));
typedef float float8 __attribute__((ext_vector_type(8)));
typedef int int8v __attribute__((ext_vector_type(8)));
typedef int int4v __attribute__((ext_vector_type(4)));
KERNEL void wmma_probe(const half16* a, const half16* b, float8* c, const int4v* ia,
                       int8v* ic, half16* hc) {
  u32 i = __builtin_amdgcn_workitem_id_x();
  c[i] = __builtin_amdgcn_wmma_f32_16x16x16_f16_w32(a[i], b[i], c[i]);
  hc[i] = __builtin_amdgcn_wmma_f16_16x16x16_f16_w32(a[i], b[i], hc[i], false);
  ic[i] = __builtin_amdgcn_wmma_i32_16x16x16_iu8_w32(true, ia[i], true, ia[i ^ 1], ic[i], false);
}
#elif defined(RDNA4)
typedef _Float16 half8 __attribute__((ext_vector_type(8)));
typedef float float8 __attribute__((ext_vector_type(8)));
typedef int int8v __attribute__((ext_vector_type(8)));
typedef int int2v __attribute__((ext_vector_type(2)));
KERNEL void wmma_probe(const half8* a, const half8* b, float8* c, const int2v* ia,
                       int8v* ic, half8* hc) {
  u32 i = __builtin_amdgcn_workitem_id_x();
  c[i] = __builtin_amdgcn_wmma_f32_16x16x16_f16_w32_gfx12(a[i], b[i], c[i]);
  hc[i] = __builtin_amdgcn_wmma_f16_16x16x16_f16_w32_gfx12(a[i], b[i], hc[i]);
  ic[i] = __builtin_amdgcn_wmma_i32_16x16x16_iu8_w32_gfx12(true, ia[i], true, ia[i ^ 1], ic[i],
                                                          false);
}
// uniform scalar math: clang-19 keeps it on the SALU (s_addk_co_i32, v_s_rcp_f32)
KERNEL void salu_probe(float s, int n, float* out) {
  float r = __builtin_amdgcn_rcpf(s) * __builtin_sqrtf(s);
  out[__builtin_amdgcn_workitem_id_x()] = r + (float)(n + 1000);
}
#endif

#if defined(RDNA4)
// the form clang-19 turns into v_s_rcp_f32 / v_s_sqrt_f32 (a uniform kernel argument)
KERNEL void salu_trans(float a, float* o) {
  o[__builtin_amdgcn_workitem_id_x()] = __builtin_amdgcn_rcpf(a) + __builtin_sqrtf(a);
}
#endif
