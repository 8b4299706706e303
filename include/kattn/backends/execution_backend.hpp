// kattn/backends/execution_backend.hpp — the execution-backend concept and its traits.
//
// A backend is a policy type with a `name` and four static primitives, each a function
// template over the feature map, taking the contract's problem structs (problem.hpp):
//   features(const feature_problem<Map, T>&)                 φ of n rows (features())
//   forward(const attention_problem<Map, T>&, T* out)        attention (operator())
//   backward(const attention_problem<Map, T>&, const attention_gradients<T>&)
//   step(const step_problem<Map, T>&)                        one decoding token (step())
// Capabilities with defaults (Eigen style), read through execution_backend_traits<B>:
//   row_ops  the row-operation policy for host-side per-row work (default scalar_ops)
//   gemm     the host matrix-product policy (default scalar_gemm)
//   splits_sequences  true when forward and backward also take a slice_link (split.hpp):
//            the backend can run one slice of a sequence split over processes (kattn/dist)
//   saves_forward_state  true when forward also fills, and backward also reads, a
//            forward_state (forward_state.hpp): the backward skips work the forward did
//   packs_sequences  true when forward and backward take packed documents
//            (attention_problem::cu_seqlens); otherwise operators run such a call one
//            document at a time. A backend opts in with `static constexpr bool packs_sequences = true;`
//   forward_bf16  `static bool forward_bf16<Map>(const attention_problem<Map, float>&,
//            const bf16_forward_io&)`: a forward on bf16 tensors (detail::backend_forwards_bf16);
//            without it, or when it returns false, operators widen to float and round back
// A backend may forward a primitive to another one (simd's step calls reference's);
// it says so explicitly, never by inheritance. Writing a backend: docs/backends.md.
#pragma once

#include <concepts>
#include <utility>

#include "../core/config.hpp"
#include "../linalg/gemm.hpp"
#include "../linalg/row_ops.hpp"
#include "forward_state.hpp"
#include "problem.hpp"
#include "split.hpp"

namespace kattn {

namespace detail {
/// The map a backend's primitives are probed with: only the call syntax is checked.
struct backend_probe_map {
    struct params {};
};

template <class B>
concept backend_has_name = requires {
    { B::name } -> std::convertible_to<const char*>;
};
template <class B>
concept backend_has_features = requires(const backends::feature_problem<backend_probe_map, float>& pf,
                                        const backends::feature_problem<backend_probe_map, double>& pd) {
    B::template features<backend_probe_map>(pf);
    B::template features<backend_probe_map>(pd);
};
template <class B>
concept backend_has_forward = requires(const backends::attention_problem<backend_probe_map, float>& pf, float* of,
                                       const backends::attention_problem<backend_probe_map, double>& pd, double* od) {
    B::template forward<backend_probe_map>(pf, of);
    B::template forward<backend_probe_map>(pd, od);
};
template <class B>
concept backend_has_backward = requires(const backends::attention_problem<backend_probe_map, float>& pf,
                                        const backends::attention_gradients<float>& gf,
                                        const backends::attention_problem<backend_probe_map, double>& pd,
                                        const backends::attention_gradients<double>& gd) {
    B::template backward<backend_probe_map>(pf, gf);
    B::template backward<backend_probe_map>(pd, gd);
};
template <class B>
concept backend_has_step = requires(const backends::step_problem<backend_probe_map, float>& sf,
                                    const backends::step_problem<backend_probe_map, double>& sd) {
    B::template step<backend_probe_map>(sf);
    B::template step<backend_probe_map>(sd);
};
template <class B>
concept backend_splits_sequences = requires(const backends::attention_problem<backend_probe_map, float>& pf,
                                            const backends::attention_gradients<float>& gf, float* of,
                                            const backends::attention_problem<backend_probe_map, double>& pd,
                                            const backends::attention_gradients<double>& gd, double* od,
                                            const backends::slice_link<float>& lf,
                                            const backends::slice_link<double>& ld) {
    B::template forward<backend_probe_map>(pf, of, lf);
    B::template forward<backend_probe_map>(pd, od, ld);
    B::template backward<backend_probe_map>(pf, gf, lf);
    B::template backward<backend_probe_map>(pd, gd, ld);
};
template <class B>
concept backend_saves_forward_state = requires(const backends::attention_problem<backend_probe_map, float>& pf,
                                               const backends::attention_gradients<float>& gf, float* of,
                                               backends::forward_state<float>& sf,
                                               const backends::attention_problem<backend_probe_map, double>& pd,
                                               const backends::attention_gradients<double>& gd, double* od,
                                               backends::forward_state<double>& sd) {
    B::template forward<backend_probe_map>(pf, of, sf);
    B::template forward<backend_probe_map>(pd, od, sd);
    B::template backward<backend_probe_map>(pf, gf, std::as_const(sf));
    B::template backward<backend_probe_map>(pd, gd, std::as_const(sd));
};

/// B runs forwards on bf16 tensors for Map: `bool forward_bf16<Map>(pb, io)` (false: it did
/// not, this problem or CPU is not one it covers, and the operator runs the float path).
template <class B, class Map>
concept backend_forwards_bf16 = requires(const backends::attention_problem<Map, float>& pb,
                                         const backends::bf16_forward_io& io) {
    { B::template forward_bf16<Map>(pb, io) } -> std::same_as<bool>;
};

template <class B>
concept backend_packs_sequences = requires {
    requires B::packs_sequences;
};

}  // namespace detail

/// An execution backend: `name` and the four primitives, for float and double.
template <class B>
concept execution_backend = detail::backend_has_name<B> && detail::backend_has_features<B> &&
    detail::backend_has_forward<B> && detail::backend_has_backward<B> && detail::backend_has_step<B>;

template <class B>
struct execution_backend_traits {
    static_assert(detail::backend_has_name<B>,
                  "kattn: this backend has no `static constexpr const char* name` (docs/backends.md)");
    static_assert(detail::backend_has_features<B>,
                  "kattn: this backend has no `template <class Map, class T> static void "
                  "features(const backends::feature_problem<Map, T>&)` (docs/backends.md)");
    static_assert(detail::backend_has_forward<B>,
                  "kattn: this backend has no `template <class Map, class T> static void "
                  "forward(const backends::attention_problem<Map, T>&, T* out)` (docs/backends.md)");
    static_assert(detail::backend_has_backward<B>,
                  "kattn: this backend has no `template <class Map, class T> static void "
                  "backward(const backends::attention_problem<Map, T>&, const backends::attention_gradients<T>&)` "
                  "(docs/backends.md)");
    static_assert(detail::backend_has_step<B>,
                  "kattn: this backend has no `template <class Map, class T> static void "
                  "step(const backends::step_problem<Map, T>&)` (docs/backends.md)");
    static constexpr const char* name = B::name;
    /// Row operations for host-side per-row work (samplers::langevin's energy, …).
    using row_ops = detail::row_ops_of<B>;
    /// Host matrix products (`gemm::template run<T>(M, N, K, A, a_rs, a_cs, B, ldb, C, ldc, acc)`).
    using gemm = detail::gemm_of<B>;
    /// Whether one slice of a split sequence runs on this backend (backends/split.hpp).
    static constexpr bool splits_sequences = detail::backend_splits_sequences<B>;
    /// Whether forward keeps, and backward reads, a forward_state (forward_state.hpp).
    static constexpr bool saves_forward_state = detail::backend_saves_forward_state<B>;
    /// Whether forward and backward take packed documents (attention_problem::cu_seqlens).
    static constexpr bool packs_sequences = detail::backend_packs_sequences<B>;
};

}  // namespace kattn
