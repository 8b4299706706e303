// kattn/backends/forward_state.hpp — what a backend's forward pass keeps for the backward.
//
// A backend that can (execution_backend_traits<B>::saves_forward_state) offers
//   forward(const attention_problem<Map, T>&, T* out, forward_state<T>&)
//   backward(const attention_problem<Map, T>&, const attention_gradients<T>&, const forward_state<T>&)
// The forward fills the state with whatever lets the backward skip work: the simd backend
// keeps the key states the backward would otherwise rebuild with a full pass over the keys
// (F × (d_v + 1) + 1 numbers per head and segment, plus the double totals of fp32 states). The contents are
// the backend's own; this struct only carries them, with their extents and a fingerprint of
// the inputs they came from (core/fingerprint.hpp), which the backward recomputes and
// compares so that a state used with other inputs is an error, never a wrong gradient.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "../core/config.hpp"

namespace kattn::backends {

template <class T>
struct forward_state {
    std::vector<T> values;       ///< the backend's payload, in T
    std::vector<double> totals;  ///< its payload in double (compensated fp32 sums)
    std::vector<unsigned char> flags;
    index_t count = 0;  ///< number of kept items (simd: key states)
    index_t features = 0, value_dim = 0;
    std::uint64_t inputs = 0;  ///< fingerprint of the inputs the payload came from
    bool kept = false;         ///< true once a backend's forward filled it

    void clear() { *this = forward_state{}; }
    /// Bytes held.
    std::size_t bytes() const {
        return values.capacity() * sizeof(T) + totals.capacity() * sizeof(double) + flags.capacity();
    }
};

}  // namespace kattn::backends

namespace kattn::detail {
using backends::forward_state;  // visible unqualified to the backends' internals, as problem.hpp's types
}  // namespace kattn::detail
