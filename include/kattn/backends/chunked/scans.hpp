// kattn/backends/chunked/scans.hpp — the scans over causal chunks, in segments.
//
// The causal forward turns the block states A_b into exclusive prefixes (every key before
// block b, at reference E_{b−1}); the backward turns the cotangents D_b into reverse
// suffixes (every block after b, at reference E_b). Both are linear recurrences over the
// nb blocks of a problem, restarting where a sequence (packed: a document) starts:
//   prefix   X_b = e^{E_{b−2} − E_{b−1}} X_{b−1} + A_{b−1}
//   suffix   T_{b−1} = D_b + e^{E_{b−1} − E_b} T_b
// One thread walking all nb blocks of one (problem, f, c) element leaves most of a GPU
// idle and waits on every step's load. So the blocks are cut into segments of
// `scan_segment` (16) blocks, and each scan runs in three launches:
//   1. per (problem, segment, element): the scan within the segment, from zero, and the
//      segment's total; the segment's 16 values are loaded before any is stored, so the
//      loads overlap;
//   2. per (problem, element): the carries between segments, in segment order, also
//      through tiles of 16 values loaded at once;
//   3. per (problem, block), a row functor over the block's elements: each block adds its
//      segment's carry, rescaled from the carry's reference to its own, unless a sequence
//      starts (prefix) or ends (suffix) between the block and its segment's edge.
// Every output has one writer and a fixed order of operations, so results are the same on
// every run and thread count; rescaling by e^{E_a − E_b} in one factor instead of a product
// of per-block factors changes the results by rounding only.
// Step 1 of the prefix can also take the block states' products with it (segment_states:
// a system's launch_chunk_states makes A_b and scans it without a round trip through memory);
// the steps' arithmetic (prefix_step) is the same either way.
#pragma once

#include "kernels.hpp"
#include "system.hpp"

namespace kattn::detail::chunked_impl {

/// Blocks per segment of the chunk scans, and values per tile of the carries' pass.
inline constexpr index_t scan_segment = 16;

/// The segments of one call's chunk scans.
struct segments {
    static constexpr index_t seg = scan_segment;  ///< blocks per segment
    index_t count = 1;                            ///< segments per problem
    KATTN_HD static index_t first(index_t s) { return s * seg; }
    KATTN_HD static index_t last(index_t s, index_t nb) { return (s + 1) * seg < nb ? (s + 1) * seg - 1 : nb - 1; }
};

inline segments segments_of(const geometry& g) { return {(g.nb + scan_segment - 1) / scan_segment}; }

/// Step 1 of a scan at block b (the k-th of its segment), the same for every element: with
/// run the value carried from the block visited before (zero at the segment's first),
/// run = begin(run); b keeps stored(run); the run goes on as next(run, A_b). The prefix
/// visits a segment's blocks in order: b keeps the exclusive prefix from the segment's
/// start (zero where a sequence starts at b).
template <class W>
struct prefix_step {
    bool start = false;  ///< a sequence starts at b: b keeps zero and the run restarts
    bool keep = false;   ///< the run carries over from b − 1 (not at a start, not at k = 0)
    W f = W(0);          ///< when it does, e^{E_{b−1} − E_b}: the run moved to b's reference
    KATTN_HD W begin(W run) const { return run; }
    KATTN_HD W stored(W run) const { return start ? W(0) : run; }
    KATTN_HD W next(W run, W cur) const { return keep ? f * run + cur : cur; }
};

/// The prefix steps of one call: at(p, b, k) for problem p's block b, the k-th of its
/// segment (blocks visited in order).
template <class Map, class W>
struct prefix_steps {
    static constexpr bool reverse = false;
    geometry g;
    const W* E;
    KATTN_HD prefix_step<W> at(index_t p, index_t b, index_t k) const {
        prefix_step<W> s;
        s.start = g.starts_sequence(b);
        s.keep = !s.start && k > 0;
        if (s.keep) s.f = rescale<Map>(E[p * g.nb + b - 1], E[p * g.nb + b]);
        return s;
    }
};

/// Prefix, step 1, per (p, s, fc): A_b of segment s becomes the exclusive prefix from the
/// segment's start (or the last sequence start in it); T[p, s] the state through the
/// segment's last block at its reference.
template <class Map, class W>
struct prefix_in_segments {
    geometry g;
    segments sg;
    prefix_steps<Map, W> steps;
    W* A;
    W* T;  ///< problems × segments × F(dv+1)
    KATTN_HD void operator()(index_t idx) const {
        const index_t n = g.F * g.dv1, fc = idx % n, ps = idx / n, p = ps / sg.count, s = ps % sg.count;
        const index_t b0 = sg.first(s), nk = sg.last(s, g.nb) - b0 + 1;
        W* a = A + (p * g.nb + b0) * n + fc;
        W cur[scan_segment];
        for (index_t k = 0; k < scan_segment; ++k) cur[k] = k < nk ? a[k * n] : W(0);
        W run = W(0);
        for (index_t k = 0; k < scan_segment; ++k) {
            if (k < nk) {
                const prefix_step<W> st = steps.at(p, b0 + k, k);
                run = st.begin(run);
                a[k * n] = st.stored(run);
                run = st.next(run, cur[k]);
            }
        }
        T[idx] = run;
    }
};

/// Suffix, step 1, at block b (visited from the segment's last block down): b keeps the
/// reverse exclusive suffix to its document's end (the run restarts after a document's
/// last block), and the run takes D_b in unless a sequence starts at b.
template <class W>
struct suffix_step {
    bool reset = false;  ///< b is a document's last block: nothing after it counts
    bool add = false;    ///< no sequence starts at b: the run takes D_b in
    W f = W(0);          ///< when it does, e^{E_{b−1} − E_b}: the run moved to b − 1's reference
    KATTN_HD W begin(W run) const { return reset ? W(0) : run; }
    KATTN_HD W stored(W run) const { return run; }
    KATTN_HD W next(W run, W cur) const { return add ? cur + f * run : run; }
};

/// The suffix steps of one call (blocks visited from a segment's last down).
template <class Map, class W>
struct suffix_steps {
    static constexpr bool reverse = true;
    geometry g;
    const W* E;
    KATTN_HD suffix_step<W> at(index_t p, index_t b, index_t) const {
        suffix_step<W> s;
        s.reset = g.packed() && g.doc_last[b] == b;
        s.add = !g.starts_sequence(b);
        if (s.add) s.f = rescale<Map>(E[p * g.nb + b - 1], E[p * g.nb + b]);
        return s;
    }
};

/// Step 1 of a scan with the block states' products, for a system that makes them in one
/// pass (launch_chunk_states, with prefix_steps or suffix_steps): for every problem p and
/// segment s, and the segment's blocks b (in order, or from the last when the steps are
/// reverse), with A_b = Φ_bᵀ·Y_b (F × dv1, a product over the block's 64 rows) and st =
/// steps.at(p, b, b − first(s)): run = st.begin(run), b's slot of A receives
/// st.stored(run), then run = st.next(run, A_b); T[p, s] = run after the segment. The same
/// as the batched product over blocks followed by prefix_in_segments (suffix_in_segments),
/// without A_b's round trip through memory.
template <class W>
struct segment_states {
    static constexpr index_t rows = chunk;  ///< rows per block
    index_t problems = 0, nb = 0, F = 0, dv1 = 0;
    segments sg;
    const W* phi = nullptr;  ///< the features (keys: Φ_K; the backward's suffix: Φ_Q), problems·nb·64 × F
    const W* Y = nullptr;    ///< the weighted [v, 1] rows (suffix: ñf), problems·nb·64 × dv1
    W* A = nullptr;          ///< out: problems × nb × F × dv1
    W* T = nullptr;          ///< out: problems × sg.count × F × dv1
    KATTN_HD index_t jobs() const { return problems * sg.count; }
};

/// Whether a sequence starts at one of the blocks [b0, b] (packed: a document; otherwise
/// only block 0 starts one).
KATTN_HD inline bool sequence_starts_in(const geometry& g, index_t b0, index_t b) {
    if (!g.packed()) return b0 == 0;
    for (index_t x = b0; x <= b; ++x)
        if (g.starts_sequence(x)) return true;
    return false;
}

/// Whether a sequence ends at one of the blocks [b, b1] (packed only: a document's last
/// block; the unpacked sequence ends after the last block).
KATTN_HD inline bool sequence_ends_in(const geometry& g, index_t b, index_t b1) {
    if (!g.packed()) return false;
    for (index_t x = b; x <= b1; ++x)
        if (g.doc_last[x] == x) return true;
    return false;
}

/// Prefix, step 2, per (p, fc): T[p, s] becomes the carry into segment s, the state of
/// every key of its sequence before the segment at reference E_{first(s)−1}.
template <class Map, class W>
struct prefix_carries {
    geometry g;
    segments sg;
    const W* E;
    W* T;
    KATTN_HD void operator()(index_t idx) const {
        const index_t n = g.F * g.dv1, p = idx / n, fc = idx % n;
        W* t = T + p * sg.count * n + fc;
        W carry = W(0);
        for (index_t s0 = 0; s0 < sg.count; s0 += scan_segment) {
            const index_t nt = sg.count - s0 < scan_segment ? sg.count - s0 : scan_segment;
            W total[scan_segment];
            for (index_t k = 0; k < scan_segment; ++k) total[k] = k < nt ? t[(s0 + k) * n] : W(0);
            for (index_t k = 0; k < scan_segment; ++k) {
                if (k < nt) {
                    const index_t s = s0 + k, b0 = sg.first(s), b1 = sg.last(s, g.nb);
                    t[s * n] = carry;
                    carry = sequence_starts_in(g, b0, b1)
                                ? total[k]
                                : total[k] + rescale<Map>(E[p * g.nb + b0 - 1], E[p * g.nb + b1]) * carry;
                }
            }
        }
    }
};

/// Prefix, step 3, per row (p, b), over its elements fc: A_b += e^{E_{first−1} − E_{b−1}}
/// times the carry of b's segment, unless a sequence starts in [first, b].
template <class Map, class W, class Ops = scalar_ops>
struct prefix_apply {
    geometry g;
    segments sg;
    const W* E;
    const W* T;
    W* A;
    KATTN_HD void operator()(index_t pb) const {
        const index_t n = g.F * g.dv1, p = pb / g.nb, b = pb % g.nb;
        const index_t s = b / sg.seg, b0 = sg.first(s);
        if (sequence_starts_in(g, b0, b)) return;  // segment 0 always holds block 0's start
        const W f = rescale<Map>(E[p * g.nb + b0 - 1], E[p * g.nb + b - 1]);
        const W* t = T + (p * sg.count + s) * n;
        W* a = A + pb * n;
        for (index_t fc = Ops::lane(); fc < n; fc += Ops::lanes) a[fc] += f * t[fc];
    }
};

/// Suffix, step 1, per (p, s, fc): D_b of segment s becomes the suffix over the segment's
/// later blocks (to a document's end); T[p, s] the value for the block before the segment.
template <class Map, class W>
struct suffix_in_segments {
    geometry g;
    segments sg;
    suffix_steps<Map, W> steps;
    W* D;
    W* T;
    KATTN_HD void operator()(index_t idx) const {
        const index_t n = g.F * g.dv1, fc = idx % n, ps = idx / n, p = ps / sg.count, s = ps % sg.count;
        const index_t b0 = sg.first(s), nk = sg.last(s, g.nb) - b0 + 1;
        W* d = D + (p * g.nb + b0) * n + fc;
        W cur[scan_segment];
        for (index_t k = 0; k < scan_segment; ++k) cur[k] = k < nk ? d[k * n] : W(0);
        W run = W(0);
        for (index_t k = scan_segment - 1; k >= 0; --k) {
            if (k < nk) {
                const suffix_step<W> st = steps.at(p, b0 + k, k);
                run = st.begin(run);
                d[k * n] = st.stored(run);
                run = st.next(run, cur[k]);
            }
        }
        T[idx] = run;
    }
};

/// Suffix, step 2, per (p, fc), last segment first: T[p, s] becomes the value for
/// segment s's last block from the blocks after the segment, at reference E_{last(s)}.
template <class Map, class W>
struct suffix_carries {
    geometry g;
    segments sg;
    const W* E;
    W* T;
    KATTN_HD void operator()(index_t idx) const {
        const index_t n = g.F * g.dv1, p = idx / n, fc = idx % n;
        W* t = T + p * sg.count * n + fc;
        W carry = W(0);
        for (index_t s1 = sg.count - 1; s1 >= 0; s1 -= scan_segment) {  // tiles [s1 − 15, s1]
            const index_t nt = s1 + 1 < scan_segment ? s1 + 1 : scan_segment;
            W local[scan_segment];  // the values for blocks first(s) − 1 from segment s's blocks
            for (index_t k = 0; k < scan_segment; ++k) local[k] = k < nt ? t[(s1 - k) * n] : W(0);
            for (index_t k = 0; k < scan_segment; ++k) {
                const index_t s = s1 - k;
                if (k < nt) t[s * n] = carry;
                if (k < nt && s > 0) {
                    const index_t b0 = sg.first(s), b1 = sg.last(s, g.nb);
                    carry = sequence_ends_in(g, b0, b1)
                                ? local[k]
                                : local[k] + rescale<Map>(E[p * g.nb + b0 - 1], E[p * g.nb + b1]) * carry;
                }
            }
        }
    }
};

/// Suffix, step 3, per row (p, b), over its elements fc: D_b += e^{E_b − E_{last}} times
/// the carry of b's segment, unless a document ends in [b, last].
template <class Map, class W, class Ops = scalar_ops>
struct suffix_apply {
    geometry g;
    segments sg;
    const W* E;
    const W* T;
    W* D;
    KATTN_HD void operator()(index_t pb) const {
        const index_t n = g.F * g.dv1, p = pb / g.nb, b = pb % g.nb;
        const index_t s = b / sg.seg, b1 = sg.last(s, g.nb);
        if (s == sg.count - 1 || sequence_ends_in(g, b, b1)) return;  // the last segment's carry is zero
        const W f = rescale<Map>(E[p * g.nb + b], E[p * g.nb + b1]);
        const W* t = T + (p * sg.count + s) * n;
        W* d = D + pb * n;
        for (index_t fc = Ops::lane(); fc < n; fc += Ops::lanes) d[fc] += f * t[fc];
    }
};

/// Prefix steps 2 and 3, after step 1 has left the prefixes within segments in A and the
/// segments' totals in T (problems × segments × F(dv+1)): A then holds the exclusive
/// prefixes X_b.
template <class Map, class W, class System>
void finish_prefix(const System& sys, const geometry& g, const W* E, W* T, W* A) {
    const segments sg = segments_of(g);
    sys.launch(g.problems * g.F * g.dv1, prefix_carries<Map, W>{g, sg, E, T});
    launch_rows(sys, g.problems * g.nb, prefix_apply<Map, W, system_row_ops<System>>{g, sg, E, T, A});
}

/// Suffix steps 2 and 3, after step 1 has left the suffixes within segments in D and the
/// values for the blocks before the segments in T: D then holds the reverse suffixes.
template <class Map, class W, class System>
void finish_suffix(const System& sys, const geometry& g, const W* E, W* T, W* D) {
    const segments sg = segments_of(g);
    sys.launch(g.problems * g.F * g.dv1, suffix_carries<Map, W>{g, sg, E, T});
    launch_rows(sys, g.problems * g.nb, suffix_apply<Map, W, system_row_ops<System>>{g, sg, E, T, D});
}

}  // namespace kattn::detail::chunked_impl
