// kattn/nn/data/text.hpp — text files, a whitespace tokenizer and a word vocabulary.
//
//   read_lines(path)  the lines of a text file (a trailing '\r' is dropped, so CRLF files work;
//                     a final newline does not make an extra empty line)
//   read_tsv(path)    a two-column file with the header `sentence<TAB>label`; every other line
//                     is `sentence<TAB>label` with a non-negative integer label (split at the
//                     last tab); a malformed line is an error naming the path and line number
//   Both read at most max_bytes (default text_max_bytes = 256 MiB) through detail::read_file:
//   a missing file, a directory or a larger file is a kattn::error naming the path.
//   tokenize(s, lc)   split on ASCII whitespace (space, \t, \n, \r, \v, \f); lc = true maps
//                     A–Z to a–z. Other bytes (UTF-8 or Latin-1 alike) are kept unchanged, so
//                     files in either encoding are read byte-exactly and never rejected.
//   vocabulary        ids 0 = "<pad>", 1 = "<unk>", then every training word with count ≥
//                     min_freq, by decreasing count, ties in byte-wise lexicographic order
//                     (deterministic); max_size > 0 caps the size (specials included).
//                     encode(s) = ids of tokenize(s); unknown words → 1; 0 is never produced
//                     (a literal "<pad>" in the text is unknown too).
//
// The vocabulary file (save/load), version 2: lines ending in '\n' (no '\r'),
//     kattn vocabulary 2 <N>              N = entries, the two specials included (2 ≤ N < 2^31)
//     <pad>                               id 0
//     <unk>                               id 1
//     <token of id k>                     k = 2 … N−1: distinct, non-empty, no whitespace
//     end <N> crc32 <8 lower-case hex>    CRC-32 (zlib's / Python's zlib.crc32) of every byte
//                                         before this line
// and nothing after the end line. The header and end lines contain spaces, so no token line
// can be mistaken for them; a file cut anywhere (at a line boundary too) lacks a valid end
// line, and a changed, added or removed line breaks the checksum: load throws kattn::error.
// save writes through detail::write_file_atomically, so a failed save leaves the previous
// file as it was. load also reads the headerless format before version 2 (one token per
// line, first "<pad>" then "<unk>"): such files carry no count or checksum, so a cut at a
// line boundary cannot be detected in them (save again to upgrade). A version-2 file never
// starts with "<pad>", so this does not weaken the checks on version-2 files.
// to_string() and from_string(bytes, label) are the same format in memory (model files,
// nn/text_classifier.hpp, hold the vocabulary as a member).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../../core/config.hpp"
#include "../../io/file.hpp"
#include "../detail/namespace.hpp"

namespace kattn::nn {

/// The default bound on the size of a text file read by read_lines, read_tsv and vocabulary::load.
inline constexpr std::uint64_t text_max_bytes = std::uint64_t{256} << 20;

/// Sentences and their integer labels, in file order.
struct labeled_texts {
    std::vector<std::string> sentences;
    std::vector<int> labels;
};

namespace detail {

/// The lines of `s` (see read_lines); strip_cr = false keeps a final '\r' in a line.
inline std::vector<std::string> split_lines(const std::string& s, bool strip_cr = true) {
    std::vector<std::string> lines;
    std::size_t pos = 0;
    while (pos < s.size()) {
        std::size_t end = s.find('\n', pos);
        if (end == std::string::npos) end = s.size();
        std::size_t stop = end;
        if (strip_cr && stop > pos && s[stop - 1] == '\r') --stop;
        lines.emplace_back(s, pos, stop - pos);
        pos = end + 1;
    }
    return lines;
}

inline constexpr std::array<std::uint32_t, 256> vocabulary_crc_table = [] {
    std::array<std::uint32_t, 256> t{};
    for (std::uint32_t i = 0; i < 256; ++i) {
        std::uint32_t c = i;
        for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
        t[i] = c;
    }
    return t;
}();

/// CRC-32 (IEEE 802.3, reflected, as zlib's crc32) of `s`.
inline std::uint32_t vocabulary_crc32(std::string_view s) {
    std::uint32_t c = 0xFFFFFFFFu;
    for (const char ch : s) c = vocabulary_crc_table[(c ^ static_cast<unsigned char>(ch)) & 0xFFu] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

inline std::string hex8(std::uint32_t x) {
    const char* digits = "0123456789abcdef";
    std::string h(8, '0');
    for (int k = 7; k >= 0; --k, x >>= 4) h[std::size_t(k)] = digits[x & 15u];
    return h;
}

/// The decimal value of `s` (1 to 10 digits), or -1.
inline std::int64_t parse_count(std::string_view s) {
    if (s.empty() || s.size() > 10) return -1;
    std::int64_t v = 0;
    for (const char c : s) {
        if (c < '0' || c > '9') return -1;
        v = v * 10 + (c - '0');
    }
    return v;
}

inline bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

inline std::string excerpt(std::string_view s) {
    return s.size() <= 60 ? std::string(s) : std::string(s.substr(0, 57)) + "...";
}

/// excerpt(s) in single quotes, then `tail`; built by appending (GCC 12's -Wrestrict misfires
/// on "'" + std::string).
inline std::string quoted_excerpt(std::string_view s, std::string_view tail = {}) {
    std::string q(1, '\'');
    q.append(excerpt(s)).append(1, '\'').append(tail);
    return q;
}

}  // namespace detail

/// The lines of the file at `path`, at most max_bytes long (see the header comment).
inline std::vector<std::string> read_lines(const std::string& path, std::uint64_t max_bytes = text_max_bytes) {
    return detail::split_lines(detail::read_file(path, "path", max_bytes, "a readable text file"));
}

/// A `sentence<TAB>label` file with that header (see the header comment).
inline labeled_texts read_tsv(const std::string& path, std::uint64_t max_bytes = text_max_bytes) {
    const std::vector<std::string> lines = read_lines(path, max_bytes);
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

    /// The bytes of the version-2 vocabulary file (see the header comment).
    std::string to_string() const {
        std::string out = "kattn vocabulary 2 " + std::to_string(words_.size()) + "\n";
        for (const std::string& w : words_) (out += w) += '\n';
        const std::uint32_t crc = detail::vocabulary_crc32(out);
        out += "end " + std::to_string(words_.size()) + " crc32 " + detail::hex8(crc) + "\n";
        return out;
    }

    /// Writes the version-2 vocabulary file (see the header comment) atomically.
    void save(const std::string& path) const { detail::write_file_atomically(path, to_string(), "path"); }

    /// Reads a file written by save() (version 2, or the headerless format before it), at
    /// most max_bytes long; every defect is a kattn::error naming the path.
    static vocabulary load(const std::string& path, bool lowercase = true, std::uint64_t max_bytes = text_max_bytes) {
        return from_string(detail::read_file(path, "path", max_bytes, "a readable vocabulary file"), path, lowercase);
    }

    /// The vocabulary of `bytes`, a file's content as load() reads it; errors name `path`
    /// (e.g. "model.kattn, member vocabulary.txt").
    static vocabulary from_string(const std::string& bytes, const std::string& path, bool lowercase = true) {
        const std::string first = bytes.substr(0, bytes.find('\n'));
        if (first == pad_token || first == std::string(pad_token) + "\r")
            return from_lines(path, detail::split_lines(bytes), 0, lowercase);
        auto bad = [&](std::string_view expected, const std::string& why) {
            detail::fail("path", expected, "'" + path + "' (" + why + ")");
        };
        const std::string prefix = "kattn vocabulary ";
        if (first.compare(0, prefix.size(), prefix) != 0)
            bad("a vocabulary file whose first line is 'kattn vocabulary 2 <entries>' (or, in the headerless "
                "format before version 2, whose first lines are '<pad>' and '<unk>')",
                "first line '" + detail::excerpt(first) + "'");
        const std::string rest = first.substr(prefix.size());
        const std::size_t space = rest.find(' ');
        const std::string version = rest.substr(0, space);
        if (version != "2") bad("a kattn vocabulary file of version 2", "version '" + detail::excerpt(version) + "'");
        const std::int64_t n = space == std::string::npos ? -1 : detail::parse_count(rest.substr(space + 1));
        if (n < 2 || n > INT32_MAX || first.size() == bytes.size())
            bad("a vocabulary header line 'kattn vocabulary 2 <entries>' with 2 <= entries < 2^31",
                "header '" + detail::excerpt(first) + "'" + (first.size() == bytes.size() ? ", truncated" : ""));
        const std::string end_expected = "a complete vocabulary file ending in the line 'end " + std::to_string(n) +
                                         " crc32 <checksum>' (" + std::to_string(n) + " entries)";
        if (bytes.back() != '\n') bad(end_expected, "truncated: the last line has no newline");
        const std::size_t last = bytes.rfind('\n', bytes.size() - 2) + 1;
        const std::string end_line = bytes.substr(last, bytes.size() - 1 - last);
        const std::string end_prefix = "end " + std::to_string(n) + " crc32 ";
        const bool end_ok = last > first.size() && end_line.size() == end_prefix.size() + 8 &&
                            end_line.compare(0, end_prefix.size(), end_prefix) == 0 &&
                            std::all_of(end_line.begin() + std::ptrdiff_t(end_prefix.size()), end_line.end(),
                                        [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
        if (!end_ok) bad(end_expected, "truncated or damaged: last line '" + detail::excerpt(end_line) + "'");
        const std::string recorded = end_line.substr(end_prefix.size());
        const std::string actual = detail::hex8(detail::vocabulary_crc32(std::string_view(bytes).substr(0, last)));
        if (recorded != actual)
            bad("a vocabulary file whose content matches its checksum",
                "checksum mismatch (damaged file): crc32 " + recorded + " recorded, " + actual + " computed");
        const std::vector<std::string> lines =
            detail::split_lines(bytes.substr(first.size() + 1, last - first.size() - 1), false);
        if (std::int64_t(lines.size()) != n)
            bad("a vocabulary file with the " + std::to_string(n) + " entries its header declares",
                std::to_string(lines.size()) + " entries");
        return from_lines(path, lines, 1, lowercase);
    }

private:
    /// The vocabulary of `lines` ("<pad>", "<unk>", then distinct tokens); line k of the
    /// file is lines[k − 1 − offset].
    static vocabulary from_lines(const std::string& path, const std::vector<std::string>& lines, std::size_t offset,
                                 bool lowercase) {
        if (lines.size() < 2 || lines[0] != pad_token || lines[1] != unk_token)
            detail::fail("path", "a vocabulary file whose entries start with the lines '<pad>' and '<unk>'",
                         "'" + path + "' (" + std::to_string(lines.size()) + " entries, first '" +
                             (lines.empty() ? std::string() : detail::excerpt(lines[0])) + "')");
        vocabulary v(lowercase);
        for (std::size_t k = 2; k < lines.size(); ++k) {
            const std::string& w = lines[k];
            const bool bad = w.empty() || std::any_of(w.begin(), w.end(), detail::is_space);
            if (bad || v.contains(w))
                detail::fail("path", "one distinct, non-empty token without whitespace per line",
                             "'" + path + "' line " + std::to_string(k + 1 + offset) + ": '" + detail::excerpt(w) +
                                 "'" + (bad ? "" : " (duplicate)"));
            v.add(w);
        }
        return v;
    }

    void add(std::string w) {
        ids_.emplace(w, std::int32_t(words_.size()));
        words_.push_back(std::move(w));
    }

    bool lowercase_ = true;
    std::vector<std::string> words_;
    std::unordered_map<std::string, std::int32_t> ids_;
};

}  // namespace kattn::nn
