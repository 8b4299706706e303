// kattn/backends/simd/workspace.hpp — the simd backend's per-thread backward cache storage.
//
// The backward passes keep what they would otherwise recompute (the key projections of the
// non-causal pass, the causal tiles' features and scores) in one buffer per calling thread
// and value type, up to attention_config::backward_cache_bytes. The buffer grows to the
// largest cache the thread has used and is kept, so repeated training steps do not pay for
// fresh pages on every call; backends::simd::release_workspace() frees it.
#pragma once

#include <cstddef>
#include <memory>

namespace kattn::detail::simd_impl {

/// The backward caches' storage: one buffer per calling thread and value type, grown to the
/// largest cache that thread has used (at most attention_config::backward_cache_bytes) and
/// kept, so repeated training steps do not pay for fresh pages every call; released by
/// backends::simd::release_workspace(). Written before read, tile by tile: never zero-filled.
template <class T>
struct cache_storage {
    std::unique_ptr<T[]> buf;
    std::size_t cap = 0;

    static cache_storage& of_this_thread() {
        thread_local cache_storage s;
        return s;
    }
};

template <class T>
T* cache_workspace(std::size_t n) {
    auto& s = cache_storage<T>::of_this_thread();
    if (n > s.cap) {
        s.buf.reset();
        s.buf.reset(new T[n]);
        s.cap = n;
    }
    return s.buf.get();
}

}  // namespace kattn::detail::simd_impl
