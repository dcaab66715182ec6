// The error file torchrun reads when a worker fails.
//
// torchrun gives each worker a path in TORCHELASTIC_ERROR_FILE. A Python
// worker wrapped in @record writes its exception there as JSON
// (torch/distributed/elastic/multiprocessing/errors/error_handler.py):
//
//   {"message": {"message": "TimeoutError: rank 1: ...",
//                "extraInfo": {"py_callstack": "<text>", "timestamp": "1732312345"}}}
//
// and torchrun's failure summary prints extraInfo.py_callstack (or
// message.message) under "traceback :". Without the file the summary only
// says "To enable traceback see: ...". A DistLab program writes the same
// file, with its exception's type and text in place of a Python stack.
// No LibTorch here; nothing is written when the variable is unset.
#pragma once

#include <cstdint>
#include <exception>
#include <string>

#include "comm/env.hpp"

namespace distlab::comm {

// The JSON text torchrun expects for `message` (one line, or several: the
// summary indents them), written at `unix_seconds`.
std::string torchelastic_error_json(const std::string& type_name, const std::string& message,
                                    const std::string& program, std::int64_t unix_seconds);

// Writes the file named by TORCHELASTIC_ERROR_FILE in `env`, if set.
// Returns the path written, or "" when the variable is unset or the file
// cannot be written (a failing program must not fail again here: it says so
// on stderr and goes on).
std::string record_error(const std::exception& error, const std::string& program, const Environment& env);
inline std::string record_error(const std::exception& error, const std::string& program = "") {
  return record_error(error, program, current_environment());
}

// "distlab::comm::TimeoutError" for a TimeoutError: the dynamic type's name.
std::string exception_type_name(const std::exception& error);

}  // namespace distlab::comm
