#include "trace/json_pull.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>

#include "trace/reader.hpp"

namespace distlab::trace {

ByteSource::ByteSource(const std::string& text)
    : begin_(text.data()), pos_(text.data()), end_(text.data() + text.size()) {}

ByteSource::ByteSource(std::FILE* file, size_t chunk_bytes) : file_(file), buffer_(chunk_bytes) {
  begin_ = pos_ = end_ = buffer_.data();
}

ByteSource::ByteSource(std::string_view arrived, int64_t offset, bool last)
    : more_to_come_(!last),
      begin_(arrived.data()),
      pos_(arrived.data()),
      end_(arrived.data() + arrived.size()),
      consumed_(offset) {}

bool ByteSource::refill() {
  if (file_ == nullptr) {
    if (more_to_come_) throw NeedMoreBytes{};
    return false;
  }
  consumed_ += end_ - begin_;
  const size_t n = std::fread(buffer_.data(), 1, buffer_.size(), file_);
  begin_ = pos_ = buffer_.data();
  end_ = begin_ + n;
  return n > 0;
}

void JsonPull::fail(const std::string& what) const {
  throw JsonSyntaxError("at byte " + std::to_string(in_.offset()) + ": " + what);
}

namespace {

std::string describe(int c) {
  if (c < 0) return "the end of the input";
  if (c >= 0x20 && c < 0x7f) return std::string("'") + static_cast<char>(c) + "'";
  char buf[8];
  std::snprintf(buf, sizeof buf, "byte 0x%02x", c);
  return buf;
}

void append_utf8(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

}  // namespace

void JsonPull::skip_space() {
  for (;;) {
    JsonBytes bytes = in_memory();
    if (bytes.p == bytes.end) return;  // the end of the input
    bytes.skip_space();
    consume(bytes.p);
    if (bytes.p < bytes.end) return;
  }
}

void JsonPull::fail_expected(const char* what, int got) const {
  fail(std::string("expected ") + what + ", found " + describe(got));
}

void JsonPull::skip_bom() {
  if (in_.peek() != 0xEF) return;
  for (int expected : {0xEF, 0xBB, 0xBF}) {
    if (in_.peek() != expected) fail("broken UTF-8 byte order mark");
    in_.skip();
  }
}

void JsonPull::expect_end() {
  // A NUL byte ends the input, as for nlohmann (and C strings).
  const int c = peek();
  if (c > 0) fail("unexpected " + describe(c) + " after the JSON value");
}

void JsonPull::read_key(std::string& key) {
  if (peek() != '"') fail("expected an object key (a string), found " + describe(peek()));
  read_string(key);
  expect(':', "':' after an object key");
}

std::string_view JsonPull::read_key_view() {
  if (peek() != '"') fail("expected an object key (a string), found " + describe(peek()));
  // Plain ASCII, the closing quote and the ':' right after it all in memory:
  // nothing can refill the buffer before the caller is done with the view.
  JsonBytes bytes = in_memory();
  std::string_view key;
  if (bytes.plain_string(key) && bytes.take(':')) {
    consume(bytes.p);
    return key;
  }
  read_key(key_);
  return key_;
}

uint32_t JsonPull::read_hex4() {
  uint32_t value = 0;
  for (int i = 0; i < 4; ++i) {
    const int c = in_.peek();
    int digit;
    if (c >= '0' && c <= '9') digit = c - '0';
    else if (c >= 'a' && c <= 'f') digit = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F') digit = c - 'A' + 10;
    else fail("\\u must be followed by 4 hex digits, found " + describe(c));
    in_.skip();
    value = value * 16 + static_cast<uint32_t>(digit);
  }
  return value;
}

// The continuation bytes of one UTF-8 sequence, with the ranges of RFC 3629
// (no overlong forms, no surrogates, nothing past U+10FFFF).
void JsonPull::read_utf8_tail(int lead, std::string& out) {
  int count;
  int low = 0x80, high = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) count = 1;
  else if (lead == 0xE0) count = 2, low = 0xA0;
  else if ((lead >= 0xE1 && lead <= 0xEC) || lead == 0xEE || lead == 0xEF) count = 2;
  else if (lead == 0xED) count = 2, high = 0x9F;
  else if (lead == 0xF0) count = 3, low = 0x90;
  else if (lead >= 0xF1 && lead <= 0xF3) count = 3;
  else if (lead == 0xF4) count = 3, high = 0x8F;
  else fail("invalid UTF-8 " + describe(lead) + " in a string");
  out += static_cast<char>(lead);
  for (int i = 0; i < count; ++i) {
    const int c = in_.peek();
    if (c < low || c > high) fail("ill-formed UTF-8 in a string at " + describe(c));
    in_.skip();
    out += static_cast<char>(c);
    low = 0x80;
    high = 0xBF;
  }
}


void JsonPull::read_string(std::string& out) {
  // Fastest path, nearly every string of a trace: plain ASCII up to the
  // closing quote, all in memory now; one copy.
  JsonBytes bytes = in_memory();
  std::string_view text;
  if (bytes.plain_string(text)) {
    out.assign(text);
    consume(bytes.p);
    return;
  }
  in_.skip();  // the opening quote
  out.clear();
  for (;;) {
    // Fast path: copy the run of plain ASCII that is already in memory.
    const char* p = in_.data();
    const size_t n = in_.available();
    size_t i = 0;
    while (i < n) {
      const auto c = static_cast<unsigned char>(p[i]);
      if (c == '"' || c == '\\' || c < 0x20 || c >= 0x80) break;
      ++i;
    }
    out.append(p, i);
    in_.advance(i);
    if (i == n && n > 0) continue;  // the chunk ended inside the string
    const int c = in_.peek();
    if (c < 0) fail("a string is not closed before the end of the input");
    in_.skip();
    if (c == '"') return;
    if (c < 0x20) fail("control character " + describe(c) + " in a string must be escaped");
    if (c >= 0x80) {
      read_utf8_tail(c, out);
      continue;
    }
    // A backslash escape.
    const int e = in_.peek();
    if (e < 0) fail("a string is not closed before the end of the input");
    in_.skip();
    switch (e) {
      case '"': out += '"'; break;
      case '\\': out += '\\'; break;
      case '/': out += '/'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'u': {
        uint32_t cp = read_hex4();
        if (cp >= 0xDC00 && cp <= 0xDFFF) fail("a low surrogate \\u without a high one before it");
        if (cp >= 0xD800 && cp <= 0xDBFF) {
          if (in_.peek() != '\\') fail("a high surrogate \\u must be followed by a low one");
          in_.skip();
          if (in_.peek() != 'u') fail("a high surrogate \\u must be followed by a low one");
          in_.skip();
          const uint32_t low = read_hex4();
          if (low < 0xDC00 || low > 0xDFFF) fail("a high surrogate \\u must be followed by a low one");
          cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
        }
        append_utf8(cp, out);
        break;
      }
      default: fail("invalid escape \\" + describe(e) + " in a string");
    }
  }
}

// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? like nlohmann: a whole
// number is unsigned (>= 0) or signed (< 0) when it fits 64 bits, else a
// double; a double that overflows is an error.
void JsonPull::read_number(JsonScalar& out) {
  // Fast path, every number the sink writes.
  JsonBytes bytes = in_memory();
  if (bytes.small_unsigned(out.unsigned_value)) {
    out.kind = JsonScalar::Kind::kUnsigned;
    consume(bytes.p);
    return;
  }
  number_.clear();
  for (;;) {
    const char* p = in_.data();
    const size_t avail = in_.available();
    size_t k = 0;
    while (k < avail && JsonBytes::continues_number(p[k])) ++k;
    number_.append(p, k);
    in_.advance(k);
    if (k < avail || avail == 0) break;
  }
  const char* s = number_.c_str();
  size_t i = 0;
  const size_t n = number_.size();
  auto digits = [&] {
    const size_t start = i;
    while (i < n && s[i] >= '0' && s[i] <= '9') ++i;
    return i > start;
  };
  bool whole = true;
  if (i < n && s[i] == '-') ++i;
  if (i < n && s[i] == '0') {
    ++i;
  } else if (!(i < n && s[i] >= '1' && s[i] <= '9' && digits())) {
    fail("invalid number '" + number_ + "'");
  }
  if (i < n && s[i] == '.') {
    ++i;
    whole = false;
    if (!digits()) fail("invalid number '" + number_ + "'");
  }
  if (i < n && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    whole = false;
    if (i < n && (s[i] == '+' || s[i] == '-')) ++i;
    if (!digits()) fail("invalid number '" + number_ + "'");
  }
  if (i != n) fail("invalid number '" + number_ + "'");
  if (whole && n <= 18 && s[0] != '-') {  // fits: 10^18 < 2^63
    uint64_t v = 0;
    for (size_t k = 0; k < n; ++k) v = v * 10 + static_cast<uint64_t>(s[k] - '0');
    out.kind = JsonScalar::Kind::kUnsigned;
    out.unsigned_value = v;
    return;
  }
  if (whole) {
    errno = 0;
    char* end = nullptr;
    if (s[0] == '-') {
      const long long v = std::strtoll(s, &end, 10);
      if (errno == 0) {
        out.kind = JsonScalar::Kind::kInteger;
        out.integer_value = v;
        return;
      }
    } else {
      const unsigned long long v = std::strtoull(s, &end, 10);
      if (errno == 0) {
        out.kind = JsonScalar::Kind::kUnsigned;
        out.unsigned_value = v;
        return;
      }
    }
  }
  const double d = std::strtod(s, nullptr);
  if (!std::isfinite(d)) fail("number overflow in '" + number_ + "'");
  out.kind = JsonScalar::Kind::kFloat;
  out.float_value = d;
}

void JsonPull::read_literal(const char* word) {
  for (const char* p = word; *p != '\0'; ++p) {
    if (in_.peek() != static_cast<unsigned char>(*p)) fail(std::string("invalid literal, expected '") + word + "'");
    in_.skip();
  }
}

void JsonPull::read_scalar(JsonScalar& out) {
  const int c = peek();
  switch (c) {
    case '"':
      out.kind = JsonScalar::Kind::kString;
      read_string(out.text);
      return;
    case 't':
      read_literal("true");
      out.kind = JsonScalar::Kind::kBool;
      out.boolean = true;
      return;
    case 'f':
      read_literal("false");
      out.kind = JsonScalar::Kind::kBool;
      out.boolean = false;
      return;
    case 'n':
      read_literal("null");
      out.kind = JsonScalar::Kind::kNull;
      return;
    case '{':
    case '[': {
      // Rare in a trace (an argument whose value is an object): written out
      // and normalised by nlohmann so that it reads as the DOM reader's dump.
      std::string text;
      walk_value(&text);
      out.kind = JsonScalar::Kind::kContainer;
      out.text = nlohmann::json::parse(text).dump();
      return;
    }
    default:
      if (c == '-' || (c >= '0' && c <= '9')) {
        read_number(out);
        return;
      }
      fail("expected a value, found " + describe(c));
  }
}

void JsonPull::skip_value() { walk_value(nullptr); }

void JsonPull::walk_value(std::string* out) {
  std::vector<char> open;  // '{' or '[' per level: the only state nesting needs
  JsonScalar scalar;
  for (;;) {
    // A value starts here.
    int c = peek();
    if (c == '{' || c == '[') {
      in_.skip();
      const char close = c == '{' ? '}' : ']';
      if (out) *out += static_cast<char>(c);
      if (accept(close)) {
        if (out) *out += close;
      } else {
        // A kept value goes through nlohmann, whose dump() recurses.
        if (out && open.size() >= kMaxKeptDepth)
          fail("a value nested deeper than " + std::to_string(kMaxKeptDepth) + " levels in an event's fields");
        open.push_back(static_cast<char>(c));
        if (c == '{') {
          read_key(scratch_);
          if (out) *out += nlohmann::json(scratch_).dump() + ":";
        }
        continue;
      }
    } else if (c == '"') {
      read_string(scratch_);
      if (out) *out += nlohmann::json(scratch_).dump();
    } else {
      read_scalar(scalar);
      if (out) {
        switch (scalar.kind) {
          case JsonScalar::Kind::kNull: *out += "null"; break;
          case JsonScalar::Kind::kBool: *out += scalar.boolean ? "true" : "false"; break;
          case JsonScalar::Kind::kUnsigned: *out += std::to_string(scalar.unsigned_value); break;
          case JsonScalar::Kind::kInteger: *out += std::to_string(scalar.integer_value); break;
          case JsonScalar::Kind::kFloat: *out += nlohmann::json(scalar.float_value).dump(); break;
          default: break;
        }
      }
    }
    // After a value: a comma (and the next key), or the closing brackets.
    for (;;) {
      if (open.empty()) return;
      const bool in_object = open.back() == '{';
      c = peek();
      if (c == ',') {
        in_.skip();
        if (out) *out += ',';
        if (in_object) {
          read_key(scratch_);
          if (out) *out += nlohmann::json(scratch_).dump() + ":";
        }
        break;
      }
      if (c == (in_object ? '}' : ']')) {
        in_.skip();
        if (out) *out += static_cast<char>(c);
        open.pop_back();
        continue;
      }
      fail(std::string("expected ',' or '") + (in_object ? '}' : ']') + "', found " + describe(c));
    }
  }
}

}  // namespace distlab::trace
