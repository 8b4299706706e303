// kattn/io/zip.hpp — a strict reader of *stored* (uncompressed) zip archives held in memory,
// and the matching writer, for the .npz files of io/npz.hpp.
//
// kattn is header-only and links nothing, so it reads the small subset of zip that
// NumPy's np.savez and kattn's own writer produce, and checks everything it reads:
//   - one end-of-central-directory (EOCD) record at the very end (its comment length must
//     reach the end of the file exactly: trailing bytes are rejected), one disk only;
//   - zip64 (np.savez opens every member with force_zip64): the locator and the zip64 EOCD
//     record must lie inside the file, before the EOCD, with their signatures;
//     zip64 extra fields must hold every saturated (0xFFFFFFFF) size or offset;
//   - the central directory must end exactly where the (zip64) EOCD begins, and hold the
//     declared number of records, each with its signature and inside the directory;
//   - every member's local header carries its signature, the same name, method, CRC-32 and
//     sizes, and lies, with its data, before the central directory; members may not overlap;
//   - names are non-empty and unique; encrypted members are rejected.
// Every offset and length is checked with overflow-free arithmetic (`fits`) before use, so
// no crafted value reads outside the buffer. Failures throw kattn::error naming `label`
// (the file's path). Members are only located here; data() returns a view, crc() the
// stored CRC-32 (io/npz.hpp compares it before trusting a member).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../core/error.hpp"

namespace kattn::detail {

inline std::uint32_t crc32(const char* data, std::size_t n) {
    static const std::array<std::uint32_t, 256> table = [] {
        std::array<std::uint32_t, 256> t{};
        for (std::uint32_t i = 0; i < 256; ++i) {
            std::uint32_t c = i;
            for (int k = 0; k < 8; ++k) c = (c & 1u) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            t[i] = c;
        }
        return t;
    }();
    std::uint32_t c = 0xFFFFFFFFu;
    for (std::size_t i = 0; i < n; ++i) c = table[(c ^ static_cast<unsigned char>(data[i])) & 0xFFu] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

inline void put_le(std::string& s, std::uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xFFu));
}

/// True when [offset, offset + length) lies inside [0, limit), without overflow.
constexpr bool fits(std::uint64_t offset, std::uint64_t length, std::uint64_t limit) {
    return offset <= limit && length <= limit - offset;
}

/// One member of a stored zip archive.
struct zip_member {
    std::string name;
    std::uint32_t method = 0, crc = 0;
    std::uint64_t header = 0, data = 0, size = 0;  ///< local header offset, data offset, data length
};

class zip_archive {
public:
    /// Parses the directory of the archive in `bytes`; `label` names it in errors.
    zip_archive(std::string_view bytes, std::string label) : b_(bytes), label_(std::move(label)) { parse(); }

    const std::string& label() const { return label_; }
    const std::vector<zip_member>& members() const { return members_; }
    const zip_member* find(const std::string& name) const {
        const auto it = index_.find(name);
        return it == index_.end() ? nullptr : &members_[it->second];
    }
    std::string_view data(const zip_member& m) const { return b_.substr(m.data, m.size); }

    [[noreturn]] void bad(const std::string& why) const {
        fail("path", "a .npz (zip) archive", "'" + label_ + "' (" + why + ")");
    }

private:
    std::uint64_t le(std::uint64_t pos, int n) const {  // callers check fits(pos, n, size) first
        std::uint64_t v = 0;
        for (int i = 0; i < n; ++i) v |= std::uint64_t(static_cast<unsigned char>(b_[pos + i])) << (8 * i);
        return v;
    }
    std::uint64_t field(std::uint64_t pos, int n, std::uint64_t limit, const char* what) const {
        if (!fits(pos, std::uint64_t(n), limit)) bad(std::string("a truncated ") + what);
        return le(pos, n);
    }

    void parse() {
        const std::uint64_t size = b_.size();
        if (size < 22) bad("too short to be a zip archive: " + std::to_string(size) + " bytes");
        // The EOCD record: the last signature whose comment ends exactly at the end of the file.
        std::uint64_t eocd = size;
        bool seen = false;
        const std::uint64_t lowest = size > 22 + 0xFFFF ? size - 22 - 0xFFFF : 0;
        for (std::uint64_t p = size - 22 + 1; p-- > lowest;) {
            if (le(p, 4) != 0x06054b50u) continue;
            seen = true;
            if (p + 22 + le(p + 20, 2) == size) {
                eocd = p;
                break;
            }
        }
        if (eocd == size)
            bad(seen ? "bytes after the end-of-central-directory record" : "no end-of-central-directory record");
        std::uint64_t disk = le(eocd + 4, 2), cd_disk = le(eocd + 6, 2), here = le(eocd + 8, 2),
                      count = le(eocd + 10, 2), cd_size = le(eocd + 12, 4), cd = le(eocd + 16, 4);
        std::uint64_t cd_end_at = eocd;  // where the central directory must end
        const bool zip64 = count == 0xFFFFu || here == 0xFFFFu || cd_size == 0xFFFFFFFFu || cd == 0xFFFFFFFFu ||
                           disk == 0xFFFFu || cd_disk == 0xFFFFu;
        if (zip64) {
            if (eocd < 20 || le(eocd - 20, 4) != 0x07064b50u) bad("a saturated EOCD record without a zip64 locator");
            const std::uint64_t loc = eocd - 20;
            if (le(loc + 4, 4) != 0 || le(loc + 16, 4) > 1) bad("a multi-disk archive");
            const std::uint64_t z = le(loc + 8, 8);
            if (!fits(z, 56, loc) || le(z, 4) != 0x06064b50u) bad("a corrupt zip64 end-of-central-directory record");
            const std::uint64_t rest = le(z + 4, 8);  // size of the record after this field
            if (rest < 44 || !fits(z + 12, rest, loc)) bad("a corrupt zip64 end-of-central-directory record");
            disk = le(z + 16, 4);
            cd_disk = le(z + 20, 4);
            here = le(z + 24, 8);
            count = le(z + 32, 8);
            cd_size = le(z + 40, 8);
            cd = le(z + 48, 8);
            cd_end_at = z;
        }
        if (disk != 0 || cd_disk != 0 || here != count) bad("a multi-disk archive");
        if (!fits(cd, cd_size, size) || cd + cd_size != cd_end_at)
            bad("a central directory that does not end at the end-of-central-directory record");
        if (count > cd_size / 46) bad("more directory records (" + std::to_string(count) + ") than fit the directory");
        members_.reserve(static_cast<std::size_t>(count));
        const std::uint64_t end = cd + cd_size;
        std::uint64_t p = cd;
        for (std::uint64_t k = 0; k < count; ++k) p = parse_record(p, end, cd);
        if (p != end) bad("bytes after the last central directory record");
        // Members may not overlap one another (each byte of data belongs to one member).
        std::vector<std::pair<std::uint64_t, std::uint64_t>> spans;
        for (const auto& m : members_) spans.emplace_back(m.header, m.data + m.size);
        std::sort(spans.begin(), spans.end());
        for (std::size_t i = 1; i < spans.size(); ++i)
            if (spans[i].first < spans[i - 1].second) bad("overlapping members");
    }

    std::uint64_t parse_record(std::uint64_t p, std::uint64_t end, std::uint64_t cd) {
        if (!fits(p, 46, end) || le(p, 4) != 0x02014b50u) bad("a corrupt central directory record");
        zip_member m;
        const std::uint64_t flags = le(p + 8, 2);
        m.method = std::uint32_t(le(p + 10, 2));
        m.crc = std::uint32_t(le(p + 16, 4));
        std::uint64_t csize = le(p + 20, 4), usize = le(p + 24, 4), start_disk = le(p + 34, 2), offset = le(p + 42, 4);
        const std::uint64_t nlen = le(p + 28, 2), elen = le(p + 30, 2), clen = le(p + 32, 2);
        if (!fits(p + 46, nlen + elen + clen, end)) bad("a central directory record past the directory");
        m.name.assign(b_.substr(p + 46, nlen));
        if (m.name.empty() || m.name.find('\0') != std::string::npos) bad("an empty or malformed member name");
        if (flags & 0x41u) bad("an encrypted member '" + m.name + "'");
        // zip64 extended information: the saturated fields, in the order usize, csize, offset, disk.
        const std::uint64_t extra_end = p + 46 + nlen + elen;
        for (std::uint64_t e = p + 46 + nlen; e < extra_end;) {
            const std::uint64_t id = field(e, 2, extra_end, "extra field"),
                                len = field(e + 2, 2, extra_end, "extra field");
            if (!fits(e + 4, len, extra_end)) bad("an extra field past its record in '" + m.name + "'");
            if (id == 0x0001) {
                std::uint64_t q = e + 4;
                const std::uint64_t q_end = e + 4 + len;
                if (usize == 0xFFFFFFFFu) usize = field(q, 8, q_end, "zip64 extra field"), q += 8;
                if (csize == 0xFFFFFFFFu) csize = field(q, 8, q_end, "zip64 extra field"), q += 8;
                if (offset == 0xFFFFFFFFu) offset = field(q, 8, q_end, "zip64 extra field"), q += 8;
                if (start_disk == 0xFFFFu) start_disk = field(q, 4, q_end, "zip64 extra field");
            }
            e += 4 + len;
        }
        if (usize == 0xFFFFFFFFu || csize == 0xFFFFFFFFu || offset == 0xFFFFFFFFu || start_disk == 0xFFFFu)
            bad("a saturated size or offset without its zip64 extra field in '" + m.name + "'");
        if (start_disk != 0) bad("a multi-disk archive");
        if (m.method == 0 && csize != usize) bad("a stored member '" + m.name + "' whose sizes differ");
        // The local header and the data lie before the central directory.
        if (!fits(offset, 30, cd) || le(offset, 4) != 0x04034b50u) bad("a corrupt local header of '" + m.name + "'");
        const std::uint64_t lnlen = le(offset + 26, 2), lelen = le(offset + 28, 2);
        // Without a data descriptor (flag bit 3) the local CRC and sizes repeat the directory's
        // (sizes may be saturated when a local zip64 field holds them, as np.savez writes).
        auto same = [&](std::uint64_t pos, std::uint64_t v) { return le(pos, 4) == v || le(pos, 4) == 0xFFFFFFFFu; };
        if (!fits(offset + 30, lnlen + lelen, cd) || b_.substr(offset + 30, lnlen) != m.name ||
            le(offset + 8, 2) != m.method ||
            (!(flags & 0x8u) &&
             (le(offset + 14, 4) != m.crc || !same(offset + 18, csize) || !same(offset + 22, usize))))
            bad("a local header that does not match the directory for '" + m.name + "'");
        m.header = offset;
        m.data = offset + 30 + lnlen + lelen;
        m.size = csize;
        if (!fits(m.data, m.size, cd)) bad("a truncated member '" + m.name + "'");
        if (!index_.emplace(m.name, members_.size()).second) bad("the member name '" + m.name + "' twice");
        members_.push_back(std::move(m));
        return p + 46 + nlen + elen + clen;
    }

    std::string_view b_;
    std::string label_;
    std::vector<zip_member> members_;
    std::map<std::string, std::size_t> index_;
};

/// Appends stored members to a zip archive image (fixed 1980-01-01 timestamp, no zip64:
/// the caller keeps the archive below 4 GiB), then finish() writes the directory.
class zip_writer {
public:
    explicit zip_writer(std::string label) : label_(std::move(label)) {}

    void add(const std::string& name, std::string_view data) {
        const std::uint64_t offset = out_.size();
        require(data.size() < 0xFFFFFFFFu && offset + 30 + name.size() + data.size() < 0xFFFFFFFFu &&
                    name.size() < 0xFFFFu && count_ < 0xFFFFu,
                "path", "parameter arrays below 4 GiB in total and fewer than 65535 of them", "'" + label_ + "'");
        const std::uint32_t crc = crc32(data.data(), data.size());
        auto common = [&](std::string& s) {
            put_le(s, 20, 2);                          // version needed
            put_le(s, 0, 2);                           // flags
            put_le(s, 0, 2);                           // method: stored
            put_le(s, 0, 2);                           // time 00:00:00
            put_le(s, (0u << 9) | (1u << 5) | 1u, 2);  // date 1980-01-01
            put_le(s, crc, 4);
            put_le(s, data.size(), 4);
            put_le(s, data.size(), 4);
            put_le(s, name.size(), 2);
            put_le(s, 0, 2);  // extra
        };
        put_le(out_, 0x04034b50u, 4);
        common(out_);
        out_ += name;
        out_ += data;
        put_le(central_, 0x02014b50u, 4);
        put_le(central_, 20, 2);  // version made by
        common(central_);
        put_le(central_, 0, 2);  // comment
        put_le(central_, 0, 2);  // disk
        put_le(central_, 0, 2);  // internal attributes
        put_le(central_, 0, 4);  // external attributes
        put_le(central_, offset, 4);
        central_ += name;
        ++count_;
    }

    std::string finish() && {
        const std::uint64_t cd_offset = out_.size();
        require(cd_offset + central_.size() < 0xFFFFFFFFu, "path", "parameter arrays below 4 GiB in total",
                "'" + label_ + "'");
        out_ += central_;
        put_le(out_, 0x06054b50u, 4);
        put_le(out_, 0, 2);
        put_le(out_, 0, 2);
        put_le(out_, count_, 2);
        put_le(out_, count_, 2);
        put_le(out_, central_.size(), 4);
        put_le(out_, cd_offset, 4);
        put_le(out_, 0, 2);
        return std::move(out_);
    }

private:
    std::string label_, out_, central_;
    std::uint64_t count_ = 0;
};

}  // namespace kattn::detail
