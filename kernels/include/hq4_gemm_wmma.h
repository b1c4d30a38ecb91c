// Prefill GEMM body on WMMA for the 136 B / 256-weight family, one template instantiated
// per header decoder (hq4_header.h); symbols are made with HQ_GEMM in
// kernels/gemm_hfq4g256_wmma.hip and, deliberately broken, in kernels/mutants/.
#ifndef HQ4_GEMM_WMMA_H
#define HQ4_GEMM_WMMA_H

#include "hq4_header.h"

#if !defined(HQ_AMD)
#error "the WMMA GEMM (hq4_gemm_wmma.h) is AMD-only; NVIDIA builds use the GEMV kernels"
#endif

typedef _Float16 hq_v16h __attribute__((ext_vector_type(16)));
typedef _Float16 hq_v8h __attribute__((ext_vector_type(8)));
typedef float hq_v8f __attribute__((ext_vector_type(8)));
typedef unsigned int hq_v4u __attribute__((ext_vector_type(4)));

#if defined(__GFX11__)
// gfx11 layout: A and B hold a whole 16-element K row per lane, lanes 16..31 mirror lanes
// 0..15; D element i of lane l is row 2i + l/16, column l%16.
#define HQ_WMMA_GEN 11
#define HQ_KPL 16  // K values per lane per k-tile
struct OutWmma {
    static HQ_DEVICE void coords(int i, unsigned int lane, int& m, int& n) {
        m = 2 * i + static_cast<int>(lane >> 4);
        n = static_cast<int>(lane & 15u);
    }
};
typedef hq_v16h hq_frag;
static HQ_DEVICE hq_v8f hq_wmma(hq_frag a, hq_frag b, hq_v8f c) {
    return __builtin_amdgcn_wmma_f32_16x16x16_f16_w32(a, b, c);
}
#elif defined(__GFX12__)
// gfx12 layout: lane l holds K 8*(l/16) .. 8*(l/16)+7 of row (A) / column (B) l%16;
// D element i of lane l is row i + 8*(l/16), column l%16.
#define HQ_WMMA_GEN 12
#define HQ_KPL 8
struct OutWmma {
    static HQ_DEVICE void coords(int i, unsigned int lane, int& m, int& n) {
        m = i + 8 * static_cast<int>(lane >> 4);
        n = static_cast<int>(lane & 15u);
    }
};
typedef hq_v8h hq_frag;
static HQ_DEVICE hq_v8f hq_wmma(hq_frag a, hq_frag b, hq_v8f c) {
    return __builtin_amdgcn_wmma_f32_16x16x16_f16_w32_gfx12(a, b, c);
}
#else
#error "the WMMA GEMM (hq4_gemm_wmma.h) needs a gfx11 or gfx12 target; other arches use the per-token GEMV fallback"
#endif

// Where a tile's operands come from and where its results go.  The plain GEMM reads one
// matrix W (row m at m * row_bytes), token n's activations at X + n * K, and stores
// Y[n][m]; the fused and MoE kernels (hq4_fused.h) give other sources with the same body.
struct HqSrcW {  // weights: row m of one matrix
    const unsigned char* __restrict__ W;
    unsigned long long row_bytes;
    HQ_DEVICE const unsigned char* row(int m) const {
        return W + static_cast<unsigned long long>(m) * row_bytes;
    }
};
struct HqActX {  // activations: token n of X [N][K]; never null
    static constexpr bool kMayBeNull = false;
    const _Float16* __restrict__ X;
    int K;
    HQ_DEVICE const _Float16* row(int n) const {
        return X + static_cast<unsigned long long>(n) * K;
    }
};
struct HqDstY {  // results: Y [N][M]
    float* __restrict__ Y;
    int M;
    HQ_DEVICE float* at(int m, int n) const {
        return Y + static_cast<unsigned long long>(n) * M + m;
    }
};

template <class Hdr, int BT, bool Residual, class Out, class Src, class Act, class Dst>
HQ_DEVICE void gemm_tile_io(Src src, Act act, Dst dst, int M, int K, int N) {
    constexpr unsigned int GB = Hdr::kGroupBytes;
    const unsigned int lane = hq_lane();
    const unsigned int r = lane & 15u;
    // K offset of this lane's slice inside a 16-wide k-tile (0 on gfx11, 0 or 8 on gfx12).
    const unsigned int kofs = (HQ_KPL == 16) ? 0u : 8u * (lane >> 4);
    const int groups = K >> 8;
    const int m0 = static_cast<int>(hq_block_x()) * 16;
    const int n0 = static_cast<int>(hq_block_y()) * 16 * BT;

    // Rows past M and tokens past N re-read the last valid one; their results are never
    // stored (a D row depends only on its A row, a D column only on its B column).
    const int my_row = (m0 + static_cast<int>(r) < M) ? m0 + static_cast<int>(r) : M - 1;
    const unsigned char* __restrict__ wrow = src.row(my_row);
    const _Float16* xrow[BT];
    #pragma unroll
    for (int b = 0; b < BT; ++b) {
        const int n = n0 + b * 16 + static_cast<int>(r);
        xrow[b] = act.row(n < N ? n : N - 1);
    }

    hq_v8f acc[BT];
    #pragma unroll
    for (int b = 0; b < BT; ++b) acc[b] = hq_v8f{0, 0, 0, 0, 0, 0, 0, 0};

    for (int g = 0; g < groups; ++g) {
        // Headers of the tile's 16 rows: each read from a lane-invariant address (s_load),
        // then handed to the lanes that hold that row (l%16 == rr).
        Hq4Raw h{0u, 0u};
        #pragma unroll
        for (int rr = 0; rr < 16; ++rr) {
            const int row = (m0 + rr < M) ? m0 + rr : M - 1;
            const Hq4Raw s = Hdr::load(src.row(row) + g * GB, 0u);
            const bool mine = r == static_cast<unsigned int>(rr);
            h.a = mine ? s.a : h.a;
            if (Hdr::kDwords == 2) h.b = mine ? s.b : h.b;
        }
        // This lane's row payload: 128 B at group offset +8 (section 2), 8 x 16 B.
        const hq_v4u* pay = reinterpret_cast<const hq_v4u*>(wrow + g * GB + Hdr::kPayloadOffset);
        hq_v4u p[8];
        #pragma unroll
        for (int i = 0; i < 8; ++i) p[i] = pay[i];

        #pragma unroll
        for (int kt = 0; kt < 16; ++kt) {
            // Half rule (section 4): k-tile kt covers payload bytes 8kt..8kt+7, which never
            // straddle byte 64, so the whole tile takes half (8kt >= 64), i.e. kt >= 8.
            float sc, zp;
            Hdr::decode(h, 8u * static_cast<unsigned int>(kt), sc, zp);
            const unsigned int lo = p[kt >> 1][(kt & 1) * 2];
            const unsigned int hi = p[kt >> 1][(kt & 1) * 2 + 1];
            hq_frag a;
            #pragma unroll
            for (int j = 0; j < HQ_KPL; ++j) {
                const unsigned int k = kofs + static_cast<unsigned int>(j);  // K inside tile
                const unsigned int word = k < 8 ? lo : hi;
                const unsigned int q = (word >> (4 * (k & 7u))) & 0xFu;
                a[j] = static_cast<_Float16>(static_cast<float>(q) * sc + zp);
            }
            #pragma unroll
            for (int b = 0; b < BT; ++b) {
                hq_frag bx;
                if (Act::kMayBeNull && xrow[b] == nullptr) {
                    bx = hq_frag{};  // a padding slot: zero activations, a zero result
                } else {
                    bx = *reinterpret_cast<const hq_frag*>(
                        xrow[b] + g * 256 + kt * 16 + static_cast<int>(kofs));
                }
                acc[b] = hq_wmma(a, bx, acc[b]);
            }
        }
    }

    #pragma unroll
    for (int b = 0; b < BT; ++b) {
        #pragma unroll
        for (int i = 0; i < 8; ++i) {
            int m, n;
            Out::coords(i, lane, m, n);
            m += m0;
            n += n0 + b * 16;
            if (m < M && n < N) {
                float* out = dst.at(m, n);
                *out = Residual ? *out + acc[b][i] : acc[b][i];
            }
        }
    }
}

template <class Hdr, int BT, bool Residual, class Out = OutWmma>
HQ_DEVICE void gemm_tile(const unsigned char* __restrict__ W, const _Float16* __restrict__ X,
                         float* __restrict__ Y, int M, int K, int N) {
    const unsigned long long row_bytes =
        static_cast<unsigned long long>(K >> 8) * Hdr::kGroupBytes;
    gemm_tile_io<Hdr, BT, Residual, Out>(HqSrcW{W, row_bytes}, HqActX{X, K}, HqDstY{Y, M},
                                         M, K, N);
}

#define HQ_GEMM(NAME, HDR, BT, RES)                                                        \
    HQ_GLOBAL void HQ_LAUNCH_BOUNDS(32) NAME(const unsigned char* __restrict__ W,          \
                                             const _Float16* __restrict__ X,               \
                                             float* __restrict__ Y, int M, int K, int N) { \
        gemm_tile<HDR, BT, RES>(W, X, Y, M, K, N);                                         \
    }

#endif  // HQ4_GEMM_WMMA_H
