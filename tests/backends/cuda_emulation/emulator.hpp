// tests/backends/cuda_emulation/emulator.hpp — CUDA's execution model on one host thread, so
// that the CUDA backend's own kernels (chunk_outputs.cuh, projected_rows.cuh, warp_ops.cuh)
// run and are checked on any machine (tests/backends/test_cuda_emulated.cpp).
//
// A launch runs its blocks one after another; a block's threads are fibers (ucontext) on
// the calling thread, switched only at barriers: __syncthreads waits for the block's
// threads, __syncwarp for the warp's 32, and __shfl_xor_sync exchanges the lanes' values
// through the warp's slots between two warp barriers. threadIdx, blockIdx, blockDim and
// gridDim are set for the fiber that runs. A kernel whose threads stop at barriers that
// can never all be reached (a barrier in divergent code, a warp that left early) is
// reported as a deadlock, the launch abandoned and faults() counted. The WMMA stand-in
// (mma.h) holds a whole tile in every lane and checks the alignment rules of
// load_matrix_sync and store_matrix_sync (also counted in faults()). Dynamic shared memory
// is a static array per kernel, which the test declares.
// What this cannot show: timing, bank conflicts, the real fragment layouts, and races that
// the barriers do not order (fibers switch only at barriers, so such a race never shows).
// Not for sanitizer builds: AddressSanitizer does not follow swapcontext's stacks.
#pragma once

#include <ucontext.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <memory>
#include <type_traits>
#include <vector>

struct uint3 {
    unsigned x = 0, y = 0, z = 0;
};
// CUDA's vector type: four floats, 16-byte aligned (loads of one are checked by the caller's
// alignment test, as on a GPU, where a misaligned one faults).
struct alignas(16) float4 {
    float x, y, z, w;
};

inline uint3 threadIdx, blockIdx, blockDim, gridDim;

#define __global__
#define __device__
#define __host__
#define __shared__
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))

namespace cuda_emulation {

/// Broken rules seen since the last reset: misaligned WMMA pointers or leading
/// dimensions, shared memory beyond the test's array, deadlocked barriers.
inline int& faults() {
    static int n = 0;
    return n;
}

struct fiber {
    ucontext_t ctx{};
    unsigned tid = 0;
    bool done = false;
};

struct barrier {
    int target = 0, arrived = 0;
    std::vector<fiber*> waiting;
};

/// The running launch: its fibers, the queue of runnable ones, the block's barriers.
struct launch_state {
    ucontext_t scheduler{};
    std::vector<fiber> fibers;
    std::deque<fiber*> runnable;
    fiber* current = nullptr;
    barrier block;
    std::vector<barrier> warps;
    std::vector<std::array<std::uint64_t, 32>> slots;
    void (*entry)(void*) = nullptr;
    void* body = nullptr;
};

inline launch_state*& state() {
    static launch_state* s = nullptr;
    return s;
}

/// The fibers' stacks, kept from launch to launch (left uninitialised: a fresh, zeroed
/// set per launch cost more than the kernels).
inline constexpr std::size_t stack_bytes = std::size_t(1) << 17;
inline std::vector<std::unique_ptr<char[]>>& stacks() {
    static std::vector<std::unique_ptr<char[]>> pool;
    return pool;
}

inline void wait(barrier& b) {
    launch_state& s = *state();
    if (++b.arrived == b.target) {
        b.arrived = 0;
        for (fiber* f : b.waiting) s.runnable.push_back(f);
        b.waiting.clear();
        return;
    }
    b.waiting.push_back(s.current);
    swapcontext(&s.current->ctx, &s.scheduler);
}

inline void fiber_main() {
    launch_state& s = *state();
    s.entry(s.body);
    s.current->done = true;
    swapcontext(&s.current->ctx, &s.scheduler);
}

/// Sets f to start at fiber_main on `stack`. Kept out of launch(): getcontext returns
/// twice, and the compiler would then have to assume launch()'s loop counters clobbered.
[[gnu::noinline]] inline void prepare(fiber& f, char* stack) {
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = stack;
    f.ctx.uc_stack.ss_size = stack_bytes;
    f.ctx.uc_link = nullptr;
    makecontext(&f.ctx, fiber_main, 0);
}

/// body() as `grid` blocks of `threads` threads (a multiple of 32), one block at a time.
/// Returns false (and counts a fault) if a block deadlocked, or if called from a kernel
/// (launches do not nest).
template <class Body>
bool launch(unsigned grid, unsigned threads, const Body& body) {
    if (state() != nullptr) {
        std::fprintf(stderr, "cuda_emulation: a launch from inside a kernel\n");
        ++faults();
        return false;
    }
    launch_state s;
    s.entry = [](void* p) { (*static_cast<const Body*>(p))(); };
    s.body = const_cast<void*>(static_cast<const void*>(&body));
    s.fibers.resize(threads);
    while (stacks().size() < threads) stacks().emplace_back(new char[stack_bytes]);
    state() = &s;
    bool ok = true;
    for (unsigned b = 0; b < grid && ok; ++b) {
        s.block = barrier{int(threads), 0, {}};
        s.warps.assign(threads / 32, barrier{32, 0, {}});
        s.slots.assign(threads / 32, {});
        for (unsigned t = 0; t < threads; ++t) {
            fiber& f = s.fibers[t];
            f.tid = t;
            f.done = false;
            prepare(f, stacks()[t].get());
            s.runnable.push_back(&f);
        }
        while (!s.runnable.empty()) {
            fiber* f = s.runnable.front();
            s.runnable.pop_front();
            s.current = f;
            threadIdx = {f->tid, 0, 0};
            blockIdx = {b, 0, 0};
            blockDim = {threads, 1, 1};
            gridDim = {grid, 1, 1};
            swapcontext(&s.scheduler, &f->ctx);
        }
        for (const auto& f : s.fibers)
            if (!f.done) ok = false;
    }
    if (!ok) {
        std::fprintf(stderr, "cuda_emulation: deadlock: threads wait at barriers the others never reach\n");
        ++faults();
    }
    state() = nullptr;
    return ok;
}

}  // namespace cuda_emulation

inline void __syncthreads() { cuda_emulation::wait(cuda_emulation::state()->block); }
inline void __syncwarp(unsigned = 0xffffffffu) {
    cuda_emulation::wait(cuda_emulation::state()->warps[threadIdx.x / 32]);
}

template <class T>
T __shfl_xor_sync(unsigned, T v, int lane_mask) {
    static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8);
    const unsigned w = threadIdx.x / 32, lane = threadIdx.x % 32;
    std::uint64_t bits = 0;
    std::memcpy(&bits, &v, sizeof(T));
    cuda_emulation::state()->slots[w][lane] = bits;
    __syncwarp();
    bits = cuda_emulation::state()->slots[w][lane ^ unsigned(lane_mask)];
    __syncwarp();
    T r;
    std::memcpy(&r, &bits, sizeof(T));
    return r;
}
