// Files that survive a crash at any moment. No LibTorch here.
//
// write_file_atomically(path, bytes):
//   1. write bytes to "<path>.tmp-<pid>" in the same folder (a rename is
//      atomic only within one file system)
//   2. fsync the file: its bytes are on disk before its name is
//   3. rename it over `path`: readers see the old file or the new, whole
//   4. fsync the folder: the rename itself is on disk
// A crash before step 3 leaves the old `path` untouched and a temporary
// file behind, which readers ignore (is_temporary_file) and the next write
// of the same checkpoint removes.
#pragma once

#include <string>
#include <vector>

namespace distlab::checkpoint {

// Throws std::runtime_error naming the path and the system's reason.
void write_file_atomically(const std::string& path, const std::vector<char>& bytes);

// The whole file. Throws std::runtime_error naming the path when it cannot
// be read.
std::vector<char> read_whole_file(const std::string& path);

// fsync of a folder, so that names created or renamed in it are durable.
void sync_folder(const std::string& folder);

// True for the names write_file_atomically uses before the rename.
bool is_temporary_file(const std::string& name);

}  // namespace distlab::checkpoint
