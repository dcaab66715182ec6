// Freed host memory kept for reuse (memory/host_allocator.hpp), seen
// through glibc's own accounting (mallinfo2): a 16 MiB block comes from the
// heap and stays there once freed; with DISTLAB_HOST_ALLOCATOR=glibc (this
// program run again) the same block is mapped on its own and unmapped.
#include <gtest/gtest.h>
#include <malloc.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

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
  EXPECT_THROW(choose_host_allocator("jemalloc", nullptr), std::invalid_argument);
}

TEST(HostAllocator, ABlockUnder32MiBComesFromTheHeapAndStaysThereWhenFreed) {
  if (std::getenv("DISTLAB_HOST_ALLOCATOR") != nullptr || std::getenv("GLIBC_TUNABLES") != nullptr)
    GTEST_SKIP() << "the environment chose the allocator";
  ASSERT_EQ(distlab::memory::host_allocator_choice(), "kept (mmap threshold 32 MiB, trim threshold 1 GiB)");
  const BlockSeen seen = allocate_and_free_a_block();
  EXPECT_EQ(seen.mapped_while_held, 0);
  EXPECT_EQ(seen.mapped_after_free, 0);
  EXPECT_GE(seen.free_in_heap_after_free, static_cast<long long>(kBlock));
}

// Run by the next test in a process of its own; prints what it saw.
TEST(HostAllocatorProbe, PrintWhatABlockDoes) {
  if (std::getenv("DISTLAB_HOST_ALLOCATOR_PROBE") == nullptr) GTEST_SKIP() << "run by the test below";
  const BlockSeen seen = allocate_and_free_a_block();
  std::printf("choice: %s\nmapped while held: %lld\nmapped after free: %lld\n",
              distlab::memory::host_allocator_choice().c_str(), seen.mapped_while_held, seen.mapped_after_free);
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
