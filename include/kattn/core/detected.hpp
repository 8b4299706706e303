// kattn/core/detected.hpp — capability lookup with a default (the detection idiom).
//
//   template <class P> using params_of = typename P::params;
//   detected_or_t<feature_params, params_of, Map>   Map::params, or feature_params if none
// Policies publish optional capabilities as member types; traits read them through this.
#pragma once

namespace kattn::detail {

template <class Default, template <class> class Op, class P>
struct detected_or {
    using type = Default;
};
template <class Default, template <class> class Op, class P>
requires requires { typename Op<P>; }
struct detected_or<Default, Op, P> {
    using type = Op<P>;
};

/// Op<P> when it names a type, Default otherwise.
template <class Default, template <class> class Op, class P>
using detected_or_t = typename detected_or<Default, Op, P>::type;

}  // namespace kattn::detail
