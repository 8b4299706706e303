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

/// The layout of one block's shared memory, in floats from its start (every tile 32-byte
/// aligned: each offset a multiple of 8 floats).
struct single_pass_layout {
    int ldf, ldc, lds, ldx;
    int phq, phk, sc, vt, S, z, den, stage, total;
    KATTN_HD single_pass_layout(int d, int F, int cw) {
        constexpr int C = 64, warps = single_pass_threads / 32, staged = warps * single_pass_stage_rows;
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
        // single_pass_stage_rows rows of x per warp, used while the rows are built, before
        // the scores exist: over the scores where they fit.
        stage = staged * ldx <= C * lds ? sc : total;
        if (stage == total) total += staged * ldx;
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

/// One block's shared memory for a walk, in floats (offsets multiples of 8): keys = true for
/// the reverse walk (Φ_Q and the scores A too), false for the forward walk.
struct single_pass_grads_layout {
    int ldf, ldc, lds, ldx;
    int phq, phk, nt, vt, A, M, state, stage, total;
    KATTN_HD single_pass_grads_layout(int d, int F, int cw, bool keys) {
        constexpr int C = 64, staged = single_pass_threads / 32 * single_pass_stage_rows;
        const auto up8 = [](int n) { return (n + 7) / 8 * 8; };
        ldf = tile_ld(F), ldc = tile_ld(cw), lds = tile_ld(C), ldx = up8(d);
        phq = 0;
        phk = phq + (keys ? C * ldf : 0);
        nt = phk + C * ldf;
        vt = nt + C * ldc;  // V', then (reverse walk) dV's columns
        A = vt + C * ldc;   // the scores (reverse walk only)
        M = A + (keys ? C * lds : 0);
        state = M + C * lds;  // S' or T
        total = state + F * ldc;
        // The staged input rows live while the tiles are built, before A and M exist.
        stage = staged * ldx <= (keys ? 2 : 1) * C * lds ? A : total;
        if (stage == total) total += staged * ldx;
    }
};

inline std::size_t single_pass_grads_shared_bytes(index_t d, index_t F, index_t cw, bool keys) {
    return sizeof(float) * std::size_t(single_pass_grads_layout(int(d), int(F), int(cw), keys).total);
}

/// Columns of ñ and v' per block for a backward call of `problems` heads with columns = dv + 1,
/// or 0 where the walks should not run: the fewest groups of at most single_pass_max_cw
/// columns (widths in tiles of 16, as even as they come), more groups while the blocks would
/// not fill the `sms` multiprocessors twice, narrower while the reverse walk's tiles exceed
/// `shared_limit` bytes; 0 when fewer blocks than multiprocessors remain.
inline index_t single_pass_grads_width(index_t problems, index_t d, index_t F, index_t columns, index_t sms,
                                       std::size_t shared_limit) {
    if (problems <= 0 || columns <= 0) return 0;
    const auto width = [&](index_t groups) { return ((columns + groups - 1) / groups + 15) / 16 * 16; };
    index_t groups = (columns + single_pass_max_cw - 1) / single_pass_max_cw;
    while (width(groups) > 16 && problems * groups < 2 * sms) ++groups;
    index_t cw = width(groups);
    while (cw > 0 && (!single_pass_shape(d, F, cw) || single_pass_grads_shared_bytes(d, F, cw, true) > shared_limit))
        cw -= 16;
    return cw > 0 && problems * ((columns + cw - 1) / cw) >= sms ? cw : 0;
}

}  // namespace kattn::detail
