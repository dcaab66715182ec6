// POSIX shared memory for the same-host transport (comm/shm_links.hpp): a
// segment one process creates and its peers on the host map.
//
// Names: "/distlab.<pid>.<job token>.<what>". The creator's pid lets a later
// job remove the segments of a job that died before it unlinked them
// (remove_stale_segments); the token, drawn by the job's rank 0, keeps two
// jobs on one host apart. A segment is unlinked as soon as every peer has
// mapped it: from then on only the mappings hold it, and the kernel frees it
// when the last process that maps it exits, killed or not.
#pragma once

#include <cstddef>
#include <string>

namespace distlab::comm {

class SharedSegment {
 public:
  // Creates a zero-filled segment of `bytes` (fails if the name exists).
  static SharedSegment create(const std::string& name, size_t bytes);
  // Maps an existing one, created with the same size.
  static SharedSegment attach(const std::string& name, size_t bytes);

  SharedSegment() = default;
  ~SharedSegment();
  SharedSegment(SharedSegment&& other) noexcept;
  SharedSegment& operator=(SharedSegment&& other) noexcept;
  SharedSegment(const SharedSegment&) = delete;
  SharedSegment& operator=(const SharedSegment&) = delete;

  void* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& name() const { return name_; }
  // Removes the name (the mapping stays). Only the creator does.
  void unlink();

 private:
  static SharedSegment mapped(const std::string& name, int fd, size_t bytes, bool owner);
  void release();
  std::string name_;
  void* data_ = nullptr;
  size_t size_ = 0;
  bool owner_ = false;  // created here and not yet unlinked
};

// "/distlab.<this pid>.<token>.<what>".
std::string segment_name(const std::string& token, const std::string& what);

// Unlinks every /dev/shm/distlab.<pid>.* whose process no longer exists;
// returns how many. Called when a job sets up its segments.
int remove_stale_segments();

// Names under /dev/shm that carry `token` (for tests: none may be left).
int count_segments(const std::string& token);

}  // namespace distlab::comm
