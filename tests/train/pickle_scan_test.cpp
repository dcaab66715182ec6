// The walk over a torch.save pickle before LibTorch's unpickler reads it
// (checkpoint/pickle_scan.hpp): what torch::pickle_save writes passes and
// loads; a pickle written here by hand, opcode by opcode, that claims a
// string, a memo index or a storage past its bytes is refused with the
// claim named, at the exact boundary (one element more than the record
// holds is refused, as many as it holds passes); so are an opcode torch.save
// never writes, a pickle cut short, one without its STOP and one that pops
// what its stack does not hold, and a zip whose directory points past its end.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/core/Dict.h>
#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "checkpoint/pickle_scan.hpp"

namespace distlab::checkpoint {
namespace {

// A torch.save zip holding `pickle` as data.pkl and each of `records` as data/<key>.
std::vector<char> zip_of(const std::string& pickle, const std::map<std::string, std::string>& records = {}) {
  std::vector<char> out;
  caffe2::serialize::PyTorchStreamWriter writer([&](const void* bytes, size_t n) {
    out.insert(out.end(), static_cast<const char*>(bytes), static_cast<const char*>(bytes) + n);
    return n;
  });
  writer.writeRecord("data.pkl", pickle.data(), pickle.size());
  for (const auto& [key, bytes] : records) writer.writeRecord("data/" + key, bytes.data(), bytes.size());
  writer.writeEndOfFile();
  return out;
}

std::string le(uint64_t v, int bytes) {
  std::string out;
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
  return out;
}
std::string unicode(const std::string& s) { return "X" + le(s.size(), 4) + s; }
const std::string kProto = "\x80\x02";

// A float storage of `numel` elements over the record "0" (16 bytes: 4 floats).
std::string storage_pickle(uint32_t numel) {
  return kProto + "(" + unicode("storage") + "ctorch\nFloatStorage\n" + unicode("0") + unicode("cpu") + "J" +
         le(numel, 4) + "tQ.";
}

TEST(PickleScan, WhatPickleSaveWritesPassesAndLoads) {
  c10::impl::GenericDict dict(c10::StringType::get(), c10::AnyType::get());
  dict.insert("weight", at::randn({3, 4}));
  dict.insert("steps", at::arange(5, at::kLong));
  dict.insert("mask", at::rand({6}) > 0.5);
  dict.insert("bytes", at::randint(255, {7}, at::kByte));
  dict.insert("half", at::randn({2}).to(at::kDouble));
  dict.insert("empty", at::empty({0}));
  dict.insert("step", int64_t(1) << 40);
  dict.insert("lr", 0.25);
  dict.insert("text", std::string(300, 'x'));
  c10::impl::GenericDict inner(c10::StringType::get(), c10::AnyType::get());
  inner.insert("again", at::ones({2}));
  dict.insert("inner", inner);
  const std::vector<char> file = torch::jit::pickle_save(dict);
  EXPECT_EQ(pickle_problem(file), "");
  const c10::IValue back = torch::jit::pickle_load(file);
  ASSERT_TRUE(back.isGenericDict());
  EXPECT_TRUE(back.toGenericDict().at("weight").toTensor().equal(dict.at("weight").toTensor()));
}

TEST(PickleScan, AStringClaimingMoreThanThereIsIsRefused) {
  const std::string why = pickle_problem(zip_of(kProto + "X" + le(4294967291u, 4) + "ab."));
  EXPECT_NE(why.find("a string at byte 2 of data.pkl claims 4294967291 bytes, past the 3 there are"), std::string::npos)
      << why;
  const std::string long_one = pickle_problem(zip_of(kProto + "\x8d" + le(uint64_t(1) << 62, 8) + "."));
  EXPECT_NE(long_one.find("claims 4611686018427387904 bytes"), std::string::npos) << long_one;
  EXPECT_EQ(pickle_problem(zip_of(kProto + unicode("ab") + ".")), "") << "the same string, its length right";
}

TEST(PickleScan, AMemoIndexPastTheMemoIsRefused) {
  const std::string why = pickle_problem(zip_of(kProto + "Nr" + le(0x7fffffff, 4) + "."));
  EXPECT_NE(why.find("the memo index 2147483647 at byte 3 of data.pkl is past the 0 values memoized"), std::string::npos)
      << why;
  const std::string get = pickle_problem(zip_of(kProto + std::string("Nq\x00h\x01.", 6)));
  EXPECT_NE(get.find("the memo index 1 at byte 5 of data.pkl was never set"), std::string::npos) << get;
  EXPECT_EQ(pickle_problem(zip_of(kProto + std::string("Nq\x00h\x00.", 6))), "") << "set, then got";
}

TEST(PickleScan, AStorageClaimingMoreThanItsRecordIsRefusedAtTheBoundary) {
  const std::map<std::string, std::string> record{{"0", std::string(16, '\0')}};
  EXPECT_EQ(pickle_problem(zip_of(storage_pickle(4), record)), "") << "4 floats in 16 bytes";
  const std::string one_more = pickle_problem(zip_of(storage_pickle(5), record));
  EXPECT_NE(one_more.find("claims 5 elements of 4 bytes, past the 16 bytes of data/0"), std::string::npos) << one_more;
  const std::string missing = pickle_problem(zip_of(storage_pickle(4)));
  EXPECT_NE(missing.find("names the record data/0, which the file does not hold"), std::string::npos) << missing;
  EXPECT_EQ(pickle_problem(zip_of(storage_pickle(0))), "") << "no elements: LibTorch reads no record";
  std::string not_a_type = storage_pickle(4);
  not_a_type.replace(not_a_type.find("FloatStorage"), 12, "EvilxStorage");
  const std::string type = pickle_problem(zip_of(not_a_type, record));
  EXPECT_NE(type.find("has the type 'torch EvilxStorage', not a torch storage"), std::string::npos) << type;
}

TEST(PickleScan, WhatTorchSaveNeverWritesIsRefused) {
  const auto refused = [](const std::string& pickle, const std::string& expected) {
    const std::string why = pickle_problem(zip_of(pickle));
    EXPECT_NE(why.find(expected), std::string::npos) << "got: " << why;
  };
  refused(kProto + "S'abc'\n.", "the opcode 0x53 at byte 2 of data.pkl is not one torch.save writes");
  refused(kProto + "X" + le(5, 2), "data.pkl ends inside the opcode at byte 2");
  refused(kProto + "N", "data.pkl ends at byte 3 before its STOP");
  refused(kProto + "t.", "the opcode at byte 2 of data.pkl takes more values than its stack holds");
  refused(kProto + "Q.", "the opcode at byte 2 of data.pkl takes more values than its stack holds");
  refused(kProto + "NQ.", "the storage at byte 3 of data.pkl is not (\"storage\", type, key, device, elements)");
  refused(kProto + "ctorch\nFloat", "the global at byte 2 of data.pkl has no end of line");
  refused(kProto + "\x8a\x04" + le(1, 4) + ".", "the long at byte 2 of data.pkl has 4 bytes (torch.save writes 8)");
  EXPECT_EQ(pickle_problem(std::vector<char>()).empty(), false) << "no zip at all";
}

// torch.save's zip ends with a zip64 locator that says where the zip64
// directory record starts; one that points 10 bytes before the end (the
// record is 56) is refused. (That the walk's zip reader never reads past
// the end is shown by the fuzz finding finding-zip-read-past-its-end under
// ASan, not here: this file is refused by the zip reader's own checks too.)
TEST(PickleScan, AZipWhoseDirectoryPointsPastItsEndIsRefused) {
  std::vector<char> file = zip_of(kProto + "N.");
  ASSERT_EQ(pickle_problem(file), "");
  const std::string bytes(file.begin(), file.end());
  const size_t locator = bytes.rfind(std::string("PK\x06\x07", 4));
  ASSERT_NE(locator, std::string::npos) << "no zip64 locator: the writer changed";
  const std::string past = le(file.size() - 10, 8);
  std::copy(past.begin(), past.end(), file.begin() + static_cast<std::ptrdiff_t>(locator + 8));
  const std::string why = pickle_problem(file);
  EXPECT_EQ(why.rfind("its zip: ", 0), 0u) << why;
}

}  // namespace
}  // namespace distlab::checkpoint
