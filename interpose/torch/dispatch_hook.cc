// The dispatch hook: a global at::RecordFunction callback that records every op a process
// runs (nesting, thread, step, module, source location, tensors with hashes, non-tensor
// arguments, generator state, chain hash) into the run database. Installed by the library's
// constructor; nothing it does changes what the program computes.
#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <ATen/SequenceNumber.h>
#include <ATen/core/Generator.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/record_function.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <dlfcn.h>
#include <execinfo.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cctype>
#include <cstring>
#include <exception>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <optional>
#include <regex>
#include <shared_mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "interpose/preload_api.h"
#include "interpose/torch/arg_text.h"
#include "interpose/torch/native_frames.h"
#include "interpose/torch/native_stack.h"
#include "interpose/torch/python_frames.h"
#include "interpose/torch/script_frames.h"
#include "interpose/torch/step_counter.h"
#include "interpose/torch/session.h"
#include "interpose/torch/tensor_state.h"

namespace tdbg::torchhook {
namespace {

using tracer::kNoSeq;
using tracer::StringId;
using tracer::TensorRecord;
using tracer::TensorStatus;

// ---- What is known about each op, decided once per schema (or per name) ------------------

struct OpInfo {
  std::string name;
  uint64_t name_hash = 0;              // hash of the name's text, for the chain
  bool has_schema = false;
  std::vector<std::string> arg_names;  // schema argument names
  std::vector<ArgKind> arg_kinds;
  std::vector<bool> arg_written;       // the op writes this argument (in-place or out=)
  size_t returns = 0;                  // the schema's return values (without varargs)
  bool varargs = false;                // the schema takes or returns a variable number
  int generator_arg = -1;              // index of a Generator argument
  int device_arg = -1;                 // index of a `device` argument
  bool ignored = false;                // profiler bookkeeping: never recorded
  bool selected = true;                // matches TDBG_OPS
  bool random = false;
  bool uninitialized_output = false;
  // `lift_fresh`: how `torch.tensor` and `as_tensor` hand over the `empty` they filled with
  // the program's data outside torch's ops.
  bool lifts_fresh = false;
  // An in-place view (torch's `inplace_view` tag: t_, transpose_, unsqueeze_, as_strided_,
  // detach_): writes only its argument's geometry, never its contents.
  bool inplace_view = false;
  // `set_` onto a Storage: the output's contents come from memory no op may have written
  // (`torch.load`'s storages, the fresh storage of a tensor's deepcopy).
  bool storage_source = false;
  bool collective = false;
  // All its work goes through the dispatcher (a composite op: torch's backend-independent
  // kernels, written in ops; or a range with no schema: an autograd node): an output that an
  // op nested in it hashed is what it returns. A backend kernel may write more into such an
  // output through its data pointer after the nested op (the slow conv fills its output with
  // the bias by a `copy_`, then multiplies into it), so its outputs are hashed again.
  bool composite = false;
  // Reads only its tensors' metadata (sizes, dtype, flags), never their contents: its inputs
  // are not hashed, so an `empty` buffer it looks at is never read as data.
  bool metadata_only = false;
  bool writes = false;
  std::vector<bool> arg_overwritten;   // written without being read: contents not recorded
  std::vector<bool> arg_view_only;     // may alias the output without being written (views)
  bool backward = false;               // a BACKWARD_FUNCTION range or the engine's wrapper
  // A range in which the program's Python code may run during backward: the engine's wrapper
  // (tensor hooks), AccumulateGrad (a leaf's hooks), a custom Function's node (its name has no
  // version digit, unlike the generated C++ nodes: "MulBackward0").
  bool python_inside = false;
  // The node of a C++ custom autograd Function ("torch::autograd::CppNode<MyFn>"): its
  // backward is the program's C++ code.
  bool cpp_node = false;
  // A Python custom autograd Function's forward (its class name, no schema, no namespace):
  // an exception its Python code raised leaves the range as if it had ended normally.
  bool python_forward = false;

  // What runs inside this op, learned from its first calls (see `Internals`).
  std::atomic<uint8_t> internals{0};
  std::atomic<uint32_t> plain_calls{0};

  // Interned ids of `name` and `arg_names` for the writer generation `interned_generation`.
  std::mutex intern_mutex;
  std::atomic<uint64_t> interned_generation{UINT64_MAX};
  StringId name_id = 0;
  std::vector<StringId> arg_name_ids;
};

// Ops whose outputs are uninitialized memory by contract: the `empty` family. Matched by name
// (with or without a namespace's leading underscore), e.g. aten::empty, aten::empty_like,
// aten::empty_strided, aten::new_empty, aten::new_empty_strided, aten::_empty_affine_quantized,
// aten::empty_quantized, aten::_empty_per_channel_affine_quantized.
bool returns_uninitialized(const std::string& name) {
  size_t colon = name.rfind("::");
  std::string base = colon == std::string::npos ? name : name.substr(colon + 2);
  while (!base.empty() && base[0] == '_') base.erase(0, 1);
  return base.rfind("empty", 0) == 0 || base.rfind("new_empty", 0) == 0;
}

// True when `name` is one of `ops`.
bool one_of(const std::string& name, std::initializer_list<const char*> ops) {
  for (const char* op : ops)
    if (name == op) return true;
  return false;
}

// In-place ops that replace every element of `self` without reading it (its previous contents
// may be garbage, e.g. a buffer from a native at::empty): `self` is not hashed at op start.
bool overwrites_self(const std::string& name) {
  return one_of(name, {"aten::copy_", "aten::fill_", "aten::zero_", "aten::uniform_",
                       "aten::normal_", "aten::random_", "aten::bernoulli_", "aten::exponential_",
                       "aten::geometric_", "aten::cauchy_", "aten::log_normal_", "aten::resize_",
                       "aten::resize_as_", "aten::set_"});
}

// Ops that look at their tensors' metadata only. `Module._apply` (`to_empty()`, `.to()`) asks
// `_has_compatible_shallow_copy_type(param, empty_like(param))` before anything is written into
// the new buffer: read as data, its garbage would be a divergence in every pair of runs.
bool reads_metadata_only(const std::string& name) {
  return one_of(name, {"aten::_has_compatible_shallow_copy_type", "aten::is_same_size",
                       "aten::size", "aten::stride", "aten::sym_size", "aten::sym_stride",
                       "aten::sym_numel", "aten::sym_storage_offset", "aten::numel", "aten::dim",
                       "aten::is_complex", "aten::is_floating_point", "aten::is_signed",
                       "aten::is_conj", "aten::is_neg", "aten::_is_zerotensor",
                       "aten::is_inference", "aten::is_set_to", "aten::is_pinned",
                       "aten::is_leaf", "aten::output_nr", "aten::_version",
                       "aten::requires_grad_", "aten::retain_grad", "aten::retains_grad",
                       "aten::result_type", "aten::_nnz", "aten::is_coalesced",
                       "aten::storage_offset", "aten::is_contiguous",
                       "aten::is_nonoverlapping_and_dense"});
}

// Kernels that draw from their device's default generator without a Generator argument, and
// without dispatching a random op that would show it (`note_internal` finds those).
bool draws_without_generator_arg(const std::string& name) {
  return one_of(name, {"aten::native_dropout", "aten::_scaled_dot_product_flash_attention",
                       "aten::_scaled_dot_product_efficient_attention",
                       "aten::_flash_attention_forward", "aten::_efficient_attention_forward"});
}

// Ops whose output may hold memory nobody wrote (growing a tensor).
bool resizes(const std::string& name) {
  return name == "aten::resize_" || name == "aten::resize_as_";
}

// The autograd engine wraps each backward node in a FUNCTION-scope range named like this.
constexpr char kEngineRange[] = "autograd::engine::evaluate_function";

bool is_collective(const std::string& name) {
  static const char* const kWords[] = {"allreduce", "all_reduce", "all_gather", "allgather",
                                       "broadcast", "reduce_scatter", "all_to_all", "alltoall",
                                       "barrier", "c10d::reduce", "c10d::scatter",
                                       "c10d::gather", "c10d::send", "c10d::recv"};
  if (name.rfind("aten::", 0) == 0 && name.find("broadcast") != std::string::npos)
    return false;  // aten::broadcast_tensors, broadcast_to: shape ops, not communication
  for (const char* w : kWords)
    if (name.find(w) != std::string::npos) return true;
  return false;
}

// ---- Ops that kernels run inside themselves ----------------------------------------------
//
// A backend kernel may dispatch ops of its own below autograd (CPU bmm selects each batch's
// matrices, native_dropout fills its mask with bernoulli_, a structured kernel resizes its
// output). They are the kernel's implementation, not ops of the program: autograd and a
// TorchDispatchMode never see them, and recording them multiplies the ops of a step (about 7x
// on a small transformer). Unless TDBG_INTERNAL_OPS is set they are not recorded: the op around
// them is, with its inputs and outputs. An internal op is one that starts with autograd's
// dispatch keys excluded inside an op that started with them included (under inference_mode
// everything starts excluded, and every op is recorded).
//
// Skipping them still costs torch's RecordFunction per internal op (boxing its arguments), so
// once an op's first calls have shown that everything it nests is internal and none draws
// random numbers, RecordFunction is switched off on the thread for the op's later calls. An op
// whose internals draw random numbers (native_dropout) keeps them visible, so that the state of
// the generator they draw from is recorded on the op.
enum Internals : uint8_t {
  kInternalsUnknown = 0,  // still learning
  kInternalsPlain,        // nests internal ops only, none random: RecordFunction off inside
  kInternalsOther,        // nests recorded ops, random internals, or nothing internal
};
constexpr uint32_t kLearningCalls = 3;

std::mutex g_info_mutex;
std::unordered_map<std::string, std::unique_ptr<OpInfo>> g_infos;  // by "name.overload" or name

OpInfo* build_info_locked(const std::string& key, const std::string& name,
                          const c10::FunctionSchema* schema, bool backward) {
  auto info = std::make_unique<OpInfo>();
  info->name = name;
  info->name_hash = hashing::hash_bytes(name.data(), name.size());
  info->backward = backward;
  info->ignored = name.rfind("profiler::", 0) == 0;
  info->uninitialized_output = returns_uninitialized(name) || resizes(name);
  info->lifts_fresh = name == "aten::lift_fresh" || name == "aten::lift";
  if (name.rfind(kEngineRange, 0) == 0) info->backward = true;
  info->python_inside = !schema && !name.empty() &&
                        (name.rfind(kEngineRange, 0) == 0 ||
                         !std::isdigit(static_cast<unsigned char>(name.back())));
  info->cpp_node = !schema && name.rfind("torch::autograd::CppNode<", 0) == 0;
  info->python_forward = !schema && !backward && !name.empty() && name.find("::") == std::string::npos &&
                         name.find('#') == std::string::npos;
  info->collective = is_collective(name);
  info->metadata_only = reads_metadata_only(name);
  info->composite = !schema;
  if (schema) {
    info->has_schema = true;
    const auto op = c10::Dispatcher::singleton().findOp(schema->operator_name());
    info->inplace_view = op && op->hasTag(at::Tag::inplace_view) && !resizes(name);
    using c10::DispatchKey;
    // (A structured kernel's functional form has a CompositeExplicitAutogradNonFunctional
    // kernel for backends without one of their own, beside its CPU and CUDA kernels: on those
    // it is a backend kernel, which `sort.stable` is, filling its output after a `copy_`.)
    info->composite =
        op &&
        (op->hasKernelForDispatchKey(DispatchKey::CompositeImplicitAutograd) ||
         op->hasKernelForDispatchKey(DispatchKey::CompositeExplicitAutograd) ||
         op->hasKernelForDispatchKey(DispatchKey::CompositeExplicitAutogradNonFunctional)) &&
        !op->hasKernelForAnyDispatchKey(c10::DispatchKeySet({DispatchKey::CPU, DispatchKey::CUDA}));
    const auto& args = schema->arguments();
    info->returns = schema->returns().size();
    info->varargs = schema->is_vararg() || schema->is_varret();
    for (size_t i = 0; i < args.size(); ++i) {
      info->arg_names.push_back(args[i].name());
      ArgKind kind = arg_kind(args[i]);
      info->arg_kinds.push_back(kind);
      bool written = args[i].alias_info() && args[i].alias_info()->isWrite();
      info->arg_written.push_back(written);
      // out= arguments are never read; `self` of a pure overwrite is not either.
      info->arg_overwritten.push_back(written && (args[i].is_out() || (i == 0 && overwrites_self(name))));
      // `lift_fresh` returns (a view of) a tensor that a constructor just filled from Python
      // data: the first point where those contents can be read, at the constructor's line.
      info->arg_view_only.push_back(args[i].alias_info() && !written &&
                                    !one_of(name, {"aten::lift_fresh", "aten::lift"}));
      info->writes = info->writes || written;
      if (kind == ArgKind::kGenerator && info->generator_arg < 0) info->generator_arg = int(i);
      if (args[i].name() == "device" && info->device_arg < 0) info->device_arg = int(i);
      if (args[i].type()->kind() == c10::TypeKind::StorageType) info->storage_source = true;
    }
    info->random = info->generator_arg >= 0 || draws_without_generator_arg(name);
    // Arguments that kernels write although the schema does not say so (torch 1.13's
    // `batch_norm` family, 2.x's `native_batch_norm` still): batch and instance norm update
    // `running_mean`/`running_var` in place when they have a `momentum` to do it with, through
    // the data pointer, without bumping the version counter. Without this their first hash
    // (the init's zeros and ones) would stand for them for the whole run. `writes` stays off:
    // that flag says the op replaces its input 0, which these ops do not.
    const bool has_momentum = std::find(info->arg_names.begin(), info->arg_names.end(),
                                        "momentum") != info->arg_names.end();
    for (size_t i = 0; i < info->arg_names.size(); ++i) {
      const std::string& arg = info->arg_names[i];
      if ((has_momentum && (arg == "running_mean" || arg == "running_var")) ||
          (name == "aten::rrelu_with_noise" && arg == "noise"))
        info->arg_written[i] = true;
    }
  }
  if (const std::regex* filter = settings().op_filter.get()) {
    try {
      info->selected = std::regex_search(name, *filter);
    } catch (...) {
      info->selected = true;
    }
  }
  OpInfo* raw = info.get();
  g_infos.emplace(key, std::move(info));
  return raw;
}

OpInfo* info_by_name(const std::string& name, bool backward) {
  std::lock_guard<std::mutex> lock(g_info_mutex);
  std::string key = (backward ? "bw:" : "fn:") + name;
  auto it = g_infos.find(key);
  if (it != g_infos.end()) return it->second.get();
  return build_info_locked(key, name, nullptr, backward);
}

// A thread's cache of op infos by name address (see info_for).
struct InfoSlot {
  const char* name = nullptr;
  OpInfo* info = nullptr;
};
constexpr size_t kInfoSlots = 1024;

// A thread's cache of op infos by name text, for ranges named by a string that lives only as
// long as the range (the autograd engine's "AddmmBackward0", about a third of a training
// step's ops): direct-mapped by the text's hash, checked against the info's own name.
struct NamedInfoSlot {
  uint64_t hash = 0;
  bool backward = false;
  OpInfo* info = nullptr;
};

OpInfo* info_by_name_cached(const char* name, bool backward, std::vector<NamedInfoSlot>& slots) {
  if (slots.empty()) slots.resize(kInfoSlots);
  const size_t size = std::strlen(name);
  const uint64_t hash = hashing::hash_bytes(name, size);
  NamedInfoSlot& slot = slots[(hash * 0x9E3779B97F4A7C15ull) >> 54];
  if (slot.info && slot.hash == hash && slot.backward == backward &&
      slot.info->name.size() == size && std::memcmp(slot.info->name.data(), name, size) == 0)
    return slot.info;
  OpInfo* info = info_by_name(name, backward);
  slot = NamedInfoSlot{hash, backward, info};
  return info;
}

// The info of a FUNCTION-scope op. Schema-based RecordFunctions return the schema's own name
// string from name(), whose address is stable and unique per overload: the thread's cache
// `slots` is direct-mapped by it, so the common case is one probe without locks, allocations
// or a node to chase.
OpInfo* info_for(const at::RecordFunction& fn, std::vector<InfoSlot>& slots,
                 std::vector<NamedInfoSlot>& named_slots) {
  if (slots.empty()) slots.resize(kInfoSlots);
  const char* name = fn.name();
  InfoSlot& slot = slots[(reinterpret_cast<uintptr_t>(name) * 0x9E3779B97F4A7C15ull) >> 54];
  if (slot.name == name) return slot.info;
  auto op = fn.operator_name();
  if (!op) return info_by_name_cached(name, /*backward=*/false, named_slots);
  std::string key = op->name + "." + op->overload_name;
  OpInfo* info = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_info_mutex);
    auto it = g_infos.find(key);
    if (it != g_infos.end()) {
      info = it->second.get();
    } else {
      const c10::FunctionSchema* schema = nullptr;
      auto handle = c10::Dispatcher::singleton().findSchema(*op);
      if (handle) schema = &handle->schema();
      info = build_info_locked(key, op->name, schema, false);
    }
  }
  slot = InfoSlot{name, info};
  return info;
}

void intern_info(OpInfo* info, tracer::Writer* w) {
  uint64_t gen = writer_generation();
  if (info->interned_generation.load(std::memory_order_acquire) == gen) return;
  std::lock_guard<std::mutex> lock(info->intern_mutex);
  if (info->interned_generation.load(std::memory_order_acquire) == gen) return;
  info->name_id = w->intern(info->name);
  info->arg_name_ids.clear();
  for (const auto& n : info->arg_names) info->arg_name_ids.push_back(w->intern(n));
  info->interned_generation.store(gen, std::memory_order_release);
}

// ---- Process-wide counters and tables ----------------------------------------------------

std::atomic<int64_t> g_next_seq{0};
std::atomic<uint32_t> g_next_thread{0};
std::atomic<uint32_t> g_next_region{1};
// Training steps completed, counted from the optimizer steps of the process's main thread:
// the count of every thread that does not step an optimizer itself (helper threads, the
// autograd engine's device threads). A thread that steps optimizers of its own counts them
// itself (`ThreadState::steps`): two threads each training a model would otherwise move one
// count in an order the scheduler picks, and the same op would get another step in each run.
std::atomic<int64_t> g_steps{0};
std::mutex g_step_mutex;               // guards g_step_counter
StepCounter g_step_counter;
std::atomic<bool> g_thread_counts_noted{false};
std::atomic<uint64_t> g_fork_generation{0};
TensorTable g_tensors;

// Forward ops by (torch thread id, autograd sequence number), for linking backward ops: a
// direct-mapped table of the last kForwardSlots sequence numbers, allocated once. Sequence
// numbers count up per thread, so a slot is overwritten only by a node created kForwardSlots
// nodes later (a backward that late loses its link, nothing else) or, rarely, by another
// thread's node. (A node-based map of the last 2^20 entries grew the heap by ~4 MB per step
// of bench/overhead/lm_steps.py: its small long-lived nodes, interleaved with the program's
// tensor buffers, fragmented the heap.)
struct ForwardOp {
  uint64_t thread = 0;
  int64_t seq_nr = -1;
  int64_t seq = kNoSeq;
  uint32_t module = 0;
};
constexpr size_t kForwardSlots = size_t{1} << 18;
std::mutex g_forward_mutex;
// Held shared while a thread switches RecordFunction off or on for itself, and exclusively
// across a fork: torch rebuilds the thread's callbacks under its global callbacks' mutex, and
// a child forked while another thread held that mutex would wait on it at its first op.
std::shared_mutex g_record_function_switch;

void switch_record_function(bool on) {
  std::shared_lock<std::shared_mutex> lock(g_record_function_switch);
  at::enableRecordFunction(on);
}
std::vector<ForwardOp> g_forward;  // kForwardSlots entries once the first one is stored

ForwardOp& forward_slot(uint64_t thread, int64_t seq_nr) {
  if (g_forward.empty()) g_forward.resize(kForwardSlots);
  const uint64_t spread = thread * 0x9E3779B97F4A7C15ull;  // threads start far apart
  return g_forward[(static_cast<uint64_t>(seq_nr) + (spread >> 40)) & (kForwardSlots - 1)];
}

// ---- Per-thread state --------------------------------------------------------------------

struct OpContext;

struct InputTensor {
  at::Tensor tensor;
  uint64_t hash = 0;
  TensorStatus status = TensorStatus::kSkipped;
  StringId reason = 0;
  bool written = false;
  int64_t writer = tracer::kNoSeq;  // not hashed: the recorded op that last wrote into it
};

struct OpenRegion {
  tracer::RegionRecord record;
  bool step = false;
  uintptr_t optimizer = 0;  // of a step region: the optimizer's identity
  tracer::StringId settings = 0;  // of a Python optimizer's step region: its settings (JSON)
  bool in_window = true;
};

struct ThreadState {
  uint64_t fork_generation = 0;
  pid_t tid = 0;  // the OS thread id (for `hook_write_unfinished`)
  bool registered = false;
  uint32_t id = 0;
  int64_t tidx = 0;
  int64_t last_seq = kNoSeq;
  uint64_t chain = 0;
  bool busy = false;  // inside the hook: ops the hook itself causes are not recorded
  // 1 + the pending index of the op whose inputs `start_op` is reading (0: none). A fault
  // there (unreadable memory behind a tensor: a truncated mmap) stops the thread at a point
  // where every pending record is whole: `hook_write_unfinished` may write them.
  size_t reading_inputs = 0;
  int8_t collective_worker = -1;  // see on_collective_worker_thread; -1 not yet known
  // The code of the last innermost Python frame found outside the program in a backward pass
  // (torch's `backward`, waiting for the engine): nodes run under it keep their forward line.
  const void* backward_plain_code = nullptr;
  std::vector<OpContext*> stack;
  // Recorded ops of the current top-level op, by tidx: `pending[0..pending_count)`. Slots are
  // reused with their vectors' capacity (Writer::append_ops copies them), so recording an op
  // allocates nothing once warm.
  std::vector<tracer::OpRecord> pending;
  std::vector<uint64_t> pending_content;  // per pending op: hash of all it compares but the chain
  size_t pending_count = 0;
  // Tensor inputs of the open ops, each op's a contiguous range (ops nest, so the innermost
  // op's inputs are last); emptied when the outermost op ends.
  std::vector<InputTensor> inputs;
  std::vector<OpenRegion> regions;
  std::vector<uint32_t> cpp_steps;  // open C++ optimizer step regions (0: not recorded)
  // The recorded ops this thread is inside, for a close that another thread makes (a
  // watchdog's abort, a signal from outside, an exit while this thread is busy), which cannot
  // read `stack` or `pending` safely: the names of the open ops by depth (up to kInFlight
  // deep), how many are open, and the top-level op's fields that place it. Stored only by this
  // thread, read by `hook_in_flight` (a read racing with an op's start or end is a snapshot
  // of either moment, or a mix of names of both).
  static constexpr int kInFlight = 8;
  std::atomic<uint32_t> in_flight_names[kInFlight] = {};
  std::atomic<int32_t> in_flight_depth{0};
  struct InFlightTop {
    std::atomic<int64_t> seq{kNoSeq}, step{0}, fwd{kNoSeq};
    std::atomic<uint32_t> user_frame{0}, stack{0}, module{0}, flags{0};
  } in_flight_top;
  // Steps of a thread other than the main one that stepped an optimizer (see g_steps).
  bool own_steps = false;
  StepCounter step_counter;
  int64_t steps = 0;
  int8_t main_thread = -1;  // this thread is the process's main one (tid == pid); -1 unknown
  uint64_t intern_generation = UINT64_MAX;
  // Shapes (up to kInlineInts dimensions) and common non-tensor argument values (None, ints,
  // doubles, bools, short int lists) seen on this thread: the id and text hash of their
  // canonical text ("2x3x4", "0.5") without building the text. Direct-mapped arrays, so a
  // lookup is one probe of inline data (hash maps of nodes were a cache miss per tensor and
  // argument). A miss or a collision builds the text and refills the slot. Valid for the
  // writer generation `intern_generation`.
  static constexpr size_t kInlineInts = 8;
  struct TextSlot {
    uint64_t key = 0;
    uint8_t tag = 0;   // 0: empty; shapes: 1; arguments: see arg_value
    uint8_t kind = 0;  // ArgKind of an argument
    uint8_t count = 0;
    int64_t ints[kInlineInts] = {};
    StringId id = 0;
    uint64_t text_hash = 0;
  };
  static constexpr size_t kTextSlots = 4096;
  static constexpr int kTextShift = 52;  // 64 - log2(kTextSlots)
  std::vector<TextSlot> texts;  // kTextSlots once `refresh_caches` ran
  std::vector<InfoSlot> info_slots;  // kInfoSlots once `info_for` ran
  std::vector<NamedInfoSlot> named_info_slots;  // kInfoSlots once `info_by_name_cached` ran
  std::vector<std::pair<const char*, StringId>> literals;  // see intern_literal
  uint64_t cpu_generation = UINT64_MAX;
  StringId cpu_device = 0;
};

void release_caches(ThreadState& ts);

// At a thread's exit, frees the caches and buffers of its state (about 100 KiB), so programs
// that start many threads do not keep them all; the state object itself stays (see below).
struct ThreadCacheReleaser {
  ThreadState* state;
  ~ThreadCacheReleaser() { release_caches(*state); }
};

// Every thread's state, for the close after a fault, which writes what the faulting thread
// was inside (`hook_write_unfinished`).
std::mutex g_thread_states_mutex;
std::vector<ThreadState*> g_thread_states;

// Heap-allocated and never freed: exit() destroys thread_locals before atexit handlers and
// static destructors, which may still run ops (they then rebuild the released caches).
ThreadState& thread_state() {
  thread_local ThreadState* state_ptr = nullptr;
  if (state_ptr == nullptr) {
    state_ptr = new ThreadState();
    state_ptr->fork_generation = g_fork_generation.load(std::memory_order_relaxed);
    state_ptr->tid = static_cast<pid_t>(syscall(SYS_gettid));
    thread_local ThreadCacheReleaser releaser{state_ptr};  // initialized once per thread, here
    std::lock_guard<std::mutex> lock(g_thread_states_mutex);
    g_thread_states.push_back(state_ptr);
  }
  ThreadState& state = *state_ptr;
  uint64_t fork_gen = g_fork_generation.load(std::memory_order_relaxed);
  if (state.fork_generation != fork_gen) {
    // The thread that called fork(), now in the child: start over with the child's database.
    state.~ThreadState();
    new (&state) ThreadState();
    state.fork_generation = fork_gen;
    state.tid = static_cast<pid_t>(syscall(SYS_gettid));
    std::lock_guard<std::mutex> lock(g_thread_states_mutex);
    g_thread_states.push_back(state_ptr);
  }
  return state;
}

struct BusyGuard {
  explicit BusyGuard(ThreadState& s) : state(s) { state.busy = true; }
  ~BusyGuard() { state.busy = false; }
  ThreadState& state;
};

// Training steps completed, as the thread's ops count them (see g_steps).
int64_t current_step(const ThreadState& ts) {
  return ts.own_steps ? ts.steps : g_steps.load(std::memory_order_relaxed);
}

bool is_main_thread(ThreadState& ts) {
  if (ts.main_thread < 0)
    ts.main_thread = static_cast<pid_t>(syscall(SYS_gettid)) == getpid() ? 1 : 0;
  return ts.main_thread == 1;
}

// Forgets the thread's cached ids when the writer changed (a fork child's new database).
void refresh_caches(ThreadState& ts) {
  uint64_t gen = writer_generation();
  if (ts.intern_generation != gen) {
    ts.texts.assign(ThreadState::kTextSlots, ThreadState::TextSlot());
    ts.literals.clear();
    ts.intern_generation = gen;
  }
}

void release_caches(ThreadState& ts) {
  std::vector<ThreadState::TextSlot>().swap(ts.texts);
  std::vector<InfoSlot>().swap(ts.info_slots);
  std::vector<NamedInfoSlot>().swap(ts.named_info_slots);
  std::vector<std::pair<const char*, StringId>>().swap(ts.literals);
  ts.intern_generation = UINT64_MAX;  // rebuilt on next use
  if (ts.stack.empty()) {
    std::vector<tracer::OpRecord>().swap(ts.pending);
    std::vector<uint64_t>().swap(ts.pending_content);
    ts.pending_count = 0;
    std::vector<InputTensor>().swap(ts.inputs);
  }
}

// The id of a string literal (a reason why a tensor is not hashed): cached by the literal's
// address, so the common reasons cost no string building or hashing.
StringId intern_literal(ThreadState& ts, tracer::Writer* w, const char* literal) {
  refresh_caches(ts);
  for (const auto& [text, id] : ts.literals)
    if (text == literal) return id;
  const StringId id = w->intern(literal);
  if (ts.literals.size() < 32) ts.literals.emplace_back(literal, id);
  return id;
}

std::string thread_name() {
  char buf[64] = {0};
  if (pthread_getname_np(pthread_self(), buf, sizeof(buf)) != 0) return "";
  return buf;
}

void register_thread(ThreadState& ts, tracer::Writer* w) {
  if (ts.registered) return;
  ts.registered = true;
  ts.id = g_next_thread.fetch_add(1);
  tracer::ThreadRecord t;
  t.id = ts.id;
  t.os_tid = static_cast<int64_t>(syscall(SYS_gettid));
  t.name = thread_name();
  w->add_thread(t);
}

// ---- Per-op context ----------------------------------------------------------------------

// Fixed-size objects recycled through a per-thread free list: torch deletes each op's context
// when the op ends, and a malloc/free pair per op is measurable at ~18,000 ops per step.
// A block freed on another thread joins that thread's list; blocks are never returned.
template <typename T>
struct Pooled {
  static void* operator new(size_t size) {
    if (size == sizeof(T) && free_list() != nullptr) {
      void* p = free_list();
      free_list() = *static_cast<void**>(p);
      return p;
    }
    return ::operator new(size);
  }
  static void operator delete(void* p, size_t size) {
    if (size != sizeof(T)) return ::operator delete(p);
    *static_cast<void**>(p) = free_list();
    free_list() = p;
  }
  static void*& free_list() {
    thread_local void* head = nullptr;
    return head;
  }
};

struct OpContext : public at::ObserverContext, public Pooled<OpContext> {
  ThreadState* thread = nullptr;
  OpInfo* info = nullptr;
  bool recorded = false;
  size_t pending_index = 0;
  int64_t seq = kNoSeq;
  int64_t record_parent = kNoSeq;  // nearest recorded enclosing op
  int record_depth = 0;            // depth among recorded ops
  // Inherited by nested ops:
  bool backward = false;
  int64_t fwd = kNoSeq;
  uint32_t module = 0;             // module path id
  SourceLocation location;
  size_t inputs_begin = 0;         // this op's tensor inputs: ThreadState::inputs[begin, end)
  size_t inputs_end = 0;
  OpContext* root = nullptr;       // the outermost recorded op around this one (maybe itself)
  bool location_taken = false;     // `location` was captured (on a scope's first op only)
  // The op whose location this op shares: the top-level op, or the outermost op under a range
  // that runs Python code of its own (see `starts_location_scope`).
  OpContext* scope = nullptr;
  bool below_autograd = false;     // started with autograd's dispatch keys excluded
  bool node = false;               // an autograd node's range (backward), not an op
  bool record_function_off = false;  // this op switched RecordFunction off for its internals
  bool saw_internal = false;       // ran an internal op (learning, see `Internals`)
  bool saw_random_internal = false;
  bool saw_nested = false;         // ran a nested op that is not internal
  // Exceptions in flight on this thread when the op started: more at its end means it ends by
  // an exception (an error inside it), its RecordFunction closed by the unwinding.
  int uncaught_exceptions = 0;

  const InputTensor* inputs_data() const { return thread->inputs.data() + inputs_begin; }
  size_t input_count() const { return inputs_end - inputs_begin; }
};

// True when `t` shares storage with an input of the top-level op `root`: data the caller passed
// in, as opposed to a buffer the op allocated natively (possibly still uninitialized).
bool is_caller_data(const OpContext* root, const at::Tensor& t) {
  const void* key = storage_key(t);
  if (!key) return false;
  const InputTensor* in = root->inputs_data();
  for (size_t i = 0; i < root->input_count(); ++i)
    if (storage_key(in[i].tensor) == key) return true;
  return false;
}

// True when `t` lives in host memory that torch's CPU allocator did not make: a NumPy array's
// (`torch.from_numpy`), a Python buffer's (`frombuffer`), shared memory (DataLoader batches,
// `share_memory_()`), DLPack. Such memory can change with no op seeing it (`buf[:] = batch`
// into the array under a tensor made once), so its hash is never carried: each read hashes it.
bool foreign_memory(const at::Tensor& t) {
  static const c10::DeleterFnPtr torch_deleter = c10::GetAllocator(c10::DeviceType::CPU)->raw_deleter();
  if (!t.is_cpu() || !t.has_storage()) return false;
  const at::DataPtr& data = t.unsafeGetTensorImpl()->unsafe_storage().data_ptr();
  return data.get() != nullptr && torch_deleter != nullptr && data.get_deleter() != torch_deleter;
}

// The table's entry of input `t` (TensorTable::find, with its `writer` and `written`), or
// nullopt for foreign memory, whose hash is never carried.
std::optional<TrackedTensor> find_input(const at::Tensor& t, int64_t* writer, bool* written) {
  auto known = g_tensors.find(t, writer, written);
  if (known && known->pending) {
    // A view taken of memory written in place since it was known: not known, but the op that
    // wrote into it is.
    if (writer && *writer == tracer::kNoSeq) *writer = known->producer;
    if (written) *written = true;
    return std::nullopt;
  }
  if (foreign_memory(t)) return std::nullopt;
  return known;
}

struct RegionContext : public at::ObserverContext, public Pooled<RegionContext> {
  ThreadState* thread = nullptr;
  uint32_t region = 0;
};

// ---- Tensors -----------------------------------------------------------------------------

bool comparable(TensorStatus s) {
  return s == TensorStatus::kHashed || s == TensorStatus::kKnown || s == TensorStatus::kView;
}

// The interned name of `device` ("cpu", "cuda:0"), without building the text each time.
StringId device_string(ThreadState& ts, tracer::Writer* w, const c10::Device& device) {
  if (device.is_cpu()) {
    if (ts.cpu_generation != writer_generation()) {
      ts.cpu_device = w->intern("cpu");
      ts.cpu_generation = writer_generation();
    }
    return ts.cpu_device;
  }
  return w->intern(device.str());
}

// The interned id of `text` and the hash of that text in `*text_hash`.
StringId intern_hashed(ThreadState& ts, tracer::Writer* w, const std::string& text,
                       uint64_t* text_hash) {
  *text_hash = hashing::hash_bytes(text.data(), text.size());
  return w->intern(text);
}

// The interned id of the text that `make_text()` builds for the value (tag, kind, ints[0..n)),
// and the hash of that text in `*text_hash`, through the thread's direct-mapped cache.
template <typename MakeText>
StringId cached_text(ThreadState& ts, tracer::Writer* w, uint8_t tag, uint8_t kind,
                     const int64_t* ints, size_t n, uint64_t* text_hash, MakeText&& make_text) {
  uint64_t key = (uint64_t(tag) << 56) ^ (uint64_t(kind) << 48) ^ n;
  for (size_t i = 0; i < n; ++i) {
    key = (key ^ static_cast<uint64_t>(ints[i])) * 0x9E3779B97F4A7C15ull;
    key ^= key >> 29;
  }
  refresh_caches(ts);
  ThreadState::TextSlot* slot = nullptr;
  if (n <= ThreadState::kInlineInts) {
    // The slot from the high bits of a product: the key's low bits are zero for a value
    // without ints (None), which put every kind of None in one slot.
    slot = &ts.texts[((key ^ (key >> 31)) * 0x9E3779B97F4A7C15ull) >> ThreadState::kTextShift];
    if (slot->tag == tag && slot->key == key && slot->kind == kind && slot->count == n &&
        std::equal(ints, ints + n, slot->ints)) {
      *text_hash = slot->text_hash;
      return slot->id;
    }
  }
  const StringId id = intern_hashed(ts, w, make_text(), text_hash);
  if (slot) {
    slot->key = key;
    slot->tag = tag;
    slot->kind = kind;
    slot->count = static_cast<uint8_t>(n);
    std::copy(ints, ints + n, slot->ints);
    slot->id = id;
    slot->text_hash = *text_hash;
  }
  return id;
}

// Fills dtype, shape and device of `rec` and mixes them into `content`.
void describe(ThreadState& ts, tracer::Writer* w, const at::Tensor& t, TensorRecord* rec,
              uint64_t* content) {
  if (!t.defined()) {
    rec->status = TensorStatus::kNotHashed;
    rec->reason = intern_literal(ts, w, "undefined tensor");
    return;
  }
  rec->dtype = to_dtype(t.scalar_type());
  rec->device = device_string(ts, w, t.device());
  *content = hashing::hash_combine(*content, static_cast<uint64_t>(rec->dtype));
  if (t.is_nested()) {
    static const std::string kNested = "nested";
    rec->shape = w->intern(kNested);
    *content = hashing::hash_combine(*content, hashing::hash_bytes(kNested.data(), kNested.size()));
    return;
  }
  // The shape, and for a tensor that is not contiguous its strides ("16x16 strides 1x16"): a
  // kernel may take another path, with other rounding, for another layout of the same values.
  const c10::IntArrayRef sizes = t.sizes();
  const bool strided = t.layout() == c10::kStrided && !t.is_contiguous();
  int64_t dims[2 * ThreadState::kInlineInts];
  size_t n = sizes.size();
  const int64_t* key = sizes.data();
  if (strided && sizes.size() <= ThreadState::kInlineInts / 2) {
    std::copy(sizes.begin(), sizes.end(), dims);
    std::copy(t.strides().begin(), t.strides().end(), dims + sizes.size());
    key = dims;
    n = 2 * sizes.size();
  }
  uint64_t text_hash = 0;
  rec->shape = cached_text(ts, w, /*tag=*/strided ? 7 : 1, 0, key, n, &text_hash, [&] {
    auto join = [](c10::IntArrayRef ints, std::string* out) {
      for (size_t i = 0; i < ints.size(); ++i) {
        if (i) *out += 'x';
        *out += std::to_string(ints[i]);
      }
    };
    std::string shape;
    join(sizes, &shape);
    if (strided) {
      shape += " strides ";
      join(t.strides(), &shape);
    }
    return shape;
  });
  *content = hashing::hash_combine(*content, text_hash);
}

// The interned canonical text of a non-tensor argument (see arg_text) and the hash of that text.
// Common values are looked up by their bits, so their text is built once per thread.
void arg_value(ThreadState& ts, tracer::Writer* w, const c10::IValue& v, ArgKind kind,
               StringId* id, uint64_t* text_hash) {
  uint8_t tag = 0;  // 2..6: cached kinds of value (1 and 7 are shapes)
  int64_t ints[ThreadState::kInlineInts];
  size_t n = 1;
  if (v.isNone()) {
    tag = 2;
    n = 0;
  } else if (v.isInt()) {
    tag = 3;
    ints[0] = v.toInt();
  } else if (v.isDouble()) {
    tag = 4;
    double d = v.toDouble();
    std::memcpy(&ints[0], &d, sizeof(d));
  } else if (v.isBool()) {
    tag = 5;
    ints[0] = v.toBool();
  } else if (v.isIntList() && v.toListRef().size() <= ThreadState::kInlineInts) {
    tag = 6;
    c10::ArrayRef<c10::IValue> list = v.toListRef();
    n = list.size();
    for (size_t i = 0; i < n; ++i) ints[i] = list[i].toInt();
  }
  if (tag == 0) {  // anything else: built each time
    *id = intern_hashed(ts, w, arg_text(v, kind), text_hash);
    return;
  }
  *id = cached_text(ts, w, tag, static_cast<uint8_t>(kind), ints, n, text_hash,
                    [&] { return arg_text(v, kind); });
}

// A Python number passed where the op takes a tensor (`x * 0.5`, `loss / scale`): torch wraps
// it in a 0-dim CPU tensor of its Python type. Recorded as an argument with the number's text,
// so a changed constant shows up as a changed argument rather than as data from outside.
// The number, read without dispatching an op, or nullopt when `t` is no such tensor.
std::optional<c10::IValue> python_number(const at::Tensor& t) {
  if (!t.defined() || !t.unsafeGetTensorImpl()->is_wrapped_number()) return std::nullopt;
  if (!t.device().is_cpu() || t.numel() != 1 || !t.has_storage() || t.data_ptr() == nullptr)
    return std::nullopt;
  const void* p = t.data_ptr();
  switch (t.scalar_type()) {
    case c10::ScalarType::Double: return c10::IValue(*static_cast<const double*>(p));
    case c10::ScalarType::Long: return c10::IValue(*static_cast<const int64_t*>(p));
    case c10::ScalarType::Bool: return c10::IValue(*static_cast<const bool*>(p));
    case c10::ScalarType::ComplexDouble:
      return c10::IValue(*static_cast<const c10::complex<double>*>(p));
    default: return std::nullopt;
  }
}

// Why a CUDA tensor cannot be copied to the host now, or nullptr when it can. Only the preload
// sees CUDA graph captures (in the driver), and a synchronizing copy inside one would break
// the program's capture: without that knowledge nothing is copied.
const char* cuda_copy_refusal() {
  using Capturing = int (*)();
  static const Capturing capturing =
      reinterpret_cast<Capturing>(dlsym(RTLD_DEFAULT, "tdbg_preload_gpu_capturing"));
  if (capturing == nullptr) return "not hashed: this tdbg was built without CUDA";
  switch (capturing()) {
    case 0: return nullptr;
    case 1: return "CUDA graph capture in progress";
    default: return "not hashed with GPU interception off (--no-gpu)";
  }
}

// Hashes `t` (hashable, see `unhashable_reason`) into `rec`. A tensor in accelerator memory
// is hashed from a host copy; when it cannot be copied now or the copy fails (a device error),
// `rec` says why and the function returns false, leaving any error to the program's own next
// use. With `held_values`, a host tensor with stride-0 dimensions is hashed by the values it
// holds once (`hash_expanded_host_tensor`).
bool hash_into(ThreadState& ts, tracer::Writer* w, const at::Tensor& t, TensorRecord* rec,
               bool held_values = false) {
  const int threads = static_cast<int>(settings().config.hash_threads);
  hashing::HashResult r;
  if (t.is_cpu()) {
    r = held_values && expanded_repeats(t) > 1 ? hash_expanded_host_tensor(t, threads)
                                               : hash_host_tensor(t, threads);
  } else {
    if (const char* refusal = t.is_cuda() ? cuda_copy_refusal() : nullptr) {
      rec->status = TensorStatus::kNotHashed;
      rec->reason = intern_literal(ts, w, refusal);
      return false;
    }
    try {
      r = hash_host_copy(t, threads);
    } catch (...) {
      rec->status = TensorStatus::kNotHashed;
      rec->reason = intern_literal(ts, w, "copy to the host failed");
      return false;
    }
  }
  if (!r.hashed) {  // memory that faulted when read (`hash_host_tensor`), a view too large
    rec->status = TensorStatus::kNotHashed;
    rec->reason = intern_literal(ts, w, r.error != nullptr ? r.error : "not hashed");
    return false;
  }
  rec->status = TensorStatus::kHashed;
  rec->hash = r.hash;
  rec->summary = r.summary;
  return true;
}

template <typename F>
void for_each_tensor(const c10::IValue& v, F&& f) {
  if (v.isTensor()) {
    f(v.toTensor());
  } else if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorList()) f(t);
  } else if (v.isList()) {
    for (const c10::IValue& e : v.toListRef())
      if (e.isTensor()) f(e.toTensor());
  } else if (v.isTuple()) {
    for (const c10::IValue& e : v.toTupleRef().elements())
      if (e.isTensor()) f(e.toTensor());
  }
}

// Hashes input `t` as read now (data from outside recorded ops, or changed since), made by
// `producer` (kNoSeq: no recorded op), and remembers it so later readers carry the hash.
void hash_input_read_now(ThreadState& ts, tracer::Writer* w, const at::Tensor& t, int64_t producer,
                         TensorRecord* rec, bool by_contents = false) {
  // Expanded (stride 0) memory read as data from outside: hashed by the values it holds once
  // and its geometry, so each read costs the memory's size, not the logical size (a NumPy
  // mask broadcast to a batch is hashed again by every op that reads it).
  if (!hash_into(ts, w, t, rec, /*held_values=*/true)) return;
  // `by_contents`: a tensor the table never saw, over memory a recorded op may have written
  // (the `p.data()` a C++ optimizer makes afresh in each step): that op, where these contents
  // are what it left there.
  if (by_contents && producer == tracer::kNoSeq && rec->status == TensorStatus::kHashed)
    producer = g_tensors.writer_of_contents(t, rec->hash);
  rec->producer = producer;
  TrackedTensor state;
  state.hash = rec->hash;
  state.status = TensorStatus::kHashed;
  state.summary = rec->summary;
  state.producer = producer;
  g_tensors.remember(t, state);
}

// Records input `t` of the op of `ctx`: `written` when the op writes it, `overwritten` when it
// writes it without reading it, `view_only` when the op may return a view of it without
// reading it (`to`, `detach`, `lift_fresh`).
void record_input(ThreadState& ts, tracer::Writer* w, OpContext* ctx, const at::Tensor& t,
                  bool written, bool overwritten, bool view_only, tracer::OpRecord* op,
                  uint64_t* content) {
  TensorRecord rec;
  rec.role = tracer::TensorRole::kInput;
  rec.index = static_cast<uint16_t>(ts.inputs.size() - ctx->inputs_begin);
  describe(ts, w, t, &rec, content);
  InputTensor in;
  in.tensor = t;
  in.written = written;
  if (t.defined() && rec.status != TensorStatus::kNotHashed) {
    const char* reason = unhashable_reason(t);
    // An op that reads only metadata reads no contents: not hashed either, for that reason.
    if (!reason && ctx->info->metadata_only) reason = "metadata only: contents not read";
    HashMode mode = settings().hash;
    int64_t writer = tracer::kNoSeq;  // set when a write through another alias made it stale
    bool written_since = false;       // set when it was written in place since it was known
    if (reason) {
      rec.status = TensorStatus::kNotHashed;
      rec.reason = intern_literal(ts, w, reason);
      if (auto known = g_tensors.find(t)) rec.producer = known->producer;  // who made it
    } else if (mode == HashMode::kNone) {
      rec.status = TensorStatus::kSkipped;
    } else if (overwritten) {
      rec.status = TensorStatus::kNotHashed;
      rec.reason = intern_literal(ts, w, tracer::kReasonOverwritten);
    } else if (auto known = find_input(t, &writer, &written_since);
               known && known->status == TensorStatus::kUninitialized && mode == HashMode::kAll &&
               !view_only && !written && !ctx->info->collective &&
               (!ctx->root || ctx->root == ctx)) {
      // Memory from the `empty` family that the program reads at the top level: filled outside
      // torch's ops since (`torch.tensor([...])` and `as_tensor` copy Python data into an
      // `aten::empty`, a C++ program writes through `data_ptr`), or genuinely garbage, which is
      // a difference worth seeing too. Hashed as data from outside: no recorded op made these
      // contents. Not an op that writes into it (`index_put_`, `scatter_` into an `empty`
      // buffer, a collective receiving into one): that is how such buffers are filled.
      hash_input_read_now(ts, w, t, tracer::kNoSeq, &rec);
      // Said on the record (a fixed text): `tdbg nan` and `diff` then name the `empty` that
      // returned it rather than data from outside torch.
      if (rec.status == TensorStatus::kHashed && !ctx->info->lifts_fresh) {
        std::string text = tracer::kReasonUninitializedRead;
        if (known->producer != tracer::kNoSeq && known->producer < op->seq)
          text += " (seq -" + std::to_string(op->seq - known->producer) + ")";
        rec.reason = w->intern(text);
      }
    } else if (known) {
      if (known->status == TensorStatus::kUninitialized) {
        rec.status = TensorStatus::kUninitialized;
        rec.producer = known->producer;
      } else {
        // A known view keeps its kind: its hash comes from geometry, not values, and `tdbg
        // diff` must not compare it with a hash of values (a `.contiguous()` copy).
        rec.status = known->status == TensorStatus::kView ? TensorStatus::kView : TensorStatus::kKnown;
        rec.hash = known->hash;
        rec.producer = known->producer;
        rec.summary = known->summary;
      }
    } else if (mode == HashMode::kOutputs) {
      rec.status = TensorStatus::kSkipped;
    } else if (view_only) {
      // A view taken of memory whose contents are not known (written in place since: `o[3:] =
      // x` into an `empty` buffer, or a view of such a view: `buf[:, :t]`): the rest of it
      // may never have been written, so the whole is not hashed here; the first op that reads
      // the view hashes what the view covers. An op that wrote into it hashed what it wrote.
      rec.status = TensorStatus::kNotHashed;
      rec.reason = intern_literal(ts, w, written_since ? "written in place since; hashed where read"
                                                       : "not known yet; hashed where read");
      in.writer = writer;
    } else if (ctx->root && ctx->root != ctx && !is_caller_data(ctx->root, t)) {
      // A tensor no recorded op produced, met inside another op: a buffer that op allocated
      // natively, whose contents may be uninitialized. Never hashed, so that garbage can never
      // reach the chain; the enclosing op's outputs are hashed when it completes.
      rec.status = TensorStatus::kNotHashed;
      rec.reason = intern_literal(ts, w, "internal buffer of the enclosing op");
    } else {
      // Data no recorded op produced (NumPy, files, a DataLoader worker) or changed since;
      // changed by a recorded op through another alias (`p.data.mul_()`): that op produced it.
      hash_input_read_now(ts, w, t, writer, &rec, /*by_contents=*/true);
    }
  }
  in.hash = rec.hash;
  in.status = rec.status;
  in.reason = rec.reason;
  if (comparable(rec.status)) *content = hashing::hash_combine(*content, rec.hash);
  ts.inputs.push_back(std::move(in));
  op->tensors.push_back(rec);
}

// The table's entry of `t` when an op nested in `ctx`'s op hashed its current contents (only
// for an op whose work all goes through the dispatcher, see `OpInfo::composite`).
std::optional<TrackedTensor> output_of_nested_op(const OpContext* ctx, const at::Tensor& t) {
  if (!ctx->info->composite) return std::nullopt;
  auto known = g_tensors.find(t);
  if (!known || known->status != TensorStatus::kHashed || known->producer <= ctx->seq)
    return std::nullopt;
  return known;
}

// A tensor a collective writes (its result, maybe still in flight): not known until an op
// reads it, but remembered as written by the collective, so that the reader that hashes it
// names the collective as its producer: the values it brought in are the collective's.
void remember_collective_result(const at::Tensor& t, int64_t collective) {
  TrackedTensor pending;
  pending.status = TensorStatus::kNotHashed;
  pending.pending = true;
  pending.producer = collective;
  g_tensors.remember(t, pending);
}

void record_output(ThreadState& ts, tracer::Writer* w, OpContext* ctx, const at::Tensor& t,
                   uint16_t index, tracer::OpRecord* op, uint64_t* content) {
  TensorRecord rec;
  rec.role = tracer::TensorRole::kOutput;
  rec.index = index;
  describe(ts, w, t, &rec, content);
  if (t.defined() && rec.status != TensorStatus::kNotHashed) {
    const OpInfo* info = ctx->info;
    const char* reason = unhashable_reason(t);
    TrackedTensor state;
    state.producer = ctx->seq;
    if (reason) {
      // Not hashable (sparse, quantized, ...): remembered only for who made it.
      rec.status = TensorStatus::kNotHashed;
      rec.reason = intern_literal(ts, w, reason);
      state.status = TensorStatus::kNotHashed;
      g_tensors.remember(t, state);
    } else if (info->uninitialized_output && t.numel() > 0) {
      // (A tensor of no element holds nothing left uninitialized: it is hashed as data.)
      rec.status = TensorStatus::kUninitialized;
      state.status = TensorStatus::kUninitialized;
      g_tensors.remember(t, state);
    } else if (info->collective) {
      // The result of a collective may still be in flight: it is hashed by the first op that
      // reads it (which runs after the wait), never here.
      rec.status = TensorStatus::kNotHashed;
      rec.reason = intern_literal(ts, w, "collective result: hashed when next used");
      remember_collective_result(t, ctx->seq);
    } else if (settings().hash == HashMode::kNone) {
      rec.status = TensorStatus::kSkipped;
    } else if (info->storage_source) {
      // A tensor made onto a Storage: `torch.load` fills its storages from the file, but a
      // deepcopy sets a fresh, unwritten one and copies into it next. Not hashed here; the
      // first op that reads it hashes it as data from outside, and an op that overwrites it
      // (the deepcopy's `copy_`) never reads the garbage.
      rec.status = TensorStatus::kNotHashed;
      rec.reason = intern_literal(ts, w, "set onto a storage no op made; hashed where read");
      g_tensors.forget(t);
      op->tensors.push_back(rec);
      return;
    } else {
      // An output sharing storage with an input the op does not write is a view: its hash is
      // derived from the input's; one sharing a written input is new data (in-place, out=).
      const InputTensor* base = nullptr;
      bool writes_into_input = false;
      const InputTensor* inputs = ctx->inputs_data();
      for (size_t i = 0; i < ctx->input_count(); ++i) {
        const InputTensor& in = inputs[i];
        if (!in.tensor.defined() || !in.tensor.has_storage() || !t.has_storage()) continue;
        if (!t.is_alias_of(in.tensor)) continue;
        if (in.written && info->inplace_view &&
            (in.status == TensorStatus::kUninitialized || in.status == TensorStatus::kNotHashed)) {
          // A new geometry over the same contents, which are still unwritten memory (an `empty`
          // buffer transposed before it is filled, as linalg_eigvals does) or not known: never
          // hashed, so that garbage cannot reach the chain.
          rec.status = in.status;
          rec.reason = in.reason;
          if (in.status == TensorStatus::kUninitialized) {
            state.status = TensorStatus::kUninitialized;
            g_tensors.remember(t, state);
          } else {
            g_tensors.forget(t);
          }
          op->tensors.push_back(rec);
          return;
        }
        if (in.written) {
          writes_into_input = true;
          break;
        }
        if (!base) base = &in;
      }
      if (!writes_into_input && base && base->status == TensorStatus::kUninitialized) {
        rec.status = TensorStatus::kUninitialized;
        state.status = TensorStatus::kUninitialized;
      } else if (!writes_into_input && base && comparable(base->status)) {
        rec.status = TensorStatus::kView;
        rec.hash = view_hash(base->hash, t, base->tensor);
        state.status = TensorStatus::kView;
        state.hash = rec.hash;
      } else if (!writes_into_input && base && base->status == TensorStatus::kNotHashed) {
        // A view of something not hashed (an internal buffer, memory written through another
        // alias): not hashed either. Unknown to later readers, but where a recorded op wrote
        // into the base, remembered as written by it: the reader that hashes it names that op
        // (a KV cache filled by an op another run does not run).
        rec.status = TensorStatus::kNotHashed;
        rec.reason = base->reason;
        if (base->writer != tracer::kNoSeq) {
          TrackedTensor pending;
          pending.status = TensorStatus::kNotHashed;
          pending.pending = true;
          pending.producer = base->writer;
          g_tensors.remember(t, pending);
        } else {
          g_tensors.forget(t);
        }
        op->tensors.push_back(rec);
        return;
      } else {
        if (auto nested = output_of_nested_op(ctx, t)) {
          // A composite op returning what an op nested in it made (linear returns addmm's
          // output): that op hashed these contents already.
          rec.status = TensorStatus::kHashed;
          rec.hash = nested->hash;
          rec.summary = nested->summary;
        } else if (!hash_into(ts, w, t, &rec)) {
          g_tensors.forget(t);
          op->tensors.push_back(rec);
          return;
        }
        state.status = TensorStatus::kHashed;
        state.hash = rec.hash;
        state.summary = rec.summary;
        // What it wrote in place, for an alias of that memory made later (`writer_of_contents`).
        if (writes_into_input) g_tensors.note_written_contents(t, ctx->seq, rec.hash);
      }
      g_tensors.remember(t, state);
    }
  }
  if (comparable(rec.status)) *content = hashing::hash_combine(*content, rec.hash);
  op->tensors.push_back(rec);
}

// ---- Random generators -------------------------------------------------------------------

uint64_t generator_state_hash(at::Generator gen) {
  if (!gen.defined()) return 0;
  std::lock_guard<std::mutex> lock(gen.mutex());
  at::Tensor state = gen.get_state();
  if (!state.defined() || !state.is_contiguous()) return 0;
  return hashing::hash_bytes(state.data_ptr(), state.numel() * state.element_size(),
                             /*seed=*/0x72616e646f6dull);  // "random"
}

// The hash of the state of the generator `fn` will draw from: its explicit Generator argument,
// else the default generator of the op's device (first tensor input, else `device=`, else CPU).
uint64_t rng_hash(const OpInfo* info, c10::ArrayRef<const c10::IValue> inputs) {
  try {
    if (info->generator_arg >= 0 && size_t(info->generator_arg) < inputs.size() &&
        inputs[info->generator_arg].isGenerator())
      return generator_state_hash(inputs[info->generator_arg].toGenerator());
    c10::Device device(c10::kCPU);
    bool found = false;
    for (const c10::IValue& v : inputs) {
      if (v.isTensor() && v.toTensor().defined()) {
        device = v.toTensor().device();
        found = true;
        break;
      }
    }
    if (!found && info->device_arg >= 0 && size_t(info->device_arg) < inputs.size() &&
        inputs[info->device_arg].isDevice())
      device = inputs[info->device_arg].toDevice();
    if (device.is_cpu()) return generator_state_hash(at::detail::getDefaultCPUGenerator());
    if (device.is_cuda() && !device.has_index()) device = c10::Device(c10::kCUDA, 0);
    return generator_state_hash(at::globalContext().defaultGenerator(device));
  } catch (...) {
    return 0;
  }
}

// Each seed the default CPU generator had at the random ops, in order, when it changed: the
// seed and the seq of the first random op that drew with it (meta `seed_history`). A program
// that seeds after its model is built drew the model's init with torch's own random seed.
constexpr size_t kMaxSeeds = 64;
std::mutex g_seeds_mutex;
std::vector<std::pair<uint64_t, int64_t>> g_seeds;  // (seed, seq), at most kMaxSeeds
std::atomic<uint64_t> g_last_seed{0};
std::atomic<bool> g_any_seed{false};

void note_seed(int64_t seq) {
  uint64_t seed = 0;
  try {
    seed = at::detail::getDefaultCPUGenerator().current_seed();
  } catch (...) {
    return;
  }
  if (g_any_seed.load(std::memory_order_relaxed) &&
      g_last_seed.load(std::memory_order_relaxed) == seed)
    return;
  std::lock_guard<std::mutex> lock(g_seeds_mutex);
  if (g_any_seed.load() && g_last_seed.load() == seed) return;
  g_last_seed.store(seed);
  g_any_seed.store(true);
  if (g_seeds.size() < kMaxSeeds) g_seeds.emplace_back(seed, seq);
}

// Flags `op` random and records the state of the generator the op `info` with `inputs` draws
// from, into the op and its `content` hash.
void mark_random(const OpInfo* info, c10::ArrayRef<const c10::IValue> inputs,
                 tracer::OpRecord* op, uint64_t* content) {
  op->flags |= tracer::kOpRandom;
  op->rng = rng_hash(info, inputs);
  *content = hashing::hash_combine(*content, op->rng);
  note_seed(op->seq);
}

// ---- Flushing ----------------------------------------------------------------------------

// Folds the finished top-level op and everything nested in it into the thread's chain, in
// start order (tidx), and hands the records to the writer.
void flush_pending(ThreadState& ts) {
  tracer::Writer* w = writer();
  for (size_t i = 0; i < ts.pending_count; ++i) {
    ts.chain = hashing::hash_combine(ts.chain, ts.pending_content[i]);
    ts.pending[i].chain = ts.chain;
  }
  if (w) w->append_ops(ts.pending.data(), ts.pending_count);
  ts.pending_count = 0;
}

// The next pending record, cleared, with its vectors' capacity.
tracer::OpRecord& next_pending(ThreadState& ts) {
  if (ts.pending_count == ts.pending.size()) {
    ts.pending.emplace_back();
    ts.pending_content.push_back(0);
  }
  tracer::OpRecord& op = ts.pending[ts.pending_count++];
  std::vector<TensorRecord> tensors = std::move(op.tensors);
  std::vector<tracer::ArgRecord> args = std::move(op.args);
  tensors.clear();
  args.clear();
  op = tracer::OpRecord();
  op.tensors = std::move(tensors);
  op.args = std::move(args);
  return op;
}

void remember_forward(const at::RecordFunction& fn, const OpContext* ctx) {
  int64_t seq_nr = fn.seqNr();
  // Not a backward node's own range (it carries its forward op's number). Ops inside backward
  // count: reentrant checkpointing runs the forward again there, with grad mode on, and
  // backward then runs through the nodes that made.
  if (seq_nr < 0 || ctx->node) return;
  // The autograd node numbered `seq_nr` exists once the counter moved past it; the first op to
  // end after that (the innermost one that created it) is its forward op.
  if (static_cast<int64_t>(at::sequence_number::peek()) <= seq_nr) return;
  const uint64_t thread = fn.threadId();
  std::lock_guard<std::mutex> lock(g_forward_mutex);
  ForwardOp& slot = forward_slot(thread, seq_nr);
  if (slot.thread == thread && slot.seq_nr == seq_nr) return;  // the innermost op came first
  slot = ForwardOp{thread, seq_nr, ctx->seq, ctx->module};
}

bool in_step_window(int64_t step) {
  return step >= settings().steps.begin && step < settings().steps.end;
}

// With a `--steps` window, the ops' callback (for which torch boxes every op's arguments and
// results, and the hook builds each op's context) is on only while the steps counted are in
// the window: before and after it, a step costs about what an untraced one does. The regions'
// callback, which counts the steps, stays on. Once a thread steps optimizers of its own (its
// steps are its own count) the ops' callback stays on, and `start_op` tells each op's window.
// Ops that began while it was off are not seen, nor what they nest; one that began while it
// was on still ends through it.
at::CallbackHandle g_ops_callback = 0;  // set only with a window (0: the ops' callback stays on)
std::mutex g_ops_callback_mutex;
bool g_ops_callback_on = true;
std::atomic<bool> g_ops_callback_pinned{false};

void update_ops_callback() {
  if (g_ops_callback == 0) return;
  const bool on = g_ops_callback_pinned.load() || in_step_window(g_steps.load());
  std::lock_guard<std::mutex> lock(g_ops_callback_mutex);
  if (on == g_ops_callback_on) return;
  // Under the fork lock: torch switches it under its global callbacks' mutex.
  std::shared_lock<std::shared_mutex> fork_lock(g_record_function_switch);
  if (on)
    at::reenableCallback(g_ops_callback);
  else
    at::disableCallback(g_ops_callback);
  g_ops_callback_on = on;
}

bool python_loaded() {
  static const bool loaded = !python_version().empty();
  return loaded;
}

// Writes this process's rank in torch.distributed (meta `rank`, "RANK/WORLD_SIZE") once per
// database, at its first collective op: `tdbg diff` pairs the processes of two runs by rank,
// whatever order they started in. Launchers that set RANK (torchrun) are covered at start.
std::atomic<uint64_t> g_rank_generation{~uint64_t{0}};
void note_rank() {
  const uint64_t gen = writer_generation();
  if (g_rank_generation.exchange(gen) == gen) return;
  if (!python_loaded() || !thread_has_python()) return;
  const std::string rank = distributed_rank();
  tracer::Writer* w = writer();
  if (w && !rank.empty()) w->set_meta("rank", rank);
}

// Writes which DataLoader worker this process is (meta `worker`, "ID/NUM_WORKERS") once per
// database: workers start together, so `tdbg diff` pairs them by id, not by start order. A
// forked worker sets its id before it runs any op; a spawned one first unpickles its dataset
// (tensors in it: ops), so until an id is found it is asked again at the process's op 1, 2,
// 4, 8, ... (a few Python evaluations in all, in a process that is no worker too).
std::atomic<uint64_t> g_worker_generation{~uint64_t{0}};  // the database that has its answer
std::atomic<uint64_t> g_worker_asked_generation{~uint64_t{0}};
std::atomic<int64_t> g_worker_next_ask{0};
void note_worker() {
  const uint64_t gen = writer_generation();
  if (g_worker_generation.load(std::memory_order_relaxed) == gen) return;
  // (Read first: an exchange on every op would bounce the line between the threads.)
  if (g_worker_asked_generation.load(std::memory_order_relaxed) != gen &&
      g_worker_asked_generation.exchange(gen) != gen)
    g_worker_next_ask.store(0);
  int64_t due = g_worker_next_ask.load(std::memory_order_relaxed);
  const int64_t seq = g_next_seq.load(std::memory_order_relaxed);
  if (seq < due || !g_worker_next_ask.compare_exchange_strong(due, std::max<int64_t>(1, 2 * seq)))
    return;
  if (!python_loaded() || !thread_has_python()) return;
  const std::string worker = dataloader_worker();
  if (worker.empty()) return;
  if (g_worker_generation.exchange(gen) == gen) return;
  if (tracer::Writer* w = writer()) w->set_meta("worker", worker);
}

// ---- Callbacks ---------------------------------------------------------------------------

// Whether a range named `name` is an optimizer step: torch's "Optimizer.step#SGD.step", or the
// one opened for a C++ optimizer (on_cpp_step_begin).
bool is_step_range(const char* name) { return std::strncmp(name, "Optimizer.step#", 15) == 0; }

// Opens a region named `name` on the thread; returns its id (0 when not recording). A step
// region's `optimizer` is the identity of the optimizer stepping (0: unknown).
uint32_t open_region(ThreadState& ts, const std::string& name, uintptr_t optimizer = 0) {
  tracer::Writer* w = writer();
  if (!w) return 0;
  register_thread(ts, w);
  OpenRegion region;
  region.step = is_step_range(name.c_str());
  region.optimizer = optimizer;
  region.record.id = g_next_region.fetch_add(1);
  region.record.thread = ts.id;
  region.record.name = w->intern(name);
  region.record.kind = region.step ? tracer::RegionKind::kStep : tracer::RegionKind::kUser;
  region.record.start_seq = g_next_seq.load();
  region.record.step = current_step(ts);
  region.record.parent = ts.regions.empty() ? 0 : ts.regions.back().record.id;
  region.in_window = in_step_window(region.record.step);
  ts.regions.push_back(region);
  return region.record.id;
}

// The process's Python optimizers by identity, numbered from 1 in the order they first
// stepped; reset in a forked child (`hook_after_fork_child`), whose database counts its own.
std::mutex g_optimizers_mutex;
auto* g_optimizers = new std::unordered_map<uintptr_t, int>();  // never freed (exit order)

// Which of the process's Python optimizers `identity` is: 1 for the first to step.
int optimizer_index(uintptr_t identity) {
  std::lock_guard<std::mutex> lock(g_optimizers_mutex);
  return g_optimizers->emplace(identity, static_cast<int>(g_optimizers->size()) + 1).first->second;
}

std::unique_ptr<at::ObserverContext> start_region(const at::RecordFunction& fn, ThreadState& ts) {
  const bool step = is_step_range(fn.name());
  const uintptr_t optimizer = step && thread_has_python() ? python_optimizer_identity() : 0;
  const uint32_t id = open_region(ts, fn.name(), optimizer);
  if (id == 0) return nullptr;
  // What the step's hyperparameters are (a scheduler may have set lr since the last step).
  // The index counts the steps before a --steps window too, so that a GAN's second optimizer
  // is "2 of 2" whatever window was recorded.
  const int index = optimizer != 0 ? optimizer_index(optimizer) : 0;
  if (optimizer != 0 && ts.regions.back().in_window) {
    const std::string settings = python_optimizer_settings(optimizer, index);
    tracer::Writer* w = writer();
    if (!settings.empty() && w) ts.regions.back().settings = w->intern(settings);
  }
  auto ctx = std::make_unique<RegionContext>();
  ctx->thread = &ts;
  ctx->region = id;
  return ctx;
}

// Closes region `id` of the thread; an optimizer step region counts the step.
void close_region(ThreadState& ts, uint32_t id) {
  for (size_t i = ts.regions.size(); i-- > 0;) {
    if (ts.regions[i].record.id != id) continue;
    OpenRegion region = ts.regions[i];
    ts.regions.erase(ts.regions.begin() + i);
    region.record.end_seq = ts.last_seq >= region.record.start_seq ? ts.last_seq : kNoSeq;
    tracer::Writer* w = writer();
    if (w && region.in_window) w->append_region(region.record);
    if (w && region.in_window && region.settings != 0) {
      tracer::RegionRecord settings = region.record;
      settings.id = g_next_region.fetch_add(1);
      settings.name = region.settings;
      settings.kind = tracer::RegionKind::kOptimizer;
      settings.parent = region.record.id;
      w->append_region(settings);
    }
    if (region.step) {
      if (is_main_thread(ts)) {
        std::lock_guard<std::mutex> lock(g_step_mutex);
        g_steps.store(g_step_counter.on_step(region.optimizer));
      } else {
        ts.steps = ts.step_counter.on_step(region.optimizer);
        ts.own_steps = true;
        g_ops_callback_pinned.store(true);
      }
      update_ops_callback();
      note_thread_counts();  // a script may change them after import; the last step's count
    }
    return;
  }
}

void end_region(RegionContext* ctx) { close_region(*ctx->thread, ctx->region); }

// An internal op of `outer` (not recorded): noted for learning, and if it draws random numbers
// the state of its generator is recorded on `outer` (its first such draw).
void note_internal(const at::RecordFunction& fn, ThreadState& ts, OpContext* outer,
                   const OpInfo* info);

// The op's own arguments and results among what RecordFunction hands over. torch 1.13's boxed
// calls (the TorchScript interpreter) pass their whole stack: the values live below the op's
// arguments come first (a tensor still used after it), and the same values again before its
// results. The op's own are the last ones, as many as its schema has.
c10::ArrayRef<const c10::IValue> own_values(c10::ArrayRef<const c10::IValue> values,
                                             const OpInfo* info, bool results) {
  if (!info || !info->has_schema || info->varargs) return values;
  const size_t n = results ? info->returns : info->arg_kinds.size();
  return values.size() > n ? values.slice(values.size() - n) : values;
}

void note_internal(const at::RecordFunction& fn, ThreadState& ts, OpContext* outer,
                   const OpInfo* info) {
  outer->saw_internal = true;
  if (!info->random) return;
  outer->saw_random_internal = true;
  if (!outer->recorded || outer->pending_index >= ts.pending_count) return;
  tracer::OpRecord& op = ts.pending[outer->pending_index];
  if (op.flags & tracer::kOpRandom) return;
  c10::ArrayRef<const c10::IValue> inputs;
  if (fn.needsInputs()) inputs = own_values(fn.inputs(), info, false);
  mark_random(info, inputs, &op, &ts.pending_content[outer->pending_index]);
}

// Updates what `ctx`'s op is known to nest, at the end of one of its first calls.
void learn_internals(const OpContext* ctx) {
  OpInfo* info = ctx->info;
  if (ctx->below_autograd || info->internals.load(std::memory_order_relaxed) != kInternalsUnknown)
    return;
  if (ctx->saw_nested || ctx->saw_random_internal) {
    info->internals.store(kInternalsOther, std::memory_order_relaxed);
  } else if (ctx->saw_internal) {
    if (info->plain_calls.fetch_add(1, std::memory_order_relaxed) + 1 >= kLearningCalls)
      info->internals.store(kInternalsPlain, std::memory_order_relaxed);
  }
}

// Pushes `ctx` on the thread's stack of open ops and, for an op known to nest only internal
// ops, switches RecordFunction off until `end_op`. Last in `start_op`: nothing may throw
// after it, or RecordFunction would stay off with no op to switch it on again.
std::unique_ptr<at::ObserverContext> open_op(ThreadState& ts, std::unique_ptr<OpContext> ctx) {
  ts.stack.push_back(ctx.get());
  if (!ctx->below_autograd && !settings().config.internal_ops &&
      ctx->info->internals.load(std::memory_order_relaxed) == kInternalsPlain) {
    switch_record_function(false);
    ctx->record_function_off = true;
  }
  return ctx;
}

// Whether ops nested directly in `outer` start a location scope of their own: `outer` is no
// dispatcher op but a range around Python code (a custom autograd Function's forward, as
// reentrant checkpointing is; in backward, a node or the engine's wrapper, inside which hooks
// run), so its ops may come from other lines than its own.
bool starts_location_scope(const OpContext* outer) { return !outer->info->has_schema; }

// Whether the top-level op of an in-flight account has nothing that places it yet.
bool top_unplaced(const ThreadState::InFlightTop& top) {
  return top.fwd.load(std::memory_order_relaxed) == tracer::kNoSeq &&
         top.user_frame.load(std::memory_order_relaxed) == 0 &&
         top.stack.load(std::memory_order_relaxed) == 0;
}

// Makes the recorded op `op` (just opened, innermost) what this thread is inside, for
// `hook_in_flight`.
void publish_in_flight(ThreadState& ts, const tracer::OpRecord& op) {
  const int depth = op.depth;
  if (depth < ThreadState::kInFlight)
    ts.in_flight_names[depth].store(op.name, std::memory_order_relaxed);
  if (depth == 0) {
    auto& top = ts.in_flight_top;
    top.seq.store(op.seq, std::memory_order_relaxed);
    top.step.store(op.step, std::memory_order_relaxed);
    top.fwd.store(op.fwd, std::memory_order_relaxed);
    top.user_frame.store(op.user_frame, std::memory_order_relaxed);
    top.stack.store(op.stack, std::memory_order_relaxed);
    top.module.store(op.module, std::memory_order_relaxed);
    top.flags.store(op.flags, std::memory_order_relaxed);
  } else if (op.fwd != tracer::kNoSeq && top_unplaced(ts.in_flight_top)) {
    // A backward pass's engine range has no line; the node inside it knows its forward op.
    ts.in_flight_top.fwd.store(op.fwd, std::memory_order_relaxed);
  }
  ts.in_flight_depth.store(depth + 1, std::memory_order_release);
}

std::unique_ptr<at::ObserverContext> start_op(const at::RecordFunction& fn, ThreadState& ts,
                                              bool backward_range) {
  OpInfo* info = backward_range ? info_by_name_cached(fn.name(), /*backward=*/true,
                                                     ts.named_info_slots)
                                 : info_for(fn, ts.info_slots, ts.named_info_slots);
  if (info->ignored) return nullptr;
  backward_range = backward_range || info->backward;
  tracer::Writer* w = writer();
  if (!w) return nullptr;

  OpContext* outer = ts.stack.empty() ? nullptr : ts.stack.back();
  const bool below_autograd = !backward_range && c10::impl::tls_local_dispatch_key_set()
                                                     .excluded_.has_any(c10::autograd_dispatch_keyset);
  if (below_autograd && !settings().config.internal_ops) {
    // Inside the kernel of `outer`, or of an op on another thread that runs part of its work
    // on this intra-op worker. An autograd node is no kernel: the ops its backward calls below
    // autograd (torch::rand_like, torch::zeros_like in a C++ custom Function, which the C++
    // factories run with autograd excluded) are the backward's own.
    if (outer && !outer->below_autograd && !outer->node) {
      note_internal(fn, ts, outer, info);
      return nullptr;
    }
    if (!outer && at::in_parallel_region()) return nullptr;
  }
  if (outer) outer->saw_nested = true;

  auto ctx = std::make_unique<OpContext>();
  ctx->uncaught_exceptions = std::uncaught_exceptions();
  ctx->thread = &ts;
  ctx->info = info;
  ctx->below_autograd = below_autograd;
  ctx->node = backward_range;
  // The outermost recorded enclosing op: nested ops judge untracked inputs against its inputs
  // (a kernel's own buffers are no data). Not across a Python custom Function's forward (as
  // reentrant checkpointing's is): its body is the program's code, whose constants
  // (`torch.tensor(...)`, `from_numpy`) are data from outside as anywhere else.
  ctx->root = outer && !outer->info->python_forward ? outer->root : nullptr;
  if (outer) {
    ctx->record_parent = outer->recorded ? outer->seq : outer->record_parent;
    ctx->record_depth = outer->recorded ? outer->record_depth + 1 : outer->record_depth;
    ctx->backward = outer->backward;
    ctx->fwd = outer->fwd;
    ctx->module = outer->module;
    ctx->location = outer->location;
  }
  if (backward_range) {
    ctx->backward = true;
    ctx->location = SourceLocation();
    // The engine's wrapper range carries the node's sequence number but may not carry the
    // forward thread: CPU backward runs on the thread that ran the forward.
    uint64_t forward_thread = fn.forwardThreadId() ? fn.forwardThreadId() : fn.threadId();
    {
      std::lock_guard<std::mutex> lock(g_forward_mutex);
      const ForwardOp& slot = forward_slot(forward_thread, fn.seqNr());
      const bool found = slot.thread == forward_thread && slot.seq_nr == fn.seqNr();
      ctx->fwd = found ? slot.seq : kNoSeq;
      ctx->module = found ? slot.module : 0;
    }
    // The node inside the engine's wrapper range names the forward op: the wrapper (still
    // pending) and what else runs in it get the same link.
    OpContext* wrapper = ts.stack.empty() ? nullptr : ts.stack.back();
    if (wrapper && wrapper->backward && wrapper->fwd == kNoSeq && ctx->fwd != kNoSeq) {
      wrapper->fwd = ctx->fwd;
      wrapper->module = ctx->module;
      if (wrapper->recorded && wrapper->pending_index < ts.pending_count) {
        ts.pending[wrapper->pending_index].fwd = ctx->fwd;
        ts.pending[wrapper->pending_index].module = module_string(ctx->module);
      }
    }
  } else if (!outer) {
    ctx->module = current_module_id();
  }
  ctx->scope = !outer || starts_location_scope(outer) ? ctx.get() : outer->scope;

  if (info->collective) note_rank();

  int64_t step = current_step(ts);
  // Ops that rebuild a tensor received from another process run whenever the data arrives
  // (a DataLoader worker's batch): not recorded, so the op stream does not depend on arrival
  // order; the tensor is data from outside at its first use.
  ctx->recorded = info->selected && in_step_window(step) && !in_ipc_rebuild();
  if (!ctx->recorded) return open_op(ts, std::move(ctx));

  // The source location is the same for all the ops of a scope (a top-level op and what is
  // nested in it, down to a range that runs Python code of its own): taken once per scope, at
  // its first recorded op (so filtered-out ops cost nothing).
  OpContext* scope = ctx->scope;
  if (!ctx->backward && !scope->location_taken) {
    scope->location_taken = true;
    const bool stacks = settings().config.stacks;
    if (python_loaded()) {
      if (thread_has_python())
        scope->location = capture_python_stack(stacks, settings().config.modules);
      // The hooks may be new: installed by this capture, inside modules whose calls they
      // entered just now (a first op selected by --ops, nested in an op not recorded that
      // began before them).
      if (scope == ctx.get() || ctx->module == 0) {
        ctx->module = current_module_id();
        if (scope->module == 0) scope->module = ctx->module;
      }
    } else if (stacks) {
      // A C++ program running a TorchScript model: the script's lines, below the call site.
      scope->location = add_script_frames(capture_native_call_site(),
                                          [](const std::string&) { return true; });
    }
  }
  if (!ctx->backward) ctx->location = scope->location;
  // Backward ops keep their forward op's line (below, the `fwd` link), except where the
  // program's Python code runs in the backward pass: a tensor or module hook, a custom
  // Function's `backward`, checkpointing's recomputation (in a custom Function's backward, or
  // in a saved tensor's unpack hook inside any node). There the program's frame is inside
  // torch's `backward`, not the line that called it; only the code of the innermost frame is
  // read for each op a node runs, and a stack is captured when it is new. A recomputed op
  // runs in the module it ran in forward: the module hooks ran again.
  if (ctx->backward && scope == ctx.get() && outer && info->has_schema && python_loaded() &&
      settings().config.stacks && thread_has_python()) {
    const void* code = python_innermost_code();
    if (code != nullptr && code != ts.backward_plain_code) {
      SourceLocation here = capture_python_stack(true, settings().config.modules);
      if (here.user_frame != 0 && here.user_inside_library) {
        ctx->location = here;
        if (const uint32_t module = current_module_id()) ctx->module = module;
      } else {
        ts.backward_plain_code = code;  // torch's or the standard library's: the usual case
      }
    }
  }

  // A C++ custom Function's backward is the program's code, as its forward is: its ops get
  // their native call site (`MyFn::backward`), not the forward op's line (no op links them).
  if (ctx->backward && scope == ctx.get() && outer && outer->info->cpp_node && info->has_schema &&
      !python_loaded() && settings().config.stacks)
    ctx->location = capture_native_call_site();

  if (!ctx->root) ctx->root = ctx.get();
  register_thread(ts, w);
  note_worker();
  intern_info(info, w);
  ctx->seq = g_next_seq.fetch_add(1);
  ts.last_seq = ctx->seq;
  ctx->pending_index = ts.pending_count;
  ctx->inputs_begin = ctx->inputs_end = ts.inputs.size();
  tracer::OpRecord& op = next_pending(ts);
  op.seq = ctx->seq;
  op.thread = ts.id;
  op.tidx = ts.tidx++;
  op.parent = ctx->record_parent;
  op.depth = static_cast<uint16_t>(std::min(ctx->record_depth, 65535));
  op.name = info->name_id;
  op.step = step;
  op.module = module_string(ctx->module);
  op.stack = ctx->location.stack;
  op.user_frame = ctx->location.user_frame;
  op.fwd = ctx->fwd;
  op.region = ts.regions.empty() ? 0 : ts.regions.back().record.id;
  op.start_ns = monotonic_ns();
  if (ctx->backward) op.flags |= tracer::kOpBackward;
  if (info->writes) op.flags |= tracer::kOpInplace;
  if (info->collective) op.flags |= tracer::kOpCollective;
  if (info->uninitialized_output) op.flags |= tracer::kOpUninitOutput;
  publish_in_flight(ts, op);

  uint64_t content = info->name_hash;
  struct ReadingInputs {
    ThreadState& ts;
    ~ReadingInputs() { ts.reading_inputs = 0; }
  } reading{ts};
  ts.reading_inputs = ctx->pending_index + 1;
  c10::ArrayRef<const c10::IValue> inputs;
  if (fn.needsInputs()) inputs = own_values(fn.inputs(), info, false);
  const bool schema_args = info->has_schema && inputs.size() == info->arg_kinds.size();
  // A reused slot has capacity; a new one grows once, not through 1, 2, 4.
  if (op.tensors.capacity() < inputs.size() + 2) op.tensors.reserve(inputs.size() + 2);
  if (op.args.capacity() < inputs.size()) op.args.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const c10::IValue& v = inputs[i];
    ArgKind kind = schema_args ? info->arg_kinds[i] : ArgKind::kOther;
    bool tensor_like = kind == ArgKind::kTensorLike || v.isTensor() || v.isTensorList() ||
                       (v.isList() && !v.isIntList() && !v.isDoubleList() && !v.isBoolList() &&
                        !v.toListRef().empty() && v.toListRef()[0].isTensor());
    const std::optional<c10::IValue> number =
        tensor_like && v.isTensor() ? python_number(v.toTensor()) : std::nullopt;
    if (tensor_like && !number) {
      bool written = schema_args && info->arg_written[i];
      bool overwritten = schema_args && info->arg_overwritten[i];
      bool view_only = schema_args && info->arg_view_only[i];
      for_each_tensor(v, [&](const at::Tensor& t) {
        record_input(ts, w, ctx.get(), t, written, overwritten, view_only, &op, &content);
      });
      continue;
    }
    tracer::ArgRecord arg;
    arg.index = static_cast<uint16_t>(i);
    arg.name = schema_args ? info->arg_name_ids[i] : 0;
    uint64_t text_hash = 0;
    if (number)  // recorded as the number
      arg_value(ts, w, *number, ArgKind::kOther, &arg.value, &text_hash);
    else
      arg_value(ts, w, v, kind, &arg.value, &text_hash);
    op.args.push_back(arg);
    content = hashing::hash_combine(content, i);
    content = hashing::hash_combine(content, text_hash);
  }
  if (info->random) mark_random(info, inputs, &op, &content);
  ts.pending_content[ctx->pending_index] = content;
  ctx->inputs_end = ts.inputs.size();
  return open_op(ts, std::move(ctx));
}

void end_op(const at::RecordFunction& fn, OpContext* ctx) {
  ThreadState& ts = *ctx->thread;
  if (ctx->recorded) ts.in_flight_depth.store(ctx->record_depth, std::memory_order_relaxed);
  if (ctx->record_function_off) switch_record_function(true);
  learn_internals(ctx);
  // Normally the innermost open op; searched so that an unexpected order cannot corrupt.
  bool innermost = !ts.stack.empty() && ts.stack.back() == ctx;
  for (size_t i = ts.stack.size(); i-- > 0;) {
    if (ts.stack[i] == ctx) {
      ts.stack.erase(ts.stack.begin() + i);
      break;
    }
  }
  tracer::Writer* w = writer();
  if (ctx->recorded && w && ctx->pending_index < ts.pending_count &&
      ctx->inputs_end <= ts.inputs.size()) {
    tracer::OpRecord& op = ts.pending[ctx->pending_index];
    uint64_t& content = ts.pending_content[ctx->pending_index];
    op.end_ns = monotonic_ns();
    if (std::uncaught_exceptions() > ctx->uncaught_exceptions ||
        (ctx->info->python_forward && thread_has_python() && python_error_set()))
      op.flags |= tracer::kOpRaised;
    // Written inputs first: their storage's other tensors (`p` when the op wrote `p.data`) are
    // stale from now on, and the outputs recorded next are not. A collective writes all its
    // tensors (in place, maybe later), so an alias (`broadcast(p.data)`, then `p`) is too.
    if (settings().hash != HashMode::kNone)
      for (size_t i = ctx->inputs_begin; i < ctx->inputs_end; ++i)
        if (ts.inputs[i].written || ctx->info->collective)
          g_tensors.note_write(ts.inputs[i].tensor, ctx->seq);
    uint16_t index = 0;
    const std::vector<c10::IValue>& all_outputs = fn.outputs();
    for (const c10::IValue& v :
         own_values(c10::ArrayRef<const c10::IValue>(all_outputs.data(), all_outputs.size()),
                    ctx->info, true)) {
      for_each_tensor(v, [&](const at::Tensor& t) {
        record_output(ts, w, ctx, t, index++, &op, &content);
      });
    }
    if (ctx->info->collective)
      for (size_t i = ctx->inputs_begin; i < ctx->inputs_end; ++i)
        remember_collective_result(ts.inputs[i].tensor, ctx->seq);
    remember_forward(fn, ctx);
  }
  // The innermost op's inputs are the last range (an op ending out of order leaves its own
  // until the outermost op ends).
  if (ts.stack.empty()) {
    ts.inputs.clear();
    flush_pending(ts);
    // Thread counts for the run's metadata, read once early from a thread running ops (and
    // again at each step end, and after torch.set_num_threads: python_frames.cc), never at
    // exit. (Asking torch costs tens of microseconds: not per op.)
    if (!g_thread_counts_noted.load(std::memory_order_relaxed) &&
        !g_thread_counts_noted.exchange(true, std::memory_order_relaxed))
      note_thread_counts();
  } else if (innermost && ctx->recorded && ctx->inputs_begin <= ts.inputs.size()) {
    ts.inputs.resize(ctx->inputs_begin);
  }
}

// Whether the calling thread is one that a process group runs its collectives' work on
// (ProcessGroupGloo::runLoop, and the MPI and UCC groups' loops). Which of those threads runs
// which work item changes from run to run, so their ops (all_gather's copies out of its flat
// buffer) would pair up differently between two identical runs. They are the collective's
// implementation, like the ops a kernel dispatches for itself: not recorded. The collective's
// results are hashed where the program reads them. Found once per thread, from the symbols of
// its call stack (exported by libtorch).
bool on_collective_worker_thread() {
  void* frames[128];
  const int n = backtrace(frames, 128);
  for (int i = n - 1; i >= 0; --i) {  // the thread's entry is outermost
    Dl_info info;
    if (dladdr(frames[i], &info) && info.dli_sname != nullptr &&
        strstr(info.dli_sname, "ProcessGroup") != nullptr &&
        strstr(info.dli_sname, "runLoop") != nullptr)
      return true;
  }
  return false;
}

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  if (!recording()) return nullptr;
  ThreadState& ts = thread_state();
  if (ts.busy) return nullptr;
  BusyGuard busy(ts);
  if (ts.collective_worker < 0) ts.collective_worker = on_collective_worker_thread() ? 1 : 0;
  if (ts.collective_worker == 1) return nullptr;
  try {
    switch (fn.scope()) {
      case at::RecordScope::USER_SCOPE: return start_region(fn, ts);
      case at::RecordScope::BACKWARD_FUNCTION: return start_op(fn, ts, /*backward_range=*/true);
      default: return start_op(fn, ts, /*backward_range=*/false);
    }
  } catch (...) {
    return nullptr;
  }
}

void on_end(const at::RecordFunction& fn, at::ObserverContext* ctx_base) {
  if (!ctx_base) return;
  ThreadState& ts = thread_state();
  if (ts.busy) return;
  BusyGuard busy(ts);
  try {
    if (fn.scope() == at::RecordScope::USER_SCOPE)
      end_region(static_cast<RegionContext*>(ctx_base));
    else
      end_op(fn, static_cast<OpContext*>(ctx_base));
  } catch (...) {
  }
}

// ---- C++ optimizer steps from libtdbg_preload.so ------------------------------------------

// A C++ program's torch::optim step opens a step region like Python's "Optimizer.step#SGD.step"
// range, so its ops get step numbers, `--steps` windows work and the report shows steps.
void on_cpp_step_begin(void*, const char* optimizer, const void* self) {
  if (!recording()) return;
  ThreadState& ts = thread_state();
  try {
    ts.cpp_steps.push_back(open_region(ts, std::string("Optimizer.step#") + optimizer + ".step",
                                       reinterpret_cast<uintptr_t>(self)));
  } catch (...) {
    ts.cpp_steps.push_back(0);
  }
}

void on_cpp_step_end(void*, const char*) {
  ThreadState& ts = thread_state();
  if (ts.cpp_steps.empty()) return;
  const uint32_t id = ts.cpp_steps.back();
  ts.cpp_steps.pop_back();
  if (id != 0) close_region(ts, id);
}

tdbg_step_sink g_step_sink{on_cpp_step_begin, on_cpp_step_end, nullptr};
using SetStepSink = void (*)(const tdbg_step_sink*);

SetStepSink find_step_sink_setter() {
  return reinterpret_cast<SetStepSink>(dlsym(RTLD_DEFAULT, "tdbg_preload_set_step_sink"));
}

// ---- GPU events from libtdbg_preload.so ----------------------------------------------------

std::atomic<uint32_t> g_next_gpu_module{1};

void on_gpu_module(void*, const char* kind, const char* name, const void* image, size_t size) {
  try {
    tracer::Writer* w = writer();
    if (!w) return;
    tracer::ModuleRecord m;
    m.id = g_next_gpu_module.fetch_add(1);
    m.kind = w->intern(kind ? kind : "");
    m.name = w->intern(name ? name : "");
    m.hash = image && size ? hashing::hash_bytes(image, size) : 0;
    m.size = static_cast<int64_t>(size);
    m.time_ns = monotonic_ns();
    w->append_module(m);
  } catch (...) {
  }
}

// A kernel launch belongs to the innermost recorded op open on the launching thread.
void on_gpu_kernel(void*, const char* name, uint32_t gx, uint32_t gy, uint32_t gz, uint32_t bx,
                   uint32_t by, uint32_t bz, uint32_t shared_mem, uint64_t stream) {
  try {
    tracer::Writer* w = writer();
    if (!w) return;
    ThreadState& ts = thread_state();
    tracer::KernelRecord k;
    if (!ts.stack.empty()) {
      const OpContext* top = ts.stack.back();
      k.op = top->recorded ? top->seq : top->record_parent;
    }
    k.name = w->intern(name ? name : "");
    k.grid = w->intern(std::to_string(gx) + "," + std::to_string(gy) + "," + std::to_string(gz));
    k.block = w->intern(std::to_string(bx) + "," + std::to_string(by) + "," + std::to_string(bz));
    k.shared_mem = shared_mem;
    k.stream = stream;
    k.start_ns = monotonic_ns();
    w->append_kernel(k);
  } catch (...) {
  }
}

tdbg_gpu_sink g_gpu_sink{on_gpu_module, on_gpu_kernel, nullptr};

using SetGpuSink = void (*)(const tdbg_gpu_sink*);

SetGpuSink find_gpu_sink_setter() {
  return reinterpret_cast<SetGpuSink>(dlsym(RTLD_DEFAULT, "tdbg_preload_set_gpu_sink"));
}

}  // namespace

void detach_gpu_sink() {
  if (SetStepSink set = find_step_sink_setter()) set(nullptr);
  if (SetGpuSink set = find_gpu_sink_setter()) set(nullptr);
}

void hook_prepare_fork() {
  g_record_function_switch.lock();
  g_info_mutex.lock();
  g_forward_mutex.lock();
  g_tensors.mutex().lock();
}

void hook_after_fork_parent() {
  g_tensors.mutex().unlock();
  g_forward_mutex.unlock();
  g_info_mutex.unlock();
  g_record_function_switch.unlock();
}

namespace {
// Locks `g_thread_states_mutex` at the close. A faulting thread may hold it (stopped while
// registering): then, after 100 ms (another thread registering holds it for microseconds),
// false.
bool lock_thread_states_at_close(std::unique_lock<std::mutex>& lock) {
  for (int tries = 0; !lock.try_lock(); ++tries) {
    if (tries == 100) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}
}  // namespace

std::string hook_in_flight() {
  std::unique_lock<std::mutex> lock(g_thread_states_mutex, std::defer_lock);
  if (!lock_thread_states_at_close(lock)) return "";
  const uint64_t gen = g_fork_generation.load(std::memory_order_relaxed);
  std::string out;
  for (const ThreadState* s : g_thread_states) {
    if (s->fork_generation != gen || !s->registered) continue;
    const int depth = s->in_flight_depth.load(std::memory_order_acquire);
    if (depth <= 0) continue;
    const auto& top = s->in_flight_top;
    std::string names;
    for (int d = 0; d < std::min(depth, ThreadState::kInFlight); ++d)
      names += (d ? "," : "") + std::to_string(s->in_flight_names[d].load(std::memory_order_relaxed));
    out += std::string(out.empty() ? "[" : ",") + "{\"thread\":" + std::to_string(s->id) +
           ",\"depth\":" + std::to_string(depth) + ",\"names\":[" + names + "]" +
           ",\"seq\":" + std::to_string(top.seq.load(std::memory_order_relaxed)) +
           ",\"step\":" + std::to_string(top.step.load(std::memory_order_relaxed)) +
           ",\"fwd\":" + std::to_string(top.fwd.load(std::memory_order_relaxed)) +
           ",\"user_frame\":" + std::to_string(top.user_frame.load(std::memory_order_relaxed)) +
           ",\"stack\":" + std::to_string(top.stack.load(std::memory_order_relaxed)) +
           ",\"module\":" + std::to_string(top.module.load(std::memory_order_relaxed)) +
           ",\"flags\":" + std::to_string(top.flags.load(std::memory_order_relaxed)) + "}";
  }
  return out.empty() ? out : out + "]";
}

void hook_write_unfinished(int tid) {
  ThreadState* ts = nullptr;
  {
    std::unique_lock<std::mutex> lock(g_thread_states_mutex, std::defer_lock);
    if (!lock_thread_states_at_close(lock)) return;
    const uint64_t gen = g_fork_generation.load(std::memory_order_relaxed);
    for (ThreadState* s : g_thread_states)
      if (s->tid == tid && s->fork_generation == gen) ts = s;
  }
  if (ts == nullptr || ts->pending_count == 0) return;
  const int64_t now = monotonic_ns();
  if (ts->busy) {
    // Stopped inside the hook itself: its records may be half written; leave them, unless it
    // was reading an op's inputs (the op's tensors so far are whole records).
    const size_t reading = ts->reading_inputs;
    if (reading == 0 || reading > ts->pending_count) return;
    tracer::OpRecord& op = ts->pending[reading - 1];
    op.flags |= tracer::kOpUnfinished | tracer::kOpInputsIncomplete;
    op.end_ns = now;
  }
  for (const OpContext* ctx : ts->stack) {
    if (!ctx->recorded || ctx->pending_index >= ts->pending_count) continue;
    tracer::OpRecord& op = ts->pending[ctx->pending_index];
    op.flags |= tracer::kOpUnfinished;
    op.end_ns = now;  // it ran at least until the close
  }
  flush_pending(*ts);
}

int64_t hook_main_step() { return g_steps.load(std::memory_order_relaxed); }

std::string seed_history() {
  std::lock_guard<std::mutex> lock(g_seeds_mutex);
  std::string text;
  for (const auto& [seed, seq] : g_seeds)
    text += (text.empty() ? "" : ",") + std::to_string(seed) + "@" + std::to_string(seq);
  return text;
}

int64_t hook_after_fork_child() {
  const int64_t forked_at_step = g_steps.load();
  {
    // The other threads do not exist here; the one that forked registers again.
    new (&g_thread_states_mutex) std::mutex();
    g_thread_states.clear();
  }
  g_tensors.mutex().unlock();
  g_forward_mutex.unlock();
  g_info_mutex.unlock();
  new (&g_record_function_switch) std::shared_mutex();
  new (&g_ops_callback_mutex) std::mutex();
  // Another thread may have held an op's intern lock at the fork: it does not exist here.
  for (auto& entry : g_infos) new (&entry.second->intern_mutex) std::mutex();
  // What the parent knew of its tensors holds in the child (a DataLoader worker reads the
  // dataset's tensors): hashes carried, so that a view of one (`self.x[i]`) has a hash that
  // tells which part it is; the ops that made them are the parent's.
  g_tensors.forget_producers();
  std::fill(g_forward.begin(), g_forward.end(), ForwardOp());
  g_next_seq.store(0);
  g_next_thread.store(0);
  g_next_region.store(1);
  g_steps.store(0);
  new (&g_step_mutex) std::mutex();
  g_step_counter.reset();
  // Another thread may have been numbering an optimizer at the fork: the map may be half
  // written. Leaked, as it is at exit.
  new (&g_optimizers_mutex) std::mutex();
  g_optimizers = new std::unordered_map<uintptr_t, int>();
  new (&g_seeds_mutex) std::mutex();  // the child's seeds are its own database's
  g_seeds.clear();
  g_any_seed.store(false);
  update_ops_callback();  // the child's steps count from 0
  g_fork_generation.fetch_add(1);
  python_frames_after_fork_child();
  native_frames_after_fork_child();
  return forked_at_step;
}

void install_dispatch_hook() {
  // Without libtdbg_preload.so (e.g. this library LD_PRELOADed by hand) the setter is absent
  // and no GPU events are recorded.
  if (settings().config.gpu) {
    if (SetGpuSink set = find_gpu_sink_setter()) set(&g_gpu_sink);
  }
  if (SetStepSink set = find_step_sink_setter()) set(&g_step_sink);
  // A program without Python gets C++ call sites, from a walk of its native stack per op.
  if (!python_loaded() && settings().config.stacks) prepare_native_stack();
  at::addGlobalCallback(
      at::RecordFunctionCallback(on_start, on_end).scopes({at::RecordScope::USER_SCOPE}));
  const at::CallbackHandle ops = at::addGlobalCallback(
      at::RecordFunctionCallback(on_start, on_end)
          .needsInputs(true)
          .needsOutputs(true)
          .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION}));
  const interpose::StepWindow& window = settings().steps;
  if (window.begin > 0 || window.end < INT64_MAX) {
    g_ops_callback = ops;
    update_ops_callback();
  }
}

}  // namespace tdbg::torchhook

