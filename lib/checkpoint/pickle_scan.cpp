#include "checkpoint/pickle_scan.hpp"

#include <c10/core/ScalarType.h>
#include <caffe2/serialize/read_adapter_interface.h>
#include <caffe2/serialize/inline_container.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <optional>

namespace distlab::checkpoint {

namespace {

// The file's bytes as the zip reader reads them, never past their end: a
// read that asks for more gets what there is, which the reader refuses.
// (LibTorch's MemoryReadAdapter copies whatever it is asked for: a zip
// whose directory claims offsets past the end made it read freed memory.)
class BoundedBytes final : public caffe2::serialize::ReadAdapterInterface {
 public:
  explicit BoundedBytes(const std::vector<char>& bytes) : bytes_(bytes) {}
  size_t size() const override { return bytes_.size(); }
  size_t read(uint64_t pos, void* buf, size_t n, const char* /*what*/ = "") const override {
    if (pos >= bytes_.size()) return 0;
    const size_t k = std::min<uint64_t>(n, bytes_.size() - pos);
    std::memcpy(buf, bytes_.data() + pos, k);
    return k;
  }

 private:
  const std::vector<char>& bytes_;
};

// What the walk keeps of a value: enough to read a storage's persistent id
// ("storage", torch.<Type>Storage, key, device, numel). Strings are shared,
// so that memo gets copy nothing.
struct Value {
  enum Kind { kOther, kString, kInt, kGlobal, kTuple } kind = kOther;
  std::shared_ptr<const std::string> text;  // kString, kGlobal ("module name")
  int64_t number = 0;                       // kInt
  std::shared_ptr<const std::vector<Value>> items;  // kTuple of at most kKeptTupleItems
};
constexpr size_t kKeptTupleItems = 5;

// The bytes per element of torch.<name>, as LibTorch's unpickler resolves it.
std::optional<size_t> element_size(const std::string& global) {
#define DISTLAB_STORAGE(_, name) \
  if (global == "torch " #name "Storage") return c10::elementSize(c10::k##name);
  AT_FORALL_SCALAR_TYPES_WITH_COMPLEX_AND_QINTS(DISTLAB_STORAGE)
#undef DISTLAB_STORAGE
  return std::nullopt;
}

class Walk {
 public:
  Walk(const char* bytes, size_t size, caffe2::serialize::PyTorchStreamReader& zip)
      : p_(bytes), size_(size), zip_(zip) {}

  std::string run() {
    while (true) {
      if (at_ >= size_) return "data.pkl ends at byte " + std::to_string(size_) + " before its STOP";
      const size_t start = at_;
      const auto op = static_cast<unsigned char>(p_[at_++]);
      if (op == '.') return "";  // STOP
      if (std::string why = step(op, start); !why.empty()) return why;
    }
  }

 private:
  std::string past(const std::string& what, size_t start, uint64_t claim) const {
    return what + " at byte " + std::to_string(start) + " of data.pkl claims " + std::to_string(claim) +
           " bytes, past the " + std::to_string(size_ - at_) + " there are";
  }
  bool take(size_t n, uint64_t* out = nullptr) {  // n little-endian bytes
    if (size_ - at_ < n) return false;
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v |= uint64_t(static_cast<unsigned char>(p_[at_ + i])) << (8 * i);
    at_ += n;
    if (out) *out = v;
    return true;
  }
  std::string short_of(size_t start) const { return "data.pkl ends inside the opcode at byte " + std::to_string(start); }
  std::string underflow(size_t start) const {
    return "the opcode at byte " + std::to_string(start) + " of data.pkl takes more values than its stack holds";
  }
  bool pop_to_mark(std::vector<Value>* items) {
    if (marks_.empty() || marks_.back() > stack_.size()) return false;
    const size_t mark = marks_.back();
    marks_.pop_back();
    if (items) items->assign(stack_.begin() + static_cast<std::ptrdiff_t>(mark), stack_.end());
    stack_.resize(mark);
    return true;
  }
  void push_tuple(std::vector<Value> items) {
    Value v;
    v.kind = Value::kTuple;
    if (items.size() <= kKeptTupleItems) v.items = std::make_shared<const std::vector<Value>>(std::move(items));
    else v.kind = Value::kOther;
    stack_.push_back(std::move(v));
  }
  std::string line(std::string* out, size_t start) {
    const void* end = std::memchr(p_ + at_, '\n', size_ - at_);
    if (end == nullptr) return "the global at byte " + std::to_string(start) + " of data.pkl has no end of line";
    const size_t n = static_cast<size_t>(static_cast<const char*>(end) - (p_ + at_));
    out->assign(p_ + at_, n);
    at_ += n + 1;
    return "";
  }

  std::string step(unsigned char op, size_t start);  // any opcode but STOP, which run() ends on
  std::string storage(const Value& id, size_t start);

  const char* p_;
  size_t size_;
  size_t at_ = 0;
  caffe2::serialize::PyTorchStreamReader& zip_;
  std::vector<Value> stack_, memo_;
  std::vector<size_t> marks_;
  std::map<std::string, size_t> record_bytes_;
};

std::string Walk::step(unsigned char op, size_t start) {
  uint64_t n = 0;
  switch (op) {
    case 0x80:  // PROTO
      return take(1) ? "" : short_of(start);
    case 'c': {  // GLOBAL module\nname\n
      std::string module, name;
      for (std::string* part : {&module, &name})
        if (std::string why = line(part, start); !why.empty()) return why;
      Value v;
      v.kind = Value::kGlobal;
      v.text = std::make_shared<const std::string>(module + " " + name);
      stack_.push_back(std::move(v));
      return "";
    }
    case 'q':  // BINPUT
    case 'r':  // LONG_BINPUT
      if (!take(op == 'q' ? 1 : 4, &n)) return short_of(start);
      if (stack_.empty()) return underflow(start);
      if (n > memo_.size())  // torch.save numbers its memo 0, 1, 2, ...
        return "the memo index " + std::to_string(n) + " at byte " + std::to_string(start) + " of data.pkl is past the " +
               std::to_string(memo_.size()) + " values memoized";
      if (n == memo_.size()) memo_.push_back(stack_.back());
      else memo_[n] = stack_.back();
      return "";
    case 'h':  // BINGET
    case 'j':  // LONG_BINGET
      if (!take(op == 'h' ? 1 : 4, &n)) return short_of(start);
      if (n >= memo_.size())
        return "the memo index " + std::to_string(n) + " at byte " + std::to_string(start) + " of data.pkl was never set";
      stack_.push_back(memo_[n]);
      return "";
    case '}': case ']': case 'N': case 0x88: case 0x89:  // EMPTY_DICT, EMPTY_LIST, NONE, NEWTRUE, NEWFALSE
      stack_.push_back(Value{});
      return "";
    case ')':  // EMPTY_TUPLE
      push_tuple({});
      return "";
    case '(':  // MARK
      marks_.push_back(stack_.size());
      return "";
    case 'X':  // BINUNICODE
    case 0x8d: {  // BINUNICODE8
      if (!take(op == 'X' ? 4 : 8, &n)) return short_of(start);
      if (n > size_ - at_) return past("a string", start, n);
      Value v;
      v.kind = Value::kString;
      v.text = std::make_shared<const std::string>(p_ + at_, static_cast<size_t>(n));
      at_ += static_cast<size_t>(n);
      stack_.push_back(std::move(v));
      return "";
    }
    case 'K': case 'M': case 'J': {  // BININT1, BININT2, BININT
      const size_t width = op == 'K' ? 1 : op == 'M' ? 2 : 4;
      if (!take(width, &n)) return short_of(start);
      Value v;
      v.kind = Value::kInt;
      v.number = width == 4 ? int64_t(int32_t(uint32_t(n))) : int64_t(n);
      stack_.push_back(v);
      return "";
    }
    case 0x8a: {  // LONG1: LibTorch reads 8 bytes only
      if (!take(1, &n)) return short_of(start);
      if (n != 8) return "the long at byte " + std::to_string(start) + " of data.pkl has " + std::to_string(n) +
                         " bytes (torch.save writes 8)";
      if (!take(8, &n)) return short_of(start);
      Value v;
      v.kind = Value::kInt;
      v.number = static_cast<int64_t>(n);
      stack_.push_back(v);
      return "";
    }
    case 'G':  // BINFLOAT
      if (!take(8)) return short_of(start);
      stack_.push_back(Value{});
      return "";
    case 't': {  // TUPLE
      std::vector<Value> items;
      if (!pop_to_mark(&items)) return underflow(start);
      push_tuple(std::move(items));
      return "";
    }
    case 0x85: case 0x86: case 0x87: {  // TUPLE1, TUPLE2, TUPLE3
      const size_t k = op - 0x84;
      if (stack_.size() < k) return underflow(start);
      std::vector<Value> items(stack_.end() - static_cast<std::ptrdiff_t>(k), stack_.end());
      stack_.resize(stack_.size() - k);
      push_tuple(std::move(items));
      return "";
    }
    case 'l': case 'd':  // LIST, DICT
      if (!pop_to_mark(nullptr)) return underflow(start);
      stack_.push_back(Value{});
      return "";
    case 'e': case 'u':  // APPENDS, SETITEMS: onto the value below the mark
      if (marks_.empty() || marks_.back() == 0) return underflow(start);
      return pop_to_mark(nullptr) ? "" : underflow(start);
    case 'a':  // APPEND
      if (stack_.size() < 2) return underflow(start);
      stack_.pop_back();
      return "";
    case 's':  // SETITEM
      if (stack_.size() < 3) return underflow(start);
      stack_.resize(stack_.size() - 2);
      return "";
    case 'R': case 'b':  // REDUCE, BUILD: the function (or object) and its argument make one value
      if (stack_.size() < 2) return underflow(start);
      stack_.resize(stack_.size() - 2);
      stack_.push_back(Value{});
      return "";
    case 0x81:  // NEWOBJ
      if (stack_.empty()) return underflow(start);
      stack_.pop_back();
      return "";
    case 'Q': {  // BINPERSID
      if (stack_.empty()) return underflow(start);
      const Value id = stack_.back();
      stack_.pop_back();
      if (std::string why = storage(id, start); !why.empty()) return why;
      stack_.push_back(Value{});
      return "";
    }
    default: {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02x", op);
      return "the opcode " + std::string(hex) + " at byte " + std::to_string(start) +
             " of data.pkl is not one torch.save writes";
    }
  }
}

// ("storage", torch.<Type>Storage, key, device, numel): the record
// data/<key> must hold numel elements.
std::string Walk::storage(const Value& id, size_t start) {
  const std::string where = "the storage at byte " + std::to_string(start) + " of data.pkl";
  const std::vector<Value>* items = id.kind == Value::kTuple ? id.items.get() : nullptr;
  if (items == nullptr || items->size() != 5 || (*items)[0].kind != Value::kString || *(*items)[0].text != "storage" ||
      (*items)[1].kind != Value::kGlobal || (*items)[2].kind != Value::kString || (*items)[3].kind != Value::kString ||
      (*items)[4].kind != Value::kInt)
    return where + " is not (\"storage\", type, key, device, elements)";
  const std::optional<size_t> element = element_size(*(*items)[1].text);
  if (!element) return where + " has the type '" + *(*items)[1].text + "', not a torch storage";
  const int64_t numel = (*items)[4].number;
  if (numel < 0) return where + " claims " + std::to_string(numel) + " elements";
  if (numel == 0) return "";  // LibTorch reads no record then
  const std::string record = "data/" + *(*items)[2].text;
  auto found = record_bytes_.find(record);
  if (found == record_bytes_.end()) {
    if (!zip_.hasRecord(record)) return where + " names the record " + record + ", which the file does not hold";
    found = record_bytes_.emplace(record, std::get<1>(zip_.getRecord(record))).first;
  }
  if (uint64_t(numel) > found->second / *element)
    return where + " claims " + std::to_string(numel) + " elements of " + std::to_string(*element) + " bytes, past the " +
           std::to_string(found->second) + " bytes of " + record;
  return "";
}

}  // namespace

std::string pickle_problem(const std::vector<char>& file) {
  try {
    caffe2::serialize::PyTorchStreamReader zip(std::make_shared<BoundedBytes>(file));
    if (!zip.hasRecord("data.pkl")) return "it holds no data.pkl";
    const auto [bytes, size] = zip.getRecord("data.pkl");
    return Walk(static_cast<const char*>(bytes.get()), size, zip).run();
  } catch (const std::exception& e) {  // LibTorch's zip reader refused it
    const std::string why = e.what();
    return "its zip: " + why.substr(0, why.find('\n'));
  }
}

}  // namespace distlab::checkpoint
