// kattn/nn/data/text.hpp — text files, a whitespace tokenizer and a word vocabulary.
//
//   read_lines(path)  the lines of a text file (a trailing '\r' is dropped, so CRLF files work;
//                     a final newline does not make an extra empty line)
//   read_tsv(path)    a two-column file with the header `sentence<TAB>label`; every other line
//                     is `sentence<TAB>label` with a non-negative integer label (split at the
//                     last tab); a malformed line is an error naming the path and line number
//   tokenize(s, lc)   split on ASCII whitespace (space, \t, \n, \r, \v, \f); lc = true maps
//                     A–Z to a–z. Other bytes (UTF-8 or Latin-1 alike) are kept unchanged, so
//                     files in either encoding are read byte-exactly and never rejected.
//   vocabulary        ids 0 = "<pad>", 1 = "<unk>", then every training word with count ≥
//                     min_freq, by decreasing count, ties in byte-wise lexicographic order
//                     (deterministic); max_size > 0 caps the size (specials included).
//                     encode(s) = ids of tokenize(s); unknown words → 1; 0 is never produced
//                     (a literal "<pad>" in the text is unknown too).
//                     save/load: a text file with one token per line, line k = id k − 1.
#pragma once

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../../core/config.hpp"
#include "../detail/namespace.hpp"

namespace kattn::nn {

/// Sentences and their integer labels, in file order.
struct labeled_texts {
    std::vector<std::string> sentences;
    std::vector<int> labels;
};

namespace detail {

inline std::string read_file_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) fail("path", "a readable text file", "'" + path + "' (cannot open)");
    std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (in.bad()) fail("path", "a readable text file", "'" + path + "' (read error)");
    return s;
}

inline bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

inline std::string excerpt(std::string_view s) {
    return s.size() <= 60 ? std::string(s) : std::string(s.substr(0, 57)) + "...";
}

}  // namespace detail

/// The lines of the file at `path` (see the header comment).
inline std::vector<std::string> read_lines(const std::string& path) {
    const std::string s = detail::read_file_bytes(path);
    std::vector<std::string> lines;
    std::size_t pos = 0;
    while (pos < s.size()) {
        std::size_t end = s.find('\n', pos);
        if (end == std::string::npos) end = s.size();
        std::size_t stop = end;
        if (stop > pos && s[stop - 1] == '\r') --stop;
        lines.emplace_back(s, pos, stop - pos);
        pos = end + 1;
    }
    return lines;
}

/// A `sentence<TAB>label` file with that header (see the header comment).
inline labeled_texts read_tsv(const std::string& path) {
    const std::vector<std::string> lines = read_lines(path);
    if (lines.empty() || lines[0] != "sentence\tlabel")
        detail::fail(
            "path", "a TSV file whose first line is the header 'sentence<TAB>label'",
            "'" + path + "' (first line '" + (lines.empty() ? std::string() : detail::excerpt(lines[0])) + "')");
    labeled_texts t;
    t.sentences.reserve(lines.size() - 1);
    t.labels.reserve(lines.size() - 1);
    for (std::size_t k = 1; k < lines.size(); ++k) {
        const std::string& line = lines[k];
        const std::size_t tab = line.rfind('\t');
        bool ok = tab != std::string::npos && tab + 1 < line.size() && line.size() - tab - 1 <= 9;
        int label = 0;
        if (ok)
            for (std::size_t i = tab + 1; i < line.size(); ++i) {
                if (line[i] < '0' || line[i] > '9') {
                    ok = false;
                    break;
                }
                label = label * 10 + (line[i] - '0');
            }
        if (!ok)
            detail::fail("path", "lines of the form 'sentence<TAB>label' with a non-negative integer label",
                         "'" + path + "' line " + std::to_string(k + 1) + ": '" + detail::excerpt(line) + "'");
        t.sentences.emplace_back(line, 0, tab);
        t.labels.push_back(label);
    }
    return t;
}

/// Splits on ASCII whitespace; lowercase maps A–Z to a–z (other bytes unchanged).
inline std::vector<std::string> tokenize(std::string_view sentence, bool lowercase = true) {
    std::vector<std::string> out;
    std::size_t i = 0;
    while (i < sentence.size()) {
        while (i < sentence.size() && detail::is_space(sentence[i])) ++i;
        const std::size_t start = i;
        while (i < sentence.size() && !detail::is_space(sentence[i])) ++i;
        if (i > start) {
            std::string w(sentence.substr(start, i - start));
            if (lowercase)
                for (char& c : w)
                    if (c >= 'A' && c <= 'Z') c = char(c - 'A' + 'a');
            out.push_back(std::move(w));
        }
    }
    return out;
}

/// Word ↔ id map (see the header comment).
class vocabulary {
public:
    static constexpr std::int32_t pad_id = 0;
    static constexpr std::int32_t unk_id = 1;
    static constexpr std::string_view pad_token = "<pad>";
    static constexpr std::string_view unk_token = "<unk>";

    /// Only "<pad>" and "<unk>".
    vocabulary() : vocabulary(true) {}
    explicit vocabulary(bool lowercase) : lowercase_(lowercase) {
        add(std::string(pad_token));
        add(std::string(unk_token));
    }

    /// From training texts: words with count ≥ min_freq, most frequent first, ties
    /// lexicographic; max_size > 0 caps the total size (the two specials included).
    static vocabulary build(std::span<const std::string> texts, index_t min_freq = 1, index_t max_size = 0,
                            bool lowercase = true) {
        detail::require(min_freq >= 1, "min_freq", ">= 1", min_freq);
        detail::require(max_size == 0 || max_size >= 2, "max_size", "0 (unlimited) or >= 2 (<pad>, <unk>)", max_size);
        std::unordered_map<std::string, index_t> counts;
        for (const std::string& s : texts)
            for (std::string& w : tokenize(s, lowercase)) ++counts[std::move(w)];
        std::vector<std::pair<std::string, index_t>> words;
        words.reserve(counts.size());
        for (auto& [w, c] : counts)
            if (c >= min_freq && w != pad_token && w != unk_token) words.emplace_back(w, c);
        std::sort(words.begin(), words.end(), [](const auto& a, const auto& b) {
            return a.second != b.second ? a.second > b.second : a.first < b.first;
        });
        if (max_size > 0 && index_t(words.size()) > max_size - 2) words.resize(std::size_t(max_size - 2));
        vocabulary v(lowercase);
        for (auto& [w, c] : words) v.add(std::move(w));
        return v;
    }

    index_t size() const { return index_t(words_.size()); }
    bool lowercase() const { return lowercase_; }
    bool contains(std::string_view word) const { return ids_.count(std::string(word)) != 0; }

    /// The id of `word` exactly as given (no case mapping); unk_id if absent.
    std::int32_t id(std::string_view word) const {
        const auto it = ids_.find(std::string(word));
        return it == ids_.end() ? unk_id : it->second;
    }

    const std::string& word(index_t id) const {
        detail::require(id >= 0 && id < size(), "id", "a value in [0, " + std::to_string(size()) + ")", id);
        return words_[std::size_t(id)];
    }

    /// The ids of tokenize(sentence, lowercase()); unknown words (and "<pad>") → unk_id.
    std::vector<std::int32_t> encode(std::string_view sentence) const {
        std::vector<std::int32_t> out;
        for (const std::string& w : tokenize(sentence, lowercase_)) {
            const std::int32_t i = id(w);
            out.push_back(i == pad_id ? unk_id : i);
        }
        return out;
    }

    /// Writes one token per line (line k holds id k − 1).
    void save(const std::string& path) const {
        std::ofstream out(path, std::ios::binary | std::ios::trunc);
        if (!out) detail::fail("path", "a writable file for the vocabulary", "'" + path + "' (cannot open)");
        for (const std::string& w : words_) out << w << '\n';
        out.flush();
        if (!out) detail::fail("path", "a writable file for the vocabulary", "'" + path + "' (write error)");
    }

    /// Reads a file written by save(): "<pad>", "<unk>", then distinct tokens without whitespace.
    static vocabulary load(const std::string& path, bool lowercase = true) {
        const std::vector<std::string> lines = read_lines(path);
        if (lines.size() < 2 || lines[0] != pad_token || lines[1] != unk_token)
            detail::fail("path", "a vocabulary file starting with the lines '<pad>' and '<unk>'",
                         "'" + path + "' (" + std::to_string(lines.size()) + " lines, first '" +
                             (lines.empty() ? std::string() : detail::excerpt(lines[0])) + "')");
        vocabulary v(lowercase);
        for (std::size_t k = 2; k < lines.size(); ++k) {
            const std::string& w = lines[k];
            const bool bad = w.empty() || std::any_of(w.begin(), w.end(), detail::is_space);
            if (bad || v.contains(w))
                detail::fail("path", "one distinct, non-empty token without whitespace per line",
                             "'" + path + "' line " + std::to_string(k + 1) + ": '" + detail::excerpt(w) + "'" +
                                 (bad ? "" : " (duplicate)"));
            v.add(w);
        }
        return v;
    }

private:
    void add(std::string w) {
        ids_.emplace(w, std::int32_t(words_.size()));
        words_.push_back(std::move(w));
    }

    bool lowercase_ = true;
    std::vector<std::string> words_;
    std::unordered_map<std::string, std::int32_t> ids_;
};

}  // namespace kattn::nn
