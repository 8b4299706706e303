// kattn/attention/detail/call_options.hpp — the optional trailing arguments of a
// linear_attention call, checked at compile time and gathered into one struct.
//
//   attn(q, k, v, opts...)                 attn.backward(q, k, v, dout, opts...)
//   attn.forward_into(out, q, k, v, opts...)  attn.backward_into(g, q, k, v, dout, opts...)
//
// opts is any subset of, in any order:
//   kattn::causal                 causal masking
//   kattn::key_lengths(...)       per-batch valid key counts (anything convertible to the span)
//   kattn::packed_sequences{...}  documents packed along the length axis
//   saved                         the operator's saved_state: written by a forward (a non-const
//                                 lvalue), read by a backward
// Each at most once; key lengths and packed documents exclude each other (a packed call is
// one batch entry whose documents already bound every key range). A pack that breaks a rule
// does not name a viable call: the compiler reports the unsatisfied `call_options_valid`.
#pragma once

#include <type_traits>

#include "../options.hpp"

namespace kattn::detail {

/// What one option argument is, for a call whose saved_state type is Saved.
enum class call_option_kind { invalid, causal, lengths, packed, saved };

/// Kind of the argument type O (as deduced by a forwarding reference). Saved is the
/// reference type the call accepts: `saved_state<T>&` for a forward (it fills the state:
/// a non-const lvalue), `const saved_state<T>&` for a backward (any saved_state<T>).
template <class O, class Saved>
constexpr call_option_kind call_option_kind_of() {
    using B = std::remove_cvref_t<O>;
    using S = std::remove_cvref_t<Saved>;
    if constexpr (std::is_same_v<B, causal_t>)
        return call_option_kind::causal;
    else if constexpr (std::is_same_v<B, packed_sequences>)
        return call_option_kind::packed;
    else if constexpr (std::is_same_v<B, S>)
        return std::is_convertible_v<O, Saved> ? call_option_kind::saved : call_option_kind::invalid;
    else if constexpr (std::is_convertible_v<O, key_lengths>)
        return call_option_kind::lengths;
    else
        return call_option_kind::invalid;
}

template <class Saved, class... Opts>
constexpr int call_option_count([[maybe_unused]] call_option_kind k) {
    return ((call_option_kind_of<Opts, Saved>() == k ? 1 : 0) + ... + 0);
}

/// True when Opts is a valid option pack for a call accepting saved states as Saved;
/// `allowed` masks the kinds a call form takes (the bf16 forms take fewer).
template <class Saved, unsigned Allowed, class... Opts>
concept call_options_valid = ((call_option_kind_of<Opts, Saved>() != call_option_kind::invalid &&
                               (Allowed & (1u << unsigned(call_option_kind_of<Opts, Saved>()))) != 0) &&
                              ...) &&
                             call_option_count<Saved, Opts...>(call_option_kind::causal) <= 1 &&
                             call_option_count<Saved, Opts...>(call_option_kind::lengths) <= 1 &&
                             call_option_count<Saved, Opts...>(call_option_kind::packed) <= 1 &&
                             call_option_count<Saved, Opts...>(call_option_kind::saved) <= 1 &&
                             call_option_count<Saved, Opts...>(call_option_kind::lengths) +
                                     call_option_count<Saved, Opts...>(call_option_kind::packed) <=
                                 1;

/// Masks of `Allowed`.
inline constexpr unsigned call_allows_all =
    (1u << unsigned(call_option_kind::causal)) | (1u << unsigned(call_option_kind::lengths)) |
    (1u << unsigned(call_option_kind::packed)) | (1u << unsigned(call_option_kind::saved));
inline constexpr unsigned call_allows_causal_lengths =
    (1u << unsigned(call_option_kind::causal)) | (1u << unsigned(call_option_kind::lengths));
inline constexpr unsigned call_allows_causal = 1u << unsigned(call_option_kind::causal);

/// The saved-state type of operators that keep none (softmax_attention): no argument is one.
struct no_saved_state {
    explicit no_saved_state() = default;
};

/// The options of one call. `saved` points at the caller's state (SavedState is
/// saved_state<T> for a forward, const saved_state<T> for a backward); `packed` at the
/// caller's packed_sequences, which live until the call returns.
template <class SavedState>
struct call_options {
    bool causal = false;
    key_lengths lengths{};
    bool has_lengths = false;
    const packed_sequences* packed = nullptr;
    SavedState* saved = nullptr;
};

/// Gathers a validated pack (call_options_valid) into call_options.
template <class SavedState, class Saved, class... Opts>
call_options<SavedState> gather_call_options(Opts&&... opts) {
    call_options<SavedState> o;
    [[maybe_unused]] const auto take = [&o]<class O>(O&& opt) {
        constexpr call_option_kind kind = call_option_kind_of<O, Saved>();
        if constexpr (kind == call_option_kind::causal) {
            o.causal = true;
        } else if constexpr (kind == call_option_kind::lengths) {
            o.lengths = key_lengths(opt);
            o.has_lengths = true;
        } else if constexpr (kind == call_option_kind::packed) {
            o.packed = &opt;
        } else {
            static_assert(kind == call_option_kind::saved);
            o.saved = &opt;
        }
    };
    (take(std::forward<Opts>(opts)), ...);
    return o;
}

}  // namespace kattn::detail
