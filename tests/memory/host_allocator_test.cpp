// Freed host memory kept for reuse (memory/host_allocator.hpp), seen
// through glibc's own accounting (mallinfo2): a 16 MiB block comes from the
// heap and stays there once freed; with DISTLAB_HOST_ALLOCATOR=glibc (this
// program run again) the same block is mapped on its own and unmapped. On
// a thread (as a thread rank allocates) more blocks than an arena's first
// heap holds reuse their pages: their second use faults no page in, where
// with the thresholds alone (the thread's own arena, whose later heaps
// glibc unmaps once free) it faults them in again.
#include <gtest/gtest.h>
#include <malloc.h>
#include <unistd.h>

#include <sys/resource.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>

#include "memory/host_allocator.hpp"

namespace {

using distlab::memory::choose_host_allocator;

constexpr std::size_t kBlock = std::size_t{16} << 20;

struct BlockSeen {
  long long mapped_while_held;  // mmapped bytes, minus those before
  long long mapped_after_free;
  long long free_in_heap_after_free;
};

BlockSeen allocate_and_free_a_block() {
  const struct mallinfo2 before = mallinfo2();
  char* block = static_cast<char*>(std::malloc(kBlock));
  std::memset(block, 1, kBlock);
  asm volatile("" : : "r"(block) : "memory");  // the block is used: the compiler keeps malloc and free
  const struct mallinfo2 held = mallinfo2();
  std::free(block);
  const struct mallinfo2 after = mallinfo2();
  return {static_cast<long long>(held.hblkhd) - static_cast<long long>(before.hblkhd),
          static_cast<long long>(after.hblkhd) - static_cast<long long>(before.hblkhd),
          static_cast<long long>(after.fordblks)};
}

// Page faults (minor: pages mapped in) on a new thread while it holds six
// 16 MiB blocks at once a second time, after holding and freeing six once:
// more than a thread arena's first heap (64 MiB) holds, as a step's
// activations are.
long page_faults_of_second_blocks_on_a_thread() {
  long faults = -1;
  auto use_blocks = [] {
    std::array<char*, 6> blocks{};
    for (char*& block : blocks) {
      block = static_cast<char*>(std::malloc(kBlock));
      std::memset(block, 1, kBlock);
      asm volatile("" : : "r"(block) : "memory");
    }
    for (char* block : blocks) std::free(block);
  };
  std::thread rank([&] {
    use_blocks();
    rusage before{}, after{};
    getrusage(RUSAGE_THREAD, &before);
    use_blocks();
    getrusage(RUSAGE_THREAD, &after);
    faults = after.ru_minflt - before.ru_minflt;
  });
  rank.join();
  return faults;
}

// This program run again with `environment` before it; its output and status.
std::pair<std::string, int> run_self(const std::string& environment, const std::string& args) {
  std::array<char, 4096> self{};
  const ssize_t n = readlink("/proc/self/exe", self.data(), self.size() - 1);
  if (n <= 0) throw std::runtime_error("cannot read /proc/self/exe");
  const std::string command = "env -u GLIBC_TUNABLES " + environment + " " + std::string(self.data(), n) + " " + args + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  std::string output;
  std::array<char, 512> chunk{};
  while (std::fgets(chunk.data(), chunk.size(), pipe) != nullptr) output += chunk.data();
  const int status = pclose(pipe);
  return {output, WIFEXITED(status) ? WEXITSTATUS(status) : -1};
}

TEST(HostAllocator, TheChoiceFromTheEnvironment) {
  EXPECT_EQ(choose_host_allocator(nullptr, nullptr), "kept");
  EXPECT_EQ(choose_host_allocator("", nullptr), "kept");
  EXPECT_EQ(choose_host_allocator("kept", "glibc.pthread.rseq=0"), "kept");
  EXPECT_EQ(choose_host_allocator("glibc", nullptr), "glibc");
  EXPECT_EQ(choose_host_allocator(nullptr, "glibc.malloc.trim_threshold=0"), "tunables");
  EXPECT_EQ(choose_host_allocator("kept", "glibc.malloc.mmap_threshold=4096"), "tunables");
  EXPECT_EQ(choose_host_allocator(nullptr, "glibc.malloc.arena_max=8"), "tunables");
  EXPECT_THROW(choose_host_allocator("jemalloc", nullptr), std::invalid_argument);
}

TEST(HostAllocator, ABlockUnder32MiBComesFromTheHeapAndStaysThereWhenFreed) {
  if (std::getenv("DISTLAB_HOST_ALLOCATOR") != nullptr || std::getenv("GLIBC_TUNABLES") != nullptr)
    GTEST_SKIP() << "the environment chose the allocator";
  ASSERT_EQ(distlab::memory::host_allocator_choice(), "kept (mmap threshold 32 MiB, trim threshold 1 GiB, one arena)");
  const BlockSeen seen = allocate_and_free_a_block();
  EXPECT_EQ(seen.mapped_while_held, 0);
  EXPECT_EQ(seen.mapped_after_free, 0);
  EXPECT_GE(seen.free_in_heap_after_free, static_cast<long long>(kBlock));
}

TEST(HostAllocator, AThreadUsesItsBlocksPagesAgain) {
  if (std::getenv("DISTLAB_HOST_ALLOCATOR") != nullptr || std::getenv("GLIBC_TUNABLES") != nullptr)
    GTEST_SKIP() << "the environment chose the allocator";
  EXPECT_LT(page_faults_of_second_blocks_on_a_thread(), 256) << "six 16 MiB blocks are 24576 pages";
}

// Run by the tests below in a process of its own; prints what it saw.
TEST(HostAllocatorProbe, PrintWhatABlockDoes) {
  if (std::getenv("DISTLAB_HOST_ALLOCATOR_PROBE") == nullptr) GTEST_SKIP() << "run by the tests below";
  const BlockSeen seen = allocate_and_free_a_block();
  std::printf("choice: %s\nmapped while held: %lld\nmapped after free: %lld\npage faults on a thread: %ld\n",
              distlab::memory::host_allocator_choice().c_str(), seen.mapped_while_held, seen.mapped_after_free,
              page_faults_of_second_blocks_on_a_thread());
}

TEST(HostAllocator, WithTheThresholdsAloneAThreadFaultsItsBlocksInAgain) {
  // glibc's tunables for the two thresholds, not the arena: the thread
  // allocates from an arena of its own, whose heap is unmapped when freed.
  const auto [output, status] = run_self(
      "GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=1073741824 "
      "DISTLAB_HOST_ALLOCATOR_PROBE=1",
      "--gtest_filter=HostAllocatorProbe.*");
  ASSERT_EQ(status, 0) << output;
  EXPECT_NE(output.find("choice: GLIBC_TUNABLES's"), std::string::npos) << output;
  const size_t at = output.find("page faults on a thread: ");
  ASSERT_NE(at, std::string::npos) << output;
  EXPECT_GE(std::stol(output.substr(at + 25)), 4096) << output;  // at least one block's pages
}

TEST(HostAllocator, WithGlibcsDefaultsTheSameBlockIsMappedAndUnmapped) {
  const auto [output, status] = run_self("DISTLAB_HOST_ALLOCATOR=glibc DISTLAB_HOST_ALLOCATOR_PROBE=1",
                                         "--gtest_filter=HostAllocatorProbe.*");
  ASSERT_EQ(status, 0) << output;
  EXPECT_NE(output.find("choice: glibc's defaults (DISTLAB_HOST_ALLOCATOR=glibc)"), std::string::npos) << output;
  EXPECT_NE(output.find("mapped while held: " + std::to_string(kBlock + 4096)), std::string::npos) << output;
  EXPECT_NE(output.find("mapped after free: 0"), std::string::npos) << output;
}

TEST(HostAllocator, AnUnknownChoiceStopsTheProgramWithAMessage) {
  const auto [output, status] = run_self("DISTLAB_HOST_ALLOCATOR=jemalloc", "--gtest_list_tests");
  EXPECT_EQ(status, 2) << output;
  EXPECT_NE(output.find("DISTLAB_HOST_ALLOCATOR=jemalloc: not 'kept'"), std::string::npos) << output;
}

}  // namespace
