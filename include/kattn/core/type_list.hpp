// kattn/core/type_list.hpp — a compile-time list of types (the registry of feature maps,
// features::all, is one) and the two operations kattn needs on it.
//
//   type_list<A, B>::size                 2
//   for_each_type<type_list<A, B>>(f)     f.template operator()<A>(); then <B>
//   type_list_apply_t<std::tuple, L>      std::tuple<A, B>
#pragma once

#include <cstddef>

namespace kattn {

template <class... Ts>
struct type_list {
    static constexpr std::size_t size = sizeof...(Ts);
};

namespace detail {
template <template <class...> class To, class L>
struct type_list_apply;
template <template <class...> class To, class... Ts>
struct type_list_apply<To, type_list<Ts...>> {
    using type = To<Ts...>;
};
template <class L>
struct for_each_type_impl;
template <class... Ts>
struct for_each_type_impl<type_list<Ts...>> {
    template <class F>
    static void run(F&& f) {
        (f.template operator()<Ts>(), ...);
    }
};
}  // namespace detail

/// To<Ts...> for L = type_list<Ts...> (e.g. std::tuple for doctest's TEST_CASE_TEMPLATE_APPLY).
template <template <class...> class To, class L>
using type_list_apply_t = typename detail::type_list_apply<To, L>::type;

/// Calls f.template operator()<T>() for every T of L, in order.
template <class L, class F>
void for_each_type(F&& f) {
    detail::for_each_type_impl<L>::run(f);
}

}  // namespace kattn
