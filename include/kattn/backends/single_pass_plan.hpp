// kattn/backends/single_pass_plan.hpp — what the host decides for the causal single passes
// (causal_single_pass.cuh, causal_single_pass_grads.cuh) before launching them: the shapes
// they take, each block's shared-memory layout, and the column widths per block. Plain
// C++ (KATTN_HD where the kernels use it too), so that systems, tests and tools that
// size or plan a call need no CUDA headers.
#pragma once

#include <cstddef>

#include "../core/config.hpp"
#include "shared_tiles.hpp"

namespace kattn::detail {

/// Threads per block of the single-pass kernel, the widest column group, and the rows a
/// warp gathers at once (the job's batch).
inline constexpr int single_pass_threads = 256;
inline constexpr int single_pass_max_cw = 128;
inline constexpr int single_pass_stage_rows = 4;

/// The shapes the kernel takes: F and d positive, F a multiple of 16 (whole state tiles)
/// and at most 1,024, d at most 4,096, cw a multiple of 16 up to single_pass_max_cw.
inline bool single_pass_shape(index_t d, index_t F, index_t cw) {
    return F > 0 && F % 16 == 0 && F <= 1024 && d > 0 && d <= 4096 && cw > 0 && cw % 16 == 0 &&
           cw <= single_pass_max_cw;
}

/// Where the kernels' staged input rows go (single_pass_stage_rows rows of ldx floats per
/// warp): they are used while a chunk's tiles are built, before the region at `over`
/// (`room` floats) is written, so over it where they fit, else at the end (total grows).
KATTN_HD inline int single_pass_stage(int ldx, int over, int room, int& total) {
    const int need = single_pass_threads / 32 * single_pass_stage_rows * ldx;
    if (need <= room) return over;
    total += need;
    return total - need;
}

/// The layout of one block's shared memory, in floats from its start (every tile 32-byte
/// aligned: each offset a multiple of 8 floats).
struct single_pass_layout {
    int ldf, ldc, lds, ldx;
    int phq, phk, sc, vt, S, z, den, stage, total;
    KATTN_HD single_pass_layout(int d, int F, int cw) {
        constexpr int C = 64;
        const auto up8 = [](int n) { return (n + 7) / 8 * 8; };
        ldf = tile_ld(F), ldc = tile_ld(cw), lds = tile_ld(C), ldx = up8(d);
        phq = 0;                                  // Φ_Q, then the numerators (ldc)
        phk = phq + C * (ldf > ldc ? ldf : ldc);  // Φ_K
        sc = phk + C * ldf;                       // scores
        vt = sc + C * lds;                        // V's columns of the group
        S = vt + C * ldc;                         // the state's columns of the group
        z = S + F * ldc;                          // z
        den = z + up8(F);                         // the chunk's denominators
        total = den + C;
        stage = single_pass_stage(ldx, sc, C * lds, total);  // before the scores exist
    }
};

inline std::size_t single_pass_shared_bytes(index_t d, index_t F, index_t cw) {
    return sizeof(float) * std::size_t(single_pass_layout(int(d), int(F), int(cw)).total);
}

/// The value columns per block for a call of `problems` heads, or 0 where the kernel
/// should not run: the widest group (dv in tiles of 16, at most single_pass_max_cw) halved
/// while the blocks would not fill the `sms` multiprocessors twice, then narrowed until the
/// tiles fit `shared_limit` bytes; 0 when that leaves fewer blocks than multiprocessors
/// (every block walks a whole sequence, so few blocks would leave the device idle).
inline index_t single_pass_width(index_t problems, index_t d, index_t F, index_t dv, index_t sms,
                                 std::size_t shared_limit) {
    if (problems <= 0 || dv <= 0) return 0;
    const auto blocks = [&](index_t cw) { return problems * ((dv + cw - 1) / cw); };
    index_t cw = (dv + 15) / 16 * 16 < single_pass_max_cw ? (dv + 15) / 16 * 16 : single_pass_max_cw;
    while (cw > 16 && blocks(cw) < 2 * sms) cw = (cw / 2 + 15) / 16 * 16;
    while (cw > 0 && (!single_pass_shape(d, F, cw) || single_pass_shared_bytes(d, F, cw) > shared_limit)) cw -= 16;
    return cw > 0 && blocks(cw) >= sms ? cw : 0;
}

/// Columns of ñ and v' = [v, 1] in the walks that hold them whole: dv + 1 rounded up to a
/// tile of 16.
KATTN_HD constexpr int single_pass_whole_columns(index_t dv) { return int((dv + 1 + 15) / 16 * 16); }

/// One block's shared memory in the walks over a group of fw features (dφ_Q's walk and
/// dφ_K's), in floats (offsets multiples of 8): Φ of the chunk's rows (whole rows: the
/// activation needs them), ñ and v' whole (wn columns), their masked product M, the
/// group's rows of the state (fw × wn), and a 16 × 16 tile per warp (where the fused walks
/// take dφ's tiles out of the accumulators).
struct single_pass_dphi_layout {
    int ldf, ldn, lds, ldx;
    int phi, nt, vt, M, state, tiles, stage, total;
    KATTN_HD single_pass_dphi_layout(int d, int F, int fw, int wn) {
        constexpr int C = 64;
        ldf = tile_ld(F), ldn = tile_ld(wn), lds = tile_ld(C), ldx = (d + 7) / 8 * 8;
        phi = 0;
        nt = phi + C * ldf;
        vt = nt + C * ldn;
        M = vt + C * ldn;
        state = M + C * lds;
        tiles = state + fw * ldn;
        total = tiles + single_pass_threads / 32 * 256;
        stage = single_pass_stage(ldx, M, C * lds, total);  // before M exists
    }
};

/// One block's shared memory in dV's walk over a group of cw value columns, in floats: Φ_Q
/// and Φ_K, ñ's columns of the group (then dV's), the masked scores A and the group's
/// columns of the state (F × cw).
struct single_pass_dv_layout {
    int ldf, ldc, lds, ldx;
    int phq, phk, nt, A, state, stage, total;
    KATTN_HD single_pass_dv_layout(int d, int F, int cw) {
        constexpr int C = 64;
        ldf = tile_ld(F), ldc = tile_ld(cw), lds = tile_ld(C), ldx = (d + 7) / 8 * 8;
        phq = 0;
        phk = phq + C * ldf;
        nt = phk + C * ldf;
        A = nt + C * ldc;
        state = A + C * lds;
        total = state + F * ldc;
        stage = single_pass_stage(ldx, A, C * lds, total);  // before A exists
    }
};

inline std::size_t single_pass_dphi_shared_bytes(index_t d, index_t F, index_t fw, index_t dv) {
    return sizeof(float) *
           std::size_t(single_pass_dphi_layout(int(d), int(F), int(fw), single_pass_whole_columns(dv)).total);
}
inline std::size_t single_pass_dv_shared_bytes(index_t d, index_t F, index_t cw) {
    return sizeof(float) * std::size_t(single_pass_dv_layout(int(d), int(F), int(cw)).total);
}

/// The widths of the backward's walks: features per block of the dφ walks and value
/// columns per block of dV's walk; both 0 where the walks do not run.
struct single_pass_grads_widths {
    index_t features = 0, values = 0;
    KATTN_HD explicit operator bool() const { return features > 0 && values > 0; }
};

/// The fewest groups of `n` columns (widths in tiles of 16, as even as they come, at most
/// `widest`), more groups while `problems` times them would not fill the `sms`
/// multiprocessors twice, then narrower while a block's tiles (bytes(width)) exceed
/// `shared_limit`; 0 when fewer blocks than multiprocessors remain.
template <class Bytes>
index_t single_pass_group_width(index_t problems, index_t n, index_t widest, index_t sms, std::size_t shared_limit,
                                const Bytes& bytes) {
    if (problems <= 0 || n <= 0) return 0;
    const auto width = [&](index_t groups) { return ((n + groups - 1) / groups + 15) / 16 * 16; };
    index_t groups = (n + widest - 1) / widest;
    while (width(groups) > 16 && problems * groups < 2 * sms) ++groups;
    index_t w = width(groups);
    while (w > 0 && bytes(w) > shared_limit) w -= 16;
    return w > 0 && problems * ((n + w - 1) / w) >= sms ? w : 0;
}

/// The walks' widths for a backward call of `problems` heads: the dφ walks split F into
/// groups of features (each block holds ñ and v' whole and writes its features of dφ
/// exactly), dV's walk splits dv into groups of value columns; both 0 where either walk
/// cannot run (a shape the kernels do not take: F a multiple of 16 up to 1,024, d up to
/// 4,096, dv + 1 up to 1,024 columns).
inline single_pass_grads_widths single_pass_grads_plan(index_t problems, index_t d, index_t F, index_t dv, index_t sms,
                                                       std::size_t shared_limit) {
    if (!single_pass_shape(d, F, 16) || dv <= 0 || dv + 1 > 1024) return {};
    const index_t fw = single_pass_group_width(problems, F, F, sms, shared_limit,
                                               [&](index_t w) { return single_pass_dphi_shared_bytes(d, F, w, dv); });
    const index_t cw = single_pass_group_width(problems, dv, single_pass_max_cw, sms, shared_limit,
                                               [&](index_t w) { return single_pass_dv_shared_bytes(d, F, w); });
    if (fw == 0 || cw == 0) return {};
    return {fw, cw};
}

}  // namespace kattn::detail
