// kattn/io/file.hpp — whole-file reads with a size bound, and durable atomic writes.
//
//   read_file(path, argument, max_bytes, what)  the bytes of a regular file. A missing or
//       unreadable file, a directory, or a file larger than max_bytes throws kattn::error
//       naming `argument` and the path (never std::ios_base::failure).
//   write_file_atomically(path, bytes, argument)  replaces `path` by `bytes` so that any
//       reader, and the disk after a crash, sees either the old file or the new one, never a
//       mixture or a truncated file:
//         1. a unique temporary "<dir>/.<name>.XXXXXX" in the target's directory (mkstemp),
//            so concurrent writers never share a temporary and the rename stays on one file system;
//         2. all bytes written (partial writes and EINTR retried), fsync of the file;
//         3. rename onto `path` (atomic on POSIX), fsync of the directory, so the new name is durable.
//       On any failure the temporary is removed and the previous file is left untouched.
//       The new file keeps the permission bits of the file it replaces (0644 for a new file).
// POSIX only (Linux, macOS, the BSDs): kattn's readers and writers are the only users.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <system_error>

#include "../core/error.hpp"

namespace kattn::detail {

/// The whole content of the regular file at `path`, at most max_bytes long.
inline std::string read_file(const std::string& path, std::string_view argument, std::uint64_t max_bytes,
                             std::string_view what = "a readable file") {
    auto bad = [&](const std::string& why) { fail(argument, what, "'" + path + "' (" + why + ")"); };
    std::error_code ec;
    const auto status = std::filesystem::status(path, ec);
    if (ec || !std::filesystem::exists(status)) bad("cannot open: no such file");
    if (std::filesystem::is_directory(status)) bad("a directory, not a file");
    if (!std::filesystem::is_regular_file(status)) bad("not a regular file");
    const std::uintmax_t size = std::filesystem::file_size(path, ec);
    if (ec) bad("cannot determine its size");
    if (size > max_bytes) bad(std::to_string(size) + " bytes, above the limit of " + std::to_string(max_bytes));
    std::ifstream in(path, std::ios::binary);
    if (!in) bad("cannot open for reading");
    std::string bytes(static_cast<std::size_t>(size), '\0');
    in.read(bytes.data(), static_cast<std::streamsize>(size));
    if (static_cast<std::uintmax_t>(in.gcount()) != size) bad("read failed or the file shrank while being read");
    return bytes;
}

/// Durably replaces the file at `path` by `bytes` (see above).
inline void write_file_atomically(const std::string& path, std::string_view bytes, std::string_view argument = "path") {
    namespace fs = std::filesystem;
    auto bad = [&](const std::string& why) {
        fail(argument, "a writable file location", "'" + path + "' (" + why + ")");
    };
    if (path.empty()) bad("an empty path");
    const fs::path target(path);
    std::error_code ec;
    const auto status = fs::status(target, ec);
    if (fs::is_directory(status)) bad("a directory, not a file");
    fs::path dir = target.parent_path();
    if (dir.empty()) dir = ".";
    if (!fs::is_directory(dir, ec)) bad("its directory '" + dir.string() + "' does not exist");
    const mode_t mode = fs::exists(status) ? static_cast<mode_t>(status.permissions()) & 07777 : 0644;

    std::string tmp = (dir / ("." + target.filename().string() + ".XXXXXX")).string();
    const int fd = ::mkstemp(tmp.data());
    if (fd < 0) bad(std::string("cannot create a temporary file: ") + std::strerror(errno));
    auto abandon = [&](const std::string& why) {
        ::close(fd);
        ::unlink(tmp.c_str());
        bad(why);
    };
    for (std::size_t done = 0; done < bytes.size();) {
        const ::ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) abandon(std::string("write failed: ") + (n < 0 ? std::strerror(errno) : "no progress"));
        done += static_cast<std::size_t>(n);
    }
    if (::fchmod(fd, mode) != 0) abandon(std::string("cannot set permissions: ") + std::strerror(errno));
    if (::fsync(fd) != 0) abandon(std::string("fsync failed: ") + std::strerror(errno));
    if (::close(fd) != 0) {
        ::unlink(tmp.c_str());
        bad(std::string("close failed: ") + std::strerror(errno));
    }
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
        const int err = errno;
        ::unlink(tmp.c_str());
        bad(std::string("rename failed: ") + std::strerror(err));
    }
    // The rename is in the directory: sync it so the new name survives a crash. Some file
    // systems refuse fsync on directories (EINVAL); the data itself is already durable then.
    const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        const int r = ::fsync(dfd);
        const int err = errno;
        ::close(dfd);
        if (r != 0 && err != EINVAL && err != ENOTSUP)
            bad(std::string("directory fsync failed: ") + std::strerror(err));
    }
}

}  // namespace kattn::detail
