// kattn/dist/sequence_parallel.hpp — linear attention over a sequence split across ranks.
//
//   kattn::linear_attention<kattn::features::favor> op(cfg);    // same cfg (seed) on every rank
//   kattn::dist::sequence_parallel sp(op, comm);                 // comm: a dist::communicator
//   auto out = sp(q, k, v, kattn::causal);   // q, k, v: this rank's slice [B, H, L_r, d]
//   auto g = sp.backward(q, k, v, dout, kattn::causal);          // ∂Ω, ∂b summed over ranks
//
// Rank r holds tokens [offset_r, offset_r + L_r) of every sequence, ranks in order
// (slices may differ in length). The state crossing a split is F × (d_v + 1) numbers per
// head whatever L is: one all_gather of the ranks' key totals (S, z) per forward, and of
// their query totals (∂S, ∂z) once more per backward; each rank merges what it sees in
// rank order (an exclusive prefix when causal, every other rank otherwise), so results
// do not depend on the transport's reduction order. Favor's stabiliser shifts travel
// with the states, making the running maximum global. Key lengths are global (per batch
// entry, over the whole sequence). Packed documents (packed_sequences: cu_seqlens,
// global) may cross the splits: attention stays within each document. Results equal the
// single-process operator (run per document when packed) on the
// concatenated sequence up to rounding. Bad input on any rank raises the same
// kattn::error on every rank (never a hang). Algorithm, costs, launch: docs/distributed.md.
#pragma once

#include <algorithm>
#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "../attention/linear_attention.hpp"
#include "../backends/split.hpp"
#include "../core/error.hpp"
#include "../core/shape.hpp"
#include "communicator.hpp"
#include "packed_sequences.hpp"

namespace kattn::dist {

namespace detail {
template <class>
inline constexpr bool unsupported_attention = false;
}

/// Primary template: only kattn::linear_attention splits over ranks.
template <class Attention, class Comm>
class sequence_parallel {
    static_assert(detail::unsupported_attention<Attention>,
                  "kattn::dist::sequence_parallel: Attention must be a kattn::linear_attention<Map, Sampler, "
                  "Backend, T> (softmax attention has no state of constant size to pass between ranks)");
};

template <class Map, class Sampler, class Backend, class T, class Comm>
class sequence_parallel<linear_attention<Map, Sampler, Backend, T>, Comm> {
    static_assert(communicator<Comm>, "kattn::dist::sequence_parallel: Comm must model kattn::dist::communicator");
    static_assert(!communicator_traits<Comm>::device_memory,
                  "kattn::dist::sequence_parallel: the CPU backends exchange host buffers; this communicator "
                  "moves device memory (use mpi_communicator)");
    static_assert(execution_backend_traits<Backend>::splits_sequences,
                  "kattn::dist::sequence_parallel: this backend cannot run one slice of a split sequence (it has "
                  "no forward/backward taking a backends::slice_link, backends/split.hpp); use backends::simd or "
                  "backends::reference");

public:
    using attention_type = linear_attention<Map, Sampler, Backend, T>;
    using value_type = T;
    template <std::size_t R>
    using gradients = typename attention_type::template gradients<R>;

    /// Where this rank's slice sits in the whole sequence (set by each call).
    struct slice_info {
        index_t offset = 0;  ///< position of this rank's first token
        index_t length = 0;  ///< tokens of the whole sequence (all ranks)
    };

    sequence_parallel(attention_type op, Comm& comm) : op_(std::move(op)), comm_(&comm) {}

    const attention_type& attention() const { return op_; }
    attention_type& attention() { return op_; }
    Comm& communicator() const { return *comm_; }
    /// The slice of the last call.
    const slice_info& slice() const { return slice_; }

    // ---- forward (collective) --------------------------------------------------------------
    template <std::size_t R>
    xt::xtensor<T, R> operator()(const xt::xtensor<T, R>& q, const xt::xtensor<T, R>& k, const xt::xtensor<T, R>& v) {
        return forward(q, k, v, false, {}, false);
    }
    template <std::size_t R>
    xt::xtensor<T, R> operator()(const xt::xtensor<T, R>& q, const xt::xtensor<T, R>& k, const xt::xtensor<T, R>& v,
                                 causal_t) {
        return forward(q, k, v, true, {}, false);
    }
    /// `lengths`: valid keys of each batch entry in the whole sequence.
    template <std::size_t R>
    xt::xtensor<T, R> operator()(const xt::xtensor<T, R>& q, const xt::xtensor<T, R>& k, const xt::xtensor<T, R>& v,
                                 key_lengths lengths) {
        return forward(q, k, v, false, lengths, true);
    }
    template <std::size_t R>
    xt::xtensor<T, R> operator()(const xt::xtensor<T, R>& q, const xt::xtensor<T, R>& k, const xt::xtensor<T, R>& v,
                                 causal_t, key_lengths lengths) {
        return forward(q, k, v, true, lengths, true);
    }
    /// Packed documents (batch 1): attention within each document of `docs` only.
    template <std::size_t R>
    xt::xtensor<T, R> operator()(const xt::xtensor<T, R>& q, const xt::xtensor<T, R>& k, const xt::xtensor<T, R>& v,
                                 packed_sequences docs) {
        return forward(q, k, v, false, {}, false, &docs);
    }
    template <std::size_t R>
    xt::xtensor<T, R> operator()(const xt::xtensor<T, R>& q, const xt::xtensor<T, R>& k, const xt::xtensor<T, R>& v,
                                 causal_t, packed_sequences docs) {
        return forward(q, k, v, true, {}, false, &docs);
    }

    // ---- backward (collective) -------------------------------------------------------------
    template <std::size_t R>
    gradients<R> backward(const xt::xtensor<T, R>& q, const xt::xtensor<T, R>& k, const xt::xtensor<T, R>& v,
                          const xt::xtensor<T, R>& dout) {
        return run_backward(q, k, v, dout, false, {}, false);
    }
    template <std::size_t R>
    gradients<R> backward(const xt::xtensor<T, R>& q, const xt::xtensor<T, R>& k, const xt::xtensor<T, R>& v,
                          const xt::xtensor<T, R>& dout, causal_t) {
        return run_backward(q, k, v, dout, true, {}, false);
    }
    template <std::size_t R>
    gradients<R> backward(const xt::xtensor<T, R>& q, const xt::xtensor<T, R>& k, const xt::xtensor<T, R>& v,
                          const xt::xtensor<T, R>& dout, key_lengths lengths) {
        return run_backward(q, k, v, dout, false, lengths, true);
    }
    template <std::size_t R>
    gradients<R> backward(const xt::xtensor<T, R>& q, const xt::xtensor<T, R>& k, const xt::xtensor<T, R>& v,
                          const xt::xtensor<T, R>& dout, causal_t, key_lengths lengths) {
        return run_backward(q, k, v, dout, true, lengths, true);
    }
    template <std::size_t R>
    gradients<R> backward(const xt::xtensor<T, R>& q, const xt::xtensor<T, R>& k, const xt::xtensor<T, R>& v,
                          const xt::xtensor<T, R>& dout, packed_sequences docs) {
        return run_backward(q, k, v, dout, false, {}, false, &docs);
    }
    template <std::size_t R>
    gradients<R> backward(const xt::xtensor<T, R>& q, const xt::xtensor<T, R>& k, const xt::xtensor<T, R>& v,
                          const xt::xtensor<T, R>& dout, causal_t, packed_sequences docs) {
        return run_backward(q, k, v, dout, true, {}, false, &docs);
    }

private:
    /// A validated slice: the local problem plus its local key lengths.
    struct local_problem {
        backends::attention_problem<Map, T> pb;
        std::vector<index_t> lengths;
        kattn::detail::attention_shape a;
        std::optional<detail::packed_plan> plan;  ///< packed documents
    };

    /// Every rank checks its own arguments, then all learn every rank's verdict and extents
    /// (one small all_gather), so that a bad argument anywhere fails everywhere.
    template <std::size_t R>
    local_problem agree(const xt::xtensor<T, R>& q, const xt::xtensor<T, R>& k, const xt::xtensor<T, R>& v,
                        const xt::xtensor<T, R>* dout, bool causal, key_lengths lengths, bool has_lengths,
                        const packed_sequences* packed) {
        static_assert(R == 2 || R == 4,
                      "kattn::dist::sequence_parallel: inputs are [length, dim] or "
                      "[batch, heads, length, dim]");
        const auto& cfg = op_.config();
        local_problem lp;
        std::string why;
        try {
            lp.a = kattn::detail::check_qkv(q.shape(), k.shape(), v.shape(), cfg.head_dim, cfg.value_dim);
            if (causal)
                kattn::detail::require(lp.a.q_len == lp.a.k_len, "k",
                                       "this rank's slice of keys as long as its queries, " +
                                           std::to_string(lp.a.q_len) + " (causal attention)",
                                       lp.a.k_len);
            if (has_lengths)
                kattn::detail::require(index_t(lengths.size()) == lp.a.batch, "key_lengths",
                                       "one entry per batch (" + std::to_string(lp.a.batch) + ")", lengths.size());
            if (packed)
                kattn::detail::require(lp.a.batch == 1 && lp.a.q_len == lp.a.k_len, "q",
                                       "batch 1 and as many queries as keys (packed documents)",
                                       kattn::detail::shape_text(q.shape()));
            if (dout) {
                auto oshape = q.shape();
                oshape[R - 1] = v.shape()[R - 1];
                kattn::detail::require(std::equal(oshape.begin(), oshape.end(), dout->shape().begin()), "dout",
                                       "the output's shape " + kattn::detail::shape_text(oshape),
                                       kattn::detail::shape_text(dout->shape()));
            }
            if (cfg.check_finite) {
                kattn::detail::check_finite("q", q.data(), index_t(q.size()));
                kattn::detail::check_finite("k", k.data(), index_t(k.size()));
                kattn::detail::check_finite("v", v.data(), index_t(v.size()));
                if (dout) kattn::detail::check_finite("dout", dout->data(), index_t(dout->size()));
            }
        } catch (const kattn::error& e) {
            why = e.what();
        }
        // Extents of every rank: ok, batch, heads, q_len, k_len, causal, has_lengths, and the
        // packed documents' count and digest (0, 0: not packed).
        constexpr std::size_t fields = 9;
        const std::int64_t docs = packed ? std::int64_t(packed->cu_seqlens.size()) : 0;
        const std::int64_t mine[fields] = {
            why.empty() ? 1 : 0, lp.a.batch, lp.a.heads,
            lp.a.q_len,          lp.a.k_len, causal ? 1 : 0,
            has_lengths ? 1 : 0, docs,       packed ? detail::digest(packed->cu_seqlens) : 0};
        const int N = comm_->size(), me = comm_->rank();
        std::vector<std::int64_t> all(std::size_t(N) * fields);
        comm_->all_gather(mine, all.data(), fields);
        if (!why.empty()) throw kattn::error(why + " (rank " + std::to_string(me) + ")");
        index_t offset = 0, total = 0;
        std::vector<index_t> offsets, slices;
        for (int r = 0; r < N; ++r) {
            const std::int64_t* f = &all[std::size_t(r) * fields];
            if (f[0] == 0)
                kattn::detail::fail("rank " + std::to_string(r), "valid arguments on every rank",
                                    "an error on that rank (see its message)");
            kattn::detail::require(
                f[1] == lp.a.batch && f[2] == lp.a.heads && f[5] == mine[5] && f[6] == mine[6],
                "rank " + std::to_string(r),
                "the same batch, heads, causal flag and use of key_lengths as rank " + std::to_string(me),
                "batch " + std::to_string(f[1]) + ", heads " + std::to_string(f[2]));
            kattn::detail::require(f[7] == mine[7] && f[8] == mine[8], "rank " + std::to_string(r),
                                   "the same packed_sequences as rank " + std::to_string(me),
                                   f[7] == 0 ? std::string("none") : std::to_string(f[7]) + " offsets that differ");
            offsets.push_back(total);
            slices.push_back(index_t(f[4]));
            if (r < me) offset += index_t(f[4]);
            total += index_t(f[4]);
        }
        slice_ = {offset, total};
        if (packed) {  // the same boundaries everywhere: every rank fails alike
            detail::check_boundaries(packed->cu_seqlens, total);
            lp.plan = detail::make_plan(packed->cu_seqlens, offsets, slices, me);
        }
        if (has_lengths) {
            // Global lengths are checked on every rank against the whole sequence.
            for (std::size_t b = 0; b < lengths.size(); ++b) {
                const index_t len = lengths[b];
                kattn::detail::require(len >= 1 && len <= total, "key_lengths",
                                       "values in [1, " + std::to_string(total) + "] (the whole sequence)",
                                       std::to_string(len) + " at batch " + std::to_string(b));
                lp.lengths.push_back(std::clamp<index_t>(len - offset, 0, lp.a.k_len));
            }
        }
        auto& pb = lp.pb;
        pb.spec = op_.spec();
        pb.q = q.data();
        pb.k = k.data();
        pb.v = v.data();
        pb.problems = lp.a.problems();
        pb.heads = lp.a.heads;
        pb.q_len = lp.a.q_len;
        pb.k_len = lp.a.k_len;
        pb.dv = lp.a.v_dim;
        pb.key_lengths = has_lengths ? lp.lengths.data() : nullptr;
        pb.causal = causal;
        pb.input_scale = op_.input_scale();
        pb.eps = cfg.eps;
        pb.backward_cache_bytes = cfg.backward_cache_bytes;
        return lp;
    }

    /// The link of this call: all_gather of the ranks' totals, merged in rank order. Packed
    /// (`plan`): every rank sends its two edge entries (the first segment's totals, then the
    /// last's; the same twice for a single segment) and entry e of this rank merges the
    /// entries of the other ranks that hold a part of its document (detail::entry_of).
    backends::slice_link<T> link(bool causal, const detail::packed_plan* plan = nullptr) {
        const index_t F = op_.feature_dim(), dv = op_.value_dim();
        auto exchange = [this, causal, F, dv, plan](bool keys) {
            return [this, causal, F, dv, keys, plan](backends::slice_states<const T> own,
                                                     backends::slice_states<T> others) {
                // Sent per rank: `slots` groups of `heads` problems (unpacked: all problems).
                const index_t problems = problems_, slots = plan ? 2 : 1, heads = problems / (plan ? plan->edges() : 1);
                const index_t sent = slots * heads;
                const std::size_t nS = std::size_t(sent * F * dv), nz = std::size_t(sent * F), nC = std::size_t(sent),
                                  block = nS + nz + nC;
                std::vector<T> send(block), all(block * std::size_t(comm_->size()));
                for (index_t p = 0; p < sent; ++p) {  // slot 1 of a single segment repeats entry 0
                    const index_t src = plan ? std::min(p / heads, plan->edges() - 1) * heads + p % heads : p;
                    std::copy_n(own.S + src * F * dv, F * dv, send.begin() + p * F * dv);
                    std::copy_n(own.z + src * F, F, send.begin() + std::ptrdiff_t(nS) + p * F);
                    send[nS + nz + std::size_t(p)] = own.C[src];
                }
                comm_->all_gather(send.data(), all.data(), block);
                std::fill_n(others.S, std::size_t(problems * F * dv), T(0));
                std::fill_n(others.z, std::size_t(problems * F), T(0));
                std::fill_n(others.C, std::size_t(problems), kattn::detail::empty_shift<T>());
                const int N = comm_->size(), me = comm_->rank();
                for (int r = 0; r < N; ++r) {
                    // keys: earlier ranks when causal; queries: later ranks; all others otherwise
                    const bool seen = !causal ? r != me : keys ? r < me : r > me;
                    if (!seen) continue;
                    const T* b = all.data() + std::size_t(r) * block;
                    for (index_t p = 0; p < problems; ++p) {
                        index_t from = p;
                        if (plan) {  // rank r's entry holding this entry's document, if any
                            const int slot = detail::entry_of(*plan, r, plan->edge(p / heads).doc);
                            if (slot < 0) continue;
                            from = slot * heads + p % heads;
                        }
                        const T* Sb = b + from * F * dv;
                        const T* zb = b + nS + from * F;
                        const T Cb = b[nS + nz + std::size_t(from)];
                        if (keys)
                            kattn::detail::merge_key_state(F, dv, others.S + p * F * dv, others.z + p * F, others.C[p],
                                                           Sb, zb, Cb);
                        else
                            kattn::detail::merge_query_state(F, dv, others.S + p * F * dv, others.z + p * F,
                                                             others.C[p], Sb, zb, Cb);
                    }
                }
            };
        };
        return backends::slice_link<T>{exchange(true), exchange(false)};
    }

    /// Rows of some segments of a [H, L_r, w] slice, as a [segments, H, len, w] problem
    /// padded with zeros to the longest segment `len` (gather), and back (scatter).
    struct segment_rows {
        std::vector<detail::packed_segment> segs;
        index_t H = 1, L = 0, len = 0;
        std::vector<index_t> lengths;
        segment_rows(std::vector<detail::packed_segment> s, index_t heads, index_t slice)
            : segs(std::move(s)), H(heads), L(slice) {
            for (const auto& g : segs) len = std::max(len, g.length), lengths.push_back(g.length);
        }
        std::vector<T> gather(const T* x, index_t w) const {
            std::vector<T> r(segs.size() * std::size_t(H * len * w), T(0));
            for (std::size_t e = 0; e < segs.size(); ++e)
                for (index_t h = 0; h < H; ++h)
                    std::copy_n(x + (h * L + segs[e].begin) * w, segs[e].length * w,
                                r.data() + ((index_t(e) * H + h) * len) * w);
            return r;
        }
        void scatter(const std::vector<T>& r, T* x, index_t w) const {
            for (std::size_t e = 0; e < segs.size(); ++e)
                for (index_t h = 0; h < H; ++h)
                    std::copy_n(r.data() + ((index_t(e) * H + h) * len) * w, segs[e].length * w,
                                x + (h * L + segs[e].begin) * w);
        }
    };

    /// The problem of `rows` within the slice problem `base` (inputs q, k, v gathered);
    /// `cu`, when given, packs documents into the one segment of `rows`.
    backends::attention_problem<Map, T> sub_problem(const backends::attention_problem<Map, T>& base,
                                                    const segment_rows& rows, const std::vector<T>& q,
                                                    const std::vector<T>& k, const std::vector<T>& v,
                                                    const std::vector<index_t>* cu) const {
        auto pb = base;
        pb.q = q.data();
        pb.k = k.data();
        pb.v = v.data();
        pb.problems = index_t(rows.segs.size()) * base.heads;
        pb.q_len = pb.k_len = rows.len;
        pb.key_lengths = rows.lengths.data();  // the zero padding is never a key
        if (cu) {
            pb.key_lengths = nullptr;
            pb.cu_seqlens = cu->data();
            pb.documents = index_t(cu->size()) - 1;
        }
        return pb;
    }

    /// The jobs of a packed slice: the linked edge entries, then the inner documents (whole
    /// documents of this slice alone, consecutive rows): one packed problem on a backend that
    /// packs_sequences, else each document alone. run(rows, linked, cu or nullptr).
    template <class Run>
    void for_each_job(const detail::packed_plan& plan, const backends::attention_problem<Map, T>& pb, Run run) {
        std::vector<detail::packed_segment> edges{plan.edge(0)};
        if (plan.edges() == 2) edges.push_back(plan.edge(1));
        run(segment_rows(edges, pb.heads, pb.q_len), true, nullptr);
        const auto inner = plan.inner();
        if (inner.empty()) return;
        if constexpr (execution_backend_traits<Backend>::packs_sequences) {
            const index_t b = inner.front().begin;
            std::vector<index_t> cu{0};
            for (const auto& seg : inner) cu.push_back(seg.begin + seg.length - b);
            run(segment_rows({{inner.front().doc, b, cu.back()}}, pb.heads, pb.q_len), false, &cu);
        } else {
            for (const auto& seg : inner) run(segment_rows({seg}, pb.heads, pb.q_len), false, nullptr);
        }
    }

    template <std::size_t R>
    xt::xtensor<T, R> forward(const xt::xtensor<T, R>& q, const xt::xtensor<T, R>& k, const xt::xtensor<T, R>& v,
                              bool causal, key_lengths lengths, bool has_lengths,
                              const packed_sequences* packed = nullptr) {
        const auto lp =
            agree(q, k, v, static_cast<const xt::xtensor<T, R>*>(nullptr), causal, lengths, has_lengths, packed);
        auto shape = q.shape();
        shape[R - 1] = v.shape()[R - 1];
        xt::xtensor<T, R> out = xt::xtensor<T, R>::from_shape(shape);
        if (!lp.plan) {
            problems_ = lp.pb.problems;
            Backend::template forward<Map>(lp.pb, out.data(), link(causal));
            return out;
        }
        const index_t d = lp.a.qk_dim, dv = lp.a.v_dim;
        for_each_job(*lp.plan, lp.pb, [&](const segment_rows& rows, bool linked, const std::vector<index_t>* cu) {
            const auto qs = rows.gather(q.data(), d), ks = rows.gather(k.data(), d), vs = rows.gather(v.data(), dv);
            const auto pb = sub_problem(lp.pb, rows, qs, ks, vs, cu);
            std::vector<T> o(std::size_t(pb.problems * pb.q_len * dv));
            problems_ = pb.problems;
            if (linked)
                Backend::template forward<Map>(pb, o.data(), link(causal, &*lp.plan));
            else
                Backend::template forward<Map>(pb, o.data());
            rows.scatter(o, out.data(), dv);
        });
        return out;
    }

    template <std::size_t R>
    gradients<R> run_backward(const xt::xtensor<T, R>& q, const xt::xtensor<T, R>& k, const xt::xtensor<T, R>& v,
                              const xt::xtensor<T, R>& dout, bool causal, key_lengths lengths, bool has_lengths,
                              const packed_sequences* packed = nullptr) {
        const auto lp = agree(q, k, v, &dout, causal, lengths, has_lengths, packed);
        constexpr bool bias = feature_map_traits<Map>::uses_bias;
        gradients<R> g;
        g.dq = xt::xtensor<T, R>::from_shape(q.shape());
        g.dk = xt::xtensor<T, R>::from_shape(k.shape());
        g.dv = xt::xtensor<T, R>::from_shape(v.shape());
        g.d_omega = xt::xtensor<T, 2>::from_shape(op_.omega().shape());
        g.d_bias = xt::xtensor<T, 1>::from_shape({bias ? op_.bias().size() : std::size_t(0)});
        if (!lp.plan) {
            backends::attention_gradients<T> gv{dout.data(), g.dq.data(),      g.dk.data(),
                                                g.dv.data(), g.d_omega.data(), bias ? g.d_bias.data() : nullptr};
            problems_ = lp.pb.problems;
            Backend::template backward<Map>(lp.pb, gv, link(causal));
        } else {
            std::fill(g.d_omega.begin(), g.d_omega.end(), T(0));
            std::fill(g.d_bias.begin(), g.d_bias.end(), T(0));
            const index_t d = lp.a.qk_dim, dv = lp.a.v_dim;
            std::vector<T> dom(g.d_omega.size()), db(g.d_bias.size());
            for_each_job(*lp.plan, lp.pb, [&](const segment_rows& rows, bool linked, const std::vector<index_t>* cu) {
                const auto qs = rows.gather(q.data(), d), ks = rows.gather(k.data(), d), vs = rows.gather(v.data(), dv),
                           gs = rows.gather(dout.data(), dv);
                const auto pb = sub_problem(lp.pb, rows, qs, ks, vs, cu);
                std::vector<T> dq(qs.size()), dk(ks.size()), dvs(vs.size());
                const backends::attention_gradients<T> gv{gs.data(),  dq.data(),  dk.data(),
                                                          dvs.data(), dom.data(), bias ? db.data() : nullptr};
                problems_ = pb.problems;
                if (linked)
                    Backend::template backward<Map>(pb, gv, link(causal, &*lp.plan));
                else
                    Backend::template backward<Map>(pb, gv);
                rows.scatter(dq, g.dq.data(), d);
                rows.scatter(dk, g.dk.data(), d);
                rows.scatter(dvs, g.dv.data(), dv);
                for (std::size_t i = 0; i < dom.size(); ++i) g.d_omega.data()[i] += dom[i];
                for (std::size_t i = 0; i < db.size(); ++i) g.d_bias.data()[i] += db[i];
            });
        }
        // ∂Ω and ∂b: every rank's partial sum, added in rank order.
        const std::size_t no = g.d_omega.size(), nb = g.d_bias.size(), block = no + nb;
        std::vector<T> send(block), all(block * std::size_t(comm_->size()));
        std::copy_n(g.d_omega.data(), no, send.begin());
        std::copy_n(g.d_bias.data(), nb, send.begin() + no);
        comm_->all_gather(send.data(), all.data(), block);
        std::fill(g.d_omega.begin(), g.d_omega.end(), T(0));
        std::fill(g.d_bias.begin(), g.d_bias.end(), T(0));
        for (int r = 0; r < comm_->size(); ++r) {
            const T* b = all.data() + std::size_t(r) * block;
            for (std::size_t i = 0; i < no; ++i) g.d_omega.data()[i] += b[i];
            for (std::size_t i = 0; i < nb; ++i) g.d_bias.data()[i] += b[no + i];
        }
        return g;
    }

    attention_type op_;
    Comm* comm_;
    slice_info slice_;
    index_t problems_ = 0;
};

template <class Attention, class Comm>
sequence_parallel(Attention, Comm&) -> sequence_parallel<Attention, Comm>;

}  // namespace kattn::dist
