// tests/scratch_dir.hpp — a private temporary directory for tests that write files,
// removed with everything in it when the object goes out of scope.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

namespace kt {

struct scratch_dir {
    std::filesystem::path path;
    scratch_dir() {
        static int counter = 0;  // one per process (inline function): unique with the pid
        path = std::filesystem::temp_directory_path() /
               ("kattn_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
        std::filesystem::create_directories(path);
    }
    scratch_dir(const scratch_dir&) = delete;
    scratch_dir& operator=(const scratch_dir&) = delete;
    ~scratch_dir() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
    /// The path of the file `name` in the directory.
    std::string file(const std::string& name) const { return (path / name).string(); }
    /// Writes `bytes` to the file `name` and returns its path.
    std::string write(const std::string& name, const std::string& bytes) const {
        const std::string p = file(name);
        std::ofstream(p, std::ios::binary) << bytes;
        return p;
    }
};

}  // namespace kt
