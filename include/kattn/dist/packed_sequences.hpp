// kattn/dist/packed_sequences.hpp — documents packed along a sequence split across ranks.
//
//   const std::vector<kattn::index_t> cu{0, 700, 1500, 4096};      // three documents
//   auto out = sp(q, k, v, kattn::causal, kattn::dist::packed_sequences{cu});
//
// FlashAttention's `cu_seqlens` convention: document i holds the tokens
// [cu[i], cu[i + 1]) of the whole sequence (global positions, the same list on every rank),
// and attention never crosses a document boundary; boundaries may fall anywhere, inside a
// rank's slice or on a split. The plan below cuts this rank's slice into segments, one per
// document it touches. Only the first and the last segment can continue on other ranks:
// they run as the two batch entries of one problem whose slice link exchanges, per head,
// the totals of both (a fixed size per rank), and each entry merges, in rank order, the
// totals of the other ranks' segments of its own document. Segments strictly inside are
// whole documents and run without a link. Used by sequence_parallel (sequence_parallel.hpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "../core/config.hpp"
#include "../core/error.hpp"
#include "../attention/detail/packed.hpp"
#include "../attention/options.hpp"

namespace kattn::dist {

/// Document boundaries of a packed sequence: cu_seqlens = {0, c_1, …, L} (strictly
/// increasing; L the whole sequence's length), global and equal on every rank. The same
/// type as the single-process operators' kattn::packed_sequences (attention/options.hpp).
using kattn::packed_sequences;

namespace detail {

/// One document's tokens within this rank's slice: local positions [begin, begin + length).
struct packed_segment {
    index_t doc = 0, begin = 0, length = 0;
};

/// How this rank's slice of a packed sequence runs (see the header comment).
struct packed_plan {
    std::vector<packed_segment> segments;  ///< this rank's, in order (at least one)
    std::vector<index_t> first_doc;        ///< per rank: the document of its first token
    std::vector<index_t> last_doc;         ///< per rank: the document of its last token

    /// Batch entries of the linked problem: the first and, when different, the last segment.
    index_t edges() const { return segments.size() >= 2 ? 2 : 1; }
    const packed_segment& edge(index_t e) const { return e == 0 ? segments.front() : segments.back(); }
    /// Segments between the edges: whole documents of this slice alone.
    std::span<const packed_segment> inner() const {
        if (segments.size() <= 2) return {};
        return std::span<const packed_segment>(segments).subspan(1, segments.size() - 2);
    }
};

/// An order-sensitive 64-bit digest of the boundaries (ranks compare theirs).
inline std::int64_t digest(std::span<const index_t> cu) {
    std::uint64_t h = 0x9e3779b97f4a7c15ull ^ cu.size();
    for (const index_t c : cu) {
        h ^= std::uint64_t(c) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
        h *= 0xff51afd7ed558ccdull;
    }
    return std::int64_t(h >> 1);
}

/// Checks the boundaries against the whole length `total`.
inline void check_boundaries(std::span<const index_t> cu, index_t total) {
    kattn::detail::check_packed_offsets(cu, total);
}

/// The document holding global token `pos` (cu checked).
inline index_t document_of(std::span<const index_t> cu, index_t pos) {
    return index_t(std::upper_bound(cu.begin(), cu.end(), pos) - cu.begin()) - 1;
}

/// The plan of rank `me`, given every rank's slice offset and length (lengths ≥ 1).
inline packed_plan make_plan(std::span<const index_t> cu, std::span<const index_t> offsets,
                             std::span<const index_t> lengths, int me) {
    packed_plan plan;
    for (std::size_t r = 0; r < offsets.size(); ++r) {
        plan.first_doc.push_back(document_of(cu, offsets[r]));
        plan.last_doc.push_back(document_of(cu, offsets[r] + lengths[r] - 1));
    }
    const index_t off = offsets[std::size_t(me)], end = off + lengths[std::size_t(me)];
    for (index_t d = plan.first_doc[std::size_t(me)]; d <= plan.last_doc[std::size_t(me)]; ++d) {
        const index_t b = std::max(off, cu[std::size_t(d)]), e = std::min(end, cu[std::size_t(d) + 1]);
        plan.segments.push_back({d, b - off, e - b});
    }
    return plan;
}

/// Which of rank s's two exchanged entries holds its part of document `doc`: 1 (its last
/// segment; also its only one), 0 (its first), or −1 (none).
inline int entry_of(const packed_plan& plan, int s, index_t doc) {
    if (plan.last_doc[std::size_t(s)] == doc) return 1;
    if (plan.first_doc[std::size_t(s)] == doc) return 0;
    return -1;
}

}  // namespace detail
}  // namespace kattn::dist
