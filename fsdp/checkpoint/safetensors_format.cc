// File: fsdp/checkpoint/safetensors_format.cc
//
// The header is parsed with nlohmann::json's SAX interface rather than into a
// DOM, for three reasons: the DOM keeps the last of two duplicate keys without
// a word (the SAX key() callback sees every one); a SAX handler that expects
// the safetensors schema stops at the first value of the wrong kind, so a
// hostile header never costs more than its own bytes (no deep nesting to
// unwind, no large DOM); and nothing throws: errors come back as return
// values, which become absl::Status here.
#include "fsdp/checkpoint/safetensors_format.h"

#include <algorithm>
#include <array>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "nlohmann/json.hpp"

namespace fsdp {
namespace checkpoint {
namespace {

struct DtypeEntry {
  SafetensorsDtype dtype;
  absl::string_view name;
  int bits;
};

constexpr std::array<DtypeEntry, 20> kDtypes = {{
    {SafetensorsDtype::kBool, "BOOL", 8},      {SafetensorsDtype::kF4, "F4", 4},
    {SafetensorsDtype::kF6E2M3, "F6_E2M3", 6}, {SafetensorsDtype::kF6E3M2, "F6_E3M2", 6},
    {SafetensorsDtype::kU8, "U8", 8},          {SafetensorsDtype::kI8, "I8", 8},
    {SafetensorsDtype::kF8E5M2, "F8_E5M2", 8}, {SafetensorsDtype::kF8E4M3, "F8_E4M3", 8},
    {SafetensorsDtype::kF8E8M0, "F8_E8M0", 8}, {SafetensorsDtype::kI16, "I16", 16},
    {SafetensorsDtype::kU16, "U16", 16},       {SafetensorsDtype::kF16, "F16", 16},
    {SafetensorsDtype::kBF16, "BF16", 16},     {SafetensorsDtype::kI32, "I32", 32},
    {SafetensorsDtype::kU32, "U32", 32},       {SafetensorsDtype::kF32, "F32", 32},
    {SafetensorsDtype::kC64, "C64", 64},       {SafetensorsDtype::kF64, "F64", 64},
    {SafetensorsDtype::kI64, "I64", 64},       {SafetensorsDtype::kU64, "U64", 64},
}};

const DtypeEntry& EntryOf(SafetensorsDtype dtype) {
  for (const DtypeEntry& entry : kDtypes) {
    if (entry.dtype == dtype) return entry;
  }
  FSDP_CHECK(false && "SafetensorsDtype value outside the enum");
  return kDtypes[0];
}

// Names come from the file: quote and escape them so that a message stays one
// readable line whatever bytes the name holds.
std::string Quoted(absl::string_view name) {
  return absl::StrCat("\"", absl::CHexEscape(name), "\"");
}

std::string ShapeString(const std::vector<uint64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// numel = product of the shape and the byte size of the data, with every
// overflow and sub-byte remainder reported against the tensor's name.
struct TensorSize {
  uint64_t numel;
  uint64_t num_bytes;
};

absl::StatusOr<TensorSize> ComputeTensorSize(absl::string_view name, SafetensorsDtype dtype,
                                             const std::vector<uint64_t>& shape) {
  uint64_t numel = 1;
  for (uint64_t dim : shape) {
    if (__builtin_mul_overflow(numel, dim, &numel)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor ", Quoted(name), ": shape ", ShapeString(shape), " has 2^64 or more elements"));
    }
  }
  const uint64_t bits_per_element = static_cast<uint64_t>(EntryOf(dtype).bits);
  uint64_t num_bits;
  if (__builtin_mul_overflow(numel, bits_per_element, &num_bits)) {
    return absl::InvalidArgumentError(absl::StrCat("tensor ", Quoted(name), ": shape ",
                                                   ShapeString(shape), " of ", EntryOf(dtype).name,
                                                   " needs 2^64 or more bits"));
  }
  if (num_bits % 8 != 0) {
    return absl::InvalidArgumentError(absl::StrCat("tensor ", Quoted(name), ": ", numel,
                                                   " elements of ", EntryOf(dtype).name, " are ",
                                                   num_bits, " bits, not a whole number of bytes"));
  }
  return TensorSize{numel, num_bits / 8};
}

// The size rule for one tensor: end >= begin and end - begin == its bytes.
absl::Status CheckOffsetsMatchSize(const SafetensorsTensorInfo& t, uint64_t num_bytes) {
  if (t.data_end < t.data_begin) {
    return absl::InvalidArgumentError(absl::StrCat("tensor ", Quoted(t.name), ": data_offsets [",
                                                   t.data_begin, ", ", t.data_end,
                                                   "] end before they begin"));
  }
  if (t.data_end - t.data_begin != num_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor ", Quoted(t.name), ": data_offsets [", t.data_begin, ", ", t.data_end, "] hold ",
        t.data_end - t.data_begin, " bytes, but shape ", ShapeString(t.shape), " of ",
        EntryOf(t.dtype).name, " needs ", num_bytes, " bytes"));
  }
  return absl::OkStatus();
}

// The tiling rule over tensors in data order: each begins where the previous
// ended, the first at 0, and the last ends at the end of the data section.
absl::Status CheckTiling(const std::vector<SafetensorsTensorInfo>& tensors,
                         uint64_t data_section_bytes) {
  uint64_t covered = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const SafetensorsTensorInfo& t = tensors[i];
    if (t.data_begin < covered) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor ", Quoted(t.name), ": data_offsets [", t.data_begin, ", ", t.data_end,
          "] overlap tensor ", Quoted(tensors[i - 1].name), ", which ends at byte ", covered));
    }
    if (t.data_begin > covered) {
      return absl::InvalidArgumentError(
          absl::StrCat("hole in the data section: bytes [", covered, ", ", t.data_begin,
                       ") belong to no tensor (the next one is ", Quoted(t.name), ")"));
    }
    covered = t.data_end;
  }
  if (covered != data_section_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the tensors cover ", covered, " bytes, but the data section holds ", data_section_bytes,
        " bytes (", covered < data_section_bytes ? "trailing bytes" : "the file is too short",
        ")"));
  }
  return absl::OkStatus();
}

// [Note: the header as a SAX state machine]
// nlohmann's parser checks JSON syntax and UTF-8 and calls one member per
// token. The handler holds where in the schema the next token must fit
// (state_) and returns false, with error_ set, at the first token that does
// not fit; the parser then stops. States, with what they accept:
//   kRoot            '{'
//   kTopKey          a key (tensor name or "__metadata__") or '}'
//   kMetadataValue   '{' or null
//   kMetadataKey     a key or '}'
//   kMetadataString  a string
//   kTensorValue     '{'
//   kTensorField     "dtype", "shape", "data_offsets" or '}'
//   kDtype           a string
//   kShapeOpen       '['      kShapeEntry    an unsigned integer or ']'
//   kOffsetsOpen     '['      kOffsetsEntry  an unsigned integer or ']'
//   kDone            nothing (the parser itself rejects trailing tokens)
class HeaderHandler {
 public:
  using json = nlohmann::json;
  using number_integer_t = json::number_integer_t;
  using number_unsigned_t = json::number_unsigned_t;
  using number_float_t = json::number_float_t;
  using string_t = json::string_t;
  using binary_t = json::binary_t;

  // --- the SAX interface (json_sax in nlohmann/json) ---
  bool null() {
    if (state_ == State::kMetadataValue) {  // "__metadata__": null is "no metadata"
      state_ = State::kTopKey;
      return true;
    }
    return Mismatch("null");
  }
  bool boolean(bool value) { return Mismatch(value ? "true" : "false"); }
  bool number_integer(number_integer_t value) {
    // nlohmann reports only negative integers (and -0) through this callback.
    return Mismatch(absl::StrCat("the negative number ", value == 0 ? "-0" : absl::StrCat(value)));
  }
  bool number_float(number_float_t, const string_t& text) {
    return Mismatch(absl::StrCat("the number ", text, ", not an integer in [0, 2^64)"));
  }
  bool number_unsigned(number_unsigned_t value) {
    if (state_ == State::kShapeEntry) {
      pending_.shape.push_back(value);
      return true;
    }
    if (state_ == State::kOffsetsEntry) {
      if (num_offsets_ == 2) {
        return Fail(absl::StrCat("tensor ", Quoted(pending_.name),
                                 ": \"data_offsets\" must be [begin, end], got more than 2 "
                                 "numbers"));
      }
      (num_offsets_ == 0 ? pending_.data_begin : pending_.data_end) = value;
      ++num_offsets_;
      return true;
    }
    return Mismatch(absl::StrCat("the number ", value));
  }
  bool string(string_t& value) {
    switch (state_) {
      case State::kMetadataString:
        header_.metadata.emplace(std::move(metadata_key_), std::move(value));
        state_ = State::kMetadataKey;
        return true;
      case State::kDtype: {
        absl::StatusOr<SafetensorsDtype> dtype = ParseSafetensorsDtype(value);
        if (!dtype.ok()) {
          return Fail(
              absl::StrCat("tensor ", Quoted(pending_.name), ": ", dtype.status().message()));
        }
        pending_.dtype = *dtype;
        state_ = State::kTensorField;
        return true;
      }
      default:
        return Mismatch(absl::StrCat("the string ", Quoted(value)));
    }
  }
  bool binary(binary_t&) { return Mismatch("binary data"); }  // never from JSON text

  bool start_object(std::size_t) {
    switch (state_) {
      case State::kRoot:
        state_ = State::kTopKey;
        return true;
      case State::kMetadataValue:
        state_ = State::kMetadataKey;
        return true;
      case State::kTensorValue:
        state_ = State::kTensorField;
        return true;
      default:
        return Mismatch("an object");
    }
  }
  bool key(string_t& key) {
    switch (state_) {
      case State::kTopKey:
        if (key == kSafetensorsMetadataKey) {
          if (seen_metadata_) return Fail("duplicate key \"__metadata__\"");
          seen_metadata_ = true;
          state_ = State::kMetadataValue;
          return true;
        }
        if (!tensor_names_.insert(key).second) {
          return Fail(absl::StrCat("duplicate tensor name ", Quoted(key)));
        }
        pending_ = SafetensorsTensorInfo();
        pending_.name = std::move(key);
        seen_dtype_ = seen_shape_ = seen_offsets_ = false;
        state_ = State::kTensorValue;
        return true;
      case State::kMetadataKey:
        if (header_.metadata.count(key) != 0) {
          return Fail(absl::StrCat("duplicate \"__metadata__\" key ", Quoted(key)));
        }
        metadata_key_ = std::move(key);
        state_ = State::kMetadataString;
        return true;
      case State::kTensorField:
        return TensorField(key);
      default:
        return Fail(absl::StrCat("unexpected key ", Quoted(key)));  // unreachable in JSON
    }
  }
  bool end_object() {
    switch (state_) {
      case State::kTopKey:
        state_ = State::kDone;
        return true;
      case State::kMetadataKey:
        state_ = State::kTopKey;
        return true;
      case State::kTensorField:
        return FinishTensor();
      default:
        return Fail("unexpected '}'");  // unreachable in JSON
    }
  }
  bool start_array(std::size_t) {
    if (state_ == State::kShapeOpen) {
      state_ = State::kShapeEntry;
      return true;
    }
    if (state_ == State::kOffsetsOpen) {
      num_offsets_ = 0;
      state_ = State::kOffsetsEntry;
      return true;
    }
    return Mismatch("an array");
  }
  bool end_array() {
    if (state_ == State::kShapeEntry) {
      state_ = State::kTensorField;
      return true;
    }
    if (state_ == State::kOffsetsEntry) {
      if (num_offsets_ != 2) {
        return Fail(absl::StrCat("tensor ", Quoted(pending_.name),
                                 ": \"data_offsets\" must be [begin, end], got ", num_offsets_,
                                 " number", num_offsets_ == 1 ? "" : "s"));
      }
      state_ = State::kTensorField;
      return true;
    }
    return Fail("unexpected ']'");  // unreachable in JSON
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
    error_ = absl::StrCat("the header is not valid JSON: ", e.what());
    return false;
  }

  // --- results ---
  const std::string& error() const { return error_; }
  bool done() const { return state_ == State::kDone; }
  SafetensorsHeader TakeHeader() { return std::move(header_); }

 private:
  enum class State {
    kRoot,
    kTopKey,
    kMetadataValue,
    kMetadataKey,
    kMetadataString,
    kTensorValue,
    kTensorField,
    kDtype,
    kShapeOpen,
    kShapeEntry,
    kOffsetsOpen,
    kOffsetsEntry,
    kDone,
  };

  bool Fail(std::string message) {
    error_ = std::move(message);
    return false;
  }

  // A token of the wrong kind: say what the current state wanted.
  bool Mismatch(absl::string_view got) {
    const std::string tensor = absl::StrCat("tensor ", Quoted(pending_.name));
    switch (state_) {
      case State::kRoot:
        return Fail(absl::StrCat("the header must be a JSON object, got ", got));
      case State::kMetadataValue:
        return Fail(absl::StrCat(
            "\"__metadata__\" must be an object of string to string (or null), got ", got));
      case State::kMetadataString:
        return Fail(absl::StrCat("\"__metadata__\" value of ", Quoted(metadata_key_),
                                 " must be a string, got ", got));
      case State::kTensorValue:
        return Fail(absl::StrCat(
            tensor, " must be an object with \"dtype\", \"shape\" and \"data_offsets\", got ",
            got));
      case State::kDtype:
        return Fail(absl::StrCat(tensor, ": \"dtype\" must be a string, got ", got));
      case State::kShapeOpen:
      case State::kShapeEntry:
        return Fail(absl::StrCat(
            tensor, ": \"shape\" must be an array of integers in [0, 2^64), got ", got));
      case State::kOffsetsOpen:
      case State::kOffsetsEntry:
        return Fail(absl::StrCat(
            tensor, ": \"data_offsets\" must be [begin, end], integers in [0, 2^64), got ", got));
      default:
        return Fail(absl::StrCat("unexpected ", got));  // unreachable in JSON
    }
  }

  bool TensorField(const std::string& field) {
    bool* seen = nullptr;
    State next;
    if (field == "dtype") {
      seen = &seen_dtype_;
      next = State::kDtype;
    } else if (field == "shape") {
      seen = &seen_shape_;
      next = State::kShapeOpen;
    } else if (field == "data_offsets") {
      seen = &seen_offsets_;
      next = State::kOffsetsOpen;
    } else {
      return Fail(absl::StrCat("tensor ", Quoted(pending_.name), ": unknown field ", Quoted(field),
                               " (a tensor has exactly \"dtype\", \"shape\", \"data_offsets\")"));
    }
    if (*seen) {
      return Fail(
          absl::StrCat("tensor ", Quoted(pending_.name), ": duplicate field ", Quoted(field)));
    }
    *seen = true;
    state_ = next;
    return true;
  }

  bool FinishTensor() {
    const char* missing = !seen_dtype_     ? "dtype"
                          : !seen_shape_   ? "shape"
                          : !seen_offsets_ ? "data_offsets"
                                           : nullptr;
    if (missing != nullptr) {
      return Fail(absl::StrCat("tensor ", Quoted(pending_.name), ": missing \"", missing, "\""));
    }
    absl::StatusOr<TensorSize> size =
        ComputeTensorSize(pending_.name, pending_.dtype, pending_.shape);
    absl::Status status =
        size.ok() ? CheckOffsetsMatchSize(pending_, size->num_bytes) : size.status();
    if (!status.ok()) return Fail(std::string(status.message()));
    pending_.numel = size->numel;
    header_.tensors.push_back(std::move(pending_));
    state_ = State::kTopKey;
    return true;
  }

  State state_ = State::kRoot;
  std::string error_;
  SafetensorsHeader header_;
  absl::flat_hash_set<std::string> tensor_names_;
  bool seen_metadata_ = false;
  std::string metadata_key_;
  // The tensor being parsed.
  SafetensorsTensorInfo pending_;
  bool seen_dtype_ = false, seen_shape_ = false, seen_offsets_ = false;
  int num_offsets_ = 0;
};

// nlohmann's dump() throws on a string that is not UTF-8; check each string
// on its own first so that the error can say which one.
absl::Status CheckUtf8(absl::string_view text, absl::string_view what) {
  try {
    (void)nlohmann::json(std::string(text)).dump();
  } catch (const nlohmann::json::type_error&) {
    return absl::InvalidArgumentError(absl::StrCat(what, " ", Quoted(text), " is not valid UTF-8"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::string_view SafetensorsDtypeName(SafetensorsDtype dtype) { return EntryOf(dtype).name; }

int SafetensorsDtypeBits(SafetensorsDtype dtype) { return EntryOf(dtype).bits; }

absl::StatusOr<SafetensorsDtype> ParseSafetensorsDtype(absl::string_view name) {
  for (const DtypeEntry& entry : kDtypes) {
    if (entry.name == name) return entry.dtype;
  }
  std::vector<absl::string_view> names;
  for (const DtypeEntry& entry : kDtypes) names.push_back(entry.name);
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown dtype ", Quoted(name), " (safetensors dtypes: ", absl::StrJoin(names, " "), ")"));
}

absl::StatusOr<uint64_t> ParseSafetensorsHeaderLength(absl::string_view prefix,
                                                      uint64_t file_bytes) {
  if (file_bytes < kSafetensorsLengthBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("the file has ", file_bytes, " bytes, fewer than the 8-byte header length"));
  }
  if (prefix.size() < kSafetensorsLengthBytes) {  // the file shrank while being opened
    return absl::InvalidArgumentError(
        absl::StrCat("only ", prefix.size(), " of the 8 header-length bytes could be read"));
  }
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(prefix[i]);
  if (n > kSafetensorsMaxHeaderBytes) {
    return absl::InvalidArgumentError(absl::StrCat("header length ", n, " exceeds the limit of ",
                                                   kSafetensorsMaxHeaderBytes, " bytes"));
  }
  if (n > file_bytes - kSafetensorsLengthBytes) {
    return absl::InvalidArgumentError(absl::StrCat("header length ", n, " exceeds the ",
                                                   file_bytes - kSafetensorsLengthBytes,
                                                   " bytes that follow it in the file"));
  }
  return n;
}

absl::StatusOr<SafetensorsHeader> ParseSafetensorsHeader(absl::string_view json,
                                                         uint64_t data_section_bytes) {
  // nlohmann's lexer takes a NUL byte for the end of the input, so "{}\0junk"
  // would parse. A raw NUL is never valid JSON text (inside a string it must
  // be escaped), so reject it before parsing.
  if (const size_t nul = json.find('\0'); nul != absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("the header is not valid JSON: NUL byte at offset ", nul));
  }
  HeaderHandler handler;
  const bool parsed = nlohmann::json::sax_parse(json.begin(), json.end(), &handler,
                                                nlohmann::json::input_format_t::json,
                                                /*strict=*/true, /*ignore_comments=*/false);
  if (!parsed || !handler.done()) {
    return absl::InvalidArgumentError(handler.error().empty() ? "the header is not valid JSON"
                                                              : handler.error());
  }
  SafetensorsHeader header = handler.TakeHeader();
  // Writers order the header by name or by dtype; the data order is what the
  // offsets say (stable: empty tensors at one offset keep the JSON order).
  std::stable_sort(header.tensors.begin(), header.tensors.end(),
                   [](const SafetensorsTensorInfo& a, const SafetensorsTensorInfo& b) {
                     return std::make_pair(a.data_begin, a.data_end) <
                            std::make_pair(b.data_begin, b.data_end);
                   });
  FSDP_RETURN_IF_ERROR(CheckTiling(header.tensors, data_section_bytes));
  return header;
}

absl::StatusOr<std::string> SerializeSafetensorsHeader(const SafetensorsHeader& header) {
  absl::flat_hash_set<absl::string_view> names;
  for (const SafetensorsTensorInfo& t : header.tensors) {
    if (t.name == kSafetensorsMetadataKey) {
      return absl::InvalidArgumentError("a tensor cannot be named \"__metadata__\"");
    }
    if (!names.insert(t.name).second) {
      return absl::InvalidArgumentError(absl::StrCat("duplicate tensor name ", Quoted(t.name)));
    }
    FSDP_RETURN_IF_ERROR(CheckUtf8(t.name, "tensor name"));
    FSDP_ASSIGN_OR_RETURN(TensorSize size, ComputeTensorSize(t.name, t.dtype, t.shape));
    if (size.numel != t.numel) {
      return absl::InvalidArgumentError(absl::StrCat("tensor ", Quoted(t.name), ": numel ", t.numel,
                                                     " is not the product of shape ",
                                                     ShapeString(t.shape)));
    }
    FSDP_RETURN_IF_ERROR(CheckOffsetsMatchSize(t, size.num_bytes));
  }
  const uint64_t data_section_bytes = header.tensors.empty() ? 0 : header.tensors.back().data_end;
  FSDP_RETURN_IF_ERROR(CheckTiling(header.tensors, data_section_bytes));
  for (const auto& [key, value] : header.metadata) {
    FSDP_RETURN_IF_ERROR(CheckUtf8(key, "metadata key"));
    FSDP_RETURN_IF_ERROR(CheckUtf8(value, "metadata value"));
  }

  // ordered_json keeps insertion order: metadata first, then the data order,
  // which is what a person reading the header expects to see.
  nlohmann::ordered_json json = nlohmann::ordered_json::object();
  if (!header.metadata.empty()) {
    nlohmann::ordered_json metadata = nlohmann::ordered_json::object();
    for (const auto& [key, value] : header.metadata) metadata[key] = value;
    json[std::string(kSafetensorsMetadataKey)] = std::move(metadata);
  }
  for (const SafetensorsTensorInfo& t : header.tensors) {
    json[t.name] = {{"dtype", std::string(SafetensorsDtypeName(t.dtype))},
                    {"shape", t.shape},
                    {"data_offsets", {t.data_begin, t.data_end}}};
  }
  std::string text = json.dump();
  text.resize((text.size() + 7) / 8 * 8, ' ');
  if (text.size() > kSafetensorsMaxHeaderBytes) {
    return absl::InvalidArgumentError(absl::StrCat("the header would be ", text.size(),
                                                   " bytes, more than the limit of ",
                                                   kSafetensorsMaxHeaderBytes));
  }
  return text;
}

absl::StatusOr<SafetensorsHeader> LayOutF32Tensors(
    absl::Span<const SafetensorsTensorSpec> tensors,
    const std::map<std::string, std::string>& metadata) {
  SafetensorsHeader header;
  header.metadata = metadata;
  absl::flat_hash_set<absl::string_view> names;
  uint64_t offset = 0;
  for (const SafetensorsTensorSpec& spec : tensors) {
    if (spec.name == kSafetensorsMetadataKey) {
      return absl::InvalidArgumentError("a tensor cannot be named \"__metadata__\"");
    }
    if (!names.insert(spec.name).second) {
      return absl::InvalidArgumentError(absl::StrCat("duplicate tensor name ", Quoted(spec.name)));
    }
    FSDP_ASSIGN_OR_RETURN(TensorSize size,
                          ComputeTensorSize(spec.name, SafetensorsDtype::kF32, spec.shape));
    SafetensorsTensorInfo t;
    t.name = spec.name;
    t.dtype = SafetensorsDtype::kF32;
    t.shape = spec.shape;
    t.numel = size.numel;
    t.data_begin = offset;
    if (__builtin_add_overflow(offset, size.num_bytes, &t.data_end)) {
      return absl::InvalidArgumentError(
          absl::StrCat("the data section would reach 2^64 bytes at tensor ", Quoted(spec.name)));
    }
    offset = t.data_end;
    header.tensors.push_back(std::move(t));
  }
  return header;
}

}  // namespace checkpoint
}  // namespace fsdp
