// libFuzzer target: the IDX readers (include/kattn/nn/data/idx.hpp), gzip'd or raw. The input
// is one file, read both as an image file and as a label file. Asserts: only kattn::error is
// thrown; what is returned matches its header (pixels = count·rows·cols, rows, cols >= 1).
#include <kattn/nn/data/idx.hpp>

#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace kattn_fuzz;
    memfile& f = input_file();
    f.assign(data, size);
    expect_kattn_error([&] {
        const kattn::nn::idx_images img = kattn::nn::read_idx_images(f.path());
        if (img.rows < 1 || img.cols < 1 || img.count < 0 ||
            img.pixels.size() != std::size_t(img.count) * std::size_t(img.rows) * std::size_t(img.cols))
            finding("read_idx_images returned pixels inconsistent with count, rows and cols");
    });
    expect_kattn_error([&] {
        const std::vector<int> labels = kattn::nn::read_idx_labels(f.path());
        for (int l : labels)
            if (l < 0 || l > 255) finding("read_idx_labels returned a label outside 0..255");
    });
    return 0;
}
