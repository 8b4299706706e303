// kattn/nn/data_parallel.hpp — data-parallel training: N ranks, one global batch.
//
// Every rank holds the whole model. A global mini-batch of n examples is cut into N
// contiguous shards (shard_range: rank r takes [⌊r·n/N⌋, ⌊(r+1)·n/N⌋)); rank r runs forward
// and backward on its n_r examples, its loss being the mean over its shard, and then
//   g ← Σ_r (n_r / n) · g_r                       (gradient_allreducer::reduce_mean)
// is the gradient of the global batch's mean loss on every rank, so identical optimiser
// steps keep the replicas identical. A term that does not depend on the batch (FSKA's
// λ·KL) is computed by every rank with a non-empty shard and survives the weighting
// (Σ_r n_r/n = 1); a rank with an empty shard contributes zeros with weight 0.
//   communicator_ref       a type-erased reference to any host-memory
//                          kattn::dist::communicator (MPI, self, a test double; not NCCL):
//                          kattn::nn needs no MPI header. Empty: a group of one process.
//   gradient_allreducer    packs the gradients of a parameter_list, in list order, into
//                          buckets of at most `bucket_bytes` (default 4 MiB; float and double
//                          views in separate buckets; a view may straddle two), scaled while
//                          packing, one all_reduce_sum per bucket; `extra` values (metrics)
//                          ride along unscaled. `ordered`: all_gather + a sum in rank order
//                          (bitwise independent of the transport's reduction algorithm).
//   shard_batch            the batch of one shard; text is padded to the length of the whole
//                          batch, so every row is the row it is in the whole batch (with
//                          context::batch_offset, dropout draws the whole batch's masks)
//   broadcast_parameters   every view ← the root's values
//   save_checkpoint(comm, …), load_checkpoint(comm, …)  collective: the root writes (others
//                          skip) or reads and broadcasts; an error on the root throws on
//                          every rank, so no rank is left waiting in a later collective.
// All of these are collectives: every rank calls them in the same order with the same
// parameter list. Used by nn::trainer (trainer_config, the communicator argument).
#pragma once

#include <algorithm>
#include <cstdint>
#include <exception>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "../dist/communicator.hpp"
#include "checkpoint.hpp"
#include "data/dataset.hpp"
#include "parameter.hpp"

namespace kattn::nn {

/// A non-owning, type-erased kattn::dist::communicator (the communicator must outlive it).
class communicator_ref {
public:
    /// The group of this process alone (rank 0 of 1).
    communicator_ref() = default;
    template <class C>
    requires(dist::communicator<C> && !std::is_same_v<std::remove_cv_t<C>, communicator_ref>) communicator_ref(C& comm)
        : obj_(&comm), ops_(&table<C>) {
        static_assert(!dist::communicator_traits<C>::device_memory,
                      "kattn::nn data parallelism keeps gradients in host memory: use a host communicator (MPI)");
    }

    /// Whether a communicator is attached (false: one process).
    bool attached() const { return obj_ != nullptr; }
    int rank() const { return obj_ ? ops_->rank(obj_) : 0; }
    int size() const { return obj_ ? ops_->size(obj_) : 1; }

    template <class T>
    void all_gather(const T* send, T* recv, std::size_t n) {
        if (obj_)
            std::get<ops_index<T>>(ops_->gather)(obj_, send, recv, n);
        else
            std::copy(send, send + n, recv);
    }
    template <class T>
    void all_reduce_sum(T* data, std::size_t n) {
        if (obj_) std::get<ops_index<T>>(ops_->reduce)(obj_, data, n);
    }
    template <class T>
    void broadcast(T* data, std::size_t n, int root) {
        if (obj_) std::get<ops_index<T>>(ops_->bcast)(obj_, data, n, root);
    }
    void barrier() {
        if (obj_) ops_->barrier(obj_);
    }
    dist::comm_stats stats() const { return obj_ ? ops_->stats(obj_) : dist::comm_stats{}; }

private:
    template <class T>
    static constexpr std::size_t ops_index = std::is_same_v<T, float>    ? 0
                                             : std::is_same_v<T, double> ? 1
                                                                         : 2;
    template <class T>
    using gather_fn = void (*)(void*, const T*, T*, std::size_t);
    template <class T>
    using reduce_fn = void (*)(void*, T*, std::size_t);
    template <class T>
    using bcast_fn = void (*)(void*, T*, std::size_t, int);
    struct ops {
        int (*rank)(const void*);
        int (*size)(const void*);
        std::tuple<gather_fn<float>, gather_fn<double>, gather_fn<std::int64_t>> gather;
        std::tuple<reduce_fn<float>, reduce_fn<double>, reduce_fn<std::int64_t>> reduce;
        std::tuple<bcast_fn<float>, bcast_fn<double>, bcast_fn<std::int64_t>> bcast;
        void (*barrier)(void*);
        dist::comm_stats (*stats)(const void*);
    };
    template <class C, class T>
    static void gather_of(void* c, const T* s, T* r, std::size_t n) {
        static_cast<C*>(c)->all_gather(s, r, n);
    }
    template <class C, class T>
    static void reduce_of(void* c, T* d, std::size_t n) {
        static_cast<C*>(c)->all_reduce_sum(d, n);
    }
    template <class C, class T>
    static void bcast_of(void* c, T* d, std::size_t n, int root) {
        static_cast<C*>(c)->broadcast(d, n, root);
    }
    template <class C>
    static constexpr ops table{[](const void* c) { return int(static_cast<const C*>(c)->rank()); },
                               [](const void* c) { return int(static_cast<const C*>(c)->size()); },
                               {&gather_of<C, float>, &gather_of<C, double>, &gather_of<C, std::int64_t>},
                               {&reduce_of<C, float>, &reduce_of<C, double>, &reduce_of<C, std::int64_t>},
                               {&bcast_of<C, float>, &bcast_of<C, double>, &bcast_of<C, std::int64_t>},
                               [](void* c) { static_cast<C*>(c)->barrier(); },
                               [](const void* c) { return dist::comm_stats(static_cast<const C*>(c)->stats()); }};

    void* obj_ = nullptr;
    const ops* ops_ = nullptr;
};

static_assert(dist::communicator<communicator_ref>);

/// Items [begin, end) of a global batch that one rank processes.
struct shard {
    index_t begin = 0, end = 0;
    index_t size() const { return end - begin; }
};

/// Rank r's shard of n items over `ranks`: [⌊r·n/N⌋, ⌊(r+1)·n/N⌋). Sizes differ by at most
/// one; a batch of N·b items gives every rank b; with n < N some shards are empty.
inline shard shard_range(index_t n, int ranks, int rank) {
    detail::require(n >= 0, "n", ">= 0", n);
    detail::require(ranks >= 1, "ranks", ">= 1", ranks);
    detail::require(rank >= 0 && rank < ranks, "rank", "a value in [0, ranks = " + std::to_string(ranks) + ")", rank);
    return {index_t(n * rank / ranks), index_t(n * (rank + 1) / ranks)};
}

/// The batch of items indices[s.begin, s.end) of `data` (s non-empty). Text is padded to the
/// length data.make_batch(indices) would have, so each row equals its row in the whole batch.
inline batch shard_batch(const dataset& data, std::span<const index_t> indices, shard s) {
    detail::require(s.begin >= 0 && s.begin < s.end && s.end <= index_t(indices.size()), "shard",
                    "a non-empty range within the " + std::to_string(indices.size()) + " indices",
                    "[" + std::to_string(s.begin) + ", " + std::to_string(s.end) + ")");
    if (s.begin == 0 && s.end == index_t(indices.size())) return data.make_batch(indices);
    batch b = data.make_batch(indices.subspan(std::size_t(s.begin), std::size_t(s.size())));
    if (b.kind != input_kind::tokens) return b;
    index_t L = 1;  // the whole batch's padded length (dataset::make_batch)
    for (index_t i : indices) L = std::max(L, std::min(index_t(data.texts[std::size_t(i)].size()), data.max_length));
    if (L == b.length) return b;
    std::vector<std::int32_t> tokens(std::size_t(b.size * L), 0);
    for (index_t r = 0; r < b.size; ++r) std::copy_n(b.tokens.data() + r * b.length, b.length, tokens.data() + r * L);
    b.tokens.swap(tokens);
    b.length = L;
    return b;
}

struct allreduce_config {
    std::size_t bucket_bytes = std::size_t(4) << 20;  ///< bucket capacity (>= 8 bytes)
    bool ordered = false;                             ///< all_gather + sum in rank order
};

class gradient_allreducer {
public:
    explicit gradient_allreducer(const allreduce_config& cfg = {}) : cfg_(cfg) {
        detail::require(cfg.bucket_bytes >= sizeof(double), "bucket_bytes", ">= 8", cfg.bucket_bytes);
    }
    const allreduce_config& config() const { return cfg_; }
    /// Collectives (buckets) of the last call.
    std::size_t last_buckets() const { return buckets_; }

    /// Every view's grad ← Σ_r scale_r · grad_r and extra ← Σ_r extra_r, on every rank
    /// (scale_r: this rank's scale; extra: the same count on every rank).
    void reduce_sum(communicator_ref comm, parameter_list& ps, double scale = 1.0, std::span<double> extra = {}) {
        buckets_ = 0;
        views_ = &ps;
        extra_ = extra;
        f_.begin(cfg_.bucket_bytes / sizeof(float));
        d_.begin(cfg_.bucket_bytes / sizeof(double));
        for (std::size_t k = 0; k < ps.size(); ++k) {
            if (ps[k].is_double())
                pack(comm, d_, ps[k].grad64, scale, k);
            else
                pack(comm, f_, ps[k].grad, scale, k);
        }
        pack(comm, d_, extra, 1.0, npos);
        flush(comm, f_);
        flush(comm, d_);
        views_ = nullptr;
        extra_ = {};
    }

    /// The gradient of the global batch's mean loss: grad ← Σ_r (local_r / global) · grad_r,
    /// where grad_r is rank r's gradient of its mean loss over its `local` examples and
    /// `global` = Σ_r local_r (the same on every rank, > 0). extra is summed as it is.
    void reduce_mean(communicator_ref comm, parameter_list& ps, index_t local, index_t global,
                     std::span<double> extra = {}) {
        detail::require(global >= 1, "global", ">= 1", global);
        detail::require(local >= 0 && local <= global, "local",
                        "a count in [0, global = " + std::to_string(global) + "]", local);
        reduce_sum(comm, ps, local == global ? 1.0 : double(local) / double(global), extra);
    }

private:
    static constexpr std::size_t npos = std::size_t(-1);
    struct segment {
        std::size_t view, offset, count;  // view == npos: the extra values
    };
    template <class T>
    struct bucket {
        std::vector<T> data;
        std::vector<segment> segments;
        std::size_t capacity = 0;
        void begin(std::size_t cap) {
            capacity = cap;
            data.clear();
            segments.clear();
        }
    };

    /// Appends scale·g to the bucket, sending the bucket whenever it is full.
    template <class T>
    void pack(communicator_ref comm, bucket<T>& b, std::span<T> g, double scale, std::size_t view) {
        for (std::size_t off = 0; off < g.size();) {
            const std::size_t c = std::min(b.capacity - b.data.size(), g.size() - off);
            b.segments.push_back({view, off, c});
            if (scale == 1.0)
                b.data.insert(b.data.end(), g.begin() + std::ptrdiff_t(off), g.begin() + std::ptrdiff_t(off + c));
            else
                for (std::size_t i = off; i < off + c; ++i) b.data.push_back(T(double(g[i]) * scale));
            off += c;
            if (b.data.size() == b.capacity) flush(comm, b);
        }
    }

    /// Sums the bucket over the ranks and writes it back to its segments.
    template <class T>
    void flush(communicator_ref comm, bucket<T>& b) {
        if (b.data.empty()) return;
        sum(comm, b.data);
        ++buckets_;
        std::size_t at = 0;
        for (const auto& sg : b.segments) {
            T* out = nullptr;
            if constexpr (std::is_same_v<T, double>)
                out = sg.view == npos ? extra_.data() : (*views_)[sg.view].grad64.data();
            else
                out = (*views_)[sg.view].grad.data();
            std::copy_n(b.data.data() + at, sg.count, out + sg.offset);
            at += sg.count;
        }
        b.data.clear();
        b.segments.clear();
    }

    template <class T>
    void sum(communicator_ref comm, std::vector<T>& data) {
        if (!cfg_.ordered) {
            comm.all_reduce_sum(data.data(), data.size());
            return;
        }
        const std::size_t n = data.size(), N = std::size_t(comm.size());
        std::vector<T>& all = gathered<T>();
        all.resize(n * N);
        comm.all_gather(data.data(), all.data(), n);
        for (std::size_t i = 0; i < n; ++i) {
            double s = 0;  // rank order, in double
            for (std::size_t r = 0; r < N; ++r) s += double(all[r * n + i]);
            data[i] = T(s);
        }
    }
    template <class T>
    std::vector<T>& gathered() {
        if constexpr (std::is_same_v<T, double>)
            return gathered_d_;
        else
            return gathered_f_;
    }

    allreduce_config cfg_;
    bucket<float> f_;
    bucket<double> d_;
    std::vector<float> gathered_f_;
    std::vector<double> gathered_d_;
    parameter_list* views_ = nullptr;
    std::span<double> extra_{};
    std::size_t buckets_ = 0;
};

/// Every view of ps ← its values on `root` (one broadcast per view).
inline void broadcast_parameters(communicator_ref comm, parameter_list& ps, int root = 0) {
    for (auto& p : ps) {
        if (p.is_double())
            comm.broadcast(p.value64.data(), p.value64.size(), root);
        else
            comm.broadcast(p.value.data(), p.value.size(), root);
    }
}

namespace detail {

/// Broadcasts whether `root` failed (its exception) and throws on every rank if it did:
/// the root rethrows its exception, the others a kattn::error carrying its message.
inline void propagate_root_error(communicator_ref comm, int root, const std::exception_ptr& failure) {
    std::string text;
    if (failure) {
        try {
            std::rethrow_exception(failure);
        } catch (const std::exception& e) {
            text = e.what();
        } catch (...) {
            text = "an unknown exception";
        }
    }
    std::int64_t status[2] = {failure ? 1 : 0, std::int64_t(text.size())};
    comm.broadcast(status, 2, root);
    if (status[0] == 0) return;
    std::vector<std::int64_t> chars(text.begin(), text.end());
    chars.resize(std::size_t(status[1]));
    comm.broadcast(chars.data(), chars.size(), root);
    if (comm.rank() == root) std::rethrow_exception(failure);
    throw kattn::error("kattn::nn: rank " + std::to_string(root) +
                       " failed: " + std::string(chars.begin(), chars.end()));
}

/// Sends the root's metadata to every rank (keys and values, flattened into doubles).
inline void broadcast_metadata(communicator_ref comm, checkpoint_metadata& meta, int root) {
    std::vector<double> flat;
    if (comm.rank() == root)
        for (const auto& [key, values] : meta) {
            flat.push_back(double(key.size()));
            flat.insert(flat.end(), key.begin(), key.end());
            flat.push_back(double(values.size()));
            flat.insert(flat.end(), values.begin(), values.end());
        }
    std::int64_t n = std::int64_t(flat.size());
    comm.broadcast(&n, 1, root);
    flat.resize(std::size_t(n));
    comm.broadcast(flat.data(), flat.size(), root);
    if (comm.rank() == root) return;
    meta.clear();
    for (std::size_t i = 0; i < flat.size();) {
        const auto kn = std::size_t(flat[i++]);
        std::string key(kn, ' ');
        for (std::size_t c = 0; c < kn; ++c) key[c] = char(flat[i++]);
        const auto vn = std::size_t(flat[i++]);
        meta[key].assign(flat.begin() + std::ptrdiff_t(i), flat.begin() + std::ptrdiff_t(i + vn));
        i += vn;
    }
}

}  // namespace detail

/// Collective save: `root` writes the checkpoint (nn/checkpoint.hpp), the other ranks write
/// nothing; a failed write throws on every rank.
inline void save_checkpoint(communicator_ref comm, const std::string& path, const parameter_list& ps,
                            const checkpoint_metadata& metadata = {}, int root = 0) {
    std::exception_ptr failure;
    if (comm.rank() == root) {
        try {
            save_checkpoint(path, ps, metadata);
        } catch (...) {
            failure = std::current_exception();
        }
    }
    detail::propagate_root_error(comm, root, failure);
}

/// Collective load: `root` reads the checkpoint at `path` (the other ranks' paths are not
/// read) and broadcasts the parameters and the metadata, which every rank returns. A failed
/// read throws on every rank and leaves every rank's ps untouched.
inline checkpoint_metadata load_checkpoint(communicator_ref comm, const std::string& path, parameter_list& ps,
                                           int root = 0) {
    std::exception_ptr failure;
    checkpoint_metadata meta;
    if (comm.rank() == root) {
        try {
            meta = load_checkpoint(path, ps);
        } catch (...) {
            failure = std::current_exception();
        }
    }
    detail::propagate_root_error(comm, root, failure);
    broadcast_parameters(comm, ps, root);
    detail::broadcast_metadata(comm, meta, root);
    return meta;
}

}  // namespace kattn::nn
