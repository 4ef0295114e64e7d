// The op-block codec (see op_block.h; the byte layout is in docs/schema.md, "Op blocks").
// Varints are LEB128, signed values zigzag-coded; most fields are stored as differences from
// the previous op of the block, or left out when they repeat, so a typical op with three
// tensors takes a few dozen bytes, most of them hashes.
#include "tracer/op_block.h"

#include <algorithm>
#include <cstring>

// Inline, so that the SQLite extension (which links no libxxhash) checks blocks too.
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace tdbg::tracer {
namespace {

// XXH3-64 (seed 0) of a format-2 or -3 block after its header: its checksum.
uint64_t block_checksum(std::string_view block) {
  return XXH3_64bits(block.data() + kOpBlockHeaderBytes, block.size() - kOpBlockHeaderBytes);
}

// The bytes of a block after its header (format 1: the format byte; formats 2 and 3: also the
// checksum); empty when the block is shorter than its header.
std::string_view block_body(std::string_view block) {
  const size_t header = !block.empty() && block[0] == 1 ? 1 : kOpBlockHeaderBytes;
  return block.size() < header ? std::string_view() : block.substr(header);
}

void put_le64(char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<char>(v >> (8 * i));
}

uint64_t get_le64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}

// Bits of an op's presence mask; the common ones first, so the mask is usually one byte.
enum : uint32_t {
  kHasParent = 1u << 0,
  kHasFwd = 1u << 1,
  kNewStack = 1u << 2,
  kNewFlags = 1u << 3,
  kNewDepth = 1u << 4,
  kHasTensors = 1u << 5,
  kHasArgs = 1u << 6,
  kNewModule = 1u << 7,
  kUserFrameDiffers = 1u << 8,  // user_frame != stack
  kNewRegion = 1u << 9,
  kHasRng = 1u << 10,
  kNewStep = 1u << 11,
};

// Bits of a tensor's head; those of an input known by its hash first (one byte).
enum : uint32_t {
  kRoleOutput = 1u << 0,
  kStatusShift = 1,             // 3 bits of TensorStatus
  kHashShift = 4,               // 2 bits: HashMode
  kHasProducer = 1u << 6,
  kHasSummary = 1u << 7,
  kNewMeta = 1u << 8,           // dtype, shape, device follow (else: as the previous tensor)
  kIndexExplicit = 1u << 9,     // index follows (else: previous index of the same role + 1)
  kHasReason = 1u << 10,
  kSummaryAsSeen = 1u << 11,    // format 3: the summaries last stored with this (seen) hash
};
// How a tensor's hash is stored: none (0), the 8 bytes (which enter the block's dictionary),
// or the ordinal of an equal hash stored earlier in the block (an input that is an earlier
// op's output, a parameter used again).
enum HashMode : uint32_t { kNoHash = 0, kRawHash = 1, kSeenHash = 2 };

// Whether two summaries hold the same bits (NaN fields included: min and max of a tensor
// with no finite value).
bool same_summary(const hashing::Summary& a, const hashing::Summary& b) {
  auto bits = [](double v) {
    uint64_t u;
    std::memcpy(&u, &v, sizeof u);
    return u;
  };
  return a.valid == b.valid && bits(a.min) == bits(b.min) && bits(a.max) == bits(b.max) &&
         bits(a.sum) == bits(b.sum) && bits(a.abs_sum) == bits(b.abs_sum) &&
         a.nan_count == b.nan_count && a.inf_count == b.inf_count;
}

// Encodings of a summary value (2 bits each, four values in one byte).
enum : uint8_t { kZero = 0, kFloat = 1, kDouble = 2 };

uint64_t zigzag(int64_t v) { return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63); }
int64_t unzigzag(uint64_t v) { return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1); }

class Out {
 public:
  explicit Out(std::string* s) : s_(s) {}
  void byte(uint8_t b) { s_->push_back(static_cast<char>(b)); }
  void varint(uint64_t v) {
    char buf[10];
    int n = 0;
    while (v >= 0x80) {
      buf[n++] = static_cast<char>(v | 0x80);
      v >>= 7;
    }
    buf[n++] = static_cast<char>(v);
    s_->append(buf, static_cast<size_t>(n));
  }
  void svarint(int64_t v) { varint(zigzag(v)); }
  void u64(uint64_t v) {
    char buf[8];
    for (int i = 0; i < 8; ++i) buf[i] = static_cast<char>(v >> (8 * i));
    s_->append(buf, 8);
  }
  void u32(uint32_t v) {
    char buf[4];
    for (int i = 0; i < 4; ++i) buf[i] = static_cast<char>(v >> (8 * i));
    s_->append(buf, 4);
  }

 private:
  std::string* s_;
};

class In {
 public:
  explicit In(std::string_view s) : p_(reinterpret_cast<const uint8_t*>(s.data())), end_(p_ + s.size()) {}
  bool ok() const { return ok_; }
  bool done() const { return p_ == end_; }
  uint8_t byte() {
    if (p_ >= end_) return fail();
    return *p_++;
  }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ >= end_) return fail();
      uint8_t b = *p_++;
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    return fail();
  }
  int64_t svarint() { return unzigzag(varint()); }
  uint64_t u64() {
    if (end_ - p_ < 8) return fail();
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p_[i]) << (8 * i);
    p_ += 8;
    return v;
  }
  uint32_t u32() {
    if (end_ - p_ < 4) return fail();
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(p_[i]) << (8 * i);
    p_ += 4;
    return v;
  }

 private:
  uint8_t fail() {
    ok_ = false;
    p_ = end_;
    return 0;
  }
  const uint8_t* p_;
  const uint8_t* end_;
  bool ok_ = true;
};

uint8_t value_kind(double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, 8);
  if (bits == 0) return kZero;
  const float f = static_cast<float>(v);
  const double back = static_cast<double>(f);
  uint64_t back_bits;
  std::memcpy(&back_bits, &back, 8);
  return back_bits == bits ? kFloat : kDouble;  // bit-exact, NaN payloads and -0.0 included
}

void put_value(Out& o, uint8_t kind, double v) {
  if (kind == kFloat) {
    const float f = static_cast<float>(v);
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    o.u32(bits);
  } else if (kind == kDouble) {
    uint64_t bits;
    std::memcpy(&bits, &v, 8);
    o.u64(bits);
  }
}

double get_value(In& in, uint8_t kind) {
  if (kind == kFloat) {
    const uint32_t bits = in.u32();
    float f;
    std::memcpy(&f, &bits, 4);
    return static_cast<double>(f);
  }
  if (kind == kDouble) {
    const uint64_t bits = in.u64();
    double d;
    std::memcpy(&d, &bits, 8);
    return d;
  }
  return 0.0;
}

bool tensor_order(const TensorRecord& a, const TensorRecord& b) {
  if (a.role != b.role) return a.role < b.role;
  return a.index < b.index;
}

}  // namespace

void OpBlockEncoder::clear() {
  out_.assign(kOpBlockHeaderBytes, '\0');  // the checksum is filled in by `block`
  out_[0] = static_cast<char>(kOpBlockFormat);
  ops_ = 0;
  prev_ = internal::PrevOp();
  hashes_.clear();
  summaries_.clear();
}

void OpBlockEncoder::add(const OpRecord& op) {
  add(op, op.tensors.data(), op.tensors.size(), op.args.data(), op.args.size());
}

void OpBlockEncoder::add(const OpRecord& op, const TensorRecord* op_tensors, size_t tensor_count,
                         const ArgRecord* op_args, size_t arg_count) {
  Out o(&out_);
  if (ops_ == 0) {
    o.varint(op.thread);
    o.svarint(op.tidx);
    o.svarint(op.seq);
    prev_.tidx = op.tidx - 1;
    prev_.seq = op.seq - 1;
  }
  ++ops_;
  uint32_t mask = 0;
  if (op.parent != kNoSeq) mask |= kHasParent;
  if (op.fwd != kNoSeq) mask |= kHasFwd;
  if (op.module != prev_.module) mask |= kNewModule;
  if (op.stack != prev_.stack) mask |= kNewStack;
  if (op.user_frame != op.stack) mask |= kUserFrameDiffers;
  if (op.region != prev_.region) mask |= kNewRegion;
  if (op.rng != 0) mask |= kHasRng;
  if (op.step != prev_.step) mask |= kNewStep;
  if (op.flags != prev_.flags) mask |= kNewFlags;
  if (op.depth != prev_.depth) mask |= kNewDepth;
  if (tensor_count > 0) mask |= kHasTensors;
  if (arg_count > 0) mask |= kHasArgs;
  o.varint(mask);
  o.varint(static_cast<uint64_t>(op.tidx - prev_.tidx - 1));
  o.varint(static_cast<uint64_t>(op.seq - prev_.seq - 1));
  o.varint(op.name);
  if (mask & kHasParent) o.svarint(op.seq - op.parent);
  if (mask & kHasFwd) o.svarint(op.seq - op.fwd);
  if (mask & kNewModule) o.varint(op.module);
  if (mask & kNewStack) o.varint(op.stack);
  if (mask & kUserFrameDiffers) o.varint(op.user_frame);
  if (mask & kNewRegion) o.varint(op.region);
  if (mask & kHasRng) o.u64(op.rng);
  if (mask & kNewStep) o.svarint(op.step - prev_.step);
  if (mask & kNewFlags) o.varint(op.flags);
  if (mask & kNewDepth) o.varint(op.depth);
  const int64_t start = op.start_ns - time_base_ns_;
  o.svarint(start - prev_.start);
  o.svarint(op.end_ns - op.start_ns);
  o.u64(op.chain);
  if (mask & kHasTensors) {
    // Stored by (role, index); the hook already records them so, which saves a copy.
    const TensorRecord* tensors = op_tensors;
    if (!std::is_sorted(op_tensors, op_tensors + tensor_count, tensor_order)) {
      sorted_.assign(op_tensors, op_tensors + tensor_count);
      std::stable_sort(sorted_.begin(), sorted_.end(), tensor_order);
      tensors = sorted_.data();
    }
    o.varint(tensor_count);
    int64_t next_index[2] = {0, 0};
    for (size_t i = 0; i < tensor_count; ++i) {
      const TensorRecord& t = tensors[i];
      const int role = t.role == TensorRole::kOutput ? 1 : 0;
      uint32_t head = (role ? static_cast<uint32_t>(kRoleOutput) : 0u) |
                      (static_cast<uint32_t>(t.status) & 7u) << kStatusShift;
      if (t.dtype != prev_.dtype || t.shape != prev_.shape || t.device != prev_.device) {
        head |= kNewMeta;
      }
      if (t.index != next_index[role]) head |= kIndexExplicit;
      if (t.producer != kNoSeq) head |= kHasProducer;
      if (t.reason != 0) head |= kHasReason;
      uint32_t mode = kNoHash;
      uint32_t ordinal = 0;
      if (t.hash != 0) {
        auto [it, fresh] = hashes_.emplace(t.hash, static_cast<uint32_t>(hashes_.size()));
        mode = fresh ? kRawHash : kSeenHash;
        ordinal = it->second;
        if (fresh) summaries_.emplace_back();
      }
      head |= mode << kHashShift;
      if (t.summary.valid) {
        if (mode == kSeenHash && same_summary(summaries_[ordinal], t.summary)) {
          head |= kSummaryAsSeen;
        } else {
          head |= kHasSummary;
          if (mode != kNoHash) summaries_[ordinal] = t.summary;
        }
      }
      o.varint(head);
      if (head & kIndexExplicit) o.varint(t.index);
      if (head & kNewMeta) {
        o.byte(static_cast<uint8_t>(t.dtype));
        o.varint(t.shape);
        o.varint(t.device);
        prev_.dtype = t.dtype;
        prev_.shape = t.shape;
        prev_.device = t.device;
      }
      if (head & kHasProducer) o.svarint(op.seq - t.producer);
      if (mode == kRawHash) o.u64(t.hash);
      if (mode == kSeenHash) o.varint(ordinal);
      if (head & kHasSummary) {
        const double v[4] = {t.summary.min, t.summary.max, t.summary.sum, t.summary.abs_sum};
        uint8_t kinds = 0;
        for (int k = 0; k < 4; ++k) kinds |= static_cast<uint8_t>(value_kind(v[k]) << (2 * k));
        o.byte(kinds);
        for (int k = 0; k < 4; ++k) put_value(o, (kinds >> (2 * k)) & 3, v[k]);
        o.varint(static_cast<uint64_t>(t.summary.nan_count));
        o.varint(static_cast<uint64_t>(t.summary.inf_count));
      }
      if (head & kHasReason) o.varint(t.reason);
      next_index[role] = static_cast<int64_t>(t.index) + 1;
    }
  }
  if (mask & kHasArgs) {
    auto by_index = [](const ArgRecord& a, const ArgRecord& b) { return a.index < b.index; };
    const ArgRecord* args = op_args;
    if (!std::is_sorted(op_args, op_args + arg_count, by_index)) {
      args_.assign(op_args, op_args + arg_count);
      std::stable_sort(args_.begin(), args_.end(), by_index);
      args = args_.data();
    }
    o.varint(arg_count);
    for (size_t i = 0; i < arg_count; ++i) {
      const ArgRecord& a = args[i];
      o.varint(a.index);
      o.varint(a.name);
      o.varint(a.value);
    }
  }
  prev_.follow(op, start);
}

void EncodeOpBlock(const std::vector<const OpRecord*>& ops, int64_t time_base_ns,
                   std::string* out) {
  OpBlockEncoder encoder(time_base_ns);
  for (const OpRecord* op : ops) encoder.add(*op);
  out->append(encoder.block());
}

std::string_view OpBlockEncoder::block() {
  put_le64(&out_[1], block_checksum(out_));
  return out_;
}

Status CheckOpBlock(std::string_view block) {
  if (block.empty()) return Status::Error("corrupt op block (empty)");
  const uint8_t format = static_cast<uint8_t>(block[0]);
  if (format == 1) return Status::Ok();
  if (format != 2 && format != kOpBlockFormat) {
    return Status::Error("op block in format " + std::to_string(format) +
                         ", this tdbg reads formats 1 to " + std::to_string(kOpBlockFormat));
  }
  if (block.size() < kOpBlockHeaderBytes) return Status::Error("corrupt op block (truncated)");
  if (get_le64(block.data() + 1) != block_checksum(block)) {
    return Status::Error("corrupt op block (its checksum does not match: the file is damaged)");
  }
  return Status::Ok();
}

StatusOr<OpBlockHead> ReadOpBlockHead(std::string_view block) {
  if (block.empty()) return Status::Error("corrupt op block (empty)");
  In in(block_body(block));
  OpBlockHead head;
  head.thread = static_cast<uint32_t>(in.varint());
  head.tidx = in.svarint();
  head.seq = in.svarint();
  if (!in.ok()) return Status::Error("corrupt op block (no first op)");
  return head;
}

Status DecodeOpBlock(std::string_view block, int64_t time_base_ns, bool with_details,
                     std::vector<OpRecord>* ops) {
  ops->clear();
  auto corrupt = [](const char* what) {
    return Status::Error(std::string("corrupt op block (") + what + ")");
  };
  TDBG_RETURN_IF_ERROR(CheckOpBlock(block));
  In in(block_body(block));
  if (in.done()) return Status::Ok();  // an empty block
  const uint32_t thread = static_cast<uint32_t>(in.varint());
  internal::PrevOp prev;
  prev.tidx = in.svarint() - 1;
  prev.seq = in.svarint() - 1;
  const uint8_t format = static_cast<uint8_t>(block[0]);
  std::vector<uint64_t> hashes;  // distinct hashes stored so far, by ordinal
  std::vector<hashing::Summary> summaries;  // by ordinal, the last stored with that hash
  while (!in.done()) {
    OpRecord& op = ops->emplace_back();
    const uint32_t mask = static_cast<uint32_t>(in.varint());
    op.thread = thread;
    op.tidx = prev.tidx + 1 + static_cast<int64_t>(in.varint());
    op.seq = prev.seq + 1 + static_cast<int64_t>(in.varint());
    op.name = static_cast<StringId>(in.varint());
    op.parent = (mask & kHasParent) ? op.seq - in.svarint() : kNoSeq;
    op.fwd = (mask & kHasFwd) ? op.seq - in.svarint() : kNoSeq;
    op.module = (mask & kNewModule) ? static_cast<StringId>(in.varint()) : prev.module;
    op.stack = (mask & kNewStack) ? static_cast<FrameId>(in.varint()) : prev.stack;
    op.user_frame = (mask & kUserFrameDiffers) ? static_cast<FrameId>(in.varint()) : op.stack;
    op.region = (mask & kNewRegion) ? static_cast<uint32_t>(in.varint()) : prev.region;
    op.rng = (mask & kHasRng) ? in.u64() : 0;
    op.step = (mask & kNewStep) ? prev.step + in.svarint() : prev.step;
    op.flags = (mask & kNewFlags) ? static_cast<uint32_t>(in.varint()) : prev.flags;
    op.depth = static_cast<uint16_t>((mask & kNewDepth) ? in.varint() : prev.depth);
    const int64_t start = prev.start + in.svarint();
    op.start_ns = start + time_base_ns;
    op.end_ns = op.start_ns + in.svarint();
    op.chain = in.u64();
    if (mask & kHasTensors) {
      const uint64_t n = in.varint();
      if (!in.ok() || n > block.size()) return corrupt("tensor count");
      op.tensors.resize(n);
      int64_t next_index[2] = {0, 0};
      for (TensorRecord& t : op.tensors) {
        const uint32_t head = static_cast<uint32_t>(in.varint());
        const int role = (head & kRoleOutput) ? 1 : 0;
        t.role = role ? TensorRole::kOutput : TensorRole::kInput;
        t.status = static_cast<TensorStatus>((head >> kStatusShift) & 7u);
        t.index = static_cast<uint16_t>((head & kIndexExplicit) ? in.varint()
                                                                 : static_cast<uint64_t>(next_index[role]));
        if (head & kNewMeta) {
          prev.dtype = static_cast<hashing::DType>(in.byte());
          prev.shape = static_cast<StringId>(in.varint());
          prev.device = static_cast<StringId>(in.varint());
        }
        t.dtype = prev.dtype;
        t.shape = prev.shape;
        t.device = prev.device;
        t.producer = (head & kHasProducer) ? op.seq - in.svarint() : kNoSeq;
        const uint32_t mode = (head >> kHashShift) & 3u;
        uint64_t ordinal = 0;
        if (mode == kRawHash) {
          t.hash = in.u64();
          ordinal = hashes.size();
          hashes.push_back(t.hash);
          summaries.emplace_back();
        } else if (mode == kSeenHash) {
          ordinal = in.varint();
          if (ordinal >= hashes.size()) return corrupt("hash reference");
          t.hash = hashes[ordinal];
        } else if (mode != kNoHash) {
          return corrupt("hash mode");
        }
        if (head & kSummaryAsSeen) {
          if (format < 3 || mode != kSeenHash || (head & kHasSummary) ||
              !summaries[ordinal].valid) {
            return corrupt("summary reference");
          }
          t.summary = summaries[ordinal];
        }
        if (head & kHasSummary) {
          t.summary.valid = true;
          const uint8_t kinds = in.byte();
          t.summary.min = get_value(in, kinds & 3);
          t.summary.max = get_value(in, (kinds >> 2) & 3);
          t.summary.sum = get_value(in, (kinds >> 4) & 3);
          t.summary.abs_sum = get_value(in, (kinds >> 6) & 3);
          t.summary.nan_count = static_cast<int64_t>(in.varint());
          t.summary.inf_count = static_cast<int64_t>(in.varint());
          if (mode != kNoHash) summaries[ordinal] = t.summary;
        }
        if (head & kHasReason) t.reason = static_cast<StringId>(in.varint());
        next_index[role] = static_cast<int64_t>(t.index) + 1;
        if (!in.ok()) return corrupt("truncated tensor");
      }
    }
    if (mask & kHasArgs) {
      const uint64_t n = in.varint();
      if (!in.ok() || n > block.size()) return corrupt("argument count");
      op.args.resize(n);
      for (ArgRecord& a : op.args) {
        a.index = static_cast<uint16_t>(in.varint());
        a.name = static_cast<StringId>(in.varint());
        a.value = static_cast<StringId>(in.varint());
      }
    }
    if (!in.ok()) return corrupt("truncated op");
    prev.follow(op, start);
  }
  if (!in.done()) return corrupt("trailing bytes");
  if (!with_details) {
    for (OpRecord& op : *ops) {
      op.tensors.clear();
      op.args.clear();
    }
  }
  return Status::Ok();
}

}  // namespace tdbg::tracer
