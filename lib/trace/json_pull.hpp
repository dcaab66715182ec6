// A pull parser for JSON read a chunk at a time: the streaming trace reader
// (reader.cpp) asks for the next token and keeps only what it needs, so a
// 257 MB file of a million events never becomes a document in memory.
//
// It accepts exactly what nlohmann::json::parse accepts (RFC 8259: strict
// numbers, valid UTF-8, paired surrogates, an optional UTF-8 byte order mark,
// nothing after the value), so the streaming reader and the DOM reader kept
// beside it (dom_reader.hpp) agree on every file. Nothing recurses: nesting
// costs one byte of stack per level, hostile depth cannot overflow the stack.
// Every fault throws TraceFormatError with the byte offset.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace distlab::trace {

// Thrown by a ByteSource of bytes still arriving (push_reader.hpp) when a
// read reaches the end of what has come: not an error, a "try again later".
struct NeedMoreBytes {};

// Where bytes come from: a file read in chunks, or a string in memory.
class ByteSource {
 public:
  explicit ByteSource(const std::string& text);  // not copied: must outlive the source
  explicit ByteSource(std::FILE* file, size_t chunk_bytes = size_t{1} << 20);
  // The part of an input that has arrived so far, from byte `offset` on
  // (not copied); reading past its end throws NeedMoreBytes unless `last`
  // says nothing more will come.
  ByteSource(std::string_view arrived, int64_t offset, bool last);
  ByteSource(const ByteSource&) = delete;
  ByteSource& operator=(const ByteSource&) = delete;

  // The next byte, or -1 at the end.
  int peek() {
    if (pos_ == end_ && !refill()) return -1;
    return static_cast<unsigned char>(*pos_);
  }
  void skip() { ++pos_; }
  int64_t offset() const { return consumed_ + (pos_ - begin_); }
  // The bytes ready in memory now (at least one unless at the end).
  const char* data() {
    if (pos_ == end_) refill();
    return pos_;
  }
  size_t available() const { return static_cast<size_t>(end_ - pos_); }
  void advance(size_t n) { pos_ += n; }

 private:
  bool refill();

  std::FILE* file_ = nullptr;
  bool more_to_come_ = false;
  std::vector<char> buffer_;
  const char* begin_ = nullptr;
  const char* pos_ = nullptr;
  const char* end_ = nullptr;
  int64_t consumed_ = 0;  // bytes before begin_
};

// Bytes a JSON string holds as they are: printable ASCII other than '"' and '\\'.
struct JsonPlainBytes {
  bool is[256] = {};
  constexpr JsonPlainBytes() {
    for (int c = 0x20; c < 0x80; ++c) is[c] = c != '"' && c != '\\';
  }
};
inline constexpr JsonPlainBytes kJsonPlainBytes{};

// The simplest tokens read straight from bytes in memory, for fast paths
// (JsonPull's own, and the trace reader's for a whole event): each takes
// one token at p when it has that form and lies wholly before end, moving p
// past it; otherwise it returns false and p stays where it was. Every other
// form, and every fault, is JsonPull's to read and name.
struct JsonBytes {
  const char* p;
  const char* end;

  static bool is_space(char c) {
    return static_cast<unsigned char>(c) <= ' ' && (c == ' ' || c == '\n' || c == '\r' || c == '\t');
  }
  void skip_space() {
    while (p < end && is_space(*p)) ++p;
  }
  // The next byte is c.
  bool take(char c) {
    if (p == end || *p != c) return false;
    ++p;
    return true;
  }
  // A string of printable ASCII without '"' or '\\': its text is its bytes.
  bool plain_string(std::string_view& text) {
    if (p == end || *p != '"') return false;
    const char* q = p + 1;
    while (q < end && kJsonPlainBytes.is[static_cast<unsigned char>(*q)]) ++q;
    if (q == end || *q != '"') return false;
    text = std::string_view(p + 1, static_cast<size_t>(q - p - 1));
    p = q + 1;
    return true;
  }
  // A whole number of up to 18 digits without a leading zero (it fits
  // int64), followed by a byte that cannot continue a number.
  bool small_unsigned(uint64_t& value) {
    const char* q = p;
    uint64_t v = 0;
    while (q < end && q - p < 19 && *q >= '0' && *q <= '9') v = v * 10 + static_cast<uint64_t>(*q++ - '0');
    const auto digits = q - p;
    if (digits == 0 || digits > 18 || q == end || continues_number(*q) || (*p == '0' && digits > 1)) return false;
    value = v;
    p = q;
    return true;
  }
  // A byte that can be part of a number.
  static bool continues_number(char c) {
    return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
  }
};

// One scalar, or the text of a whole object or array.
struct JsonScalar {
  enum class Kind { kNull, kBool, kUnsigned, kInteger, kFloat, kString, kContainer };
  Kind kind = Kind::kNull;
  bool boolean = false;
  uint64_t unsigned_value = 0;
  int64_t integer_value = 0;
  double float_value = 0.0;
  // kString: the decoded string; kContainer: the value as compact JSON, with
  // keys sorted, as nlohmann::json::dump() writes it.
  std::string text;
};

class JsonPull {
 public:
  // Objects and arrays inside a kept value (read_scalar) nest at most this
  // deep; skipped values may nest as deep as memory allows.
  static constexpr size_t kMaxKeptDepth = 256;

  explicit JsonPull(ByteSource& source) : in_(source) {}

  // The next non-whitespace byte without taking it, -1 at the end.
  int peek() {
    const int c = in_.peek();
    if (c > ' ') return c;  // every JSON whitespace byte is <= ' '
    skip_space();
    return in_.peek();
  }
  // Takes `c` (after whitespace) or throws "expected <what>". Inline, as
  // accept(): a million-event file calls them about 30 million times.
  void expect(char c, const char* what) {
    const int got = peek();
    if (got != static_cast<unsigned char>(c)) fail_expected(what, got);
    in_.skip();
  }
  // Takes `c` if it is next (after whitespace).
  bool accept(char c) {
    if (peek() != static_cast<unsigned char>(c)) return false;
    in_.skip();
    return true;
  }
  // After '{' or ',' inside an object: the key and its ':'.
  void read_key(std::string& key);
  // The same without a copy when it can: a view of the key in the input's
  // buffer (else of a scratch string), valid until the next call on this
  // parser. For keys only compared, as an event's are.
  std::string_view read_key_view();
  // A string token (the opening quote is next).
  void read_string(std::string& out);
  // Any value; containers are kept as their compact text.
  void read_scalar(JsonScalar& out);
  // The bytes in memory from here on, for a fast path that reads them
  // itself (JsonBytes) and then consume()s up to where it stopped.
  JsonBytes in_memory() {
    const char* p = in_.data();
    return JsonBytes{p, p + in_.available()};
  }
  void consume(const char* to) { in_.advance(static_cast<size_t>(to - in_.data())); }
  // Any value, checked and thrown away.
  void skip_value();
  // A leading UTF-8 byte order mark, as nlohmann skips it.
  void skip_bom();
  // Throws unless only whitespace is left.
  void expect_end();

  [[noreturn]] void fail(const std::string& what) const;
  [[noreturn]] void fail_expected(const char* what, int got) const;
  int64_t offset() const { return in_.offset(); }

 private:
  void skip_space();
  void read_number(JsonScalar& out);
  void read_literal(const char* word);
  void read_utf8_tail(int lead, std::string& out);
  uint32_t read_hex4();
  // Walks one value; with `out` non-null, also writes it as JSON text.
  void walk_value(std::string* out);

  ByteSource& in_;
  std::string number_;  // scratch
  std::string scratch_;
  std::string key_;  // read_key_view's, when the key is not plain or not all in memory
};

}  // namespace distlab::trace
