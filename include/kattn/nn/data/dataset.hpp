// kattn/nn/data/dataset.hpp — an in-memory classification data set and its mini-batches.
//
// One type for both kinds of input kattn::nn's examples use:
//   text    items are token-id sequences (ids from nn::vocabulary; 0 = padding), padded or
//           truncated to `max_length` when batched; lengths[i] = valid tokens of item i
//   images  items are `item_size` float pixels (e.g. 784 for 28×28), cut into tokens by
//           nn::patch_embedding
// make_batch(indices) gathers items into a `batch` (row-major, padded to the longest item of
// the batch for text), which the models and the trainer consume.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "../../core/config.hpp"
#include "../detail/namespace.hpp"

namespace kattn::nn {

enum class input_kind { tokens, pixels };

/// A mini-batch: `size` items; tokens [size·length] (text, 0-padded) or pixels
/// [size·item_size] (images); lengths (text: valid tokens per item); labels [size].
struct batch {
    input_kind kind = input_kind::tokens;
    index_t size = 0;
    index_t length = 0;                ///< tokens per item (text: padded length)
    index_t item_size = 0;             ///< pixels per item (images)
    std::vector<std::int32_t> tokens;  ///< [size·length]
    std::vector<float> pixels;         ///< [size·item_size]
    std::vector<index_t> lengths;      ///< [size] valid tokens (text)
    std::vector<int> labels;           ///< [size]
};

struct dataset {
    std::string name;
    input_kind kind = input_kind::tokens;
    index_t num_classes = 0;
    index_t item_size = 0;                         ///< pixels per image
    index_t max_length = 0;                        ///< text: truncation length
    std::vector<std::vector<std::int32_t>> texts;  ///< text items (token ids, unpadded)
    std::vector<float> pixels;                     ///< images [size·item_size]
    std::vector<int> labels;

    index_t size() const { return index_t(labels.size()); }

    /// The items at `indices`, in that order.
    batch make_batch(std::span<const index_t> indices) const {
        batch b;
        b.kind = kind;
        b.size = index_t(indices.size());
        detail::require(b.size >= 1, "indices", "at least one item", b.size);
        for (index_t i : indices)
            detail::require(i >= 0 && i < size(), "indices", "values in [0, " + std::to_string(size()) + ")", i);
        b.labels.reserve(indices.size());
        for (index_t i : indices) b.labels.push_back(labels[std::size_t(i)]);
        if (kind == input_kind::pixels) {
            b.item_size = item_size;
            b.pixels.resize(std::size_t(b.size * item_size));
            for (index_t r = 0; r < b.size; ++r)
                std::copy_n(pixels.data() + indices[r] * item_size, item_size, b.pixels.data() + r * item_size);
            return b;
        }
        index_t L = 1;
        for (index_t i : indices) L = std::max(L, std::min(index_t(texts[std::size_t(i)].size()), max_length));
        b.length = L;
        b.tokens.assign(std::size_t(b.size * L), 0);
        b.lengths.resize(std::size_t(b.size));
        for (index_t r = 0; r < b.size; ++r) {
            const auto& t = texts[std::size_t(indices[r])];
            const index_t n = std::min(index_t(t.size()), L);
            std::copy_n(t.data(), n, b.tokens.data() + r * L);
            b.lengths[r] = std::max<index_t>(n, 1);  // an empty text keeps one padding token
        }
        return b;
    }

    /// The subset at `indices` (a copy).
    dataset subset(std::span<const index_t> indices) const {
        dataset d;
        d.name = name;
        d.kind = kind;
        d.num_classes = num_classes;
        d.item_size = item_size;
        d.max_length = max_length;
        for (index_t i : indices) {
            detail::require(i >= 0 && i < size(), "indices", "values in [0, " + std::to_string(size()) + ")", i);
            d.labels.push_back(labels[std::size_t(i)]);
            if (kind == input_kind::pixels)
                d.pixels.insert(d.pixels.end(), pixels.begin() + i * item_size, pixels.begin() + (i + 1) * item_size);
            else
                d.texts.push_back(texts[std::size_t(i)]);
        }
        return d;
    }
};

}  // namespace kattn::nn
