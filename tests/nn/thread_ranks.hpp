// tests/nn/thread_ranks.hpp — N simulated ranks as N threads of the test process, for the
// data-parallel tests of the unit suite (no MPI). thread_communicator satisfies
// kattn::dist::communicator: every collective meets at a barrier, all_reduce_sum adds the
// ranks' buffers in rank order, and each call checks that every rank called the same
// collective with the same count. A rank that throws (or a rank left waiting 60 s) breaks
// the group: the others throw too, so a wrong collective sequence fails instead of hanging.
// run_ranks(N, f) runs f(comm) on N threads (one OpenMP thread each) and returns each
// rank's exception (null when it finished).
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <typeinfo>
#include <vector>

#include <omp.h>

#include <kattn/dist/communicator.hpp>

namespace kt {

class thread_group {
public:
    explicit thread_group(int n) : n_(n), posts_(std::size_t(n)) {}
    int size() const { return n_; }

    struct post {
        const void* data = nullptr;
        std::size_t n = 0;
        std::size_t type = 0;
        int kind = -1, root = 0;
    };

    /// Posts this rank's call and waits for every rank; throws unless all calls match.
    void meet(int rank, const post& p) {
        posts_[std::size_t(rank)] = p;
        arrive();
        for (const auto& q : posts_)
            if (q.n != p.n || q.type != p.type || q.kind != p.kind || q.root != p.root)
                throw std::runtime_error("thread_group: ranks called different collectives");
    }
    const post& posted(int rank) const { return posts_[std::size_t(rank)]; }

    void arrive() {
        std::unique_lock<std::mutex> lk(m_);
        if (broken_) throw std::runtime_error("thread_group: another rank failed");
        const std::uint64_t gen = generation_;
        if (++count_ == n_) {
            count_ = 0;
            ++generation_;
            cv_.notify_all();
            return;
        }
        cv_.wait_for(lk, std::chrono::seconds(60), [&] { return generation_ != gen || broken_; });
        if (generation_ != gen) return;  // every rank arrived (even if one fails right after)
        broken_ = true;
        cv_.notify_all();
        throw std::runtime_error("thread_group: a rank did not arrive");
    }
    void breakdown() {
        std::lock_guard<std::mutex> lk(m_);
        broken_ = true;
        cv_.notify_all();
    }

private:
    int n_;
    std::vector<post> posts_;
    std::mutex m_;
    std::condition_variable cv_;
    int count_ = 0;
    std::uint64_t generation_ = 0;
    bool broken_ = false;
};

class thread_communicator {
public:
    thread_communicator(thread_group& g, int rank) : g_(g), rank_(rank) {}
    int rank() const { return rank_; }
    int size() const { return g_.size(); }

    template <class T>
    void all_gather(const T* send, T* recv, std::size_t n) {
        count(n * sizeof(T));
        g_.meet(rank_, {send, n, typeid(T).hash_code(), 0, 0});
        for (int r = 0; r < size(); ++r) {
            const T* s = static_cast<const T*>(g_.posted(r).data);
            std::copy(s, s + n, recv + std::size_t(r) * n);
        }
        g_.arrive();
    }
    template <class T>
    void all_reduce_sum(T* data, std::size_t n) {
        count(n * sizeof(T));
        g_.meet(rank_, {data, n, typeid(T).hash_code(), 1, 0});
        std::vector<T> sum(n, T(0));
        for (int r = 0; r < size(); ++r) {
            const T* s = static_cast<const T*>(g_.posted(r).data);
            for (std::size_t i = 0; i < n; ++i) sum[i] += s[i];
        }
        g_.arrive();  // every rank has read every buffer
        std::copy(sum.begin(), sum.end(), data);
    }
    template <class T>
    void broadcast(T* data, std::size_t n, int root) {
        count(n * sizeof(T));
        g_.meet(rank_, {data, n, typeid(T).hash_code(), 2, root});
        if (rank_ != root) {
            const T* s = static_cast<const T*>(g_.posted(root).data);
            std::copy(s, s + n, data);
        }
        g_.arrive();
    }
    void barrier() { g_.arrive(); }
    const kattn::dist::comm_stats& stats() const { return stats_; }

private:
    void count(std::size_t bytes) {
        ++stats_.calls;
        stats_.payload_bytes += bytes;
    }
    thread_group& g_;
    int rank_;
    kattn::dist::comm_stats stats_;
};

static_assert(kattn::dist::communicator<thread_communicator>);

/// Runs f(comm) on `ranks` threads; entry r: rank r's exception, or null.
template <class F>
std::vector<std::exception_ptr> run_ranks(int ranks, F f) {
    thread_group g(ranks);
    std::vector<std::exception_ptr> errors(static_cast<std::size_t>(ranks));
    std::vector<std::thread> threads;
    for (int r = 0; r < ranks; ++r)
        threads.emplace_back([&, r] {
            omp_set_num_threads(1);
            thread_communicator comm(g, r);
            try {
                f(comm);
            } catch (...) {
                errors[std::size_t(r)] = std::current_exception();
                g.breakdown();
            }
        });
    for (auto& t : threads) t.join();
    return errors;
}

/// The message of an exception (empty for null).
inline std::string what(const std::exception_ptr& e) {
    if (!e) return {};
    try {
        std::rethrow_exception(e);
    } catch (const std::exception& x) {
        return x.what();
    } catch (...) {
        return "unknown exception";
    }
}

}  // namespace kt
