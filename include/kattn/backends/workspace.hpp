// kattn/backends/workspace.hpp — caller-supplied scratch memory for the chunked backends.
//
//   kattn::backends::workspace_allocator{context, allocate, deallocate}
//   kattn::backends::workspace_alignment   (256 bytes)
//   kattn::backends::device_pass           forward, backward, step
//
// A chunked system (host_system, cuda_system) takes its scratch memory from the caller's
// allocator when one is set, instead of std::vector or cudaMallocAsync: a framework's
// caching allocator (PyTorch's, for instance) then owns every byte kattn touches. The
// hook is three plain values, so it crosses a C boundary:
//   allocate(context, bytes, stream)        memory for `bytes` bytes (bytes > 0), aligned
//                                           to workspace_alignment, usable in stream order
//   deallocate(context, p, bytes, stream)   returns it (same bytes as requested)
// `stream` is the system's stream (a cudaStream_t on CUDA, nullptr on the host). Buffers
// are released in any order, not only last-in first-out. An allocator that returns
// nullptr or misaligned memory gets a kattn::error naming 'allocator'.
//
// chunked<S>::device_workspace_bytes(...) says, before a call, the peak of the bytes a
// call holds at once (each request rounded up to workspace_alignment): the size of a
// pool that serves that call without growing. Docs: docs/cuda_backend.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "../core/error.hpp"

namespace kattn::backends {

/// Alignment of every scratch request, and the rounding of device_workspace_bytes.
inline constexpr std::size_t workspace_alignment = 256;

/// A caller's allocator for a system's scratch memory (see the file comment). Empty
/// (allocate == nullptr): the system's own allocation.
struct workspace_allocator {
    void* context = nullptr;
    void* (*allocate)(void* context, std::size_t bytes, void* stream) = nullptr;
    void (*deallocate)(void* context, void* p, std::size_t bytes, void* stream) = nullptr;

    explicit operator bool() const { return allocate != nullptr; }
};

/// Which call device_workspace_bytes sizes.
enum class device_pass { forward, backward, step };

/// `bytes` rounded up to whole workspace_alignment units.
constexpr std::size_t workspace_round(std::size_t bytes) {
    return (bytes + workspace_alignment - 1) / workspace_alignment * workspace_alignment;
}

}  // namespace kattn::backends

namespace kattn::detail {

/// `bytes` (> 0) from a caller's allocator, checked: a kattn::error names 'allocator' when
/// the hook is half set, returns nullptr or returns misaligned memory.
inline void* workspace_allocate(const backends::workspace_allocator& a, std::size_t bytes, void* stream) {
    if (!a.deallocate)
        throw kattn::error("kattn: argument 'allocator': expected both allocate and deallocate, got no deallocate");
    void* p = a.allocate(a.context, bytes, stream);
    if (p == nullptr)
        throw kattn::error("kattn: argument 'allocator': expected memory for " + std::to_string(bytes) +
                           " bytes, got nullptr");
    if (reinterpret_cast<std::uintptr_t>(p) % backends::workspace_alignment != 0) {
        a.deallocate(a.context, p, bytes, stream);
        throw kattn::error("kattn: argument 'allocator': expected memory aligned to " +
                           std::to_string(backends::workspace_alignment) + " bytes, got an address " +
                           std::to_string(reinterpret_cast<std::uintptr_t>(p) % backends::workspace_alignment) +
                           " bytes past a boundary");
    }
    return p;
}

}  // namespace kattn::detail
