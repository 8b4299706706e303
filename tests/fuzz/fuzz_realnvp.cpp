// libFuzzer target: kattn::samplers::realnvp::load (include/kattn/samplers/realnvp.hpp). The
// input is the flow's .npz file. Asserts: only kattn::error is thrown; a loaded flow has a
// valid configuration (dim, layers, hidden >= 1, finite scale_bound >= 0).
#include <cmath>

#include <kattn/samplers/realnvp.hpp>

#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace kattn_fuzz;
    memfile& f = input_file();
    f.assign(data, size);
    expect_kattn_error([&] {
        const auto flow = kattn::samplers::realnvp::load(f.path());
        if (flow.dim() < 1 || flow.layers() < 1 || flow.hidden() < 1 || !std::isfinite(flow.scale_bound()) ||
            flow.scale_bound() < 0)
            finding("realnvp::load returned a flow with an invalid configuration");
    });
    return 0;
}
