// bench/cli_args.hpp — a walk over a benchmark's command line: the option at hand and
// the value after it (a missing value ends the program with status 2, naming the option).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

namespace bench_cli {

class arguments {
public:
    arguments(const char* program, int argc, char** argv) : program_(program), argc_(argc), argv_(argv) {}
    /// Moves to the next option; false after the last.
    bool next() { return ++i_ < argc_; }
    /// The option at hand.
    std::string option() const { return argv_[i_]; }
    /// The argument after the option, which it consumes.
    std::string value() {
        if (i_ + 1 >= argc_) {
            std::fprintf(stderr, "%s: %s needs a value\n", program_, argv_[i_]);
            std::exit(2);
        }
        return argv_[++i_];
    }

private:
    const char* program_;
    int argc_;
    char** argv_;
    int i_ = 0;
};

}  // namespace bench_cli
