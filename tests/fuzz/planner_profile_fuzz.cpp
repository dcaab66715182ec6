// The planner's machine profile (planner/profile.hpp): refused with a
// ProfileError naming the field, or read; a profile read is written and
// read again to the same text (nlohmann/json's parse-dump-parse), and
// every question a prediction asks of it (products, links, sharing) is
// answered or refused with a ProfileError, for the sizes it holds and
// their neighbours.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "planner/profile.hpp"

using namespace distlab::planner;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  Profile profile;
  try {
    profile = parse_profile(text, "fuzz");
  } catch (const ProfileError&) {
    return 0;
  }
  const std::string written = profile_json(profile);
  const std::string again = profile_json(parse_profile(written, "written"));  // throws: a finding
  if (again != written) {
    std::fprintf(stderr, "planner_profile_fuzz: written, read and written again differs:\n%s\n%s\n", written.c_str(),
                 again.c_str());
    std::abort();
  }
  for (const MatmulPoint& m : profile.matmul)
    for (const int64_t dm : {int64_t{-1}, int64_t{0}, int64_t{1}}) {
      try {
        profile.matmul_flops(m.m + dm, m.k, m.n, m.precision);
        profile.matmul_flops(m.m, m.k + 1, m.n, "fp32");
      } catch (const ProfileError&) {
      }
    }
  for (const LinkPoint& l : profile.links)
    for (const int dr : {-1, 0, 1}) {
      try {
        profile.link(l.backend, l.collective, l.ranks + dr);
      } catch (const ProfileError&) {
      }
    }
  for (const SharingPoint& s : profile.sharing)
    for (const int dr : {-1, 0, 1}) profile.slowdown(s.ranks + dr);
  for (const int ranks : {1, 2, 3, 8, 64, 4096}) profile.slowdown(ranks);
  return 0;
}
