// libFuzzer target: kattn::nn::load_checkpoint (include/kattn/nn/checkpoint.hpp) into a small
// parameter_list (tests/fuzz/fuzz_model.hpp). The input is the checkpoint (.npz) file.
// Asserts: only kattn::error is thrown; on error the parameters are untouched (the header's
// promise: every array is checked before any view is written).
#include <cstring>

#include "fuzz_common.hpp"
#include "fuzz_model.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace kattn_fuzz;
    memfile& f = input_file();
    f.assign(data, size);
    model m;
    m.w.init_normal(1.0, 1, 1);
    m.b.init_normal(1.0, 1, 2);
    m.flow.init_normal(1.0, 1, 3);
    const model before = m;
    kattn::nn::parameter_list ps = m.views();
    const bool loaded = expect_kattn_error([&] {
        const kattn::nn::checkpoint_metadata meta = kattn::nn::load_checkpoint(f.path(), ps);
        for (const auto& [key, values] : meta)
            if (key.empty()) finding("load_checkpoint returned an empty metadata key");
    });
    if (!loaded) {
        const auto same = [](const auto& a, const auto& b) {
            return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(a[0])) == 0;
        };
        if (!same(m.w.value, before.w.value) || !same(m.b.value, before.b.value) ||
            !same(m.flow.value, before.flow.value))
            finding("load_checkpoint threw but modified the parameters");
    }
    return 0;
}
