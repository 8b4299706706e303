// kattn/nn/data/labelled_text.hpp — labelled texts from any TSV or CSV file.
//
//   read_labelled_text(path, options) → labelled_data {texts, labels, label_names, lines}
//
// Format (labelled_text_options::format; automatic: csv when the path ends in ".csv", any
// case, else tsv). Both: a UTF-8 byte-order mark at the start is skipped, empty lines are
// skipped, bytes are kept as they are (any encoding), records end at LF or CRLF.
//   tsv  a record is a line; every `delimiter` (default TAB) separates fields; no quoting
//        (a '"' is text), so a field cannot contain a tab or a line break.
//   csv  RFC 4180, `delimiter` default ','. A field that starts with '"' is quoted: "" in it
//        is one '"', separators and line breaks in it are text, and it ends at the next
//        lone '"', which a separator or the end of the record must follow. A '"' inside an
//        unquoted field is text.
// Columns. header = true (default): the first record names the columns; text_column and
// label_column select columns by name (exact match) and, when empty, text_index and
// label_index (0-based; defaults 0 and 1) select them by position. header = false: by
// position only. A record needs at least max(text, label column) + 1 fields; further
// fields are ignored. Texts must hold a non-whitespace byte; labels are trimmed of ASCII
// whitespace and must not be empty.
// Labels → class ids 0 … C−1, label_names[k] = the name of class k:
//   label_type::names     every distinct label string is a class. With options.label_names
//                         given, class k is label_names[k] and any other label is an error;
//                         else the distinct labels in byte-wise sorted order (label_order::
//                         sorted, the default: the same mapping for any row order) or in
//                         order of first appearance (label_order::first_appearance).
//   label_type::integers  decimal labels 0 … max_classes − 1 are the class ids; label_names is
//                         the given list (every label must be below its size), else "0" … "max".
// At most max_classes classes (default 65,536) in either mode, so a hostile label such as
// 999999999 cannot make the reader allocate a billion class names.
// So that train, dev and test files share one mapping, read the training file first and pass
// its label_names to the others (load_labelled_splits does this): a label of a later file
// that the training file lacks is then an error naming that file and line.
// Every defect of a file is a kattn::error for argument 'path' naming the file and the line:
// an empty file, a header without the chosen column, a record with too few fields, an empty
// text or label, an unknown label, a bad integer label, an unterminated quoted field. The file
// is read through detail::read_file: at most max_bytes (default text_max_bytes = 256 MiB);
// a missing file or a directory is a kattn::error naming the path.
// Train/dev/test token datasets from such files: nn/data/labelled_splits.hpp.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "../../core/config.hpp"
#include "../../io/file.hpp"
#include "../detail/namespace.hpp"
#include "text.hpp"

namespace kattn::nn {

enum class text_format { automatic, tsv, csv };
enum class label_type { names, integers };
enum class label_order { sorted, first_appearance };

struct labelled_text_options {
    text_format format = text_format::automatic;  ///< automatic: csv for "*.csv", else tsv
    bool header = true;                           ///< the first record names the columns
    std::string text_column{};                    ///< by name (needs header); empty: text_index
    std::string label_column{};                   ///< by name (needs header); empty: label_index
    index_t text_index = 0;                       ///< 0-based field of the text
    index_t label_index = 1;                      ///< 0-based field of the label
    label_type labels = label_type::names;
    label_order order = label_order::sorted;  ///< class order when label_names is empty (names)
    std::vector<std::string> label_names{};   ///< caller-given classes: class k = label_names[k]
    char delimiter = 0;                       ///< 0: TAB (tsv) or ',' (csv)
    std::uint64_t max_bytes = text_max_bytes;
    index_t max_classes = index_t(1) << 16;  ///< bound on the class count (integer labels: label < max_classes)
};

/// The records of a labelled text file, in file order.
struct labelled_data {
    std::vector<std::string> texts;
    std::vector<int> labels;               ///< class ids in [0, num_classes())
    std::vector<std::string> label_names;  ///< label_names[k]: the name of class k
    std::vector<index_t> lines;            ///< the (1-based) line each record starts on

    index_t size() const { return index_t(labels.size()); }
    index_t num_classes() const { return index_t(label_names.size()); }
};

namespace detail {

/// One record of a delimited file and the line it starts on.
struct text_record {
    std::vector<std::string> fields;
    index_t line = 0;
};

[[noreturn]] inline void fail_at(const std::string& path, index_t line, std::string_view expected,
                                 const std::string& got) {
    fail("path", expected, "'" + path + "' line " + std::to_string(line) + ": " + got);
}

inline std::string delimiter_text(char d) { return d == '\t' ? std::string("<TAB>") : "'" + std::string(1, d) + "'"; }

/// TSV: one record per non-empty line, fields split at every delimiter.
inline std::vector<text_record> parse_tsv(const std::string& bytes, char delim) {
    std::vector<text_record> out;
    const std::vector<std::string> lines = split_lines(bytes);
    for (std::size_t k = 0; k < lines.size(); ++k) {
        if (lines[k].empty()) continue;
        text_record r;
        r.line = index_t(k + 1);
        std::size_t pos = 0;
        for (;;) {
            const std::size_t end = lines[k].find(delim, pos);
            r.fields.emplace_back(lines[k], pos, end == std::string::npos ? std::string::npos : end - pos);
            if (end == std::string::npos) break;
            pos = end + 1;
        }
        out.push_back(std::move(r));
    }
    return out;
}

/// CSV (RFC 4180, see the header comment); empty lines between records are skipped.
inline std::vector<text_record> parse_csv(const std::string& s, char delim, const std::string& path) {
    std::vector<text_record> out;
    const std::size_t n = s.size();
    std::size_t i = 0;
    index_t line = 1;
    auto at_record_end = [&](std::size_t j) {
        return j >= n || s[j] == '\n' || (s[j] == '\r' && j + 1 < n && s[j + 1] == '\n') ||
               (s[j] == '\r' && j + 1 == n);
    };
    while (i < n) {
        if (s[i] == '\n' || (s[i] == '\r' && at_record_end(i))) {  // an empty line
            i += s[i] == '\r' && i + 1 < n ? 2 : 1;
            ++line;
            continue;
        }
        text_record r;
        r.line = line;
        for (;;) {
            std::string f;
            if (i < n && s[i] == '"') {
                const index_t opened = line;
                for (++i;; ++i) {
                    if (i >= n)
                        fail_at(path, opened, "a quoted CSV field closed by '\"'",
                                "the quoted field opened here is never closed (unterminated '\"')");
                    if (s[i] == '"') {
                        if (i + 1 < n && s[i + 1] == '"') {
                            f += '"';
                            ++i;
                            continue;
                        }
                        ++i;
                        break;
                    }
                    if (s[i] == '\n') ++line;
                    f += s[i];
                }
                if (!at_record_end(i) && s[i] != delim)
                    fail_at(path, line,
                            "a separator " + delimiter_text(delim) + " or the end of the record after a closing '\"'",
                            "'" + excerpt(std::string_view(s).substr(i, 20)) + "'");
            } else {
                const std::size_t start = i;
                while (i < n && s[i] != delim && s[i] != '\n') ++i;
                std::size_t stop = i;
                if (stop > start && s[stop - 1] == '\r' && (i >= n || s[i] == '\n')) --stop;  // CRLF
                f.assign(s, start, stop - start);
            }
            r.fields.push_back(std::move(f));
            if (i < n && s[i] == delim) {
                ++i;  // the next field (empty at the end of the record: "a,b,")
                continue;
            }
            if (i < n && s[i] == '\r') ++i;
            if (i < n && s[i] == '\n') ++i, ++line;
            break;
        }
        out.push_back(std::move(r));
    }
    return out;
}

inline std::string trim_ascii(std::string_view s) {
    std::size_t a = 0, b = s.size();
    while (a < b && is_space(s[a])) ++a;
    while (b > a && is_space(s[b - 1])) --b;
    return std::string(s.substr(a, b - a));
}

inline bool ends_with_csv(const std::string& path) {
    if (path.size() < 4) return false;
    std::string tail = path.substr(path.size() - 4);
    for (char& c : tail)
        if (c >= 'A' && c <= 'Z') c = char(c - 'A' + 'a');
    return tail == ".csv";
}

inline std::string quoted_list(const std::vector<std::string>& names, std::size_t limit = 8) {
    std::string out;
    for (std::size_t k = 0; k < names.size() && k < limit; ++k) out += (k ? ", '" : "'") + excerpt(names[k]) + "'";
    if (names.size() > limit) out += ", ...";
    return out;
}

/// The 0-based column for `name` (in the header) or `index`.
inline index_t choose_column(const std::string& path, const text_record* header, const std::string& name, index_t index,
                             std::string_view which) {
    const std::string name_arg = std::string(which) + "_column", index_arg = std::string(which) + "_index";
    if (!name.empty()) {
        if (!header)
            fail(name_arg, "an empty name with header = false (the columns have no names: use " + index_arg + ")",
                 "'" + name + "'");
        const auto it = std::find(header->fields.begin(), header->fields.end(), name);
        if (it == header->fields.end())
            fail_at(path, header->line, "a header with the " + std::string(which) + " column '" + name + "'",
                    "the columns " + quoted_list(header->fields, 16));
        return index_t(it - header->fields.begin());
    }
    require(index >= 0, index_arg, ">= 0 (a 0-based field position)", index);
    if (header && index_t(header->fields.size()) <= index)
        fail_at(path, header->line,
                "a header with a " + std::string(which) + " column at position " + std::to_string(index) + " (0-based)",
                std::to_string(header->fields.size()) + " column(s): " + quoted_list(header->fields, 16));
    return index;
}

/// Names must be non-empty, without surrounding ASCII whitespace, and distinct: one hash-set pass
/// (a training file's 65,536 integer class names are checked again for each later file).
inline void check_label_names(const std::vector<std::string>& names) {
    std::unordered_set<std::string_view> seen;
    seen.reserve(names.size());
    for (const std::string& n : names) {
        require(!n.empty() && !is_space(n.front()) && !is_space(n.back()), "label_names",
                "non-empty names without surrounding whitespace", quoted_excerpt(n));
        require(seen.insert(n).second, "label_names", "distinct names", quoted_excerpt(n, " twice"));
    }
}

}  // namespace detail

/// The texts and labels of a TSV or CSV file (see the header comment).
inline labelled_data read_labelled_text(const std::string& path, const labelled_text_options& options = {}) {
    const labelled_text_options& o = options;
    detail::check_label_names(o.label_names);
    detail::require(o.delimiter != '\n' && o.delimiter != '\r' && o.delimiter != '"', "delimiter",
                    "a separator other than a line break or '\"' (0: the format's default)", int(o.delimiter));
    const bool csv =
        o.format == text_format::csv || (o.format == text_format::automatic && detail::ends_with_csv(path));
    const char delim = o.delimiter ? o.delimiter : (csv ? ',' : '\t');
    std::string bytes = detail::read_file(path, "path", o.max_bytes, "a readable labelled text file");
    if (bytes.compare(0, 3, "\xEF\xBB\xBF") == 0) bytes.erase(0, 3);
    const std::vector<detail::text_record> records =
        csv ? detail::parse_csv(bytes, delim, path) : detail::parse_tsv(bytes, delim);
    if (records.empty())
        detail::fail_at(path, 1, o.header ? "a header line and data records" : "data records", "an empty file");
    const detail::text_record* header = o.header ? &records[0] : nullptr;
    const index_t tc = detail::choose_column(path, header, o.text_column, o.text_index, "text");
    const index_t lc = detail::choose_column(path, header, o.label_column, o.label_index, "label");
    detail::require(tc != lc, "label_column", "a column other than the text column " + std::to_string(tc), lc);
    const std::size_t first = o.header ? 1 : 0;
    if (records.size() <= first)
        detail::fail_at(path, records[0].line, "data records after the header", "the header and nothing after it");
    const index_t need = std::max(tc, lc) + 1;
    labelled_data d;
    std::unordered_map<std::string, int> ids;
    const bool given = !o.label_names.empty();
    if (o.labels == label_type::names)
        for (std::size_t k = 0; k < o.label_names.size(); ++k) ids.emplace(o.label_names[k], int(k));
    int max_label = -1;
    for (std::size_t r = first; r < records.size(); ++r) {
        const detail::text_record& rec = records[r];
        if (index_t(rec.fields.size()) < need)
            detail::fail_at(path, rec.line,
                            "at least " + std::to_string(need) + " fields separated by " +
                                detail::delimiter_text(delim) + " (text in field " + std::to_string(tc) +
                                ", label in field " + std::to_string(lc) + ", 0-based)",
                            std::to_string(rec.fields.size()) + " field(s): '" + detail::excerpt(rec.fields[0]) + "'");
        const std::string& text = rec.fields[std::size_t(tc)];
        if (std::all_of(text.begin(), text.end(), detail::is_space))
            detail::fail_at(path, rec.line, "a non-empty text in field " + std::to_string(tc), "an empty text");
        const std::string label = detail::trim_ascii(rec.fields[std::size_t(lc)]);
        if (label.empty())
            detail::fail_at(path, rec.line, "a non-empty label in field " + std::to_string(lc), "an empty label");
        int id = 0;
        if (o.labels == label_type::integers) {
            const std::int64_t v = label.size() <= 9 ? detail::parse_count(label) : -1;
            if (v < 0)
                detail::fail_at(path, rec.line, "an integer label 0 ... 999999999", "'" + detail::excerpt(label) + "'");
            if (v >= o.max_classes)
                detail::fail_at(path, rec.line, "an integer label below max_classes = " + std::to_string(o.max_classes),
                                label);
            id = int(v);
            if (given && id >= int(o.label_names.size()))
                detail::fail_at(path, rec.line,
                                "a label in [0, " + std::to_string(o.label_names.size()) + ") (the " +
                                    std::to_string(o.label_names.size()) + " label_names)",
                                "unknown label " + label);
        } else {
            const auto it = ids.find(label);
            if (it != ids.end())
                id = it->second;
            else if (given)
                detail::fail_at(path, rec.line,
                                "a label among the " + std::to_string(o.label_names.size()) + " label_names (" +
                                    detail::quoted_list(o.label_names) + ")",
                                "unknown label '" + detail::excerpt(label) + "'");
            else {
                if (index_t(d.label_names.size()) >= o.max_classes)
                    detail::fail_at(path, rec.line,
                                    "at most max_classes = " + std::to_string(o.max_classes) + " distinct labels",
                                    "a new label '" + detail::excerpt(label) + "'");
                id = int(d.label_names.size());
                ids.emplace(label, id);
                d.label_names.push_back(label);
            }
        }
        max_label = std::max(max_label, id);
        d.texts.push_back(text);
        d.labels.push_back(id);
        d.lines.push_back(rec.line);
    }
    if (given) {
        d.label_names = o.label_names;
    } else if (o.labels == label_type::integers) {
        for (int k = 0; k <= max_label; ++k) d.label_names.push_back(std::to_string(k));
    } else if (o.order == label_order::sorted) {
        std::vector<std::string> sorted = d.label_names;
        std::sort(sorted.begin(), sorted.end());
        std::vector<int> remap(sorted.size());
        for (std::size_t k = 0; k < sorted.size(); ++k) remap[std::size_t(ids[sorted[k]])] = int(k);
        for (int& y : d.labels) y = remap[std::size_t(y)];
        d.label_names = std::move(sorted);
    }
    return d;
}

}  // namespace kattn::nn
