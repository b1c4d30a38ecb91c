// Small kernels that pin down single instructions and control-flow patterns for the
// interpreter's tests (tests/emu).  Built with bare clang-19 (-nogpulib -nogpuinc).
#define KERNEL extern "C" __attribute__((global))
#define SHARED __attribute__((shared))
typedef unsigned int u32;
typedef unsigned short u16;
typedef _Float16 half16 __attribute__((ext_vector_type(16)));
typedef _Float16 half8 __attribute__((ext_vector_type(8)));
typedef float float8 __attribute__((ext_vector_type(8)));

// one wave per workgroup: 32 threads, or 64 when built with -mwavefrontsize64
#define WAVE __AMDGCN_WAVEFRONT_SIZE
static __attribute__((device)) inline u32 gid() {
  return __builtin_amdgcn_workgroup_id_x() * WAVE + __builtin_amdgcn_workitem_id_x();
}
static __attribute__((device)) inline void sync_block() {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}

KERNEL void fma_f32(const float* a, const float* b, const float* c, float* out) {
  u32 i = gid();
  out[i] = __builtin_fmaf(a[i], b[i], c[i]);
}

KERNEL void arith_f32(const float* a, const float* b, float* out) {
  u32 i = gid();
  out[4 * i + 0] = a[i] + b[i];
  out[4 * i + 1] = a[i] * b[i];
  out[4 * i + 2] = a[i] / b[i];
  out[4 * i + 3] = __builtin_fmaxf(a[i], b[i]);
}

KERNEL void cvt_f16(const float* a, u16* out16, float* back) {
  u32 i = gid();
  _Float16 h = (_Float16)a[i];
  out16[i] = __builtin_bit_cast(u16, h);
  back[i] = (float)__builtin_bit_cast(_Float16, out16[i]);
}

KERNEL void cmp_f32(const float* a, const float* b, u32* out) {
  u32 i = gid();
  float x = a[i], y = b[i];
  out[i] = (x < y) | ((x == y) << 1) | ((x != y) << 2) | ((x >= y) << 3) |
           (__builtin_isunordered(x, y) << 4);
}

KERNEL void int_div(const u32* a, const u32* b, u32* out) {
  u32 i = gid();
  out[4 * i + 0] = a[i] / b[i];
  out[4 * i + 1] = a[i] % b[i];
  out[4 * i + 2] = (u32)((int)a[i] / (int)b[i]);
  out[4 * i + 3] = (u32)((int)a[i] % (int)b[i]);
}

// exec masking: nested divergent branches (stores cannot be if-converted) and a
// data-dependent loop without a closed form
KERNEL void diverge(const int* a, int* out) {
  u32 i = gid();
  int v = a[i];
  if (v > 0) {
    out[2 * i] = v * 3;
  } else if (v < -5) {
    out[2 * i] = -v;
  } else {
    out[2 * i] = 7;
  }
  int s = 0;
  for (int j = 0; j < (v & 15); ++j) s = s * 3 + (j ^ v);
  out[2 * i + 1] = s;
}

// scalar ALU on uniform kernel arguments (only lane 0 stores)
KERNEL void scalar_ops(int* out, int p, int q) {
  if (__builtin_amdgcn_workitem_id_x() != 0) return;
  out[0] = p * q;
  out[1] = (int)((unsigned)p >> (q & 31));
  out[2] = p < q ? p : q;
  out[3] = (p >> 3) & 0x1f;
  long long w = (long long)p * (long long)q;
  out[4] = (int)(w >> 32);
  out[5] = p ^ (q << 4);
  out[6] = __builtin_popcount((unsigned)p);
  out[7] = p > 1000 ? q - p : q + p;
}

// LDS and s_barrier across the 4 waves of a 128-thread workgroup
KERNEL void lds_reduce(const float* a, float* out) {
  SHARED float s[128];
  u32 t = __builtin_amdgcn_workitem_id_x();
  u32 g = __builtin_amdgcn_workgroup_id_x();
  s[t] = a[g * 128 + t];
  sync_block();
  for (u32 stride = 64; stride > 0; stride >>= 1) {
    if (t < stride) s[t] += s[t + stride];
    sync_block();
  }
  if (t == 0) out[g] = s[0];
}

KERNEL void atomic_ret(u32* counter, u32* out) {
  u32 i = gid();
  out[i] = __atomic_fetch_add(counter, 1u, __ATOMIC_RELAXED);
}

// cross-lane: ds_bpermute (lane ^ 5), ds_swizzle quad perm [3,2,1,0] and bitmask xor 16,
// DPP row_shr:1 (bound_ctrl: shifted-in lanes read 0) and quad_perm [1,0,3,2]
KERNEL void cross_lane(const int* a, int* out) {
  u32 i = gid();
  u32 lane = __builtin_amdgcn_workitem_id_x() & 31;  // bpermute indexes within 32 lanes
  int v = a[i];
  out[5 * i + 0] = __builtin_amdgcn_ds_bpermute((int)((lane ^ 5) << 2), v);
  out[5 * i + 1] = __builtin_amdgcn_ds_swizzle(v, 0x801B);
  out[5 * i + 2] = __builtin_amdgcn_ds_swizzle(v, (16 << 10) | 0x1F);
  out[5 * i + 3] = __builtin_amdgcn_update_dpp(0, v, 0x111, 0xF, 0xF, true);
  out[5 * i + 4] = __builtin_amdgcn_mov_dpp(v, 0xB1, 0xF, 0xF, false);
}

#if defined(__gfx1100__) || defined(__gfx1151__) || defined(__gfx1201__)
// VOP3P: fma_mix (f16 scale/zero from one dword, f32 q), dot2, packed f16 fma
KERNEL void vop3p(const u32* h, const float* f, const u32* g, float* out, u32* pk) {
  u32 i = gid();
  float r, d;
  u32 p;
  asm volatile("v_fma_mix_f32 %0, %1, %2, %1 op_sel:[0,0,1] op_sel_hi:[1,0,1]"
               : "=v"(r) : "v"(h[i]), "v"(f[i]));
  asm volatile("v_dot2_f32_f16 %0, %1, %2, %3" : "=v"(d) : "v"(h[i]), "v"(g[i]), "v"(f[i]));
  asm volatile("v_pk_fma_f16 %0, %1, %2, %3" : "=v"(p) : "v"(h[i]), "v"(g[i]), "v"(h[i]));
  out[2 * i] = r;
  out[2 * i + 1] = d;
  pk[i] = p;
}
#endif

#if (defined(__gfx1100__) || defined(__gfx1151__)) && WAVE == 32
// A[16][16] f16 row-major, B[16][16] (k, n) f16 row-major, C/D f32 [16][16]
KERNEL void wmma_gfx11(const _Float16* A, const _Float16* B, const float* C, float* D) {
  u32 l = __builtin_amdgcn_workitem_id_x();
  half16 a, b;
  float8 c;
  for (int k = 0; k < 16; ++k) {
    a[k] = A[(l % 16) * 16 + k];
    b[k] = B[k * 16 + (l % 16)];
  }
  for (int v = 0; v < 8; ++v) c[v] = C[(2 * v + l / 16) * 16 + (l % 16)];
  float8 d = __builtin_amdgcn_wmma_f32_16x16x16_f16_w32(a, b, c);
  for (int v = 0; v < 8; ++v) D[(2 * v + l / 16) * 16 + (l % 16)] = d[v];
}
#endif

#if defined(__gfx1201__) && WAVE == 32
KERNEL void wmma_gfx12(const _Float16* A, const _Float16* B, const float* C, float* D) {
  u32 l = __builtin_amdgcn_workitem_id_x();
  half8 a, b;
  float8 c;
  for (int k = 0; k < 8; ++k) {
    a[k] = A[(l % 16) * 16 + 8 * (l / 16) + k];
    b[k] = B[(8 * (l / 16) + k) * 16 + (l % 16)];
  }
  for (int v = 0; v < 8; ++v) c[v] = C[(v + 8 * (l / 16)) * 16 + (l % 16)];
  float8 d = __builtin_amdgcn_wmma_f32_16x16x16_f16_w32_gfx12(a, b, c);
  for (int v = 0; v < 8; ++v) D[(v + 8 * (l / 16)) * 16 + (l % 16)] = d[v];
}
#endif

// reads a[i + off]: a launch with a bad offset must raise OutOfBounds
KERNEL void copy_off(const float* a, float* out, int off) {
  u32 i = gid();
  out[i] = a[i + off];
}
