// Run-time instruction-set dispatch (backends/simd/dispatch.hpp). This program is built
// without -march and with the `kattn` dependency (KATTN_SIMD_DISPATCH, libkattn_simd), as a
// consumer's would be. Every dispatched primitive must give the bits that the same code
// compiled with that instruction set's flags gives (fixed.cpp), the choice must follow the
// CPU and KATTN_SIMD_ISA, and the program's own (baseline) kernels must agree with them
// to rounding.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "../error_text.hpp"
#include "cases.hpp"

#ifndef KATTN_SIMD_DISPATCH
#error "the dispatch test is built with the exported kattn dependency (KATTN_SIMD_DISPATCH)"
#endif

extern "C" void kattn_fixed_x86_64_v3(kt_dispatch::results*);
extern "C" const char* kattn_fixed_x86_64_v3_arch();
extern "C" void kattn_fixed_x86_64_v4(kt_dispatch::results*);
extern "C" const char* kattn_fixed_x86_64_v4_arch();

namespace {

using simd = kattn::backends::simd;
namespace sd = kattn::detail::simd_dispatch;

std::string env_isa() {
    const char* e = std::getenv("KATTN_SIMD_ISA");
    return e ? e : "";
}

bool same_bits(const kt_dispatch::results& a, const kt_dispatch::results& b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (a[i].size() != b[i].size() || std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(double)) != 0)
            return false;
    return true;
}

/// Largest |a − b| over (largest |b| + 1), over every result.
double max_rel_diff(const kt_dispatch::results& a, const kt_dispatch::results& b) {
    double worst = 0;
    for (std::size_t i = 0; i < b.size(); ++i) {
        double num = 0, den = 0;
        for (std::size_t j = 0; j < b[i].size(); ++j) {
            num = std::max(num, std::abs(a[i][j] - b[i][j]));
            den = std::max(den, std::abs(b[i][j]));
        }
        worst = std::max(worst, std::isfinite(num) ? num / (den + 1) : INFINITY);
    }
    return worst;
}

}  // namespace

// First in the file: the choice made on first use, before anything selects.
TEST_CASE("dispatch: the first choice is the best the CPU runs, capped by KATTN_SIMD_ISA") {
    const std::string env = env_isa();
    if (env == "avx512" || env == "avx2" || env == "baseline" || env.empty()) {
        std::string want = env;
        if (env.empty()) want = sd::cpu_runs("avx512") ? "avx512" : sd::cpu_runs("avx2") ? "avx2" : "baseline";
        if (!sd::cpu_runs(want)) {
            MESSAGE("this CPU does not run ", want, ": nothing to check");
            return;
        }
        const std::string arch = want == "avx512" ? kattn_fixed_x86_64_v4_arch()
                                 : want == "avx2" ? kattn_fixed_x86_64_v3_arch()
                                                  : xsimd::default_arch::name();
        CHECK(std::string(simd::isa()) == arch);
        CHECK(simd::dispatched() == (want != "baseline"));
    } else {
        // An unknown value is an error naming the variable, on every call, not a silent default.
        const auto msg = kt::error_text([] { (void)simd::isa(); });
        CHECK(msg.find("KATTN_SIMD_ISA") != std::string::npos);
        CHECK(msg.find(env) != std::string::npos);
        CHECK(kt::error_text([] {
                  kt_dispatch::results r;
                  kt_dispatch::run_gemm<float>(r);
              }) == msg);
        simd::select_isa("baseline");  // an explicit choice replaces it
        CHECK_FALSE(simd::dispatched());
    }
}

TEST_CASE("dispatch: every primitive gives the fixed-ISA bits") {
    bool any = false;
    for (std::string isa : {"avx2", "avx512"}) {
        if (!sd::cpu_runs(isa)) {
            MESSAGE("this CPU does not run ", isa, ": skipped");
            continue;
        }
        any = true;
        INFO("isa = ", isa);
        simd::select_isa(isa);
        CHECK(simd::dispatched());
        kt_dispatch::results want;
        if (isa == "avx512") {
            kattn_fixed_x86_64_v4(&want);
            CHECK(std::string(simd::isa()) == kattn_fixed_x86_64_v4_arch());
        } else {
            kattn_fixed_x86_64_v3(&want);
            CHECK(std::string(simd::isa()) == kattn_fixed_x86_64_v3_arch());
        }
        const auto got = kt_dispatch::run_all();
        REQUIRE(got.size() == want.size());
        CHECK(got.size() > 13 * 2 * 8);
        CHECK(same_bits(got, want));
    }
    if (!any) MESSAGE("no dispatched instruction set on this CPU");
}

TEST_CASE("dispatch: the program's own kernels agree with the dispatched ones to rounding") {
    if (!sd::cpu_runs("avx2")) return;
    simd::select_isa("baseline");
    CHECK_FALSE(simd::dispatched());
    CHECK(std::string(simd::isa()) == xsimd::default_arch::name());
    const auto own_f = kt_dispatch::run_all_of<float>(), own_d = kt_dispatch::run_all_of<double>();
    simd::select_isa("avx2");
    const auto lib_f = kt_dispatch::run_all_of<float>(), lib_d = kt_dispatch::run_all_of<double>();
    // Signed maps divide by denominators that cancel: float differs in the 3rd digit at worst.
    MESSAGE("largest relative difference: float ", max_rel_diff(own_f, lib_f), ", double ", max_rel_diff(own_d, lib_d));
    CHECK(max_rel_diff(own_f, lib_f) < 2e-2);
    CHECK(max_rel_diff(own_d, lib_d) < 1e-10);
    CHECK(max_rel_diff(own_d, lib_d) > 0);  // FMA against mul+add: not the same rounding
}

TEST_CASE("dispatch: the backward cache of the library's kernels is reported and released") {
    if (!sd::cpu_runs("avx2")) return;
    simd::select_isa("avx2");
    simd::release_workspace();
    CHECK(simd::workspace_bytes() == 0);
    using op_t = kattn::linear_attention<kattn::features::favor, kattn::samplers::orthogonal_gaussian, simd>;
    const op_t op({.head_dim = 8, .value_dim = 4, .num_features = 16, .seed = 1});
    const xt::xtensor<float, 2> q = xt::ones<float>({300, 8}) * 0.1f, v = xt::ones<float>({300, 4});
    (void)op.backward(q, q, v, v, kattn::causal);
    CHECK(simd::workspace_bytes() > 0);
    simd::release_workspace();
    CHECK(simd::workspace_bytes() == 0);
}

TEST_CASE("dispatch: a choice the CPU or the library cannot make is a kattn::error naming isa") {
    const auto msg = kt::error_text([] { simd::select_isa("avx1024"); });
    CHECK(msg.find("isa") != std::string::npos);
    CHECK(msg.find("avx1024") != std::string::npos);
    CHECK(msg.find("avx512, avx2, baseline") != std::string::npos);
    if (!sd::cpu_runs("avx512")) {
        const auto m2 = kt::error_text([] { simd::select_isa("avx512"); });
        CHECK(m2.find("this CPU supports") != std::string::npos);
    }
}
