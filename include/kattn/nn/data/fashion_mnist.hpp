// kattn/nn/data/fashion_mnist.hpp — Fashion-MNIST (Xiao et al., 2017) as two kattn::nn datasets.
//
// Reads the four standard gzip'd IDX files from `directory` (Debian's package
// dataset-fashion-mnist installs them in /usr/share/datasets/fashion-mnist):
//   train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz   60,000 images of 28×28
//   t10k-images-idx3-ubyte.gz,  t10k-labels-idx1-ubyte.gz    10,000 images of 28×28
// into datasets of kind pixels, item_size 784, 10 classes (fashion_mnist_classes).
// Pixels p ∈ {0..255} become floats x = p/255, and with normalize = true
//   x = (p/255 − 0.2860) / 0.3530        (the training set's pixel mean and standard deviation).
// limit_train / limit_test > 0 keep the first N images of the file order (N larger than the
// file keeps all); 0 keeps all. A missing file, or a directory in its place, is an error
// naming its full expected path; read_idx_images / read_idx_labels check the files.
#pragma once

#include <array>
#include <filesystem>
#include <string>
#include <string_view>

#include "dataset.hpp"
#include "idx.hpp"

namespace kattn::nn {

/// The class names of labels 0..9.
inline constexpr std::array<std::string_view, 10> fashion_mnist_classes = {
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"};

inline constexpr double fashion_mnist_mean = 0.2860;
inline constexpr double fashion_mnist_sd = 0.3530;

struct fashion_mnist_options {
    std::string directory = "/usr/share/datasets/fashion-mnist";
    bool normalize = true;    ///< (x − 0.2860)/0.3530 after x = p/255
    index_t limit_train = 0;  ///< keep the first N training images (0 = all)
    index_t limit_test = 0;   ///< keep the first N test images (0 = all)
};

struct fashion_mnist_split {
    dataset train, test;
};

namespace detail {

inline std::string fashion_mnist_file(const std::string& directory, std::string_view name) {
    const std::string path = (std::filesystem::path(directory) / name).string();
    std::error_code ec;
    const auto status = std::filesystem::status(path, ec);
    if (!std::filesystem::is_regular_file(status))
        fail("directory",
             "the Fashion-MNIST file '" + path +
                 "' (install the Debian package dataset-fashion-mnist, or set fashion_mnist_options::directory)",
             std::filesystem::is_directory(status)
                 ? "a directory, not a file"
                 : (std::filesystem::exists(status) ? "not a regular file" : "no such file"));
    return path;
}

inline dataset load_fashion_mnist_part(const std::string& directory, std::string_view images_name,
                                       std::string_view labels_name, index_t limit, bool normalize, std::string name) {
    const std::string ipath = fashion_mnist_file(directory, images_name);
    const std::string lpath = fashion_mnist_file(directory, labels_name);
    const idx_images img = read_idx_images(ipath);
    std::vector<int> labels = read_idx_labels(lpath);
    require(img.rows == 28 && img.cols == 28, "path", "28 x 28 Fashion-MNIST images",
            "'" + ipath + "' (" + std::to_string(img.rows) + " x " + std::to_string(img.cols) + ")");
    require(index_t(labels.size()) == img.count, "path",
            "as many labels as the " + std::to_string(img.count) + " images of '" + ipath + "'",
            "'" + lpath + "' (" + std::to_string(labels.size()) + " labels)");
    for (std::size_t i = 0; i < labels.size(); ++i)
        if (labels[i] < 0 || labels[i] > 9)
            fail("path", "labels in [0, 9]",
                 "'" + lpath + "' (label " + std::to_string(labels[i]) + " at item " + std::to_string(i) + ")");
    const index_t n = (limit > 0 && limit < img.count) ? limit : img.count;
    dataset d;
    d.name = std::move(name);
    d.kind = input_kind::pixels;
    d.num_classes = 10;
    d.item_size = 784;
    labels.resize(std::size_t(n));
    d.labels = std::move(labels);
    std::array<float, 256> table{};
    for (int p = 0; p < 256; ++p) {
        const double x = double(p) / 255.0;
        table[std::size_t(p)] = float(normalize ? (x - fashion_mnist_mean) / fashion_mnist_sd : x);
    }
    d.pixels.resize(std::size_t(n * 784));
    for (std::size_t i = 0; i < d.pixels.size(); ++i) d.pixels[i] = table[img.pixels[i]];
    return d;
}

}  // namespace detail

/// Loads the Fashion-MNIST training and test sets (see the header comment).
inline fashion_mnist_split load_fashion_mnist(const fashion_mnist_options& options = {}) {
    detail::require(options.limit_train >= 0, "limit_train", ">= 0 (0 = all)", options.limit_train);
    detail::require(options.limit_test >= 0, "limit_test", ">= 0 (0 = all)", options.limit_test);
    fashion_mnist_split s;
    s.train =
        detail::load_fashion_mnist_part(options.directory, "train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                                        options.limit_train, options.normalize, "fashion-mnist/train");
    s.test =
        detail::load_fashion_mnist_part(options.directory, "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz",
                                        options.limit_test, options.normalize, "fashion-mnist/test");
    return s;
}

}  // namespace kattn::nn
