// Source locations of ops: the Python stack through the CPython API resolved with dlsym at run
// time (so the library has no compile-time or link-time dependency on Python) and the injected
// nn.Module hooks. The call site of ops in C++ programs is native_frames.cc's.
#include "interpose/torch/python_frames.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "hashing/tensor_hash.h"
#include "interpose/torch/script_frames.h"
#include "interpose/torch/session.h"
#include "interpose/torch_api.h"

namespace tdbg::torchhook {
namespace {

using PyObject = void;

// The few CPython functions the hook needs, all part of the stable C API of 3.9+.
struct PythonApi {
  int (*Py_IsInitialized)() = nullptr;
  int (*Py_IsFinalizing)() = nullptr;  // _Py_IsFinalizing before 3.13
  void* (*PyGILState_GetThisThreadState)() = nullptr;
  int (*PyGILState_Ensure)() = nullptr;
  void (*PyGILState_Release)(int) = nullptr;
  PyObject* (*PyEval_GetFrame)() = nullptr;
  PyObject* (*PyFrame_GetCode)(PyObject*) = nullptr;
  int (*PyFrame_GetLineNumber)(PyObject*) = nullptr;
  int (*PyFrame_GetLasti)(PyObject*) = nullptr;  // 3.11+; optional (line cache)
  PyObject* (*PyFrame_GetBack)(PyObject*) = nullptr;
  PyObject* (*PyObject_GetAttrString)(PyObject*, const char*) = nullptr;
  const char* (*PyUnicode_AsUTF8)(PyObject*) = nullptr;
  void (*Py_IncRef)(PyObject*) = nullptr;
  void (*Py_DecRef)(PyObject*) = nullptr;
  void (*PyErr_Fetch)(PyObject**, PyObject**, PyObject**) = nullptr;
  void (*PyErr_Restore)(PyObject*, PyObject*, PyObject*) = nullptr;
  void (*PyErr_Clear)() = nullptr;
  PyObject* (*PyImport_GetModuleDict)() = nullptr;
  PyObject* (*PyDict_GetItemString)(PyObject*, const char*) = nullptr;
  PyObject* (*PyDict_New)() = nullptr;
  PyObject* (*PyRun_StringFlags)(const char*, int, PyObject*, PyObject*, void*) = nullptr;
  // Optional: compiled under a file name of its own, tdbg's code reads as tdbg's in a
  // traceback (else "<string>").
  PyObject* (*Py_CompileStringExFlags)(const char*, const char*, int, void*, int) = nullptr;
  PyObject* (*PyEval_EvalCode)(PyObject*, PyObject*, PyObject*) = nullptr;
  int (*PyObject_IsTrue)(PyObject*) = nullptr;
  const char* (*Py_GetVersion)() = nullptr;
  // Optional (not part of `complete`): the optimizer identity only.
  PyObject* (*PyMapping_GetItemString)(PyObject*, const char*) = nullptr;
  PyObject* (*PyTuple_GetItem)(PyObject*, long) = nullptr;  // Py_ssize_t
  long (*PyTuple_Size)(PyObject*) = nullptr;
  // Optional: the bytes of a name that is not UTF-8 (a Latin-1 file name, which Python holds
  // with surrogate escapes).
  PyObject* (*PyUnicode_EncodeFSDefault)(PyObject*) = nullptr;
  char* (*PyBytes_AsString)(PyObject*) = nullptr;
  // Optional: the files the program opens for reading (`audit_open`).
  int (*PySys_AddAuditHook)(int (*)(const char*, PyObject*, void*), void*) = nullptr;
  int (*PyGILState_Check)() = nullptr;
  long (*PyLong_AsLong)(PyObject*) = nullptr;
  bool complete = false;
};

template <typename F>
void resolve(F** slot, const char* name, bool* ok) {
  *slot = reinterpret_cast<F*>(dlsym(RTLD_DEFAULT, name));
  if (!*slot) *ok = false;
}

const PythonApi& api() {
  static const PythonApi table = [] {
    PythonApi a;
    bool ok = true;
    resolve(&a.Py_IsInitialized, "Py_IsInitialized", &ok);
    a.Py_IsFinalizing = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "Py_IsFinalizing"));
    if (!a.Py_IsFinalizing)
      a.Py_IsFinalizing = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "_Py_IsFinalizing"));
    resolve(&a.PyGILState_GetThisThreadState, "PyGILState_GetThisThreadState", &ok);
    resolve(&a.PyGILState_Ensure, "PyGILState_Ensure", &ok);
    resolve(&a.PyGILState_Release, "PyGILState_Release", &ok);
    resolve(&a.PyEval_GetFrame, "PyEval_GetFrame", &ok);
    resolve(&a.PyFrame_GetCode, "PyFrame_GetCode", &ok);
    resolve(&a.PyFrame_GetLineNumber, "PyFrame_GetLineNumber", &ok);
    a.PyFrame_GetLasti =
        reinterpret_cast<int (*)(PyObject*)>(dlsym(RTLD_DEFAULT, "PyFrame_GetLasti"));
    resolve(&a.PyFrame_GetBack, "PyFrame_GetBack", &ok);
    resolve(&a.PyObject_GetAttrString, "PyObject_GetAttrString", &ok);
    resolve(&a.PyUnicode_AsUTF8, "PyUnicode_AsUTF8", &ok);
    resolve(&a.Py_IncRef, "Py_IncRef", &ok);
    resolve(&a.Py_DecRef, "Py_DecRef", &ok);
    resolve(&a.PyErr_Fetch, "PyErr_Fetch", &ok);
    resolve(&a.PyErr_Restore, "PyErr_Restore", &ok);
    resolve(&a.PyErr_Clear, "PyErr_Clear", &ok);
    resolve(&a.PyImport_GetModuleDict, "PyImport_GetModuleDict", &ok);
    resolve(&a.PyDict_GetItemString, "PyDict_GetItemString", &ok);
    resolve(&a.PyDict_New, "PyDict_New", &ok);
    resolve(&a.PyRun_StringFlags, "PyRun_StringFlags", &ok);
    a.Py_CompileStringExFlags =
        reinterpret_cast<PyObject* (*)(const char*, const char*, int, void*, int)>(
            dlsym(RTLD_DEFAULT, "Py_CompileStringExFlags"));
    a.PyEval_EvalCode = reinterpret_cast<PyObject* (*)(PyObject*, PyObject*, PyObject*)>(
        dlsym(RTLD_DEFAULT, "PyEval_EvalCode"));
    resolve(&a.PyObject_IsTrue, "PyObject_IsTrue", &ok);
    resolve(&a.Py_GetVersion, "Py_GetVersion", &ok);
    a.PyMapping_GetItemString = reinterpret_cast<PyObject* (*)(PyObject*, const char*)>(
        dlsym(RTLD_DEFAULT, "PyMapping_GetItemString"));
    a.PyTuple_GetItem =
        reinterpret_cast<PyObject* (*)(PyObject*, long)>(dlsym(RTLD_DEFAULT, "PyTuple_GetItem"));
    a.PyTuple_Size = reinterpret_cast<long (*)(PyObject*)>(dlsym(RTLD_DEFAULT, "PyTuple_Size"));
    a.PyUnicode_EncodeFSDefault = reinterpret_cast<PyObject* (*)(PyObject*)>(
        dlsym(RTLD_DEFAULT, "PyUnicode_EncodeFSDefault"));
    a.PyBytes_AsString = reinterpret_cast<char* (*)(PyObject*)>(dlsym(RTLD_DEFAULT, "PyBytes_AsString"));
    a.PySys_AddAuditHook = reinterpret_cast<int (*)(int (*)(const char*, PyObject*, void*), void*)>(
        dlsym(RTLD_DEFAULT, "PySys_AddAuditHook"));
    a.PyLong_AsLong = reinterpret_cast<long (*)(PyObject*)>(dlsym(RTLD_DEFAULT, "PyLong_AsLong"));
    a.PyGILState_Check = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "PyGILState_Check"));
    a.complete = ok;
    return a;
  }();
  return table;
}

// A SIGINT that came while tdbg's own Python code ran raised its KeyboardInterrupt there (the
// handler runs at the next bytecode of the main thread, whatever code that is): given back, so
// that the program's own next bytecode raises it, as it would have without tdbg (t143: Ctrl-C
// lost in 5 of 9 tries). Call with the exception pending, before clearing it.
void rearm_interrupt() {
  static const auto matches =
      reinterpret_cast<int (*)(PyObject*)>(dlsym(RTLD_DEFAULT, "PyErr_ExceptionMatches"));
  static const auto interrupt =
      reinterpret_cast<PyObject**>(dlsym(RTLD_DEFAULT, "PyExc_KeyboardInterrupt"));
  static const auto set_interrupt =
      reinterpret_cast<void (*)()>(dlsym(RTLD_DEFAULT, "PyErr_SetInterrupt"));
  if (matches && interrupt && *interrupt && set_interrupt && matches(*interrupt)) set_interrupt();
}

// Holds the GIL for a stretch of tdbg's own calls into Python, with the thread's pending
// exception (the program's) put aside, and puts it back at the end: PyErr_Restore replaces
// whatever exception tdbg's calls left.
class PythonScope {
 public:
  PythonScope() : py_(api()), gil_(py_.PyGILState_Ensure()) {
    py_.PyErr_Fetch(&type_, &value_, &trace_);
  }
  ~PythonScope() {
    py_.PyErr_Restore(type_, value_, trace_);
    py_.PyGILState_Release(gil_);
  }
  PythonScope(const PythonScope&) = delete;
  PythonScope& operator=(const PythonScope&) = delete;

 private:
  const PythonApi& py_;
  const int gil_;
  PyObject *type_ = nullptr, *value_ = nullptr, *trace_ = nullptr;
};

constexpr int kPyFileInput = 257;  // Py_file_input
constexpr int kMaxFrames = 96;     // deeper stacks keep their innermost frames

// What the hook remembers of a code object. Only touched with the GIL held, which serializes
// every access; the code object is kept alive by a reference so its address is never reused.
struct CodeInfo {
  std::string file;
  std::string function;
  bool user = false;
  bool classified = false;      // torch's directory was known when `user` was decided
  // multiprocessing's BaseProcess._bootstrap: in a forked child (a DataLoader or Pool worker)
  // the frames outside it are the parent's, which the child copied but does not run.
  bool process_start = false;
  uint64_t generation = 0;      // writer generation of the two ids below
  tracer::StringId file_id = 0;
  tracer::StringId function_id = 0;
  // Line of each bytecode offset seen: PyFrame_GetLineNumber scans the code's line table
  // from the start, which was the largest single cost of a stack capture.
  std::unordered_map<int, int> lines;
};

struct FrameKey {
  tracer::FrameId parent;
  const CodeInfo* code;
  int line;
  bool operator==(const FrameKey& o) const {
    return parent == o.parent && code == o.code && line == o.line;
  }
};
struct FrameKeyHash {
  size_t operator()(const FrameKey& k) const {
    return (size_t(k.parent) * 1000003u) ^ (reinterpret_cast<uintptr_t>(k.code) >> 4) ^
           (size_t(k.line) << 20);
  }
};

// All guarded by the GIL.
std::unordered_map<PyObject*, CodeInfo> g_codes;
std::unordered_map<FrameKey, tracer::FrameId, FrameKeyHash> g_frames;
uint64_t g_frames_generation = 0;
// The source files whose identity the current writer has been given (meta `source:<path>`).
std::unordered_set<std::string> g_files_written;
std::string g_torch_dir;   // ".../torch/" once known
std::string g_functorch_dir;  // its sibling ".../functorch/" (a package of its own in torch 1.13)
std::string g_stdlib_dir;  // ".../python3.11/" once known
bool g_dirs_known = false;
std::atomic<bool> g_hooks_installed{false};
bool g_hooks_failed = false;

// The text of a str object: UTF-8, or for a name that is not (surrogate escapes of the bytes
// of a Latin-1 file name) its bytes as the file system has them; "" for anything else.
std::string unicode_text(PyObject* value) {
  const PythonApi& py = api();
  if (const char* text = py.PyUnicode_AsUTF8(value)) return text;
  py.PyErr_Clear();
  std::string out;
  if (py.PyUnicode_EncodeFSDefault && py.PyBytes_AsString) {
    if (PyObject* bytes = py.PyUnicode_EncodeFSDefault(value)) {
      if (const char* raw = py.PyBytes_AsString(bytes)) out = raw;
      py.Py_DecRef(bytes);
    }
    py.PyErr_Clear();
  }
  return out;
}

std::string module_dir(PyObject* modules, const char* name) {
  const PythonApi& py = api();
  PyObject* mod = py.PyDict_GetItemString(modules, name);  // borrowed
  if (!mod) return "";
  PyObject* file = py.PyObject_GetAttrString(mod, "__file__");
  if (!file) {
    py.PyErr_Clear();
    return "";
  }
  const std::string path = unicode_text(file);
  py.Py_DecRef(file);
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash + 1);
}

void learn_dirs() {
  if (g_dirs_known) return;
  const PythonApi& py = api();
  PyObject* modules = py.PyImport_GetModuleDict();
  if (!modules) return;
  if (g_stdlib_dir.empty()) g_stdlib_dir = module_dir(modules, "os");
  if (g_torch_dir.empty()) {
    g_torch_dir = module_dir(modules, "torch");
    if (g_torch_dir.size() > 6) g_functorch_dir = g_torch_dir.substr(0, g_torch_dir.size() - 6) + "functorch/";
  }
  g_dirs_known = !g_torch_dir.empty() && !g_stdlib_dir.empty();
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return !prefix.empty() && s.compare(0, prefix.size(), prefix) == 0;
}

// A frame is the user's unless it is torch's own code (functorch's too), the standard library
// (not its site-packages), frozen import machinery or code torch.fx generated (a
// GraphModule's forward, `<eval_with_key>.N`: no file the user can open; its caller is named).
bool is_user_file(const std::string& file) {
  if (starts_with(file, g_torch_dir) || starts_with(file, g_functorch_dir)) return false;
  if (file.rfind("<frozen", 0) == 0 || file.rfind("<eval_with_key>", 0) == 0) return false;
  if (starts_with(file, g_stdlib_dir) && file.find("-packages/") == std::string::npos) return false;
  return true;
}

std::string attr_text(PyObject* obj, const char* name) {
  const PythonApi& py = api();
  PyObject* value = py.PyObject_GetAttrString(obj, name);
  if (!value) {
    py.PyErr_Clear();
    return "";
  }
  std::string out = unicode_text(value);
  py.Py_DecRef(value);
  return out;
}

// `file` without its `.` and `dir/..` parts (Python names a script run as `../train.py` from
// `exp/` as `/work/exp/../train.py`), where that names the same file: the same script run from
// two folders is one file in both runs' stacks. (Through a symbolic link, `link/..` is the
// parent of the link's target, and the path is kept.)
std::string normal_path(const std::string& file) {
  if (file.empty() || file[0] != '/' ||
      (file.find("/./") == std::string::npos && file.find("/../") == std::string::npos &&
       file.find("//") == std::string::npos))
    return file;
  std::error_code error;
  const std::filesystem::path normal = std::filesystem::path(file).lexically_normal();
  return std::filesystem::equivalent(file, normal, error) && !error ? normal.string() : file;
}

CodeInfo* code_info(PyObject* code) {
  auto it = g_codes.find(code);
  if (it == g_codes.end()) {
    CodeInfo info;
    info.file = normal_path(attr_text(code, "co_filename"));
    info.function = attr_text(code, "co_qualname");
    if (info.function.empty()) info.function = attr_text(code, "co_name");
    const std::string kProcessFile = "multiprocessing/process.py";
    info.process_start =
        info.file.size() >= kProcessFile.size() &&
        info.file.compare(info.file.size() - kProcessFile.size(), kProcessFile.size(),
                          kProcessFile) == 0 &&
        (info.function == "BaseProcess._bootstrap" || info.function == "_bootstrap");
    api().Py_IncRef(code);  // keeps the address from being reused while cached
    it = g_codes.emplace(code, std::move(info)).first;
  }
  CodeInfo& info = it->second;
  if (!info.classified) {
    learn_dirs();
    info.user = is_user_file(info.file);
    info.classified = g_dirs_known;
  }
  return &info;
}

// The current line of `frame`, whose code is `code`: cached per bytecode offset where the
// interpreter tells the offset (the code object is kept alive by `code_info`, so the cache
// stays right).
int line_number(const PythonApi& py, PyObject* frame, CodeInfo* code) {
  if (!py.PyFrame_GetLasti) return py.PyFrame_GetLineNumber(frame);
  const int lasti = py.PyFrame_GetLasti(frame);
  auto it = code->lines.find(lasti);
  if (it != code->lines.end()) return it->second;
  const int line = py.PyFrame_GetLineNumber(frame);
  if (lasti >= 0) code->lines.emplace(lasti, line);
  return line;
}

// The last Python stack captured on a thread, outermost frame first: each frame's code (kept
// alive by `code_info`), bytecode offset, frame id, and the innermost user frame at or above it.
// Consecutive ops mostly share all or most of their stack, so a capture looks up only the
// frames below the part it shares with the last one.
struct StackMemo {
  uint64_t generation = ~uint64_t{0};  // writer generation of the ids; other: empty
  int n = 0;
  PyObject* codes[kMaxFrames];
  int lastis[kMaxFrames];
  tracer::FrameId ids[kMaxFrames];
  tracer::FrameId user_frames[kMaxFrames];
  bool user_inside_library[kMaxFrames];
  bool library_outside[kMaxFrames];  // a frame outside the user's code, up to this one
};
thread_local StackMemo t_stack_memo;

// Tells the database which version of `file` ran (its size and modification time, meta
// `source:<path>`), so that `tdbg` can say when the file it shows lines from changed since.
void note_source_file(tracer::Writer* w, const std::string& file) {
  if (file.empty() || file[0] != '/' || !g_files_written.insert(file).second) return;
  struct stat st;
  if (stat(file.c_str(), &st) != 0) return;
  const int64_t mtime_ns = int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  w->set_meta("source:" + file, std::to_string(st.st_size) + ":" + std::to_string(mtime_ns));
}

// The data files the program opens for reading once torch is imported (a dataset, a config,
// a checkpoint: not Python's own modules or libraries), each as meta `read:<path>` with its
// size, modification time and contents' hash when first opened, so that `tdbg diff` can say
// that a file both runs read was another version in each. At most `kMaxFilesRead` a database.
std::mutex g_files_read_mutex;
std::unordered_set<std::string> g_files_read;
uint64_t g_files_read_generation = ~uint64_t{0};
constexpr size_t kMaxFilesRead = 256;

bool ends_with(const std::string& s, const char* suffix) {
  const size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

// The hex tdbg hash of a file's `size` bytes (mapped, not copied), or "" for a file larger
// than kMaxFileHashed or one that cannot be read.
constexpr int64_t kMaxFileHashed = int64_t{64} << 20;
std::string file_hash(const std::string& path, int64_t size) {
  if (size > kMaxFileHashed) return "";
  uint64_t hash = hashing::hash_bytes(nullptr, 0);
  if (size > 0) {
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return "";
    void* data = mmap(nullptr, static_cast<size_t>(size), PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (data == MAP_FAILED) return "";
    hash = hashing::hash_bytes(data, static_cast<size_t>(size));
    munmap(data, static_cast<size_t>(size));
  }
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(hash));
  return text;
}

void note_file_read(std::string path) {
  if (path.empty()) return;
  if (path[0] != '/') {
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof(cwd))) return;
    path = std::string(cwd) + "/" + path;
  }
  path = normal_path(path);
  // Python's modules, compiled code and libraries, and the kernel's files, are no data.
  for (const char* suffix : {".py", ".pyc", ".so", ".pth", ".pyi"})
    if (ends_with(path, suffix)) return;
  if (path.find("/__pycache__/") != std::string::npos ||
      path.find("-packages/") != std::string::npos || starts_with(path, "/proc/") ||
      starts_with(path, "/sys/") || starts_with(path, "/dev/") ||
      (!g_torch_dir.empty() && starts_with(path, g_torch_dir)) ||
      (!g_stdlib_dir.empty() && starts_with(path, g_stdlib_dir)))
    return;
  // (Never the first to open a lazily opened database: a process that execs before its
  // first op leaves none.)
  tracer::Writer* w = open_writer();
  if (!w) return;
  std::lock_guard<std::mutex> lock(g_files_read_mutex);
  if (g_files_read_generation != writer_generation()) {
    g_files_read.clear();
    g_files_read_generation = writer_generation();
  }
  if (g_files_read.size() >= kMaxFilesRead || g_files_read.count(path)) return;
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return;
  g_files_read.insert(path);
  const int64_t mtime_ns = int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  std::string identity = std::to_string(st.st_size) + ":" + std::to_string(mtime_ns);
  // The contents' hash too, up to kMaxFileHashed bytes: a file saved again with the same
  // bytes (a config touched, a checkpoint written anew) is the same file.
  if (const std::string hash = file_hash(path, st.st_size); !hash.empty()) identity += ":" + hash;
  w->set_meta("read:" + path, identity);
}

// Python's audit hook (PEP 578), called with the GIL held for each audited event: the
// "open" event (builtins.open, io.open, os.open: path, mode, flags) of a path opened read
// only. It never fails the event and leaves any pending error as it was.
int audit_open(const char* event, PyObject* args, void*) {
  if (event[0] != 'o' || std::strcmp(event, "open") != 0 || !recording()) return 0;
  const PythonApi& py = api();
  if (!py.PyTuple_GetItem || !py.PyTuple_Size || !py.PyLong_AsLong || py.PyTuple_Size(args) < 3)
    return 0;
  PyObject *type = nullptr, *value = nullptr, *trace = nullptr;
  py.PyErr_Fetch(&type, &value, &trace);
  PyObject* flags = py.PyTuple_GetItem(args, 2);
  const long f = flags ? py.PyLong_AsLong(flags) : -1;
  std::string path;
  if (f != -1 && (f & O_ACCMODE) == O_RDONLY)
    if (PyObject* name = py.PyTuple_GetItem(args, 0))
      if (const char* text = py.PyUnicode_AsUTF8(name)) path = text;  // (not for bytes, an fd)
  py.PyErr_Clear();
  py.PyErr_Restore(type, value, trace);
  note_file_read(std::move(path));
  return 0;
}

std::atomic<bool> g_audit_added{false};

// Adds `audit_open` once. The GIL held by this thread.
void add_audit_hook() {
  const PythonApi& py = api();
  if (!py.PySys_AddAuditHook || g_audit_added.exchange(true)) return;
  if (py.PySys_AddAuditHook(audit_open, nullptr) != 0) py.PyErr_Clear();
}

tracer::FrameId intern_frame(tracer::Writer* w, tracer::FrameId parent, CodeInfo* code, int line) {
  uint64_t gen = writer_generation();
  if (g_frames_generation != gen) {
    g_frames.clear();
    g_files_written.clear();
    g_frames_generation = gen;
  }
  FrameKey key{parent, code, line};
  auto it = g_frames.find(key);
  if (it != g_frames.end()) return it->second;
  if (code->generation != gen) {
    code->file_id = w->intern(code->file);
    note_source_file(w, code->file);
    code->function_id = w->intern(code->function);
    code->generation = gen;
  }
  tracer::FrameId id = w->intern_frame(parent, code->file_id, line, code->function_id);
  g_frames.emplace(key, id);
  return id;
}

std::string library_path() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&tdbg_torch_set_module), &info) && info.dli_fname)
    return info.dli_fname;
  return "";
}

// The Python run once torch is fully imported: global forward pre/post hooks that keep a
// per-thread stack of module paths and tell the hook the current one (when _TDBG_MODULES; they
// only read modules, named_modules, and never change an input or output), the wrappers of
// torch.multiprocessing's rebuild functions, and the close of multiprocessing children.
const char* kPythonHooksSource = R"PY(
import ctypes, gc, sys, threading, weakref
import torch.nn.modules.module as _tdbg_mm
_lib = ctypes.PyDLL(_TDBG_LIB)
_module_id = _lib.tdbg_torch_module_id
_module_id.argtypes = [ctypes.c_char_p]
_module_id.restype = ctypes.c_uint32
_set_module = _lib.tdbg_torch_set_module
_set_module.argtypes = [ctypes.c_uint32, ctypes.c_void_p]
_set_module.restype = None
_paths = weakref.WeakKeyDictionary()
_local = threading.local()

# A signal's Python handler runs at the next bytecode of the main thread, which may be these
# hooks': what it raises is the program's (a handler that stops training), never tdbg's to
# pass over. True where a frame of `e`'s traceback is a handler's (the `signal` module's
# handlers, only set through it).
def _raised_by_handler(e):
    sig = sys.modules.get('signal')
    if sig is None:
        return False
    codes = set()
    for number in sig.valid_signals():
        try:
            handler = sig.getsignal(number)
        except Exception:
            continue
        code = getattr(handler, '__code__', None) or getattr(getattr(handler, '__func__', None), '__code__', None)
        if code is not None:
            codes.add(code)
    tb = e.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code in codes:
            return True
        tb = tb.tb_next
    return False

def _class_name(module):
    # A scripted module's class is RecursiveScriptModule, a traced one's TopLevelTracedModule
    # or TracedModule: name it by the class it compiled.
    name = type(module).__name__
    if name in ('RecursiveScriptModule', 'ScriptModule', 'TopLevelTracedModule', 'TracedModule'):
        original = getattr(module, 'original_name', None)
        if isinstance(original, str) and original:
            return original
    return name

# A tree's root is named by its class; where the main script's globals hold other modules of
# that class (a GAN's two Sequentials, an EMA copy of the model, a teacher beside its
# student), by its class and the global that holds it: "Sequential(D)". Said by what the
# program holds, not by the order the roots are first called, which may differ between runs.
# (A root held only in a function's variables keeps its class name: reading a frame's locals
# would keep them alive.)
_root_names = weakref.WeakKeyDictionary()  # a root keeps the name it was first given

def _root_name(root):
    named = _root_names.get(root)
    if named is not None:
        return named
    name = _root_names[root] = _class_name(root)
    try:
        main = sys.modules.get('__main__')
        found = []
        for key, value in list(vars(main).items()) if main is not None else ():
            if isinstance(value, _tdbg_mm.Module) and _class_name(value) == name:
                found.append((key, value))
        mine = [key for key, value in found if value is root]
        if mine and any(value is not root for key, value in found):
            name = _root_names[root] = name + '(' + mine[0] + ')'
    except Exception as e:
        if _raised_by_handler(e):
            raise
    return name

def _name_tree(root):
    base = _root_name(root)
    for name, sub in root.named_modules():
        path = base + '.' + name if name else base
        _paths[sub] = (path, _module_id(path.encode('utf-8', 'replace')))

# A module called outside any module call and never named (`model[0](x)` in the loop,
# `self.enc(x)` in a method that is not forward): the root of the tree that holds it, so that
# two layers called directly are told apart; None for a module no other holds. Found through
# the objects that refer to it (its parent's `_modules`), never through a frame's locals:
# reading `f_locals` of a function's frame keeps a copy of its variables alive until it
# returns, which would change when the program's objects are freed. Each search scans the
# heap, so a process makes a bounded number of them.
_owner_searches = [64]

def _parent(module):
    for ref in gc.get_referrers(module):
        if not isinstance(ref, dict):
            continue
        # `ref` may be a parent's `_modules`: held by the parent itself (its attributes kept
        # inline) or by its `__dict__`.
        for holder in gc.get_referrers(ref):
            if isinstance(holder, _tdbg_mm.Module):
                if getattr(holder, '_modules', None) is ref:
                    return holder
            elif isinstance(holder, dict) and holder.get('_modules') is ref:
                for parent in gc.get_referrers(holder):
                    if isinstance(parent, _tdbg_mm.Module) and getattr(parent, '_modules', None) is ref:
                        return parent
    return None

def _owner(module):
    if _owner_searches[0] <= 0:
        return None
    _owner_searches[0] -= 1
    root, seen = None, {id(module)}
    try:
        parent = _parent(module)
        while parent is not None and id(parent) not in seen and len(seen) < 64:
            seen.add(id(parent))
            root = parent
            parent = _parent(parent)
    except Exception as e:
        if _raised_by_handler(e):
            raise
        return root
    return root

# A module call that raised ran no post hook (torch < 2.1): its entry stays on the stack. Each
# entry keeps the id of its module's call frame (live while the call runs); entries whose
# frame is not among the callers of this call are dropped. Usually the entry on top is found
# a few frames up, the parent module's call.
def _drop_ended(stack, frame):
    top = stack[-1][3]
    seen = set()
    while frame is not None:
        key = id(frame)
        if key == top:
            return
        seen.add(key)
        frame = frame.f_back
    while stack and stack[-1][3] not in seen:
        stack.pop()

def _pre(module, args):
    _enter(module, sys._getframe(1))

def _enter(module, call):
    try:
        stack = _local.__dict__.setdefault('stack', [])
        if stack:
            _drop_ended(stack, call.f_back)
        entry = _paths.get(module)
        if entry is None:
            if stack:
                path = stack[-1][1] + '.' + _class_name(module)
                entry = (path, _module_id(path.encode('utf-8', 'replace')))
                _paths[module] = entry
            else:
                owner = _owner(module)
                _name_tree(owner if owner is not None else module)
                entry = _paths[module]
        stack.append((id(module), entry[0], entry[1], id(call)))
        _set_module(entry[1], id(call))
    except Exception as e:
        if _raised_by_handler(e):
            raise

def _post(module, args, output):
    try:
        stack = getattr(_local, 'stack', None)
        if stack:
            key = id(module)
            for i in range(len(stack) - 1, -1, -1):
                if stack[i][0] == key:
                    del stack[i:]
                    break
            if stack:
                _set_module(stack[-1][2], stack[-1][3])
            else:
                _set_module(0, None)
    except Exception as e:
        if _raised_by_handler(e):
            raise

# `wrapper` (of torch's function `fn`, which it calls) made to read as `fn` in a traceback
# or help(), and marked as a wrapper (`__wrapped__`) so that it is not wrapped again.
def _as_wrapper_of(wrapper, fn):
    wrapper.__module__ = getattr(fn, '__module__', None)
    wrapper.__name__ = fn.__name__
    wrapper.__qualname__ = getattr(fn, '__qualname__', fn.__name__)
    wrapper.__doc__ = fn.__doc__
    wrapper.__wrapped__ = fn
    return wrapper

# The hooks are installed at the first op recorded, which may run inside modules already
# called (with --ops, a layer's addmm inside the model's forward): those calls ran no pre
# hook, so they are entered here from the frames of Module._call_impl on this thread's stack,
# outermost first, or the model's path would start at the layer ("Linear" for "Net.fc1").
def _enter_running():
    calls = []
    try:
        code = _tdbg_mm.Module._call_impl.__code__
        frame = sys._getframe(1)
        while frame is not None:
            if frame.f_code is code:
                module = frame.f_locals.get('self')
                if isinstance(module, _tdbg_mm.Module):
                    calls.append((module, frame))
            frame = frame.f_back
    except Exception as e:
        if _raised_by_handler(e):
            raise
        return
    for module, frame in reversed(calls):
        _enter(module, frame)

if _TDBG_MODULES:
    _tdbg_mm.register_module_forward_pre_hook(_pre)
    try:
        # torch >= 2.1 calls it also when forward raises.
        _tdbg_mm.register_module_forward_hook(_post, always_call=True)
    except TypeError:
        _tdbg_mm.register_module_forward_hook(_post)
    _enter_running()

# A thread count set after the hooks are installed (after the first op: a script that builds
# its model, then calls torch.set_num_threads) is read for the run's metadata when it is set,
# where an evaluation or a gradient check steps no optimizer to read it at.
def _threads_wrap(fn):
    def set_threads(*args, **kwargs):
        result = fn(*args, **kwargs)
        try:
            _note_threads()
        except Exception as e:
            if _raised_by_handler(e):
                raise
        return result
    return _as_wrapper_of(set_threads, fn)

try:
    import torch as _torch
    _note_threads = _lib.tdbg_torch_note_threads
    _note_threads.argtypes = []
    _note_threads.restype = None
    for _name in ('set_num_threads', 'set_num_interop_threads'):
        _fn = getattr(_torch, _name, None)
        if callable(_fn) and not hasattr(_fn, '__wrapped__'):
            setattr(_torch, _name, _threads_wrap(_fn))
except Exception:
    pass

# Tensors received from another process (a DataLoader worker's batch, a torch.multiprocessing
# queue) are rebuilt by torch.multiprocessing.reductions' rebuild_* functions while pickle
# loads them, whenever the data arrives: the ops they run are not recorded (tdbg_torch_ipc
# counts the calls open on the thread), and the tensors are data from outside at their first use.
# Pickle names these functions by module and name, so the wrappers replace them for both
# the sending and the receiving side.
import sys as _sys
_mpr = _sys.modules.get('torch.multiprocessing.reductions')
if _mpr is not None:
    _ipc = _lib.tdbg_torch_ipc
    _ipc.argtypes = [ctypes.c_int]
    _ipc.restype = None

    def _ipc_wrap(fn):
        def rebuild(*args, **kwargs):
            _ipc(1)
            try:
                return fn(*args, **kwargs)
            finally:
                _ipc(-1)
        return _as_wrapper_of(rebuild, fn)

    for _name in list(vars(_mpr)):
        _fn = getattr(_mpr, _name)
        if _name.startswith('rebuild_') and callable(_fn) and not hasattr(_fn, '__wrapped__'):
            setattr(_mpr, _name, _ipc_wrap(_fn))

# multiprocessing children (DataLoader workers) leave through os._exit, which skips atexit:
# close the child's database from the last multiprocessing finalizer instead. Only when torch
# has already imported multiprocessing.util (it does), so nothing new is imported.
_mpu = _sys.modules.get('multiprocessing.util')
if _mpu is not None:
    _shutdown = _lib.tdbg_torch_shutdown
    _shutdown.argtypes = []
    _shutdown.restype = None

    class _AfterFork(object):
        pass

    _after_fork = _AfterFork()

    def _arm_child(_obj):
        try:
            _mpu.Finalize(None, _shutdown, exitpriority=-1000000)
        except Exception as e:
            if _raised_by_handler(e):
                raise

    _mpu.register_after_fork(_after_fork, _arm_child)
)PY";

// Installs the Python hooks when `torch.nn.modules.module` is loaded and `torch` itself has
// finished importing: the module path hooks (when `with_modules`), the wrappers of
// torch.multiprocessing's rebuild functions and the exit of multiprocessing children. GIL held.
void maybe_install_python_hooks(bool with_modules) {
  if (g_hooks_installed.load(std::memory_order_relaxed) || g_hooks_failed) return;
  const PythonApi& py = api();
  PyObject* modules = py.PyImport_GetModuleDict();
  if (!modules) return;
  PyObject* mm = py.PyDict_GetItemString(modules, "torch.nn.modules.module");
  PyObject* torch = py.PyDict_GetItemString(modules, "torch");
  if (!mm || !torch) return;
  PyObject* hook_fn = py.PyObject_GetAttrString(mm, "register_module_forward_pre_hook");
  if (!hook_fn) {
    py.PyErr_Clear();
    return;
  }
  py.Py_DecRef(hook_fn);
  // A module still executing its body has __spec__._initializing set.
  PyObject* spec = py.PyObject_GetAttrString(torch, "__spec__");
  if (!spec) {
    py.PyErr_Clear();
  } else {
    PyObject* initializing = py.PyObject_GetAttrString(spec, "_initializing");
    py.Py_DecRef(spec);
    if (!initializing) {
      py.PyErr_Clear();
    } else {
      int busy = py.PyObject_IsTrue(initializing);
      py.Py_DecRef(initializing);
      if (busy != 0) {
        if (busy < 0) py.PyErr_Clear();
        return;
      }
    }
  }
  std::string lib = library_path();
  if (lib.empty()) {
    g_hooks_failed = true;
    return;
  }
  std::string source = "_TDBG_LIB = " + json_quote(lib) + "\n_TDBG_MODULES = " +
                       (with_modules ? "True" : "False") + "\n" + kPythonHooksSource;
  PyObject* globals = py.PyDict_New();
  PyObject* result = nullptr;
  if (globals && py.Py_CompileStringExFlags && py.PyEval_EvalCode) {
    // A frame of this code in a traceback (a DataLoader batch that fails to rebuild) says it
    // is tdbg's wrapper, and where it comes from.
    PyObject* code = py.Py_CompileStringExFlags(
        source.c_str(), "<tdbg: libtdbg_torch.so's Python hooks (python_frames.cc)>", kPyFileInput,
        nullptr, -1);
    if (code) {
      result = py.PyEval_EvalCode(code, globals, globals);
      py.Py_DecRef(code);
    }
  } else if (globals) {
    result = py.PyRun_StringFlags(source.c_str(), kPyFileInput, globals, globals, nullptr);
  }
  if (!result) {
    rearm_interrupt();
    py.PyErr_Clear();
    g_hooks_failed = true;
    say("could not install the nn.Module hooks; module paths are not recorded");
  } else {
    py.Py_DecRef(result);
    g_hooks_installed.store(true);
    add_audit_hook();
  }
  if (globals) py.Py_DecRef(globals);  // the hooks keep what they use alive
}

// Module path ids: the texts, for the life of the process (Python caches the ids, across fork).
std::mutex g_module_mutex;
std::vector<std::string> g_module_paths{""};
std::unordered_map<std::string, uint32_t> g_module_ids;

thread_local uint32_t t_module = 0;
thread_local const void* t_module_frame = nullptr;  // see tdbg_torch_set_module
thread_local int t_ipc_depth = 0;  // rebuild_* calls of torch.multiprocessing open on the thread

struct ModuleStrings {
  uint64_t generation = UINT64_MAX;
  std::vector<tracer::StringId> ids;
};
thread_local ModuleStrings* t_module_strings = new ModuleStrings();  // never freed, see thread_state()

}  // namespace

namespace {
// The text that the Python expression `expr` evaluates to (a str), or "" on any error. Takes
// the GIL and leaves any pending exception as it was.
std::string eval_python_text(const char* expr) {
  const PythonApi& py = api();
  constexpr int kPyEvalInput = 258;  // Py_eval_input
  std::string out;
  PythonScope scope;
  PyObject* globals = py.PyDict_New();
  PyObject* result =
      globals ? py.PyRun_StringFlags(expr, kPyEvalInput, globals, globals, nullptr) : nullptr;
  if (result) {
    const char* text = py.PyUnicode_AsUTF8(result);
    if (text) out = text;
    py.Py_DecRef(result);
  } else {
    rearm_interrupt();
  }
  if (globals) py.Py_DecRef(globals);
  return out;
}
}  // namespace

std::string distributed_rank() {
  return eval_python_text(
      "(lambda d: '%d/%d' % (d.get_rank(), d.get_world_size()) if d is not None and "
      "d.is_available() and d.is_initialized() else '')"
      "(__import__('sys').modules.get('torch.distributed'))");
}

std::string dataloader_worker() {
  return eval_python_text(
      "(lambda m: (lambda w: '%d/%d' % (w.id, w.num_workers) if w is not None else '')"
      "(m.get_worker_info()) if m is not None else '')"
      "(__import__('sys').modules.get('torch.utils.data._utils.worker'))");
}

std::string python_version() {
  const PythonApi& py = api();
  if (!py.complete) return "";
  const char* v = py.Py_GetVersion();  // a static string: valid before and after init
  return v ? v : "";
}

void watch_files_read() {
  const PythonApi& py = api();
  // Only on a thread that already holds the GIL: waiting for it here, inside the dlopen that
  // loads the hook, could wait on a thread that waits for the loader.
  if (!py.complete || !py.PyGILState_Check || !py.Py_IsInitialized() ||
      (py.Py_IsFinalizing && py.Py_IsFinalizing()) || py.PyGILState_Check() != 1)
    return;
  add_audit_hook();
}

bool thread_has_python() {
  const PythonApi& py = api();
  if (!py.complete) return false;
  if (!py.Py_IsInitialized()) return false;
  if (py.Py_IsFinalizing && py.Py_IsFinalizing()) return false;
  return py.PyGILState_GetThisThreadState() != nullptr;
}

const void* python_innermost_code() {
  const PythonApi& py = api();
  int gil = py.PyGILState_Ensure();
  const void* result = nullptr;
  if (PyObject* frame = py.PyEval_GetFrame()) {  // borrowed
    PyObject* code = py.PyFrame_GetCode(frame);
    result = code;
    py.Py_DecRef(code);  // a running frame keeps its code alive
  }
  py.PyGILState_Release(gil);
  return result;
}

bool python_error_set() {
  using ThreadState = void*;
  // Optional: a thread's state is current only while it holds the GIL (PyErr_Occurred reads
  // that state and must not run without it).
  static const auto current = reinterpret_cast<ThreadState (*)()>(dlsym(RTLD_DEFAULT, "_PyThreadState_UncheckedGet"));
  static const auto occurred = reinterpret_cast<void* (*)()>(dlsym(RTLD_DEFAULT, "PyErr_Occurred"));
  if (!current || !occurred) return false;
  const PythonApi& py = api();
  ThreadState mine = py.PyGILState_GetThisThreadState();
  return mine != nullptr && current() == mine && occurred() != nullptr;
}

uintptr_t python_optimizer_identity() {
  const PythonApi& py = api();
  if (!py.PyMapping_GetItemString || !py.PyTuple_GetItem || !py.PyTuple_Size) return 0;
  PythonScope scope;
  uintptr_t id = 0;
  PyObject* frame = py.PyEval_GetFrame();  // borrowed
  if (frame) py.Py_IncRef(frame);
  // torch's profiling wrapper of `step` (`def wrapper(*args, **kwargs)` in torch/optim/
  // optimizer.py, 1.x and 2.x) is a few frames out: record_function.__enter__ is innermost.
  for (int depth = 0; frame != nullptr && depth < 6 && id == 0; ++depth) {
    PyObject* code = py.PyFrame_GetCode(frame);
    PyObject* name = code ? py.PyObject_GetAttrString(code, "co_name") : nullptr;
    const char* text = name ? py.PyUnicode_AsUTF8(name) : nullptr;
    if (text && std::strcmp(text, "wrapper") == 0) {
      if (PyObject* locals = py.PyObject_GetAttrString(frame, "f_locals")) {
        if (PyObject* args = py.PyMapping_GetItemString(locals, "args")) {
          if (py.PyTuple_Size(args) > 0)
            id = reinterpret_cast<uintptr_t>(py.PyTuple_GetItem(args, 0));
          py.Py_DecRef(args);
        }
        py.Py_DecRef(locals);
      }
    }
    if (name) py.Py_DecRef(name);
    if (code) py.Py_DecRef(code);
    PyObject* back = py.PyFrame_GetBack(frame);  // new reference or nullptr
    py.Py_DecRef(frame);
    frame = back;
  }
  if (frame) py.Py_DecRef(frame);
  return id;
}

namespace {
// The C API that reads an optimizer's param groups without running Python code (`settings_of`),
// resolved once; `complete` false where one is missing.
struct SettingsApi {
  using Ssize = long;  // Py_ssize_t
  PyObject* (*PyObject_Type)(PyObject*) = nullptr;
  int (*PyObject_IsInstance)(PyObject*, PyObject*) = nullptr;
  Ssize (*PyObject_Size)(PyObject*) = nullptr;
  PyObject* (*PyList_GetItem)(PyObject*, Ssize) = nullptr;
  int (*PyDict_Next)(PyObject*, Ssize*, PyObject**, PyObject**) = nullptr;
  double (*PyFloat_AsDouble)(PyObject*) = nullptr;
  long long (*PyLong_AsLongLong)(PyObject*) = nullptr;
  char* (*PyOS_double_to_string)(double, char, int, int, int*) = nullptr;
  void (*PyMem_Free)(void*) = nullptr;
  PyObject* (*PyErr_Occurred)() = nullptr;
  PyObject *none = nullptr, *true_ = nullptr, *bool_type = nullptr, *int_type = nullptr,
           *float_type = nullptr, *str_type = nullptr, *tuple_type = nullptr, *list_type = nullptr,
           *dict_type = nullptr;
  bool complete = false;
};

const SettingsApi& settings_api() {
  static const SettingsApi table = [] {
    SettingsApi a;
    bool ok = api().complete;
    resolve(&a.PyObject_Type, "PyObject_Type", &ok);
    resolve(&a.PyObject_IsInstance, "PyObject_IsInstance", &ok);
    resolve(&a.PyObject_Size, "PyObject_Size", &ok);
    resolve(&a.PyList_GetItem, "PyList_GetItem", &ok);
    resolve(&a.PyDict_Next, "PyDict_Next", &ok);
    resolve(&a.PyFloat_AsDouble, "PyFloat_AsDouble", &ok);
    resolve(&a.PyLong_AsLongLong, "PyLong_AsLongLong", &ok);
    resolve(&a.PyOS_double_to_string, "PyOS_double_to_string", &ok);
    resolve(&a.PyMem_Free, "PyMem_Free", &ok);
    resolve(&a.PyErr_Occurred, "PyErr_Occurred", &ok);
    for (auto [slot, name] : {std::pair{&a.none, "_Py_NoneStruct"},
                              {&a.true_, "_Py_TrueStruct"},
                              {&a.bool_type, "PyBool_Type"},
                              {&a.int_type, "PyLong_Type"},
                              {&a.float_type, "PyFloat_Type"},
                              {&a.str_type, "PyUnicode_Type"},
                              {&a.tuple_type, "PyTuple_Type"},
                              {&a.list_type, "PyList_Type"},
                              {&a.dict_type, "PyDict_Type"}}) {
      *slot = dlsym(RTLD_DEFAULT, name);
      ok = ok && *slot != nullptr;
    }
    a.complete = ok;
    return a;
  }();
  return table;
}

// A setting's value as json.dumps writes it (a float as repr does, NaN and the infinities as
// Python's json does), or nullopt for a value that is none of None, bool, int, float, str, or a
// tuple of numbers: left out, as tensors are (reading them would run ops).
std::optional<std::string> setting_text(const SettingsApi& c, PyObject* v, bool in_tuple = false) {
  const PythonApi& py = api();
  auto is = [&](PyObject* type) { return c.PyObject_IsInstance(v, type) == 1; };
  if (v == c.none && !in_tuple) return "null";
  if (is(c.bool_type)) return std::string(v == c.true_ ? "true" : "false");
  if (is(c.int_type)) {
    const long long n = c.PyLong_AsLongLong(v);
    if (c.PyErr_Occurred()) {  // beyond 64 bits
      py.PyErr_Clear();
      return std::nullopt;
    }
    return std::to_string(n);
  }
  if (is(c.float_type)) {
    const double d = c.PyFloat_AsDouble(v);
    if (std::isnan(d)) return "NaN";
    if (std::isinf(d)) return std::string(d > 0 ? "Infinity" : "-Infinity");
    constexpr int kAddDot0 = 2;  // Py_DTSF_ADD_DOT_0: 1.0, not 1, as repr
    char* text = c.PyOS_double_to_string(d, 'r', 0, kAddDot0, nullptr);
    if (!text) return std::nullopt;
    std::string out = text;
    c.PyMem_Free(text);
    return out;
  }
  if (is(c.str_type) && !in_tuple) {
    const char* text = py.PyUnicode_AsUTF8(v);
    if (!text) {
      py.PyErr_Clear();
      return std::nullopt;
    }
    return json_quote(text);
  }
  if (is(c.tuple_type) && !in_tuple) {
    std::string out = "[";
    const long n = c.PyObject_Size(v);
    for (long k = 0; k < n; ++k) {
      auto item = setting_text(c, py.PyTuple_GetItem(v, k), true);
      if (!item) return std::nullopt;
      out += (k ? ", " : "") + *item;
    }
    return out + "]";
  }
  return std::nullopt;
}

// json.dumps({'optimizer': type(o).__name__, 'index': index, 'groups': [each group's settings
// of the kinds above, with params=len(group['params'])]}, sort_keys=True), read through the C
// API: no Python code runs, so no signal handler runs inside tdbg (its exception would be
// tdbg's to clear), and nothing is compiled at each step. nullopt where the optimizer is not
// as expected (the Python expression then reads it). GIL held.
std::optional<std::string> settings_of(PyObject* o, int index) {
  const PythonApi& py = api();
  const SettingsApi& c = settings_api();
  if (!c.complete || !py.PyTuple_GetItem) return std::nullopt;
  std::string name;
  if (PyObject* type = c.PyObject_Type(o)) {
    if (PyObject* text = py.PyObject_GetAttrString(type, "__name__")) {
      if (const char* utf8 = py.PyUnicode_AsUTF8(text)) name = utf8;
      py.Py_DecRef(text);
    }
    py.Py_DecRef(type);
  }
  PyObject* groups = py.PyObject_GetAttrString(o, "param_groups");
  if (name.empty() || !groups || c.PyObject_IsInstance(groups, c.list_type) != 1) {
    if (groups) py.Py_DecRef(groups);
    rearm_interrupt();  // (a wrapper's `param_groups` property runs Python code)
    py.PyErr_Clear();
    return std::nullopt;
  }
  std::string out = "{\"groups\": [";
  bool ok = true;
  const long n = c.PyObject_Size(groups);
  for (long g = 0; ok && g < n; ++g) {
    PyObject* group = c.PyList_GetItem(groups, g);  // borrowed
    PyObject* params = group && c.PyObject_IsInstance(group, c.dict_type) == 1
                           ? py.PyDict_GetItemString(group, "params")
                           : nullptr;
    const long count = params ? c.PyObject_Size(params) : -1;
    if (count < 0) {
      ok = false;
      break;
    }
    std::vector<std::pair<std::string, std::string>> entries{{"params", std::to_string(count)}};
    SettingsApi::Ssize at = 0;
    PyObject *key = nullptr, *value = nullptr;
    while (c.PyDict_Next(group, &at, &key, &value)) {  // borrowed
      const char* k =
          c.PyObject_IsInstance(key, c.str_type) == 1 ? py.PyUnicode_AsUTF8(key) : nullptr;
      if (!k) {
        ok = false;
        break;
      }
      if (std::string_view(k) == "params") continue;
      if (auto text = setting_text(c, value)) entries.emplace_back(k, std::move(*text));
    }
    std::sort(entries.begin(), entries.end());
    out += g ? ", {" : "{";
    for (size_t e = 0; e < entries.size(); ++e)
      out += (e ? ", " : "") + json_quote(entries[e].first) + ": " + entries[e].second;
    out += "}";
  }
  py.Py_DecRef(groups);
  if (!ok) {
    rearm_interrupt();
    py.PyErr_Clear();
    return std::nullopt;
  }
  return out + "], \"index\": " + std::to_string(index) + ", \"optimizer\": " + json_quote(name) +
         "}";
}
}  // namespace

std::string python_optimizer_settings(uintptr_t identity, int index) {
  if (identity == 0) return "";
  // The optimizer is alive while it steps (its `wrapper` frame holds it). Tensors (lr as a
  // tensor in torch 2.x) are left out: reading them would run ops.
  {
    PythonScope scope;
    if (std::optional<std::string> read = settings_of(reinterpret_cast<PyObject*>(identity), index))
      return *read;
  }
  const std::string expr =
      "(lambda o, json: json.dumps({'optimizer': type(o).__name__, 'index': " +
      std::to_string(index) +
      ", 'groups': [dict({k: "
      "list(v) if isinstance(v, tuple) else v for k, v in g.items() if k != 'params' and (v is "
      "None or isinstance(v, (bool, int, float, str)) or (isinstance(v, tuple) and all("
      "isinstance(x, (int, float)) for x in v)))}, params=len(g['params'])) for g in "
      "o.param_groups]}, sort_keys=True))(__import__('ctypes').cast(" +
      std::to_string(identity) + ", __import__('ctypes').py_object).value, __import__('json'))";
  return eval_python_text(expr.c_str());
}

SourceLocation capture_python_stack(bool want_stack, bool with_module_hooks) {
  SourceLocation loc;
  const PythonApi& py = api();
  tracer::Writer* w = writer();
  if (!w) return loc;
  PythonScope scope;
  maybe_install_python_hooks(with_module_hooks);
  if (want_stack) {
    PyObject* raw_codes[kMaxFrames];
    PyObject* frames[kMaxFrames];  // each with a reference, dropped below
    int lastis[kMaxFrames];
    int n = 0;
    PyObject* frame = py.PyEval_GetFrame();  // borrowed
    if (frame) py.Py_IncRef(frame);
    while (frame && n < kMaxFrames) {
      PyObject* code = py.PyFrame_GetCode(frame);
      raw_codes[n] = code;
      lastis[n] = py.PyFrame_GetLasti ? py.PyFrame_GetLasti(frame) : -1;
      py.Py_DecRef(code);  // a running frame keeps its code alive
      frames[n++] = frame;
      frame = py.PyFrame_GetBack(frame);
    }
    const bool whole = frame == nullptr;
    if (frame) py.Py_DecRef(frame);
    // The module's call frame is gone from a whole stack: its forward raised (no post hook
    // ran) and this op is outside it.
    if (whole && t_module != 0 && t_module_frame != nullptr &&
        std::find(frames, frames + n, t_module_frame) == frames + n) {
      t_module = 0;
      t_module_frame = nullptr;
    }
    // Outer frames the last stack of this thread shares (same code at the same offset, counted
    // from the outermost) have the same ids: only the frames below them are looked up.
    StackMemo& memo = t_stack_memo;
    const uint64_t gen = writer_generation();
    int shared = 0;
    if (memo.generation == gen) {
      while (shared < n && shared < memo.n && lastis[n - 1 - shared] >= 0 &&
             raw_codes[n - 1 - shared] == memo.codes[shared] &&
             lastis[n - 1 - shared] == memo.lastis[shared])
        ++shared;
    }
    tracer::FrameId parent = shared ? memo.ids[shared - 1] : 0;
    loc.user_frame = shared ? memo.user_frames[shared - 1] : 0;
    loc.user_inside_library = shared ? memo.user_inside_library[shared - 1] : false;
    // Whether a frame outside the user's code encloses the frame being looked at.
    bool library_outside = shared ? memo.library_outside[shared - 1] : false;
    bool memo_valid = g_dirs_known;
    for (int k = shared; k < n; ++k) {
      const int i = n - 1 - k;
      CodeInfo* code = code_info(raw_codes[i]);
      parent = intern_frame(w, parent, code, line_number(py, frames[i], code));
      if (code->user) {
        loc.user_frame = parent;
        loc.user_inside_library = library_outside;
      } else {
        library_outside = true;
      }
      // The user's line of a worker's op is in the worker's own code, not the parent's line
      // that started it; with none (collate, say), the innermost frame stands for it.
      if (code->process_start) {
        loc.user_frame = 0;
        loc.user_inside_library = library_outside = false;
      }
      memo.codes[k] = raw_codes[i];
      memo.lastis[k] = lastis[i];
      memo.ids[k] = parent;
      memo.user_frames[k] = loc.user_frame;
      memo.user_inside_library[k] = loc.user_inside_library;
      memo.library_outside[k] = library_outside;
      memo_valid = memo_valid && code->classified;
    }
    memo.n = n;
    memo.generation = memo_valid ? gen : ~uint64_t{0};
    for (int i = 0; i < n; ++i) py.Py_DecRef(frames[i]);
    loc.stack = parent;
    // Inside a scripted function the op's line is the script's, below the Python call of it.
    loc = add_script_frames(loc, is_user_file);
  }
  return loc;
}

tracer::StringId module_string(uint32_t module_id) {
  if (module_id == 0) return 0;
  tracer::Writer* w = writer();
  if (!w) return 0;
  ModuleStrings& cache = *t_module_strings;
  uint64_t gen = writer_generation();
  if (cache.generation != gen) {
    cache.ids.clear();
    cache.generation = gen;
  }
  if (module_id >= cache.ids.size()) cache.ids.resize(module_id + 1, 0);
  if (cache.ids[module_id] == 0) {
    std::string text;
    {
      std::lock_guard<std::mutex> lock(g_module_mutex);
      if (module_id < g_module_paths.size()) text = g_module_paths[module_id];
    }
    cache.ids[module_id] = w->intern(text);
  }
  return cache.ids[module_id];
}

uint32_t current_module_id() { return t_module; }

bool in_ipc_rebuild() { return t_ipc_depth > 0; }

void python_frames_after_fork_child() {
  new (&g_module_mutex) std::mutex();
}

}  // namespace tdbg::torchhook

extern "C" uint32_t tdbg_torch_module_id(const char* path) {
  if (!path) return 0;
  try {
    std::lock_guard<std::mutex> lock(tdbg::torchhook::g_module_mutex);
    auto it = tdbg::torchhook::g_module_ids.find(path);
    if (it != tdbg::torchhook::g_module_ids.end()) return it->second;
    uint32_t id = static_cast<uint32_t>(tdbg::torchhook::g_module_paths.size());
    tdbg::torchhook::g_module_paths.push_back(path);
    tdbg::torchhook::g_module_ids.emplace(path, id);
    return id;
  } catch (...) {
    return 0;
  }
}

extern "C" void tdbg_torch_set_module(uint32_t id, const void* call_frame) {
  tdbg::torchhook::t_module = id;
  tdbg::torchhook::t_module_frame = call_frame;
}

extern "C" void tdbg_torch_note_threads(void) { tdbg::torchhook::note_thread_counts(); }

extern "C" void tdbg_torch_ipc(int delta) {
  tdbg::torchhook::t_ipc_depth = std::max(0, tdbg::torchhook::t_ipc_depth + delta);
}
