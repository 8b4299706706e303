// libFuzzer target: kattn::detail::npz_reader (include/kattn/io/npz.hpp).
// The input is an .npz file. The reader is constructed on it; then every member name found
// in the bytes is read back with each .npy shape found in the bytes and with a wrong shape.
// Asserts: only kattn::error is thrown; a member read returns exactly prod(shape) values.
#include <kattn/io/npz.hpp>

#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace kattn_fuzz;
    memfile& f = input_file();
    f.assign(data, size);
    const std::string_view bytes(reinterpret_cast<const char*>(data), size);
    expect_kattn_error([&] {
        const kattn::detail::npz_reader reader(f.path());
        const npz_listing listing = list_npz(bytes);
        std::vector<std::vector<std::size_t>> shapes = listing.shapes;
        shapes.push_back({});
        shapes.push_back({3, 1});
        for (std::string name : listing.names) {
            if (name.size() >= 4 && name.compare(name.size() - 4, 4, ".npy") == 0) name.resize(name.size() - 4);
            (void)reader.contains(name);
            for (const auto& shape : shapes) {
                expect_kattn_error([&] {
                    const std::vector<double> v = reader.array(name, shape);
                    std::size_t n = 1;
                    for (auto e : shape) n *= e;
                    if (v.size() != n) finding("npz_reader::array returned a size different from the shape's");
                });
            }
        }
        (void)reader.contains("");
    });
    return 0;
}
